// SPDX-License-Identifier: Apache-2.0
/// @file Tests of tiebreak/testing/matchers.hpp: the matchers pass, fail, and explain failures.
#include "tiebreak/testing/matchers.hpp"

#include <gtest/gtest-spi.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tiebreak/fp/fast.hpp"
#include "tiebreak/testing/adversarial.hpp"

#if TIEBREAK_TESTING_HAVE_BOOST
#include <boost/multiprecision/cpp_bin_float.hpp>
#endif

using namespace tiebreak;
using tiebreak::testing::HasUnbiasedError;
using tiebreak::testing::IsBitExact;
using tiebreak::testing::IsRoundedFrom;
using tiebreak::testing::IsRoundingOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

/// Explanation of a (mis)match, as a failing EXPECT_THAT prints it after "Actual: ...".
template <class M, class T>
std::string explain(const M& m, const T& value, bool& matched) {
  ::testing::StringMatchResultListener l;
  matched = ::testing::ExplainMatchResult(m, value, &l);
  return l.str();
}

constexpr double tie_1p8 = 1.00390625;  // 1 + 2^-8: halfway between bf16 0x3f80 and 0x3f81

}  // namespace

// Bit table (bf16, from exact doubles):  value                  M R S   rne    rna    rz     ru
//   1 + 2^-8               (tie, even lsb)   0 1 0   3f80   3f81   3f80   3f81
//   1 + 2^-7 + 2^-8        (tie, odd lsb)    1 1 0   3f82   3f82   3f81   3f82
//   1 + 2^-8 + 2^-30       (above the tie)   0 1 1   3f81   3f81   3f80   3f81
//   -(1 + 2^-8 - 2^-30)    (below the tie)   0 0 1   bf80   bf80   bf80   bf80 (ru: toward +inf)
TEST(IsRoundedFrom, MatchesTheBitTable) {
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(tie_1p8, "bf16", "rne"));
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(tie_1p8, "bf16", "rna"));
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(tie_1p8, "bf16", "rz"));
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(tie_1p8, "bf16", "ru"));
  EXPECT_THAT(std::uint16_t{0x3f82}, IsRoundedFrom(1.01171875, "bf16", "rne"));
  EXPECT_THAT(std::uint16_t{0x3f82}, IsRoundedFrom(1.01171875, "bf16", "rna"));
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(1.01171875, "bf16", "rz"));
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(tie_1p8 + 0x1p-30, "bf16", "rne"));
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(tie_1p8 + 0x1p-30, "bf16", "rz"));
  EXPECT_THAT(std::uint16_t{0xbf80}, IsRoundedFrom(-(tie_1p8 - 0x1p-30), "bf16", "rne"));
  EXPECT_THAT(std::uint16_t{0xbf80}, IsRoundedFrom(-(tie_1p8 - 0x1p-30), "bf16", "ru"));
  EXPECT_THAT(std::uint16_t{0xbf81}, IsRoundedFrom(-(tie_1p8 - 0x1p-30), "bf16", "rd"));
  EXPECT_THAT(std::uint16_t{0x3f80}, Not(IsRoundedFrom(tie_1p8, "bf16", "rna")));
}

TEST(IsRoundedFrom, AcceptsEnumsPoliciesDescriptorsAndExactValues) {
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(tie_1p8, format_id::bf16, round_mode::rne));
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(tie_1p8, formats::bf16, rna_t{}));
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(make_exact(false, 0x101, -8), "bf16", "rne"));
  // f16: 1 + 2^-11 is a tie (10 fraction bits); rne 0x3c00, rna 0x3c01.
  EXPECT_THAT(std::uint16_t{0x3c00}, IsRoundedFrom(1 + 0x1p-11, "f16", "rne"));
  EXPECT_THAT(std::uint16_t{0x3c01}, IsRoundedFrom(1 + 0x1p-11, "f16", "rna"));
  // e4m3: 17 = 1.0001b * 2^4 is a tie between 16 (0x58) and 18 (0x59); 480 overflows to NaN 0x7f.
  EXPECT_THAT(std::uint8_t{0x58}, IsRoundedFrom(17, "e4m3", "rne"));
  EXPECT_THAT(std::uint8_t{0x59}, IsRoundedFrom(17, "e4m3", "rna"));
  EXPECT_THAT(std::uint8_t{0x7f}, IsRoundedFrom(480, "e4m3", "rne"));
  EXPECT_THAT(std::uint8_t{0x7e}, IsRoundedFrom(480, "e4m3", "rz"));
}

