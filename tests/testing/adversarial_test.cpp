// SPDX-License-Identifier: Apache-2.0
/// @file Tests of tiebreak/testing/adversarial.hpp: every generator produces what it claims, checked
/// through round_pack's guard/round/sticky trace.
#include "tiebreak/testing/adversarial.hpp"

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/emu/ops.hpp"
#include "tiebreak/fp/round.hpp"

using namespace tiebreak;
namespace adv = tiebreak::testing::adversarial;
namespace tt = tiebreak::testing;

namespace {

const char* const narrow_formats[] = {"bf16", "f16", "e4m3", "e5m2", "tf32", "f32"};

/// Magnitude difference of two encodings of one sign, in ulps of `f`.
std::int64_t mag_steps(const format_desc& f, std::uint64_t a, std::uint64_t b) {
  return tt::ordinal(f, a & ~f.sign_mask()) - tt::ordinal(f, b & ~f.sign_mask());
}

round_result narrow(const format_desc& to, const format_desc& from, std::uint64_t x, rounding r) {
  return round_pack(to, unpack(from, x), r);
}

}  // namespace

TEST(Adversarial, SourceFormats) {
  EXPECT_EQ(adv::source_format("bf16").name, "f32");
  EXPECT_EQ(adv::source_format("e4m3").name, "f32");
  EXPECT_EQ(adv::source_format("tf32").name, "f32");
  EXPECT_EQ(adv::source_format("f32").name, "f64");
  EXPECT_THROW((void)adv::source_format("f64"), std::invalid_argument);
}

TEST(Adversarial, TiesAreExactTiesInEveryBinadeSignAndParity) {
  for (const char* name : narrow_formats) {
    SCOPED_TRACE(name);
    const format_desc to = tt::format_spec(name).desc, from = adv::source_format(name);
    const auto cases = adv::ties(name);
    std::set<std::uint64_t> binades;
    int parity[2][2] = {{0, 0}, {0, 0}};  // [sign][lsb of the truncated result]
    for (std::uint64_t x : cases) {
      const round_result r = narrow(to, from, x, rne_t{});
      ASSERT_TRUE(r.guard && !r.round_bit && !r.sticky) << std::hex << "0x" << x << " is not an exact tie";
      const round_result t = narrow(to, from, x, rz_t{});
      binades.insert(to.exp_field_of(t.bits));
      ++parity[r.sign][to.frac_of(t.bits) & 1];
      if (r.overflow()) continue;
      // rne: ties go to the even neighbour; rna: away from zero (one ulp above the truncation).
      EXPECT_EQ(to.frac_of(r.bits) & 1, 0u) << std::hex << x;
      EXPECT_EQ(mag_steps(to, narrow(to, from, x, rna_t{}).bits, t.bits), 1);
    }
    const std::uint64_t finite_fields = to.special == special_style::ieee ? to.exp_field_max() : to.exp_field_max() + 1;
    EXPECT_EQ(binades.size(), finite_fields);  // subnormal binade (field 0) included
    for (int s = 0; s < 2; ++s) {
      EXPECT_GT(parity[s][0], 0);
      EXPECT_GT(parity[s][1], 0);
    }
    // The last two: +-(M + u/2), which rne rounds out of range iff M's lsb is odd.
    const bool odd_max = (to.frac_of(to.max_finite(false)) & 1) != 0;
    for (std::size_t k = cases.size() - 2; k < cases.size(); ++k) {
      const round_result r = narrow(to, from, cases[k], rne_t{});
      EXPECT_EQ(mag_steps(to, narrow(to, from, cases[k], rz_t{}).bits, to.max_finite(false)), 0);
      EXPECT_EQ(r.overflow(), odd_max);
    }
    EXPECT_EQ(cases.size(), 4 * finite_fields + 2);
  }
}

TEST(Adversarial, TiesAreDeterministicInTheSeed) {
  EXPECT_EQ(adv::ties("bf16", 7), adv::ties("bf16", 7));
  EXPECT_NE(adv::ties("bf16", 7), adv::ties("bf16", 8));
  EXPECT_EQ(adv::ties("bf16", "f32", 7, 3).size(), 255u * 4 * 3 + 2);
}

