// SPDX-License-Identifier: Apache-2.0
/// @file ex2.approx.ftz.f32 and ex2.approx.f32 (MUFU.EX2) against fp/sfu.hpp on all 2^32 inputs: the
/// model runs in the kernel, with sm_90's interpolator (the core's, compiled for the device), and
/// again with the embedded table read from global memory (the oracle the interpolator was proven
/// equal to on the host).
#include <cstdint>
#include <cstdio>
#include <string>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "../gpu_test_util.hpp"
#include "tiebreak/fp/sfu.hpp"
#include "tiebreak/host/sfu.hpp"

namespace tiebreak::gpu {
namespace {

using testing::dev_buf;

/// sfu::ex2_approx*'s `table(F)`: T in global memory (32 MiB, read-only during the kernel).
/// __host__ __device__ although only the kernel calls it: nvcc rejects a __device__-only callable
/// in a constexpr __host__ __device__ function (the model's).
struct global_table {
  const std::uint32_t* t;
  TIEBREAK_HD std::uint32_t operator()(std::uint32_t f) const noexcept {
#if defined(__CUDA_ARCH__)
    return __ldg(t + f);
#else
    return t[f];
#endif
  }
};

// The rule and the interpolator in nvcc's constant evaluation too (tests/host/fp/sfu_test.cpp has
// the tables of them).
struct linear_table {
  constexpr std::uint32_t operator()(std::uint32_t f) const noexcept { return 0x3f800000u | f; }
};
static_assert(sfu::ex2_approx_ftz_bits(0xbfc00000u, linear_table{}) == 0x3ebfffffu);  // -1.5: ones' complement
static_assert(sfu::ex2_approx_ftz_bits(0x33ffffffu, linear_table{}) == 0x3f800000u);  // below 2^-23: truncated
static_assert(sfu::ex2_approx_ftz_bits(0xc2fc0001u, linear_table{}) == 0u);           // below -126: flushed
static_assert(sfu::ex2_sm90_entry(0) == 0x3f800000u && sfu::ex2_sm90_entry(sfu::ex2_table_size - 1) == 0x3fffffffu);
static_assert(sfu::ex2_sm90_entry(sfu::ex2_table_size / 2) == 0x3fb504f3u);  // sqrt(2)
static_assert(sfu::ex2_sm90_entry(7340031) == 0x3feac0c5u && sfu::ex2_sm90_entry(7340032) == 0x3feac0c8u);

// The instructions themselves (inline PTX: no intrinsic in between).
__device__ __forceinline__ float hw_ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float hw_ex2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

constexpr int variants = 2;  // 0: ex2.approx.ftz.f32, 1: ex2.approx.f32
constexpr const char* variant_name[variants] = {"ex2.approx.ftz.f32", "ex2.approx.f32"};
constexpr unsigned keep = 8;  // first mismatches kept per variant

struct mismatch {
  std::uint32_t x, hw, model;
};
struct sweep_state {
  unsigned long long covered;
  unsigned long long mismatches[variants];
  unsigned int recorded[variants];
  mismatch first[variants][keep];
};

__device__ void record(sweep_state* st, int v, std::uint32_t x, std::uint32_t hw, std::uint32_t model) {
  atomicAdd(&st->mismatches[v], 1ull);
  const unsigned n = atomicAdd(&st->recorded[v], 1u);
  if (n < keep) st->first[v][n] = mismatch{x, hw, model};
}

/// Inputs begin, ..., begin + count - 1 (grid-stride), both variants per input, the model's T from
/// `tab` (sfu::ex2_sm90_interpolator or global_table).
template <class Table>
__global__ void ex2_sweep(std::uint64_t begin, std::uint64_t count, Table tab, sweep_state* st) {
  unsigned long long mine = 0;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::uint32_t u = static_cast<std::uint32_t>(begin + i);
    const float x = bits_to_f32(u);
    const std::uint32_t hw_ftz = f32_to_bits(hw_ex2_ftz(x));
    const std::uint32_t model_ftz = sfu::ex2_approx_ftz_bits(u, tab);
    if (hw_ftz != model_ftz) record(st, 0, u, hw_ftz, model_ftz);
    const std::uint32_t hw = f32_to_bits(hw_ex2(x));
    const std::uint32_t model = f32_to_bits(sfu::ex2_approx(x, tab));
    if (hw != model) record(st, 1, u, hw, model);
    ++mine;
  }
  atomicAdd(&st->covered, mine);
}

/// All 2^32 inputs against the model with `tab`, in chunks: expects no mismatch, prints the device time.
template <class Table>
void sweep_all(const cudaDeviceProp& prop, Table tab, const char* model_name) {
  dev_buf<sweep_state> st(1);
  ASSERT_NE(st.p, nullptr);
  cudaEvent_t start = nullptr, stop = nullptr;
  TIEBREAK_CUDA_OK(cudaEventCreate(&start));
  TIEBREAK_CUDA_OK(cudaEventCreate(&stop));
  constexpr std::uint64_t total = std::uint64_t{1} << 32, chunk = std::uint64_t{1} << 28;
  const unsigned blocks = static_cast<unsigned>(prop.multiProcessorCount) * 8;  // 8 blocks of 256 per SM
  TIEBREAK_CUDA_OK(cudaEventRecord(start));
  for (std::uint64_t begin = 0; begin < total; begin += chunk) {
    ex2_sweep<<<blocks, 256>>>(begin, chunk, tab, st.p);
    TIEBREAK_CUDA_OK(cudaGetLastError());
  }
  TIEBREAK_CUDA_OK(cudaEventRecord(stop));
  TIEBREAK_CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0;
  TIEBREAK_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);