TEST(IsRoundedFrom, FloatsAndWideContainers) {
  // 0.1 -> f32: rne 0x3dcccccd (which is 0.1f), rz 0x3dcccccc.
  EXPECT_THAT(0.1f, IsRoundedFrom(0.1, "f32", "rne"));
  EXPECT_THAT(0.1f, Not(IsRoundedFrom(0.1, "f32", "rz")));
  EXPECT_THAT(std::uint32_t{0x3dcccccc}, IsRoundedFrom(0.1, "f32", "rz"));
  // A bf16 result in a 32-bit container is fine as long as the upper bits are zero.
  EXPECT_THAT(std::uint32_t{0x3f80}, IsRoundedFrom(tie_1p8, "bf16", "rne"));
  bool matched = true;
  EXPECT_THAT(explain(IsRoundedFrom(tie_1p8, "bf16", "rne"), std::uint32_t{0x3f800000}, matched),
              HasSubstr("bits set above the 16-bit bf16 encoding"));
  EXPECT_FALSE(matched);
  EXPECT_THAT(explain(IsRoundedFrom(tie_1p8, "bf16", "rne"), std::uint8_t{0x80}, matched),
              HasSubstr("cannot hold a 16-bit bf16 encoding"));
  EXPECT_FALSE(matched);
}

TEST(IsRoundedFrom, NaNIsComparedBitExactlyUnderTheNanPolicy) {
  EXPECT_THAT(std::uint16_t{0x7fff}, IsRoundedFrom(std::nan(""), "bf16", "rne"));
  EXPECT_THAT(std::uint16_t{0x7fc0}, Not(IsRoundedFrom(std::nan(""), "bf16", "rne")));
  convert_options torch;
  torch.nan = nan_policy::quiet;
  EXPECT_THAT(std::uint16_t{0x7fc0}, IsRoundedFrom(std::nan(""), "bf16", "rne", torch));
  convert_options sat;
  sat.saturate = true;
  EXPECT_THAT(std::uint16_t{0x7f7f}, IsRoundedFrom(1e39, "bf16", "rne", sat));
  EXPECT_THAT(std::uint16_t{0x7f80}, IsRoundedFrom(1e39, "bf16", "rne"));
}

TEST(IsRoundedFrom, StochasticRoundingAcceptsExactlyTheReachableNeighbours) {
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(tie_1p8, "bf16", "sr"));
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(tie_1p8, "bf16", "sr"));
  EXPECT_THAT(std::uint16_t{0x3f82}, Not(IsRoundedFrom(tie_1p8, "bf16", "sr")));
  // Exact results have one outcome.
  EXPECT_THAT(std::uint16_t{0x3f81}, Not(IsRoundedFrom(1.0, "bf16", "sr")));
  // Discarded bits only beyond the first 32 (2^-45 below bf16's lsb 2^-7): hardware-style SR never
  // rounds up, so 0x3f81 is not reachable.
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(1 + 0x1p-45, "bf16", "sr"));
  EXPECT_THAT(std::uint16_t{0x3f81}, Not(IsRoundedFrom(1 + 0x1p-45, "bf16", "sr")));
  // A pinned random word pins the outcome: top32 = 0x80000000, + 0x80000000 carries.
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(tie_1p8, "bf16", rounding{round_mode::sr, 0x80000000u}));
  EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(tie_1p8, "bf16", rounding{round_mode::sr, 0x7fffffffu}));
}

TEST(IsRoundedFrom, FailureMessageShowsBitsFieldsMrsAndDistance) {
  bool matched = true;
  const std::string why = explain(IsRoundedFrom(tie_1p8, "bf16", "rne"), std::uint16_t{0x3f81}, matched);
  EXPECT_FALSE(matched);
  EXPECT_THAT(why, HasSubstr("got      0x3f81 = 0|01111111|0000001 = 1.0078125 (0x1.02p+0)"));
  EXPECT_THAT(why, HasSubstr("expected 0x3f80 = 0|01111111|0000000 = 1 (0x1p+0)"));
  EXPECT_THAT(why, HasSubstr("exact    1.00390625 (0x1.01p+0)"));
  EXPECT_THAT(why, HasSubstr("M/R/S: lsb(M)=0 guard(R)=1 round=0 sticky=0 (S=0), exact tie, rne step 0 ulp"));
  EXPECT_THAT(why, HasSubstr("distance: got - expected = 1 ulp"));

  const std::string desc = ::testing::DescribeMatcher<std::uint16_t>(IsRoundedFrom(tie_1p8, "bf16", "rne"));
  EXPECT_EQ(desc, "is the bf16 encoding 0x3f80 = 0|01111111|0000000 = 1 (0x1p+0), rne-rounded from 1.00390625 (0x1.01p+0)");
  const std::string neg = ::testing::DescribeMatcher<std::uint16_t>(IsRoundedFrom(tie_1p8, "bf16", "rne"), true);
  EXPECT_THAT(neg, HasSubstr("is not the bf16 encoding 0x3f80"));
}

