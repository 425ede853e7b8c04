// SPDX-License-Identifier: Apache-2.0
/// @file Device tests of the tensor-core launchers (cuda/include/tiebreak/gpu/mma.hpp).
///
/// Hardware against the model of mma_models: validation on random and adversarial tiles, and
/// bit-identity of the CUDA GEMM kernel with emu::gemm. Skipped without a GPU that runs the
/// instruction. Meaningful once the table holds the parameters the probes established.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/host/emu_gemm.hpp"
#include "tiebreak/emu/mma_gen.hpp"
#include "tiebreak/gpu/mma.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

class MmaGpu : public ::testing::TestWithParam<mma_instr> {};

/// Cases per validation: 10^8 at the full test level, 4e6 otherwise; TIEBREAK_MMA_GPU_CASES
/// overrides both (compute-sanitizer runs use 2^16: the tools slow kernels 10-100x).
std::uint64_t validation_cases() {
  if (const char* s = std::getenv("TIEBREAK_MMA_GPU_CASES")) {
    const unsigned long long v = std::strtoull(s, nullptr, 10);
    if (v > 0) return v;
  }
  return TIEBREAK_TEST_LEVEL_FULL ? 100000000ull : 4000000ull;
}

/// The hardware against the model evaluated on the host: tiles drawn on the host, executed by
/// gpu::mma_run_tiles, every output element compared with emu::mma_dot (threaded).
TEST_P(MmaGpu, HardwareMatchesHostModel) {
  const mma_instr id = GetParam();
  if (!gpu::mma_available(id)) GTEST_SKIP() << gpu::mma_device_description();
  const mma_model& m = mma_entry(id).model;
  const std::size_t M = m.m, N = m.n, K = m.k, ta = M * K, tb = K * N, tc = M * N;
  const std::size_t tiles = static_cast<std::size_t>((validation_cases() + tc - 1) / tc);
  std::vector<std::uint32_t> A(tiles * ta), B(tiles * tb), C(tiles * tc), D(tiles * tc);
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  auto parallel = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < nt; ++w)
      pool.emplace_back([&, w] {
        for (std::size_t t = w; t < tiles; t += nt) body(t);
      });
    for (auto& th : pool) th.join();
  };
  const std::uint64_t seed = 7;
  parallel([&](std::size_t t) { mma_gen_tile(m, seed, t, &A[t * ta], &B[t * tb], &C[t * tc]); });
  gpu::mma_run_tiles(id, tiles, A.data(), B.data(), C.data(), D.data());
  std::vector<std::uint64_t> bad(tiles, 0);
  parallel([&](std::size_t t) {
    for (std::size_t i = 0; i < tc; ++i) {
      const std::size_t row = i / N, col = i % N;
      const auto r = mma_dot(m, C[t * tc + i], &A[t * ta + row * K], 1, &B[t * tb + col], static_cast<std::ptrdiff_t>(N));
      bad[t] += static_cast<std::uint32_t>(r.bits) != D[t * tc + i];
    }
  });
  std::uint64_t total = 0;
  for (std::size_t t = 0; t < tiles; ++t) {
    if (bad[t] != 0 && total == 0) {
      for (std::size_t i = 0; i < tc; ++i) {
        const std::size_t row = i / N, col = i % N;
        const auto r = mma_dot(m, C[t * tc + i], &A[t * ta + row * K], 1, &B[t * tb + col], static_cast<std::ptrdiff_t>(N));
        if (static_cast<std::uint32_t>(r.bits) != D[t * tc + i]) {
          ADD_FAILURE() << mma_instr_name(id) << " tile " << t << " (" << row << "," << col << "): hardware 0x"
                        << std::hex << D[t * tc + i] << ", model 0x" << r.bits << std::dec;
          break;
        }
      }
    }
    total += bad[t];
  }
  EXPECT_EQ(total, 0u) << mma_instr_name(id) << ": " << total << " of " << tiles * tc << " elements";
}

TEST_P(MmaGpu, ModelMatchesHardware) {
  const mma_instr id = GetParam();
  if (!gpu::mma_available(id)) GTEST_SKIP() << gpu::mma_device_description();
  const mma_model& m = mma_entry(id).model;
  const auto v = gpu::mma_validate(id, {m}, validation_cases(), 42, 120.0);
  EXPECT_GT(v.cases, 0u);
  EXPECT_EQ(v.mismatches.at(0), 0u) << mma_instr_name(id) << ": " << v.mismatches[0] << " of " << v.cases;
}

TEST_P(MmaGpu, GemmKernelEqualsEmulatedGemm) {
  const mma_instr id = GetParam();
  if (!gpu::mma_available(id)) GTEST_SKIP() << gpu::mma_device_description();
  const mma_model& m = mma_entry(id).model;
  const int M = m.m * 3, N = 24, K = m.k * 6;
  std::vector<std::uint32_t> A(static_cast<std::size_t>(M) * K), B(static_cast<std::size_t>(K) * N),
      C(static_cast<std::size_t>(M) * N), D(C.size()), E(C.size());
  mma_gen_gemm(m, 9, M, N, K, A.data(), B.data(), C.data());
  gpu::mma_gemm(id, M, N, K, A.data(), B.data(), C.data(), D.data());
  gemm(m, M, N, K, A.data(), B.data(), C.data(), E.data());
  std::size_t diff = 0;
  for (std::size_t e = 0; e < D.size(); ++e) diff += D[e] != E[e];
  EXPECT_EQ(diff, 0u) << mma_instr_name(id);
}

INSTANTIATE_TEST_SUITE_P(AllInstructions, MmaGpu, ::testing::ValuesIn(all_mma_instrs),
                         [](const ::testing::TestParamInfo<mma_instr>& i) {
                           std::string s(mma_instr_name(i.param));
                           for (char& ch : s) if (ch == '.') ch = '_';
                           return s;
                         });

}  // namespace
