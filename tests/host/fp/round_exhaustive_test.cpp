// SPDX-License-Identifier: Apache-2.0
/// @file All 2^32 f32 inputs to f16 through round_pack in every mode, against the f64 oracle.
///
/// f16 exercises what bf16 cannot: a narrower exponent range (overflow above 65504, f16 subnormals
/// from 2^-24, f32 inputs far below the f16 grid that only set the sticky bit). Bits, flags, the
/// G/R/S trace, step, discarded bits and the error fields are checked for every input in every
/// deterministic mode (rne rna rz ru rd rto); sr, with a hash of the input as its random bits, on
/// every 257th block of inputs (16.7 M inputs at both test levels: its random operand makes any
/// sweep of it a sample). The oracle's bracket
/// is computed once per input and every mode's answer derived from it; round_pack is inlined with a
/// constant mode per check. (The f32 -> bf16 sweep lives in fast_exhaustive_test.cpp, where it also
/// proves fast.hpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "support/convert_check.hpp"
#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak::test {
namespace {

constexpr ref_format F16 = ref_of(formats::f16);

/// Cold path: the full diagnostic of one failing (input, mode).
[[gnu::noinline, gnu::cold]] void report(const f32_case& c, rounding r, mismatch_log& log) {
  const round_result got = f32_bits_to(formats::f16, c.x, r);
  if (check_f32_case(formats::f16, F16, c, got, r, convert_options{}, log)) {
    log.add("f16 " + std::string(to_string(r.mode)) + " x=" + hex(c.x) + ": fast check failed, full check passed");
  }
}

/// One mode over a batch of cases: round_pack inlined with a constant mode, every check folded into
/// one flag (no branch per input); a failing batch is walked again for the reports. Kept out of line
/// (seven small loops rather than one body that inlines all seven modes, which was ~115 KB of code
/// per input and ran from outside the instruction cache).
template <round_mode M>
[[gnu::noinline, gnu::flatten]] void check_mode(const f32_case* cs, std::size_t n, mismatch_log& log) {
  auto check = [&](std::size_t i, bool report_failure) {
    const rounding r{M, M == round_mode::sr ? hash32(cs[i].x) : 0u};
    const bool ok = f32_case_matches<M>(F16, cs[i], f32_bits_to(formats::f16, cs[i].x, r), r);
    if (report_failure && !ok) report(cs[i], r, log);
    return ok;
  };
  bool all = true;
  for (std::size_t i = 0; i < n; ++i) all &= check(i, false);
  if (all) [[likely]] return;
  for (std::size_t i = 0; i < n; ++i) check(i, true);
}

/// One block of inputs, in batches: the oracle's case once per input (one bracket), then every mode
/// over the batch; sr only on the sampled blocks (sampled_block).
void check_block(std::uint64_t lo, std::uint64_t hi, bool with_sr, mismatch_log& log) {
  f32_case cs[case_batch];  // no default initialisers: nothing is cleared
  for (std::uint64_t b = lo; b < hi; b += case_batch) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(case_batch, hi - b));
    for (std::size_t i = 0; i < n; ++i) make_f32_case(F16, static_cast<std::uint32_t>(b + i), cs[i]);
    check_mode<round_mode::rne>(cs, n, log);
    check_mode<round_mode::rna>(cs, n, log);
    check_mode<round_mode::rz>(cs, n, log);
    check_mode<round_mode::ru>(cs, n, log);
    check_mode<round_mode::rd>(cs, n, log);
    check_mode<round_mode::rto>(cs, n, log);
    if (with_sr) check_mode<round_mode::sr>(cs, n, log);
  }
}

TEST(round_exhaustive, f32_to_f16_every_mode_matches_oracle) {
  mismatch_log log;
  constexpr std::uint64_t block = 1u << 14;
  sweep_blocks("f32_to_f16_all_modes", std::uint64_t{1} << 32, block,
               [&](std::uint64_t lo, std::uint64_t hi) { check_block(lo, hi, sampled_block(lo, block), log); });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

}  // namespace
}  // namespace tiebreak::test