TEST(IsRoundedFrom, FailsInsideGoogleTest) {
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(1.00390625, "bf16", "rne")),
                          "M/R/S: lsb(M)=0 guard(R)=1");
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(std::uint16_t{0x3f80}, IsRoundedFrom(1.00390625, "bf16", "rna")),
                          "distance: got - expected = -1 ulp");
  // An unknown name is an error, not a silent default.
  EXPECT_THROW((void)IsRoundedFrom(1.0, "bfloat16", "rne"), std::invalid_argument);
  EXPECT_THROW((void)IsRoundedFrom(1.0, "bf16", "nearest"), std::invalid_argument);
}

#if TIEBREAK_TESTING_HAVE_BOOST
TEST(IsRoundedFrom, BoostMultiprecisionReference) {
  using boost::multiprecision::cpp_bin_float_50;
  EXPECT_THAT(std::uint16_t{0x3eab}, IsRoundedFrom(cpp_bin_float_50(1) / 3, "bf16", "rne"));
  EXPECT_THAT(std::uint16_t{0x3eaa}, IsRoundedFrom(cpp_bin_float_50(1) / 3, "bf16", "rz"));
  // 1 + 2^-8 + 2^-150: the tie broken by a bit no double holds.
  const cpp_bin_float_50 x = cpp_bin_float_50(1) + ldexp(cpp_bin_float_50(1), -8) + ldexp(cpp_bin_float_50(1), -150);
  EXPECT_THAT(std::uint16_t{0x3f81}, IsRoundedFrom(x, "bf16", "rne"));
  bool matched = true;
  const std::string why = explain(IsRoundedFrom(x, "bf16", "rne"), std::uint16_t{0x3f80}, matched);
  EXPECT_FALSE(matched);
  EXPECT_THAT(why, HasSubstr("exact    ~1.00390625"));  // not a double: shown approximately
  EXPECT_THAT(why, HasSubstr("guard(R)=1 round=0 sticky=1"));
}
#endif

TEST(IsRoundingOf, PointwiseOverAKernelsOutputs) {
  // The "kernel": fast.hpp's branch-free rne, checked against round_pack on adversarial inputs.
  std::vector<float> in;
  for (std::uint64_t b : tiebreak::testing::adversarial::near_ties("bf16")) in.push_back(bits_to_f32(static_cast<std::uint32_t>(b)));
  for (std::uint64_t b : tiebreak::testing::adversarial::ties("bf16")) in.push_back(bits_to_f32(static_cast<std::uint32_t>(b)));
  std::vector<std::uint16_t> out;
  for (float x : in) out.push_back(f32_bits_to_bf16_rne(f32_to_bits(x)));
  EXPECT_THAT(out, ::testing::Pointwise(IsRoundingOf("bf16", "rne"), in));
  // Truncation is not rne: Pointwise must fail on these inputs, naming the element.
  std::vector<std::uint16_t> truncated;
  for (float x : in) truncated.push_back(f32_bits_to_bf16_rz(f32_to_bits(x)));
  bool matched = true;
  const std::string why = explain(::testing::Pointwise(IsRoundingOf("bf16", "rne"), in), truncated, matched);
  EXPECT_FALSE(matched);
  EXPECT_THAT(why, HasSubstr("at index #"));
  EXPECT_THAT(why, HasSubstr("M/R/S"));
}

TEST(IsBitExact, ComparesBitPatterns) {
  EXPECT_THAT(std::uint16_t{0x3f80}, IsBitExact(0x3f80));
  EXPECT_THAT(std::uint16_t{0x3f80}, IsBitExact(std::uint16_t{0x3f80}, "bf16"));
  EXPECT_THAT(0.0f, Not(IsBitExact(-0.0f)));
  EXPECT_THAT(std::nanf(""), IsBitExact(std::nanf("")));  // NaN == NaN by bits
  EXPECT_THAT(-std::nanf(""), Not(IsBitExact(std::nanf(""))));
  EXPECT_THAT(1.0, IsBitExact(0x3ff0000000000000ull));
}

