// SPDX-License-Identifier: Apache-2.0
/// @file Throughput of the emulated tensor-core GEMM (emu::gemm), in GFLOP/s on one core.
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "tiebreak/emu/mma_gemm.hpp"
#include "tiebreak/emu/mma_gen.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

/// GEMM of 64 x 64 x (32 k) on typical data (generator scenario `typical` only: the common case).
void BM_EmuGemm(benchmark::State& state) {
  const mma_instr id = static_cast<mma_instr>(state.range(0));
  const mma_model& m = mma_entry(id).model;
  const int M = 64, N = 64, K = m.k * 32;
  std::uint64_t seed = 0;
  while (mma_tile_scenario(seed, 0) != mma_scenario::typical) ++seed;  // tile 0 of this seed is typical
  std::vector<std::uint32_t> A(static_cast<std::size_t>(M) * K), B(static_cast<std::size_t>(K) * N),
      C(static_cast<std::size_t>(M) * N), D(C.size());
  for (int r = 0; r < M; ++r)
    for (int i = 0; i < K; ++i)
      A[static_cast<std::size_t>(r) * K + i] =
          static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::a, r, i));
  for (int i = 0; i < K; ++i)
    for (int c = 0; c < N; ++c)
      B[static_cast<std::size_t>(i) * N + c] =
          static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::b, i, c));
  for (std::size_t e = 0; e < C.size(); ++e)
    C[e] = static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::c, static_cast<int>(e), 0));
  for (auto _ : state) {
    gemm(m, M, N, K, A.data(), B.data(), C.data(), D.data());
    benchmark::DoNotOptimize(D.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K * static_cast<double>(state.iterations()) / 1e9,
                                                  benchmark::Counter::kIsRate);
  state.SetLabel(std::string(mma_instr_name(id)));
}
BENCHMARK(BM_EmuGemm)->DenseRange(0, 7)->Unit(benchmark::kMillisecond);

}  // namespace