TEST(Adversarial, NearTiesStraddleEachTieByOneSourceUlp) {
  for (const char* name : narrow_formats) {
    SCOPED_TRACE(name);
    const format_desc to = tt::format_spec(name).desc, from = adv::source_format(name);
    const auto ties = adv::ties(name);
    const auto near = adv::near_ties(name);
    ASSERT_EQ(near.size(), 2 * ties.size());
    for (std::size_t i = 0; i < ties.size(); ++i) {
      const std::uint64_t below = near[2 * i], above = near[2 * i + 1];
      EXPECT_EQ(tt::ordinal(from, ties[i]) - tt::ordinal(from, below), from.sign_of(ties[i]) ? -1 : 1);
      EXPECT_EQ(tt::ordinal(from, above) - tt::ordinal(from, ties[i]), from.sign_of(ties[i]) ? -1 : 1);
      const round_result rb = narrow(to, from, below, rne_t{}), ra = narrow(to, from, above, rne_t{});
      // Below the tie: guard 0, everything after it 1. Above: guard 1 and a sticky bit.
      EXPECT_TRUE(!rb.guard && rb.round_bit && rb.sticky) << std::hex << below;
      EXPECT_TRUE(ra.guard && !ra.round_bit && ra.sticky) << std::hex << above;
      EXPECT_EQ(rb.step, 0);  // rne rounds toward zero below the tie ...
      if (!ra.overflow()) {
        EXPECT_EQ(ra.step, 1);  // ... and away above it, whatever the parity
      }
    }
  }
}

TEST(Adversarial, SubnormalBoundaries) {
  for (const char* name : narrow_formats) {
    SCOPED_TRACE(name);
    const format_desc to = tt::format_spec(name).desc, from = adv::source_format(name);
    const auto cases = adv::subnormal_boundaries(name);
    const std::uint64_t min_sub = to.pack(false, 0, 1), max_sub = to.pack(false, 0, to.frac_mask()),
                        min_normal = to.pack(false, 1, 0);
    const double u = to_double(to, min_sub);
    std::set<std::uint64_t> landed;
    int ties = 0, underflows = 0, sign_neg = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (i > 0) {
        EXPECT_NE(cases[i - 1], cases[i]);
        EXPECT_LE(to_double(from, cases[i - 1]), to_double(from, cases[i]));
      }
      const double v = std::fabs(to_double(from, cases[i]));
      EXPECT_LE(v, to_double(to, min_normal) + u);  // all at the bottom of the range
      const round_result r = narrow(to, from, cases[i], rne_t{});
      landed.insert(r.bits & ~to.sign_mask());
      ties += r.guard && !r.round_bit && !r.sticky;
      underflows += r.underflow();
      sign_neg += from.sign_of(cases[i]);
    }
    for (std::uint64_t want : {std::uint64_t{0}, min_sub, max_sub, min_normal}) EXPECT_TRUE(landed.count(want)) << want;
    EXPECT_EQ(ties, 2 * 5);  // u/2, 3u/2, max_sub - u/2, max_sub + u/2 = min_normal - u/2, min_normal + u/2
    EXPECT_GT(underflows, 0);
    EXPECT_EQ(2 * sign_neg, static_cast<int>(cases.size()));
    // The tie u/2 goes to zero under rne (even) and to min_sub under rna.
    std::uint64_t half_u = 0;
    for (std::uint64_t x : cases) if (to_double(from, x) == u / 2) half_u = x;
    ASSERT_NE(half_u, 0u);
    EXPECT_EQ(narrow(to, from, half_u, rne_t{}).bits, 0u);
    EXPECT_EQ(narrow(to, from, half_u, rna_t{}).bits, min_sub);
  }
}

