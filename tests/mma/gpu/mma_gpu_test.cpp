// SPDX-License-Identifier: Apache-2.0
/// @file Device tests of the tensor-core launchers (cuda/include/tiebreak/gpu/mma.hpp).
///
/// Hardware against the model of mma_models: validation on random and adversarial tiles, and
/// bit-identity of the CUDA GEMM kernel with emu::gemm. Skipped without a GPU that runs the
/// instruction. Meaningful once the table holds the parameters the probes established.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/emu/mma_gemm.hpp"
#include "tiebreak/emu/mma_gen.hpp"
#include "tiebreak/gpu/mma.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

class MmaGpu : public ::testing::TestWithParam<mma_instr> {};

TEST_P(MmaGpu, ModelMatchesHardware) {
  const mma_instr id = GetParam();
  if (!gpu::mma_available(id)) GTEST_SKIP() << gpu::mma_device_description();
  const mma_model& m = mma_entry(id).model;
  const auto v = gpu::mma_validate(id, {m}, TIEBREAK_TEST_LEVEL_FULL ? 100000000ull : 4000000ull, 42, 120.0);
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
  for (int r = 0; r < M; ++r)
    for (int i = 0; i < K; ++i)
      A[static_cast<std::size_t>(r) * K + i] = static_cast<std::uint32_t>(
          mma_gen_element(m, 9, static_cast<std::uint64_t>(i / m.k), mma_operand_kind::a, r % m.m, i % m.k));
  for (int i = 0; i < K; ++i)
    for (int c = 0; c < N; ++c)
      B[static_cast<std::size_t>(i) * N + c] = static_cast<std::uint32_t>(
          mma_gen_element(m, 9, static_cast<std::uint64_t>(i / m.k), mma_operand_kind::b, i % m.k, c % m.n));
  for (std::size_t e = 0; e < C.size(); ++e)
    C[e] = static_cast<std::uint32_t>(mma_gen_element(m, 9, 0, mma_operand_kind::c, static_cast<int>(e / N) % m.m,
                                                      static_cast<int>(e % N) % m.n));
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
