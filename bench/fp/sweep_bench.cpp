// SPDX-License-Identifier: Apache-2.0
/// @file Time of the exhaustive sweeps' core work on 2 threads: all 2^32 f32 -> bf16 through
/// round_pack in one mode, and all 2^32 bf16 pairs through emu::add / emu::mul (rne).
///
/// The work per input is the core call only (no oracle): it is the floor under the exhaustive tests.
/// Targets (issue 2): f32 -> bf16 one mode <= 30 s, bf16 add all pairs <= 120 s, on 2 cores.
/// Each benchmark runs once (about a minute each); filter with --benchmark_filter. Besides the wall
/// time, each reports the process CPU time of the sweep (counter cpu_s) and cpu_s / 2 (counter
/// idle_2core_s): on a shared machine the wall time includes other people's work, the CPU time
/// does not, and cpu_s / 2 estimates the wall time on 2 idle cores.
#include <benchmark/benchmark.h>

#include <atomic>
#include <ctime>
#include <cstdint>
#include <thread>
#include <vector>

#include "tiebreak/emu/ops.hpp"
#include "tiebreak/fp/round.hpp"

namespace {

using namespace tiebreak;

constexpr unsigned threads = 2;

/// Runs body(lo, hi) over [0, 2^32) in 2^20 chunks on `threads` threads; returns an xor of the
/// results so nothing is optimised away.
template <class Body>
std::uint64_t sweep(Body body) {
  std::atomic<std::uint64_t> next{0}, acc{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::uint64_t local = 0;
      for (;;) {
        const std::uint64_t lo = next.fetch_add(1u << 20);
        if (lo >= (std::uint64_t{1} << 32)) break;
        local ^= body(lo, lo + (1u << 20));
      }
      acc ^= local;
    });
  }
  for (auto& th : pool) th.join();
  return acc;
}

/// Runs the sweep once per iteration and records items and the process CPU time.
template <class Body>
void run_timed(benchmark::State& st, Body body) {
  const std::clock_t c0 = std::clock();
  for (auto _ : st) benchmark::DoNotOptimize(sweep(body));
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / static_cast<double>(st.iterations());
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) << 32);
  st.counters["cpu_s"] = cpu;
  st.counters["idle_2core_s"] = cpu / threads;
}

template <round_mode M>
[[gnu::flatten]] std::uint64_t convert_chunk(std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t h = 0;
  for (std::uint64_t i = lo; i < hi; ++i)
    h = h * 31 + f32_bits_to(formats::bf16, static_cast<std::uint32_t>(i), rounding{M}).bits;
  return h;
}

template <round_mode M>
[[gnu::flatten]] std::uint64_t add_chunk(std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t h = 0;
  for (std::uint64_t i = lo; i < hi; ++i)
    h = h * 31 + emu::add(formats::bf16, i >> 16, i & 0xffff, rounding{M}).bits();
  return h;
}

template <round_mode M>
[[gnu::flatten]] std::uint64_t mul_chunk(std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t h = 0;
  for (std::uint64_t i = lo; i < hi; ++i)
    h = h * 31 + emu::mul(formats::bf16, i >> 16, i & 0xffff, rounding{M}).bits();
  return h;
}

void bm_all_f32_to_bf16_rne(benchmark::State& st) {
  run_timed(st, convert_chunk<round_mode::rne>);
}
void bm_all_f32_to_bf16_rz(benchmark::State& st) {
  run_timed(st, convert_chunk<round_mode::rz>);
}
void bm_all_bf16_pairs_add_rne(benchmark::State& st) {
  run_timed(st, add_chunk<round_mode::rne>);
}
void bm_all_bf16_pairs_mul_rne(benchmark::State& st) {
  run_timed(st, mul_chunk<round_mode::rne>);
}

BENCHMARK(bm_all_f32_to_bf16_rne)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(bm_all_f32_to_bf16_rz)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(bm_all_bf16_pairs_add_rne)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK(bm_all_bf16_pairs_mul_rne)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
