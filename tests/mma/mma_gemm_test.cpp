// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the emulated GEMM and dot product (include/tiebreak/emu/mma_gemm.hpp).
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/emu/mma_gemm.hpp"
#include "tiebreak/emu/mma_gen.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

/// Random operands of a model: A M x K, B K x N, C M x N (generator tiles along K).
void fill(const mma_model& m, int M, int N, int K, std::uint64_t seed, std::vector<std::uint32_t>& A,
          std::vector<std::uint32_t>& B, std::vector<std::uint32_t>& C) {
  A.resize(static_cast<std::size_t>(M) * K);
  B.resize(static_cast<std::size_t>(K) * N);
  C.resize(static_cast<std::size_t>(M) * N);
  for (int r = 0; r < M; ++r)
    for (int i = 0; i < K; ++i)
      A[static_cast<std::size_t>(r) * K + i] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, static_cast<std::uint64_t>(i / m.k), mma_operand_kind::a, r % m.m, i % m.k));
  for (int i = 0; i < K; ++i)
    for (int c = 0; c < N; ++c)
      B[static_cast<std::size_t>(i) * N + c] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, static_cast<std::uint64_t>(i / m.k), mma_operand_kind::b, i % m.k, c % m.n));
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      C[static_cast<std::size_t>(r) * N + c] =
          static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::c, r % m.m, c % m.n));
}

/// Reference: element by element, the k chunks in order, each through mma_dot on raw encodings.
std::vector<std::uint32_t> reference(const mma_model& m, int M, int N, int K, const std::vector<std::uint32_t>& A,
                                     const std::vector<std::uint32_t>& B, const std::vector<std::uint32_t>& C) {
  std::vector<std::uint32_t> D(C.size());
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) {
      std::uint64_t d = C[static_cast<std::size_t>(r) * N + c];
      for (int k0 = 0; k0 < K; k0 += m.k)
        d = mma_dot(m, d, &A[static_cast<std::size_t>(r) * K + k0], 1, &B[static_cast<std::size_t>(k0) * N + c], N).bits;
      D[static_cast<std::size_t>(r) * N + c] = static_cast<std::uint32_t>(d);
    }
  return D;
}

TEST(MmaGemm, TableModelsEqualElementwiseChunks) {
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    const int M = 24, N = 16, K = m.k * 5;
    std::vector<std::uint32_t> A, B, C;
    fill(m, M, N, K, 3 + static_cast<std::uint64_t>(id), A, B, C);
    std::vector<std::uint32_t> D(C.size());
    gemm(m, M, N, K, A.data(), B.data(), C.data(), D.data());
    EXPECT_EQ(D, reference(m, M, N, K, A, B, C)) << mma_instr_name(id);
    // dot() on one row and column agrees with the GEMM element.
    std::vector<std::uint32_t> col(static_cast<std::size_t>(K));
    for (int i = 0; i < K; ++i) col[static_cast<std::size_t>(i)] = B[static_cast<std::size_t>(i) * N + 3];
    EXPECT_EQ(dot(m, C[2 * N + 3], &A[2 * static_cast<std::size_t>(K)], 1, col.data(), 1, K), D[2 * N + 3]);
  }
}

TEST(MmaGemm, GenericModelAndAliasing) {
  // A model not in the table takes the generic path; D may alias C.
  mma_model m = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  m.group = 4;
  m.grouping = mma_grouping::strided;
  m.align_bits = 27;
  m.align_round = round_mode::rd;
  m.step_round = round_mode::rne;
  const int M = 16, N = 8, K = 64;
  std::vector<std::uint32_t> A, B, C;
  fill(m, M, N, K, 5, A, B, C);
  const auto want = reference(m, M, N, K, A, B, C);
  gemm(m, M, N, K, A.data(), B.data(), C.data(), C.data());
  EXPECT_EQ(C, want);
}

}  // namespace
