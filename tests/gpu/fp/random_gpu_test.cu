// SPDX-License-Identifier: Apache-2.0
/// @file Philox4x32-10 and splitmix64 of the core in a kernel equal the host build bit for bit, and
/// equal cuRAND's Philox4_32_10: philox_word(seed, stream, step) is curand() after
/// curand_init(seed, stream, step), and the raw block is curand_Philox4x32_10. emu::sum with
/// per-step stochastic rounding gives the same bits on the device. Skipped without a GPU.
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>
#include <curand_kernel.h>
#include <gtest/gtest.h>

#include "tiebreak/emu/sum.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/gpu/device.hpp"

#include "../gpu_test_util.hpp"

namespace {

using namespace tiebreak;

using tiebreak::gpu::testing::dev_buf;

/// Case i: (seed, stream, step) from splitmix64 of i, with small streams and steps near the
/// block boundaries every few cases (step % 4, carries of step / 4 into the high counter word).
struct coords {
  std::uint64_t seed, stream, step;
};
TIEBREAK_HDC coords coords_of(std::uint64_t i) noexcept {
  const std::uint64_t a = splitmix64(i), b = splitmix64(a), c = splitmix64(b);
  coords k{a, b, c};
  if (i % 4 == 1) k.stream = i % 7;
  if (i % 4 == 2) k.step = (i % 16) + ((std::uint64_t{1} << 34) - 8);
  if (i % 4 == 3) k.step = i % 64;
  return k;
}

constexpr std::uint64_t cases = std::uint64_t{1} << 20;

__global__ void core_kernel(std::uint64_t n, std::uint32_t* words, std::uint64_t* mixes) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const coords k = coords_of(i);
    words[i] = philox_word(k.seed, k.stream, k.step);
    mixes[i] = splitmix64(i ^ 0x5eedull);
  }
}

__global__ void curand_words_kernel(std::uint64_t n, std::uint32_t* words) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const coords k = coords_of(i);
    curandStatePhilox4_32_10_t s;
    curand_init(k.seed, k.stream, k.step, &s);
    words[i] = curand(&s);
  }
}

/// curand4 after curand_init(seed, stream, 4j) against four philox_word calls, and the raw block
/// function against philox4x32_10 on the same counter and key. out: 8 words per case.
__global__ void block_kernel(std::uint64_t n, std::uint32_t* out) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const coords k = coords_of(i);
    curandStatePhilox4_32_10_t s;
    const std::uint64_t step = (k.step >> 2) << 2;
    curand_init(k.seed, k.stream, step, &s);
    const uint4 r4 = curand4(&s);
    const uint4 ctr = make_uint4(static_cast<unsigned>(k.step), static_cast<unsigned>(k.step >> 32),
                                 static_cast<unsigned>(k.stream), static_cast<unsigned>(k.stream >> 32));
    const uint4 raw = curand_Philox4x32_10(ctr, make_uint2(static_cast<unsigned>(k.seed), static_cast<unsigned>(k.seed >> 32)));
    std::uint32_t* o = out + 8 * i;
    o[0] = r4.x; o[1] = r4.y; o[2] = r4.z; o[3] = r4.w;
    o[4] = raw.x; o[5] = raw.y; o[6] = raw.z; o[7] = raw.w;
  }
}

constexpr int sum_len = 64;
constexpr std::uint64_t sum_seeds = 4096;

/// The sum of sr_sum_test below for seed s (bf16 accumulation, fresh Philox word per step).
TIEBREAK_HDC std::uint64_t sr_sum(std::uint64_t s) noexcept {
  std::uint64_t xs[sum_len];
  for (int k = 0; k < sum_len; ++k) xs[k] = k == 0 ? 0x3f80u : ((std::uint64_t{118} << 7) | ((k % 8) << 4));
  emu::sum_config c;
  c.accum = formats::bf16;
  c.accum_rounding = sr_t{0};
  c.output_rounding = sr_t{0};
  c.random = sr_source::philox(s, 3);
  return emu::sum(c, xs, sum_len, emu::no_steps{}).bits;
}

__global__ void sum_kernel(std::uint64_t n, std::uint64_t* out) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    out[i] = sr_sum(i + 1);
  }
}

