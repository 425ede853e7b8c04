// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the tie demonstration sweep (src/host/include/tiebreak/host/tie_demo.hpp).
///
/// demo_pair takes shortcuts for speed (exact f32 sums built from integers, the fast f32 -> bf16
/// narrowing); here every variant of every pair of several binades is recomputed with
/// tiebreak::emu::sum, the reference emulator, and every error with exact rationals.

#include "tiebreak/host/tie_demo.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include <gtest/gtest.h>

#include "tiebreak/emu/sum.hpp"
#include "tiebreak/host/exact.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::host;

TEST(TieDemo, TailIsAScaledCopyOfA) {
  for (unsigned e = demo_exp_lo; e <= static_cast<unsigned>(demo_exp_hi); ++e) {
    for (unsigned f = 0; f < 128; f += 9) {
      const auto a = static_cast<std::uint16_t>(e << 7 | f);
      EXPECT_EQ(value_of(formats::bf16, demo_tail_bits(a, demo_tail::same_sign)), value_of(formats::bf16, a) * pow2(-12));
      EXPECT_EQ(value_of(formats::bf16, demo_tail_bits(a | 0x8000, demo_tail::opposite_sign)),
                value_of(formats::bf16, a) * pow2(-12));
    }
  }
}

TEST(TieDemo, EveryVariantEqualsEmuSumBitForBitWithExactErrors) {
  const unsigned binades[] = {demo_exp_lo, demo_exp_lo + 1, 100, 127, 200, demo_exp_hi};
  // The smoke level (the sanitizer build, where all six took 23 s of its ctest) walks the lowest,
  // the middle and the highest binade; the Release build walks all six.
  constexpr std::size_t binade_count = TIEBREAK_TEST_LEVEL_SMOKE ? 3 : 6;
  const unsigned smoke_binades[] = {demo_exp_lo, 127, demo_exp_hi};
  const unsigned* walked = TIEBREAK_TEST_LEVEL_SMOKE ? smoke_binades : binades;
  std::uint64_t checked = 0;
  for (unsigned sign = 0; sign < 2; ++sign) {
    for (const unsigned e : std::span(walked, binade_count)) {
      for (unsigned fa = 0; fa < 128; ++fa) {
        for (unsigned fb = 0; fb < 128; ++fb) {
          const auto a = static_cast<std::uint16_t>(sign << 15 | e << 7 | fa);
          const auto b = static_cast<std::uint16_t>(sign << 15 | e << 7 | fb);
          demo_randoms rnd = demo_random_bits(99, (e << 14) | (fa << 7) | fb);
          // emu::sum uses one random value for all additions of a sum: make both steps equal.
          for (auto& per_tail : rnd[1]) per_tail[1] = per_tail[0];
          const demo_pair_result got = demo_pair(a, b, rnd);
          for (int t = 0; t < 3; ++t) {
            const std::uint64_t xs[3] = {a, b, demo_tail_bits(a, demo_tails[t])};
            const std::size_t n = t == 0 ? 2 : 3;
            const rational exact = value_of(formats::bf16, xs[0]) + value_of(formats::bf16, xs[1]) +
                                   (n == 3 ? value_of(formats::bf16, xs[2]) : rational(0));
            for (int m = 0; m < 3; ++m) {
              emu::sum_config f32cfg;  // bf16 in, f32 accumulation (rne), bf16 out
              f32cfg.output_rounding = rounding{demo_modes[m], rnd[0][t][0]};
              const emu::sum_result want32 = emu::sum(f32cfg, xs, n, emu::no_steps{});
              emu::sum_config bf16cfg;
              bf16cfg.accum = formats::bf16;
              bf16cfg.accum_rounding = rounding{demo_modes[m], rnd[1][t][0]};
              const emu::sum_result want16 = emu::sum(bf16cfg, xs, n, emu::no_steps{});
              ASSERT_EQ(got.bits[0][t][m], want32.bits) << a << " " << b << " t" << t << " m" << m;
              ASSERT_EQ(got.bits[1][t][m], want16.bits) << a << " " << b << " t" << t << " m" << m;
              // f32 accumulation is exact here, so the output rounding's error is the total error.
              ASSERT_EQ(got.error_ulps[0][t][m], want32.output.error_ulps());
              if (fb % 16 == 0) {  // exact rationals for a sample (they are slow)
                for (int ac = 0; ac < 2; ++ac) {
                  const rational err = value_of(formats::bf16, got.bits[ac][t][m]) - exact;
                  const round_result grid = round_pack(formats::bf16, from_rational(exact).window, rne_t{});
                  ASSERT_EQ(rational(got.error_ulps[ac][t][m]), err / pow2(grid.lsb_exp));
                }
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2u * binade_count * 128 * 128 * 9);
}

TEST(TieDemo, SweepCountsAndTheMechanism) {
  const demo_table t = run_tie_demo(1);
  // Independent counts: 2 signs x (exp_hi - exp_lo + 1) binades x 128^2 pairs, half with odd sums.
  const std::uint64_t binades = 2u * (demo_exp_hi - demo_exp_lo + 1);
  EXPECT_EQ(t.pairs, binades * 128 * 128);
  EXPECT_EQ(t.ties, binades * 128 * 64);
  for (const demo_cell& c : t.cells) {
    EXPECT_EQ(c.pairs, t.pairs);
    EXPECT_EQ(c.ties, t.ties);
    EXPECT_EQ(c.ties_away + c.ties_toward, c.ties);  // a tie is never exact after rounding
    if (c.mode == round_mode::rz) {
      EXPECT_EQ(c.ties_toward, c.ties);
    }
    if (c.mode == round_mode::rne && c.tail == demo_tail::none) {
      EXPECT_EQ(2 * c.ties_away, c.ties);
    }
    if (c.mode == round_mode::rne && c.accum == demo_accum::f32 && c.tail == demo_tail::same_sign) {
      EXPECT_EQ(c.ties_away, c.ties);
    }
    if (c.mode == round_mode::rne && c.accum == demo_accum::f32 && c.tail == demo_tail::opposite_sign) {
      EXPECT_EQ(c.ties_toward, c.ties);
    }
    if (c.mode == round_mode::rne && c.accum == demo_accum::bf16) {
      EXPECT_EQ(2 * c.ties_away, c.ties);
    }
    // sr is unbiased in expectation; |error| < 1.5 ulp, n = 3932160: sigma of the mean < 0.0008,
    // bound 0.006 is > 7 sigma (false-failure rate < 1e-12), and the seed is fixed.
    if (c.mode == round_mode::sr) {
      EXPECT_LT(std::abs(c.mean_error_ties()), 0.006);
    }
  }
}

}  // namespace