  sweep_state h{};
  TIEBREAK_CUDA_OK(cudaMemcpy(&h, st.p, sizeof h, cudaMemcpyDeviceToHost));
  std::printf("[ sweep    ] ex2.approx{.ftz,}.f32 on %s, model with %s: %llu inputs in %.1f ms device time; "
              "mismatches %llu (ftz), %llu\n",
              prop.name, model_name, h.covered, static_cast<double>(ms), h.mismatches[0], h.mismatches[1]);
  ::testing::Test::RecordProperty(std::string("device_ms_") + model_name, std::to_string(ms));
  EXPECT_EQ(h.covered, total) << model_name;
  for (int v = 0; v < variants; ++v) {
    std::string first;
    for (unsigned k = 0; k < h.recorded[v] && k < keep; ++k) {
      const mismatch& m = h.first[v][k];
      char line[128];
      std::snprintf(line, sizeof line, "  x = 0x%08x (%a): hardware 0x%08x, model 0x%08x\n", m.x,
                    static_cast<double>(bits_to_f32(m.x)), m.hw, m.model);
      first += line;
    }
    EXPECT_EQ(h.mismatches[v], 0u) << variant_name[v] << ", model with " << model_name << ", first mismatches:\n"
                                   << first;
  }
}

TEST(sfu_gpu, ex2_approx_equals_the_model_on_every_input) {
  TIEBREAK_REQUIRE_GPU();
  int dev = 0;
  cudaDeviceProp prop{};
  TIEBREAK_CUDA_OK(cudaGetDevice(&dev));
  TIEBREAK_CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  if (prop.major != 9 || prop.minor != 0)
    GTEST_SKIP() << "the ex2 table was captured on sm_90 (H200); this device is sm_" << prop.major << prop.minor
                 << " (" << prop.name << "): capture its table with tiebreak_ex2_probe (cuda/sfu/ex2_probe.cu)";

  // The core's interpolator, compiled for the device: the model the twin uses.
  sweep_all(prop, sfu::ex2_sm90_interpolator{}, "interpolator");

  // The captured table from global memory: were the interpolator's device build wrong, this one
  // passing shows it is the build, not the rule.
  const auto t = host::ex2_approx_sm90_table();
  ASSERT_EQ(t.size(), std::size_t{sfu::ex2_table_size});
  dev_buf<std::uint32_t> table(t.size());
  ASSERT_NE(table.p, nullptr);
  TIEBREAK_CUDA_OK(cudaMemcpy(table.p, t.data(), t.size_bytes(), cudaMemcpyHostToDevice));
  sweep_all(prop, global_table{table.p}, "table");
}

}  // namespace
}  // namespace tiebreak::gpu
