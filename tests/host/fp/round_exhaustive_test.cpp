// SPDX-License-Identifier: Apache-2.0
/// @file All 2^32 f32 inputs to f16 through round_pack in every mode, against the f64 oracle.
///
/// f16 exercises what bf16 cannot: a narrower exponent range (overflow above 65504, f16 subnormals
/// from 2^-24, f32 inputs far below the f16 grid that only set the sticky bit). Bits, flags, the
/// G/R/S trace, step, discarded bits and the error fields are checked for every input and mode
/// (rne rna rz ru rd rto, and sr with a hash of the input as its random bits). The oracle's bracket
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

/// One mode of one input: round_pack inlined with a constant mode. Kept out of line (seven small
/// functions rather than one that inlines all seven modes, which was ~115 KB of code per input and
/// ran from outside the instruction cache).
template <round_mode M>
[[gnu::noinline, gnu::flatten]] void check_mode(const f32_case& c, mismatch_log& log) {
  const rounding r{M, M == round_mode::sr ? hash32(c.x) : 0u};
  const round_result got = f32_bits_to(formats::f16, c.x, r);
  if (!f32_case_matches<M>(F16, c, got, r)) [[unlikely]] report(c, r, log);
}

/// One block of inputs: the oracle's case once per input (one bracket), then every mode.
[[gnu::flatten]] void check_block(std::uint64_t lo, std::uint64_t hi, mismatch_log& log) {
  for (std::uint64_t i = lo; i < hi; ++i) {
    const f32_case c = make_f32_case(F16, static_cast<std::uint32_t>(i));
    check_mode<round_mode::rne>(c, log);
    check_mode<round_mode::rna>(c, log);
    check_mode<round_mode::rz>(c, log);
    check_mode<round_mode::ru>(c, log);
    check_mode<round_mode::rd>(c, log);
    check_mode<round_mode::rto>(c, log);
    check_mode<round_mode::sr>(c, log);
  }
}

TEST(round_exhaustive, f32_to_f16_every_mode_matches_oracle) {
  mismatch_log log;
  sweep_blocks("f32_to_f16_all_modes", std::uint64_t{1} << 32, 1u << 14,
                  [&](std::uint64_t lo, std::uint64_t hi) { check_block(lo, hi, log); });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

}  // namespace
}  // namespace tiebreak::test
