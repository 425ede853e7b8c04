// SPDX-License-Identifier: Apache-2.0
/// @file Throughput of the emulated tensor-core GEMM (emu::gemm) and dot product (emu::dot), in GFLOP/s
/// on one core (2 FLOP per product).
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "tiebreak/host/emu_gemm.hpp"
#include "tiebreak/emu/mma_gen.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

/// Operands of a 64 x 64 x (32 k) GEMM on typical data (generator scenario `typical` only: the
/// common case).
struct bench_gemm {
  int M = 64, N = 64, K = 0;
  std::vector<std::uint32_t> A, B, C, D;
};

bench_gemm make_gemm(const mma_model& m) {
  bench_gemm g;
  g.K = m.k * 32;
  std::uint64_t seed = 0;
  while (mma_tile_scenario(seed, 0) != mma_scenario::typical) ++seed;  // tile 0 of this seed is typical
  g.A.resize(static_cast<std::size_t>(g.M) * g.K);
  g.B.resize(static_cast<std::size_t>(g.K) * g.N);
  g.C.resize(static_cast<std::size_t>(g.M) * g.N);
  g.D.resize(g.C.size());
  for (int r = 0; r < g.M; ++r)
    for (int i = 0; i < g.K; ++i)
      g.A[static_cast<std::size_t>(r) * g.K + i] =
          static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::a, r, i));
  for (int i = 0; i < g.K; ++i)
    for (int c = 0; c < g.N; ++c)
      g.B[static_cast<std::size_t>(i) * g.N + c] =
          static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::b, i, c));
  for (std::size_t e = 0; e < g.C.size(); ++e)
    g.C[e] = static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::c, static_cast<int>(e), 0));
  return g;
}

void report(benchmark::State& state, const bench_gemm& g, mma_instr id) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * g.M * g.N * g.K * static_cast<double>(state.iterations()) / 1e9,
                                                  benchmark::Counter::kIsRate);
  state.SetLabel(std::string(mma_instr_name(id)));
}

/// emu::gemm as it runs by default (the fast path for every row of mma_models).
void BM_EmuGemm(benchmark::State& state) {
  const auto id = static_cast<mma_instr>(state.range(0));
  const mma_model& m = mma_entry(id).model;
  bench_gemm g = make_gemm(m);
  for (auto _ : state) {
    gemm(m, g.M, g.N, g.K, g.A.data(), g.B.data(), g.C.data(), g.D.data());
    benchmark::DoNotOptimize(g.D.data());
  }
  report(state, g, id);
}
BENCHMARK(BM_EmuGemm)->DenseRange(0, 7)->Unit(benchmark::kMillisecond);

/// emu::gemm through the general model only (mma_dot_with per element: the implementation before
/// the fast path, kept as the reference the fast path is tested against).
void BM_EmuGemmGeneral(benchmark::State& state) {
  const auto id = static_cast<mma_instr>(state.range(0));
  const mma_model& m = mma_entry(id).model;
  bench_gemm g = make_gemm(m);
  for (auto _ : state) {
    gemm(m, g.M, g.N, g.K, g.A.data(), g.B.data(), g.C.data(), g.D.data(), gemm_kernel::general);
    benchmark::DoNotOptimize(g.D.data());
  }
  report(state, g, id);
}
BENCHMARK(BM_EmuGemmGeneral)->DenseRange(0, 7)->Unit(benchmark::kMillisecond);

/// emu::dot on every (row, column) of the same GEMM (B's column strided): the per-element API.
void BM_EmuDot(benchmark::State& state) {
  const auto id = static_cast<mma_instr>(state.range(0));
  const mma_model& m = mma_entry(id).model;
  bench_gemm g = make_gemm(m);
  for (auto _ : state) {
    for (int r = 0; r < g.M; ++r)
      for (int c = 0; c < g.N; ++c)
        g.D[static_cast<std::size_t>(r) * g.N + c] = static_cast<std::uint32_t>(
            dot(m, g.C[static_cast<std::size_t>(r) * g.N + c], &g.A[static_cast<std::size_t>(r) * g.K], 1, &g.B[c], g.N, g.K));
    benchmark::DoNotOptimize(g.D.data());
  }
  report(state, g, id);
}
BENCHMARK(BM_EmuDot)->DenseRange(0, 7)->Unit(benchmark::kMillisecond);

}  // namespace
