// SPDX-License-Identifier: Apache-2.0
/// @file Host audit timings: the f64 reference alone (forward, forward + backward) and the whole
/// audit (reference + statistics) on the host target, B=1, H=8, S=1024, D=64.
#include "audit_fixtures.hpp"  // tests/audit: seeded bf16 problems and the emulated kernel

#include <tiebreak/audit/audit.hpp>

#include <benchmark/benchmark.h>

namespace {

namespace ref = tiebreak::reference;
namespace audit = tiebreak::audit;
using tiebreak::round_mode;

ref::attention_shape shape_of(const benchmark::State& st) {
  const auto h = static_cast<std::size_t>(st.range(0)), s = static_cast<std::size_t>(st.range(1)),
             d = static_cast<std::size_t>(st.range(2));
  return {1, h, h, s, s, d, d};
}

void BM_ReferenceForward(benchmark::State& st) {
  const auto in = tiebreak::test::make_problem(shape_of(st), 1, 0.5);
  for (auto _ : st) benchmark::DoNotOptimize(ref::attention_f64(in));
}

void BM_ReferenceForwardBackward(benchmark::State& st) {
  const auto in = tiebreak::test::make_problem(shape_of(st), 1, 0.5, true);
  for (auto _ : st) benchmark::DoNotOptimize(ref::attention_f64(in));
}

/// The whole audit of a kernel dump with dO: reference forward + backward, every statistic.
void BM_Audit(benchmark::State& st) {
  const auto in = tiebreak::test::make_problem(shape_of(st), 1, 0.5, true);
  const auto dump = tiebreak::test::emulate_kernel(in, true, [](std::size_t, std::size_t h) {
    return h % 2 ? round_mode::rz : round_mode::rne;
  });
  audit::audit_options o;
  o.causal = true;
  for (auto _ : st) benchmark::DoNotOptimize(audit::run_audit(dump, o));
}

}  // namespace

BENCHMARK(BM_ReferenceForward)->Args({8, 1024, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReferenceForwardBackward)->Args({8, 1024, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Audit)->Args({8, 1024, 64})->Args({8, 256, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