TEST(random_gpu, core_in_kernel_equals_core_on_host) {
  TIEBREAK_REQUIRE_GPU();
  dev_buf<std::uint32_t> w(cases);
  dev_buf<std::uint64_t> m(cases);
  ASSERT_NE(w.p, nullptr);
  ASSERT_NE(m.p, nullptr);
  core_kernel<<<264, 256>>>(cases, w.p, m.p);
  TIEBREAK_CUDA_OK(cudaGetLastError());
  TIEBREAK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> words;
  std::vector<std::uint64_t> mixes;
  TIEBREAK_CUDA_OK(w.get(words));
  TIEBREAK_CUDA_OK(m.get(mixes));
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < cases; ++i) {
    const coords k = coords_of(i);
    if (words[i] != philox_word(k.seed, k.stream, k.step) || mixes[i] != splitmix64(i ^ 0x5eedull)) {
      if (++bad <= 5) ADD_FAILURE() << "case " << i << ": device " << words[i] << " host " << philox_word(k.seed, k.stream, k.step);
    }
  }
  std::printf("[random_gpu] %llu cases, %llu mismatches (core kernel vs host)\n", static_cast<unsigned long long>(cases),
              static_cast<unsigned long long>(bad));
  EXPECT_EQ(bad, 0u);
}

TEST(random_gpu, philox_word_is_curand_after_curand_init_seed_stream_step) {
  TIEBREAK_REQUIRE_GPU();
  dev_buf<std::uint32_t> w(cases);
  ASSERT_NE(w.p, nullptr);
  curand_words_kernel<<<264, 256>>>(cases, w.p);
  TIEBREAK_CUDA_OK(cudaGetLastError());
  TIEBREAK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> words;
  TIEBREAK_CUDA_OK(w.get(words));
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < cases; ++i) {
    const coords k = coords_of(i);
    if (words[i] != philox_word(k.seed, k.stream, k.step) && ++bad <= 5) ADD_FAILURE() << "case " << i;
  }
  std::printf("[random_gpu] %llu cases, %llu mismatches (cuRAND curand vs host philox_word)\n",
              static_cast<unsigned long long>(cases), static_cast<unsigned long long>(bad));
  EXPECT_EQ(bad, 0u);
}

TEST(random_gpu, curand4_and_the_raw_block_equal_the_core) {
  TIEBREAK_REQUIRE_GPU();
  const std::uint64_t n = cases / 4;
  dev_buf<std::uint32_t> w(8 * n);
  ASSERT_NE(w.p, nullptr);
  block_kernel<<<264, 256>>>(n, w.p);
  TIEBREAK_CUDA_OK(cudaGetLastError());
  TIEBREAK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> out;
  TIEBREAK_CUDA_OK(w.get(out));
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const coords k = coords_of(i);
    const std::uint64_t step = (k.step >> 2) << 2;
    const philox_block raw = philox4x32_10(
        philox_block{{static_cast<std::uint32_t>(k.step), static_cast<std::uint32_t>(k.step >> 32),
                      static_cast<std::uint32_t>(k.stream), static_cast<std::uint32_t>(k.stream >> 32)}},
        static_cast<std::uint32_t>(k.seed), static_cast<std::uint32_t>(k.seed >> 32));
    bool ok = true;
    for (int j = 0; j < 4; ++j) {
      ok = ok && out[8 * i + j] == philox_word(k.seed, k.stream, step + static_cast<std::uint64_t>(j));
      ok = ok && out[8 * i + 4 + j] == raw.w[j];
    }
    if (!ok && ++bad <= 5) ADD_FAILURE() << "case " << i;
  }
  std::printf("[random_gpu] %llu cases, %llu mismatches (curand4, curand_Philox4x32_10)\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(bad));
  EXPECT_EQ(bad, 0u);
}

TEST(random_gpu, sum_with_per_step_sr_equals_host) {
  TIEBREAK_REQUIRE_GPU();
  dev_buf<std::uint64_t> o(sum_seeds);
  ASSERT_NE(o.p, nullptr);
  sum_kernel<<<32, 128>>>(sum_seeds, o.p);
  TIEBREAK_CUDA_OK(cudaGetLastError());
  TIEBREAK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint64_t> out;
  TIEBREAK_CUDA_OK(o.get(out));
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < sum_seeds; ++i) {
    if (out[i] != sr_sum(i + 1) && ++bad <= 5) ADD_FAILURE() << "seed " << i + 1;
  }
  EXPECT_EQ(bad, 0u);
}

}  // namespace
