// SPDX-License-Identifier: Apache-2.0
/// @file Threaded sweeps over index ranges (std::thread, hardware_concurrency), with timing and a
/// bounded log of mismatches.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tiebreak/fp/random.hpp"

#ifndef TIEBREAK_TEST_LEVEL_FULL
#define TIEBREAK_TEST_LEVEL_FULL 1
#endif
#ifndef TIEBREAK_TEST_LEVEL_SMOKE
#define TIEBREAK_TEST_LEVEL_SMOKE 0
#endif

namespace tiebreak::test {

/// full: every input; quick: every 257th input (all exponents, all kinds of low bits; ~1/257 of
/// the time); smoke: every (16 * 257)th, for the sanitizer build (tools/sanitize.sh), where the
/// sweeps' arithmetic runs ~10x slower and the other host tests already cover the same code. Set by
/// the CMake option TIEBREAK_TEST_LEVEL.
inline constexpr bool full_level = TIEBREAK_TEST_LEVEL_FULL != 0;
inline constexpr bool smoke_level = !full_level && TIEBREAK_TEST_LEVEL_SMOKE != 0;
inline constexpr std::uint64_t sweep_stride = full_level ? 1 : smoke_level ? 16 * 257 : 257;

/// Collects mismatches from all threads: their count and the first few descriptions.
class mismatch_log {
 public:
  void add(const std::string& what) {
    const auto n = count_.fetch_add(1, std::memory_order_relaxed);
    if (n < 16) {
      std::lock_guard<std::mutex> lock(mu_);
      first_.push_back(what);
    }
  }
  std::uint64_t count() const { return count_.load(); }
  std::string report() const {
    std::string s = std::to_string(count()) + " mismatches; first ones:\n";
    for (const auto& w : first_) s += "  " + w + "\n";
    return s;
  }

 private:
  std::atomic<std::uint64_t> count_{0};
  std::mutex mu_;
  std::vector<std::string> first_;
};

inline unsigned sweep_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : n;
}

/// Calls body(i) for i = 0, stride, 2*stride, ... < end on every hardware thread (chunks handed out
/// dynamically), then prints and records the wall time and the CPU time of the process under `name`
/// (the machine is shared: CPU time / 2 estimates the wall time on 2 idle cores).
template <class Body>
double parallel_sweep(const char* name, std::uint64_t end, std::uint64_t stride, Body body) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  const std::uint64_t count = (end + stride - 1) / stride;
  constexpr std::uint64_t chunk = std::uint64_t{1} << 20;
  std::atomic<std::uint64_t> next{0};
  std::vector<std::thread> pool;
  const unsigned nt = sweep_threads();
  for (unsigned t = 0; t < nt; ++t) {
    pool.emplace_back([&] {
      for (;;) {
        const std::uint64_t lo = next.fetch_add(chunk);
        if (lo >= count) break;
        const std::uint64_t hi = std::min(count, lo + chunk);
        for (std::uint64_t j = lo; j < hi; ++j) body(j * stride);
      }
    });
  }
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  std::printf("[ sweep    ] %s: %llu inputs in %.2f s wall, %.2f s CPU, %u threads (%.1f ns CPU/input)\n", name,
              static_cast<unsigned long long>(count), s, cpu, nt, cpu * 1e9 / static_cast<double>(count));
  ::testing::Test::RecordProperty(std::string(name) + "_seconds", std::to_string(s));
  ::testing::Test::RecordProperty(std::string(name) + "_cpu_seconds", std::to_string(cpu));
  return s;
}

/// Sweeps the inputs [0, total) in blocks of `block` consecutive inputs: body(lo, hi) for every
/// block at full level, for every 257th block at quick level and every (16 * 257)th at smoke (the
/// same per-input work, so the time per input measured at quick level is the full sweep's). Blocks are handed out dynamically to
/// every hardware thread: one atomic increment per block, none per input. Consecutive inputs also
/// keep the data-dependent branches of the core and the oracle as predictable as in the full sweep
/// (a strided sample mispredicts them and runs up to 4x slower per input). Prints and records wall
/// and CPU time and the CPU time extrapolated to all inputs; returns the CPU seconds.
template <class Body>
double sweep_blocks(const char* name, std::uint64_t total, std::uint64_t block, Body body) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  const std::uint64_t blocks = (total + block - 1) / block;
  const std::uint64_t block_stride = sweep_stride;
  const std::uint64_t visited = (blocks + block_stride - 1) / block_stride;
  std::atomic<std::uint64_t> next{0}, inputs{0};
  std::vector<std::thread> pool;
  const unsigned nt = sweep_threads();
  for (unsigned t = 0; t < nt; ++t) {
    pool.emplace_back([&] {
      std::uint64_t mine = 0;
      for (;;) {
        const std::uint64_t k = next.fetch_add(1, std::memory_order_relaxed);
        if (k >= visited) break;
        const std::uint64_t lo = k * block_stride * block, hi = std::min(total, lo + block);
        body(lo, hi);
        mine += hi - lo;
      }
      inputs.fetch_add(mine);
    });
  }
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const double n = static_cast<double>(inputs.load());
  std::printf("[ sweep    ] %s: %.0f of %.0f inputs in %.2f s wall, %.2f s CPU, %u threads (%.1f ns CPU/input; "
              "all inputs: %.0f s CPU, ~%.0f s wall on 2 idle cores)\n",
              name, n, static_cast<double>(total), s, cpu, nt, cpu * 1e9 / n, cpu / n * static_cast<double>(total),
              cpu / n * static_cast<double>(total) / 2);
  ::testing::Test::RecordProperty(std::string(name) + "_seconds", std::to_string(s));
  ::testing::Test::RecordProperty(std::string(name) + "_cpu_seconds", std::to_string(cpu));
  ::testing::Test::RecordProperty(std::string(name) + "_cpu_ns_per_input", std::to_string(cpu * 1e9 / n));
  return cpu;
}

/// True for the blocks the quick level visits (every 257th block of `block` inputs, block-aligned
/// `lo`): at the full level, checks that are a sample by design (stochastic rounding, whose random
/// operand has its own 2^32 values per input) run on these blocks only, the same inputs at both
/// levels.
inline bool sampled_block(std::uint64_t lo, std::uint64_t block) { return (lo / block) % 257 == 0; }

/// SplitMix64: deterministic, seedable random bits for samples (the core's generator).
using splitmix64 = tiebreak::splitmix64_generator;

/// A fixed hash of an index, for random bits inside sweeps.
inline std::uint32_t hash32(std::uint64_t i) {
  splitmix64 g(i * 0x2545f4914f6cdd1dull + 7);
  return static_cast<std::uint32_t>(g() >> 32);
}

}  // namespace tiebreak::test
