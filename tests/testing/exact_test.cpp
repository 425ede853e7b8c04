// SPDX-License-Identifier: Apache-2.0
/// @file Tests of tiebreak/testing/exact.hpp: exact reference values from doubles, integers, Boost.
#include "tiebreak/testing/exact.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "tiebreak/fp/round.hpp"

#if TIEBREAK_TESTING_HAVE_BOOST
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/cpp_dec_float.hpp>
#endif

namespace tt = tiebreak::testing;
using namespace tiebreak;

namespace {
std::uint64_t bf16_rne(const exact_value& x) { return round_pack(formats::bf16, x, rne_t{}).bits; }
}  // namespace

TEST(ToExact, DoublesFloatsAndIntegersAreExact) {
  const exact_value d = tt::to_exact(1.00390625);  // 1 + 2^-8
  EXPECT_EQ(d.cls, value_class::finite);
  EXPECT_EQ(d.sig, (u128{1} << 52) + (u128{1} << 44));
  EXPECT_EQ(d.exp, -52);
  const exact_value f = tt::to_exact(-0.1f);  // 0xbdcccccd
  EXPECT_TRUE(f.sign);
  EXPECT_EQ(f.sig, u128{0xcccccd});
  EXPECT_EQ(f.exp, -27);
  EXPECT_TRUE(tt::to_exact(-0.0).sign);
  EXPECT_EQ(tt::to_exact(std::numeric_limits<double>::infinity()).cls, value_class::inf);
  EXPECT_EQ(tt::to_exact(std::nan("")).cls, value_class::nan);
  const exact_value i = tt::to_exact(std::int64_t{-257});
  EXPECT_TRUE(i.sign);
  EXPECT_EQ(i.sig, u128{257});
  EXPECT_EQ(i.exp, 0);
  const exact_value m = tt::to_exact(std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(m.sig, u128{1} << 63);
  EXPECT_EQ(tt::to_exact(0).cls, value_class::zero);
  // 257 = 1.00000001b * 2^8: a bf16 tie, rne keeps 256 (0x4380); 259 is above the next tie point.
  EXPECT_EQ(bf16_rne(tt::to_exact(257)), 0x4380u);
  EXPECT_EQ(bf16_rne(tt::to_exact(259u)), 0x4382u);
}

#if TIEBREAK_TESTING_HAVE_BOOST
TEST(ToExact, BoostBinaryFloatKeepsStickyBitsBeyondTheWindow) {
  using boost::multiprecision::cpp_bin_float_50;
  using mp = boost::multiprecision::number<boost::multiprecision::cpp_bin_float<400, boost::multiprecision::digit_base_2>>;
  // 1 + 2^-8 is a tie: rne keeps 1.0 (0x3f80). 2^-300 more is far below the 125-bit window but must
  // still break the tie upward (0x3f81).
  const mp tie = mp(1) + ldexp(mp(1), -8);
  EXPECT_EQ(bf16_rne(tt::to_exact(tie)), 0x3f80u);
  const exact_value above = tt::to_exact(mp(tie + ldexp(mp(1), -300)));
  EXPECT_TRUE(above.sticky);
  EXPECT_EQ(bf16_rne(above), 0x3f81u);
  const exact_value below = tt::to_exact(mp(tie - ldexp(mp(1), -300)));
  EXPECT_EQ(bf16_rne(below), 0x3f80u);
  EXPECT_EQ(round_pack(formats::bf16, below, rz_t{}).bits, 0x3f80u);
  EXPECT_EQ(round_pack(formats::bf16, below, ru_t{}).bits, 0x3f81u);
  // 1/3 = 1.0101010|1 0101...b * 2^-2: guard 1 and sticky, rne rounds up to 0x3eab.
  EXPECT_EQ(bf16_rne(tt::to_exact(cpp_bin_float_50(1) / 3)), 0x3eabu);
  EXPECT_EQ(bf16_rne(tt::to_exact(cpp_bin_float_50(-1) / 3)), 0xbeabu);
  EXPECT_EQ(tt::to_exact(cpp_bin_float_50(0)).cls, value_class::zero);
}

TEST(ToExact, BoostDecimalFloat) {
  using boost::multiprecision::cpp_dec_float_50;
  EXPECT_EQ(bf16_rne(tt::to_exact(cpp_dec_float_50("1.00390625"))), 0x3f80u);
  // 0.1 in decimal: f32 rne of 0.1 is 0x3dcccccd, rz 0x3dcccccc.
  const exact_value tenth = tt::to_exact(cpp_dec_float_50("0.1"));
  EXPECT_EQ(round_pack(formats::f32, tenth, rne_t{}).bits, 0x3dcccccdu);
  EXPECT_EQ(round_pack(formats::f32, tenth, rz_t{}).bits, 0x3dccccccu);
}
#endif
