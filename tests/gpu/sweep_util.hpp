// SPDX-License-Identifier: Apache-2.0
/// @file Shared helpers of the GPU sweep tests: sweep sizes, reporting, the device skip.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/gpu/device.hpp"
#include "tiebreak/emu/instr_table.hpp"
#include "tiebreak/gpu/sweep.hpp"

#include "gpu_test_util.hpp"  // TIEBREAK_REQUIRE_GPU

#ifndef TIEBREAK_TEST_LEVEL_FULL
#define TIEBREAK_TEST_LEVEL_FULL 1
#endif

namespace tiebreak::gpu::testing {

/// log2 of the inputs one sweep covers: 32 (every input) at TIEBREAK_TEST_LEVEL=full, 24 at quick;
/// the environment variable TIEBREAK_GPU_SWEEP_LOG2 (16..32) overrides both (compute-sanitizer runs
/// use a small one).
inline int sweep_log2() {
  if (const char* s = std::getenv("TIEBREAK_GPU_SWEEP_LOG2")) {
    const int v = std::atoi(s);
    if (v >= 16 && v <= 32) return v;
  }
  return TIEBREAK_TEST_LEVEL_FULL ? 32 : 24;
}

inline std::uint64_t sweep_size() { return std::uint64_t{1} << sweep_log2(); }

/// Sweeps an instruction over the 32-bit space, or, below 2^32, over 16 windows spread across it (so a
/// reduced run still meets every sign and exponent range). Returns the merged result.
inline sweep_result sweep_space(instr_op op) {
  const std::uint64_t n = sweep_size();
  if (n == (std::uint64_t{1} << 32)) return sweep(op);
  sweep_result total;
  const std::uint64_t w = n / 16;
  for (std::uint64_t k = 0; k < 16; ++k) {
    const std::uint64_t begin = k << 28;
    sweep_result r = sweep(op, begin, begin + w);
    total.covered += r.covered;
    total.mismatches += r.mismatches;
    total.seconds += r.seconds;
    for (int i = 0; i < instr_bin_count; ++i) total.by_bin[i] += r.by_bin[i];
    for (const mismatch& m : r.first)
      if (total.first.size() < static_cast<std::size_t>(max_recorded)) total.first.push_back(m);
  }
  return total;
}

/// One line per sweep (tools/device-check.sh collects them into its timing table), then the
/// mismatches found, if any.
inline void report(const std::string& name, const sweep_result& r) {
  std::printf("[sweep] %-34s covered=%" PRIu64 " mismatches=%" PRIu64 " seconds=%.3f\n", name.c_str(), r.covered,
              r.mismatches, r.seconds);
  for (int i = 0; i < instr_bin_count; ++i)
    if (r.by_bin[i]) std::printf("[sweep]   bin %3d: %" PRIu64 " mismatches\n", i, r.by_bin[i]);
  for (const mismatch& m : r.first)
    std::printf("[sweep]   input=0x%012" PRIx64 " core=0x%08x hw=0x%08x\n", m.input, m.core_bits, m.hw_bits);
  std::fflush(stdout);
}

/// Every instruction of the given kinds, for INSTANTIATE_TEST_SUITE_P.
inline std::vector<instr_op> instrs_where(bool (*pred)(const instr_desc&)) {
  std::vector<instr_op> v;
  for (instr_op op : all_instr_ops)
    if (pred(instr_desc_of(op))) v.push_back(op);
  return v;
}

inline std::string instr_name(const ::testing::TestParamInfo<instr_op>& info) {
  return std::string(instr_desc_of(info.param).name);
}

/// Inputs spread over the whole 32-bit space (an odd stride visits every residue class), for
/// comparing the core in a kernel with the core on the host.
inline std::vector<std::uint64_t> spread_inputs(std::size_t n) {
  std::vector<std::uint64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>(i * 0x9e3779b1u + 0x7f7fffffu * (i & 1));
  return v;
}

}  // namespace tiebreak::gpu::testing