TEST(Adversarial, OverflowBoundaries) {
  for (const char* name : narrow_formats) {
    SCOPED_TRACE(name);
    const format_desc to = tt::format_spec(name).desc, from = adv::source_format(name);
    const auto cases = adv::overflow_boundaries(name);
    const double max = to_double(to, to.max_finite(false));
    const double half_ulp = (to_double(to, to.max_finite(false)) - to_double(to, to.max_finite(false) - (1ull << to.pad))) / 2;
    const bool odd_max = (to.frac_of(to.max_finite(false)) & 1) != 0;
    bool saw_max = false, saw_tie = false;
    for (std::size_t i = 1; i < cases.size(); ++i) EXPECT_LT(tt::ordinal(from, cases[i - 1]), tt::ordinal(from, cases[i]));
    for (std::uint64_t x : cases) {
      const double v = std::fabs(to_double(from, x));
      const round_result rne = narrow(to, from, x, rne_t{}), rz = narrow(to, from, x, rz_t{});
      if (v == max) {
        saw_max = true;
        EXPECT_FALSE(rne.inexact());
      }
      if (v == max + half_ulp) {
        saw_tie = true;
        EXPECT_TRUE(rne.guard && !rne.round_bit && !rne.sticky);
        EXPECT_EQ(rne.overflow(), odd_max);  // to even: up and out of range iff M's lsb is odd
        EXPECT_EQ(rz.bits & ~to.sign_mask(), to.max_finite(false));
      }
      // rne overflows exactly from the tie upward (Inf inputs are not overflows: they stay Inf/NaN).
      if (std::isfinite(v)) {
        EXPECT_EQ(rne.overflow(), odd_max ? v >= max + half_ulp : v > max + half_ulp) << std::hex << x;
      }
      EXPECT_GE(v, max - 2 * half_ulp);
    }
    EXPECT_TRUE(saw_max);
    EXPECT_TRUE(saw_tie);
  }
}

TEST(Adversarial, RepeatedMaxRows) {
  const std::size_t n = 200, d = 64;
  const adv::score_rows rows = adv::repeated_max_rows(n, d, 42);
  ASSERT_EQ(rows.scores.size(), n * d);
  ASSERT_EQ(rows.values.size(), n * d);
  int pos_max = 0, neg_max = 0;
  for (std::size_t r = 0; r < n; ++r) {
    SCOPED_TRACE(r);
    const float* s = &rows.scores[r * d];
    const float* v = &rows.values[r * d];
    float m = s[0];
    for (std::size_t t = 1; t < d; ++t) m = std::max(m, s[t]);
    std::vector<std::size_t> at;
    for (std::size_t t = 0; t < d; ++t) if (s[t] == m) at.push_back(t);
    EXPECT_EQ(at, rows.max_positions[r]);
    EXPECT_EQ(at.size(), rows.max_count[r]);
    EXPECT_GE(at.size(), 2u);
    (m > 0 ? pos_max : neg_max) += 1;
    const bool neg = std::signbit(v[0]);
    for (std::size_t t = 0; t < d; ++t) {
      EXPECT_EQ(std::signbit(v[t]), neg);
      EXPECT_NE(v[t], 0.0f);
      EXPECT_EQ(f32_to_bits(v[t]) & 0xffffu, 0u);  // bf16 values
      EXPECT_EQ(f32_to_bits(s[t]) & 0xffffu, 0u);
    }
    // P-bar = exp(s - m) is exactly 1 at the maxima: the sum of the first two values is a bf16 tie,
    // and adding one of the small same-sign terms in f32 sets the sticky bit that breaks it away from zero.
    const std::uint32_t a = f32_to_bits(v[at[0]]), b = f32_to_bits(v[at[1]]);
    const emu::op_result sum = emu::add(formats::f32, a, b, rne_t{});
    EXPECT_FALSE(sum.round.inexact());  // exact in f32
    const round_result tie = f32_bits_to(formats::bf16, static_cast<std::uint32_t>(sum.bits()), rne_t{});
    EXPECT_TRUE(tie.guard && !tie.round_bit && !tie.sticky);
    std::size_t small = 0;
    while (s[small] == m) ++small;
    const emu::op_result with_tail = emu::add(formats::f32, sum.bits(), f32_to_bits(v[small]), rne_t{});
    const round_result broken = f32_bits_to(formats::bf16, static_cast<std::uint32_t>(with_tail.bits()), rne_t{});
    EXPECT_EQ(broken.step, 1);  // away from zero, every row
  }
  EXPECT_GT(pos_max, 0);
  EXPECT_GT(neg_max, 0);
  EXPECT_EQ(adv::repeated_max_rows(10, 8, 1).values, adv::repeated_max_rows(10, 8, 1).values);
  EXPECT_NE(adv::repeated_max_rows(10, 8, 1).values, adv::repeated_max_rows(10, 8, 2).values);
  EXPECT_THROW((void)adv::repeated_max_rows(1, 1, 0), std::invalid_argument);
}