TEST(IsBitExact, FailureMessageShowsFieldsAndDifferingBits) {
  bool matched = true;
  const std::string why = explain(IsBitExact(std::uint16_t{0x3c00}, "f16"), std::uint16_t{0x3c01}, matched);
  EXPECT_FALSE(matched);
  EXPECT_THAT(why, HasSubstr("got      0x3c01 = 0|01111|0000000001 = 1.0009765625"));
  EXPECT_THAT(why, HasSubstr("expected 0x3c00 = 0|01111|0000000000 = 1 (0x1p+0)"));
  EXPECT_THAT(why, HasSubstr("differing bits 0|00000|0000000001"));
  EXPECT_THAT(why, HasSubstr("distance: got - expected = 1 ulp"));
  // Without a format a 2-byte value is read as bf16.
  const std::string why2 = explain(IsBitExact(0x3f80), std::uint16_t{0xbf80}, matched);
  EXPECT_THAT(why2, HasSubstr("0xbf80 = 1|01111111|0000000"));
  EXPECT_THAT(why2, HasSubstr("distance: got - expected = -32512 ulps"));
  EXPECT_EQ(::testing::DescribeMatcher<std::uint16_t>(IsBitExact(0x3f80)), "has the bits 0x3f80");
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(std::uint16_t{0x3c01}, IsBitExact(std::uint16_t{0x3c00}, "f16")),
                          "differing bits 0|00000|0000000001");
}

namespace {
/// Errors in ulps of rounding `n` seeded values in [1, 2) from f32 to bf16 under `mode`.
std::vector<double> rounding_errors_ulps(round_mode mode, std::size_t n, std::uint64_t seed) {
  tiebreak::testing::adversarial::splitmix64 rng(seed);
  std::vector<double> e;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t x = 0x3f800000u | static_cast<std::uint32_t>(rng.next() & 0x7fffffu);
    e.push_back(f32_bits_to(formats::bf16, x, rounding{mode, 0}).error_ulps());
  }
  return e;
}
}  // namespace

TEST(HasUnbiasedError, PassesForRneAndFailsForTruncation) {
  // Fixed seeds: each assertion is deterministic. Under the null the matcher would fail with
  // probability <= alpha = 1e-3.
  EXPECT_THAT(rounding_errors_ulps(round_mode::rne, 20000, 1), HasUnbiasedError(1e-3, 0.01));
  const auto rz = rounding_errors_ulps(round_mode::rz, 20000, 2);  // mean -0.5 ulp, sd ~0.29
  EXPECT_THAT(rz, Not(HasUnbiasedError(1e-3, 0.01)));
  bool matched = true;
  const std::string why = explain(HasUnbiasedError(1e-3, 0.01), rz, matched);
  EXPECT_FALSE(matched);
  for (const char* field : {"n=20000", "mean=-0.49", "sd=0.2", "t=-", "p=0", "effect(|mean|/sd)=1.7", "biased"}) {
    EXPECT_THAT(why, HasSubstr(field));
  }
  EXPECT_THAT(::testing::DescribeMatcher<std::vector<double>>(HasUnbiasedError(1e-3, 0.01)),
              HasSubstr("alpha=0.001"));
}

TEST(HasUnbiasedError, StickyBrokenTiesAreBiasedTheWayTheMechanismSays) {
  // Ties whose sticky bit comes from a same-sign tail always round away from zero under rne.
  std::vector<double> e;
  for (std::uint64_t t : tiebreak::testing::adversarial::ties("bf16", "f32", 3, 4)) {
    const std::uint32_t x = static_cast<std::uint32_t>(t);
    if ((x & 0x7f800000u) == 0 || (x & 0x7f800000u) == 0x7f800000u) continue;
    const round_result r = f32_bits_to(formats::bf16, x + 1, rne_t{});  // tie + 1 f32 ulp in magnitude
    if (r.overflow()) continue;
    e.push_back(x >> 31 ? -r.error_ulps() : r.error_ulps());  // magnitude error
  }
  ASSERT_GT(e.size(), 1000u);
  EXPECT_THAT(e, Not(HasUnbiasedError(1e-3, 0.1)));
}

TEST(HasUnbiasedError, EffectFloorAndPredicateForm) {
  // 10^6 errors alternating +-1 around a 0.01 offset: t = 10 (p ~ 1e-23) but |mean|/sd = 0.01.
  std::vector<double> e(1000000);
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = (i % 2 ? 1.0 : -1.0) + 0.01;
  EXPECT_THAT(e, HasUnbiasedError(1e-3, 0.05));                    // significant, below the floor
  EXPECT_THAT(e, Not(HasUnbiasedError(1e-3, 0.005)));              // above a lower floor
  EXPECT_THAT(e, HasUnbiasedError(1e-3, 0.02, tiebreak::testing::effect_measure::absolute));
  EXPECT_TRUE(HasUnbiasedError(e, 1e-3, 0.05));
  const ::testing::AssertionResult r = HasUnbiasedError(e, 1e-3, 0.005);
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("biased error: n=1000000 mean=0.01"));
  // Too few samples cannot show absence of bias.
  EXPECT_THAT(std::vector<double>{0.5}, Not(HasUnbiasedError(1e-3, 0.05)));
}
