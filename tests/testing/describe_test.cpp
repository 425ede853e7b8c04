// SPDX-License-Identifier: Apache-2.0
/// @file Tests of tiebreak/testing/describe.hpp: name parsing, bit dumps, ulp distances, M/R/S text.
#include "tiebreak/testing/describe.hpp"

#include <stdexcept>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tt = tiebreak::testing;
using ::testing::HasSubstr;

TEST(FormatSpec, NamesEnumsAndDescriptorsAgree) {
  EXPECT_EQ(tt::format_spec("bf16").desc.name, "bf16");
  EXPECT_EQ(tt::format_spec(tiebreak::format_id::e4m3).desc.name, "e4m3");
  EXPECT_EQ(tt::format_spec(tiebreak::formats::tf32).desc.pad, 13);
  EXPECT_EQ(tt::format_spec(std::string("f16")).desc.man_bits, 10);
  EXPECT_THROW(tt::format_spec("bfloat16"), std::invalid_argument);
}

TEST(ModeSpec, NamesEnumsPoliciesAndSr) {
  EXPECT_EQ(tt::mode_spec("rna").r.mode, tiebreak::round_mode::rna);
  EXPECT_EQ(tt::mode_spec(tiebreak::round_mode::rz).r.mode, tiebreak::round_mode::rz);
  EXPECT_EQ(tt::mode_spec(tiebreak::rd_t{}).r.mode, tiebreak::round_mode::rd);
  EXPECT_TRUE(tt::mode_spec("sr").sr_any);
  const tt::mode_spec pinned(tiebreak::rounding{tiebreak::round_mode::sr, 123});
  EXPECT_FALSE(pinned.sr_any);
  EXPECT_EQ(pinned.r.random, 123u);
  EXPECT_THROW(tt::mode_spec("nearest"), std::invalid_argument);
}

TEST(Describe, HexAndFields) {
  using namespace tiebreak::formats;
  EXPECT_EQ(tt::hex_bits(bf16, 0x3f81), "0x3f81");
  EXPECT_EQ(tt::hex_bits(e4m3, 0x7e), "0x7e");
  EXPECT_EQ(tt::field_bits(bf16, 0x3f81), "0|01111111|0000001");
  EXPECT_EQ(tt::field_bits(f16, 0xfc00), "1|11111|0000000000");
  EXPECT_EQ(tt::field_bits(e4m3, 0x7e), "0|1111|110");
  // tf32: 10 fraction bits, then the 13 zero pad bits after a second bar.
  EXPECT_EQ(tt::field_bits(tf32, 0x3f802000), "0|01111111|0000000001|0000000000000");
  EXPECT_EQ(tt::describe_bits(bf16, 0x3f81), "0x3f81 = 0|01111111|0000001 = 1.0078125 (0x1.02p+0)");
}

TEST(Describe, OrdinalAndUlpDistance) {
  using tiebreak::formats::bf16;
  EXPECT_EQ(tt::ordinal(bf16, 0x0000), 0);
  EXPECT_EQ(tt::ordinal(bf16, 0x8000), 0);
  EXPECT_EQ(tt::ordinal(bf16, 0x8001), -1);
  EXPECT_EQ(tt::ordinal(bf16, 0x3f80), 0x3f80);
  EXPECT_EQ(tt::ulp_distance_text(bf16, 0x3f81, 0x3f80), "distance: got - expected = 1 ulp");
  EXPECT_EQ(tt::ulp_distance_text(bf16, 0x0001, 0x8001), "distance: got - expected = 2 ulps");
  EXPECT_THAT(tt::ulp_distance_text(bf16, 0x8000, 0x0000), HasSubstr("zeros of opposite sign"));
  EXPECT_THAT(tt::ulp_distance_text(bf16, 0x7fff, 0x7f80), HasSubstr("n/a"));
  // Inf is one step past the largest finite value.
  EXPECT_EQ(tt::ulp_distance_text(bf16, 0x7f80, 0x7f7f), "distance: got - expected = 1 ulp");
}

TEST(Describe, RoundingBitsOfATieAndOfAStickyCase) {
  using namespace tiebreak;
  // 1 + 2^-8 -> bf16: kept 1.0000000 (M=0), discarded 1|000... : G=1, R=0, S=0, an exact tie.
  const exact_value tie = unpack(formats::f64, f64_to_bits(1.00390625));
  const round_result r = round_pack(formats::bf16, tie, rne_t{});
  EXPECT_EQ(tt::describe_rounding(formats::bf16, tie, r, rne_t{}),
            "M/R/S: lsb(M)=0 guard(R)=1 round=0 sticky=0 (S=0), exact tie, rne step 0 ulp");
  // 1 + 2^-7 + 2^-8 + 2^-30: M=1, G=1, sticky only from the far bit.
  const exact_value st = unpack(formats::f64, f64_to_bits(1.01171875 + 0x1p-30));
  const round_result rs = round_pack(formats::bf16, st, rna_t{});
  EXPECT_EQ(tt::describe_rounding(formats::bf16, st, rs, rna_t{}),
            "M/R/S: lsb(M)=1 guard(R)=1 round=0 sticky=1 (S=1), rna step 1 ulp");
  const exact_value one = unpack(formats::f64, f64_to_bits(1.0));
  EXPECT_THAT(tt::describe_rounding(formats::bf16, one, round_pack(formats::bf16, one, rne_t{}), rne_t{}),
              HasSubstr(", exact"));
  EXPECT_THAT(tt::describe_rounding(formats::bf16, make_nan(), round_result{}, rne_t{}), HasSubstr("no rounding step"));
}

TEST(Describe, ExactValues) {
  using namespace tiebreak;
  EXPECT_EQ(tt::describe_exact(unpack(formats::f64, f64_to_bits(0.5))), "0.5 (0x1p-1)");
  // 1 + 2^-60 is not a double: shown as "~" and the nearest double.
  EXPECT_EQ(tt::describe_exact(make_exact(false, (u128{1} << 60) + 1, -60)), "~1 (0x1p+0)");
  EXPECT_EQ(tt::describe_exact(make_inf(true)), "-Inf");
  EXPECT_EQ(tt::describe_exact(make_zero(true)), "-0");
}
