// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the exact host helpers (src/host/include/tiebreak/host/exact.hpp).
///
/// Oracles: Boost rationals built by hand, and glibc's correctly rounded strtod/strtof under
/// fesetround for the rounding of parsed decimals (an implementation independent of the core).

#include "tiebreak/host/exact.hpp"

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

using namespace tiebreak;
using namespace tiebreak::host;
namespace mp = boost::multiprecision;

TEST(Exact, ParseDecimalKeepsTheExactValue) {
  EXPECT_EQ(parse_decimal("0.1").value, rational(1, 10));
  EXPECT_EQ(parse_decimal("-12.5e-3").value, rational(-125, 10000));
  EXPECT_EQ(parse_decimal("1E2").value, rational(100));
  EXPECT_EQ(parse_decimal(".5").value, rational(1, 2));
  EXPECT_EQ(parse_decimal("5.").value, rational(5));
  EXPECT_EQ(parse_decimal("000123.4500").value, rational(12345, 100));
  const exact_number z = parse_decimal("-0.000");
  EXPECT_EQ(z.cls, value_class::zero);
  EXPECT_TRUE(z.sign);
  EXPECT_EQ(parse_decimal("NaN").cls, value_class::nan);
  EXPECT_EQ(parse_decimal("-Infinity").cls, value_class::inf);
  EXPECT_TRUE(parse_decimal("-inf").sign);
  for (const char* bad : {"", ".", "e5", "1e", "1.2.3", "0x1", "1f", "+-1", " 1", "in"}) {
    EXPECT_THROW((void)parse_decimal(bad), parse_error) << bad;
  }
  EXPECT_THROW((void)parse_decimal("1e10001"), parse_error);
  EXPECT_NO_THROW((void)parse_decimal("1e10000"));
}

// Limits pinned by tests/fuzz (docs/fuzzing.md): at 10^-100000 and 2^-400000 one `tiebreak round`
// took 37 s and 4 s; 4.9e-3249 (f64 seed mutated by fuzz_number) spent its time stripping factors
// of 5 one division at a time. The edges of the accepted range must parse and print exactly.
TEST(Exact, ExponentAndDigitLimitsFromFuzzing) {
  static_assert(max_decimal_exponent == 10000 && max_binary_exponent == 40000 && max_significant_digits == 10000);
  EXPECT_THROW((void)parse_decimal("1e-10001"), parse_error);
  EXPECT_THROW((void)parse_decimal("1e-100000"), parse_error);
  EXPECT_THROW((void)parse_hex("0x1p-40001"), parse_error);
  EXPECT_THROW((void)parse_hex("0x1p40001"), parse_error);  // leading bit 2^40001
  EXPECT_NO_THROW((void)parse_hex("0x1p40000"));
  EXPECT_THROW((void)parse_hex("0x1p-400000"), parse_error);
  EXPECT_EQ(parse_hex("0x1p-40000").value, pow2(-40000));
  EXPECT_EQ(parse_decimal("1e-10000").value, rational(1, mp::pow(integer(10), 10000)));
  // Significant digits: 10000 accepted, 10001 rejected; leading and trailing zeros are free.
  const std::string d10000(10000, '7');
  EXPECT_NO_THROW((void)parse_decimal(d10000 + "e-10000"));
  EXPECT_THROW((void)parse_decimal(d10000 + "7e-10000"), parse_error);
  EXPECT_EQ(parse_decimal("0." + std::string(9000, '0') + "5" + std::string(9000, '0')).value,
            rational(5, mp::pow(integer(10), 9001)));
  EXPECT_NO_THROW((void)parse_hex("0x." + std::string(10000, 'f')));
  EXPECT_THROW((void)parse_hex("0x." + std::string(10001, 'f')), parse_error);
  // Exact text of the extreme values parses back to the same value.
  for (const char* t : {"4.9e-3249", "1e-10000", "-9.99e9999", "123456789e-9000"}) {
    const exact_number x = parse_decimal(t);
    EXPECT_EQ(parse_decimal(to_decimal_string(x.value)).value, x.value) << t;
  }
  EXPECT_EQ(to_decimal_string(parse_decimal("4.9e-3249").value), "4.9e-3249");
  const rational tiny = pow2(-40000);  // its exact decimal has 27960 digits: more than parse_decimal takes
  EXPECT_EQ(parse_hex(to_hex_string(tiny)).value, tiny);
  EXPECT_EQ(to_decimal_string(tiny).substr(0, 12), "6.3120937524");
  EXPECT_TRUE(has_finite_decimal(rational(3, mp::pow(integer(5), 4097) * 32)));
  EXPECT_FALSE(has_finite_decimal(rational(1, mp::pow(integer(5), 4097) * 3)));
}

TEST(Exact, WindowHasTheLeadingBitsAndAnExactStickyBit) {
  // 0.1 = 0x1.999...p-4: 128 leading bits, sticky (the expansion never ends).
  const exact_number x = parse_decimal("0.1");
  EXPECT_EQ(x.window.cls, value_class::finite);
  EXPECT_TRUE(x.window.sticky);
  EXPECT_EQ(msb128(x.window.sig), 127);
  EXPECT_EQ(x.window.exp + 127, -4);
  // Exactly representable: no sticky, trailing zeros stripped.
  const exact_number y = parse_decimal("1.00390625");
  EXPECT_FALSE(y.window.sticky);
  EXPECT_EQ(y.window.sig, u128{257});
  EXPECT_EQ(y.window.exp, -8);
  EXPECT_EQ(to_rational(y.window), rational(257, 256));
}

TEST(Exact, ParseHexIsExactForAnyNumberOfDigits) {
  EXPECT_EQ(parse_hex("0x1.02p+0").value, rational(129, 128));
  EXPECT_EQ(parse_hex("-0X1P-149").value, -pow2(-149));
  EXPECT_EQ(parse_hex("0x.8").value, rational(1, 2));
  EXPECT_EQ(parse_hex("0x10").value, rational(16));
  // 1 + 2^-120 needs 121 bits: kept exactly.
  const exact_number x = parse_hex("0x1.000000000000000000000000001p+0");
  EXPECT_EQ(x.value, 1 + pow2(-108));
  EXPECT_FALSE(x.window.sticky);
  // 1 + 2^-200: beyond the 128-bit window, the sticky bit is set and the value kept.
  const exact_number y = parse_hex("0x1.00000000000000000000000000000000000000000000000001p+0");
  EXPECT_EQ(y.value, 1 + pow2(-200));
  EXPECT_TRUE(y.window.sticky);
  for (const char* bad : {"0x", "0xg", "0x1p", "0x1.2.3", "1.5", "0x1p+1.5"}) {
    EXPECT_THROW((void)parse_hex(bad), parse_error) << bad;
  }
}

TEST(Exact, ParseBitsChecksTheWidth) {
  EXPECT_EQ(parse_bits(formats::bf16, "0x3f80"), 0x3f80u);
  EXPECT_EQ(parse_bits(formats::bf16, "16256"), 0x3f80u);
  EXPECT_THROW((void)parse_bits(formats::bf16, "0x10000"), parse_error);
  EXPECT_THROW((void)parse_bits(formats::e4m3, "0x100"), parse_error);
  EXPECT_THROW((void)parse_bits(formats::f64, "0x10000000000000000"), parse_error);
  EXPECT_THROW((void)parse_bits(formats::f32, ""), parse_error);
  EXPECT_THROW((void)parse_bits(formats::f32, "0x"), parse_error);
}

TEST(Exact, DecimalTextIsExact) {
  EXPECT_EQ(to_decimal_string(rational(1, 10)), "0.1");
  EXPECT_EQ(to_decimal_string(rational(-257, 256)), "-1.00390625");
  EXPECT_EQ(to_decimal_string(rational(448)), "448");
  EXPECT_EQ(to_decimal_string(rational(0)), "0");
  EXPECT_EQ(to_decimal_string(rational(1, 1000000)), "0.000001");
  EXPECT_EQ(to_decimal_string(rational(1, 10000000)), "1e-7");
  EXPECT_EQ(to_decimal_string(rational(integer(10) * integer("100000000000000000000"))), "1e+21");
  EXPECT_EQ(to_decimal_string(rational(integer("100000000000000000000"))), "100000000000000000000");
  EXPECT_EQ(to_decimal_string(rational(3, 2) * pow2(-20)), "0.000001430511474609375");
  // 2^-1074: 751 significant digits, ends in ...625.
  const std::string tiny = to_decimal_string(pow2(-1074));
  EXPECT_EQ(tiny.rfind("4.9406564584124654417656879286822137236505980", 0), 0u) << tiny;
  EXPECT_EQ(tiny.substr(tiny.size() - 8), "625e-324");
  EXPECT_EQ(tiny.size(), 751u + 1 + 5);  // 751 significant digits, the point, "e-324"
  EXPECT_EQ(parse_decimal(tiny).value, pow2(-1074));
  EXPECT_THROW((void)to_decimal_string(rational(1, 3)), std::domain_error);
  // Round trip through the parser for a spread of dyadic and decimal rationals.
  std::mt19937_64 g(11);
  for (int i = 0; i < 2000; ++i) {
    const rational r = rational(static_cast<std::int64_t>(g())) * pow2(static_cast<int>(g() % 400) - 200) /
                       boost::multiprecision::pow(integer(5), static_cast<unsigned>(g() % 30));
    EXPECT_EQ(parse_decimal(to_decimal_string(r)).value, r);
  }
}

TEST(Exact, HexTextIsExact) {
  EXPECT_EQ(to_hex_string(rational(257, 256)), "0x1.01p+0");
  EXPECT_EQ(to_hex_string(-pow2(-149)), "-0x1p-149");
  EXPECT_EQ(to_hex_string(rational(3)), "0x1.8p+1");
  EXPECT_EQ(to_hex_string(rational(0)), "0x0p+0");
  EXPECT_THROW((void)to_hex_string(rational(1, 10)), std::domain_error);
  std::mt19937_64 g(5);
  for (int i = 0; i < 2000; ++i) {
    const rational r = rational(static_cast<std::int64_t>(g())) * pow2(static_cast<int>(g() % 2000) - 1000);
    EXPECT_EQ(parse_hex(to_hex_string(r)).value, r);
  }
}

TEST(Exact, ValuesAndErrorsOfEncodings) {
  EXPECT_EQ(value_of(formats::bf16, 0x3f81), rational(129, 128));
  EXPECT_EQ(value_of(formats::e4m3, 0x7e), rational(448));
  EXPECT_EQ(value_of(formats::f32, 0x00000001), pow2(-149));
  EXPECT_THROW((void)value_of(formats::bf16, 0x7f80), std::domain_error);
  const exact_number x = parse_decimal("0.1");
  const round_result r = round_pack(formats::bf16, x.window, rne_t{});
  EXPECT_EQ(rounding_error(formats::bf16, r, x.value), rational(205, 2048) - rational(1, 10));  // 0x3dcd
  EXPECT_EQ(rounding_error(formats::bf16, r, x.value) / result_ulp(formats::bf16, r), rational(1, 5));
}

TEST(Exact, ToDoubleRoundsOnceToNearestEven) {
  std::mt19937_64 g(3);
  for (int i = 0; i < 5000; ++i) {
    const std::string s = fmt::format("{}{}.{}e{}", (g() & 1) ? "-" : "", g() % 100000, g(), static_cast<int>(g() % 700) - 350);
    EXPECT_EQ(to_double(parse_decimal(s).value), std::strtod(s.c_str(), nullptr)) << s;
  }
  EXPECT_EQ(to_double(rational(integer(10)) * pow2(1100)), __builtin_huge_val());
}

/// The parsed window rounds correctly in every directed mode: compared with glibc's strtod/strtof,
/// which honour the current rounding mode, over random decimals, halfway cases and near-halfway cases.
TEST(Exact, ParsedWindowRoundsLikeStrtodInEveryMode) {
  const struct { round_mode mode; int fe; } modes[] = {{round_mode::rne, FE_TONEAREST},
                                                       {round_mode::rz, FE_TOWARDZERO},
                                                       {round_mode::ru, FE_UPWARD},
                                                       {round_mode::rd, FE_DOWNWARD}};
  std::mt19937_64 g(17);
  std::vector<std::string> inputs;
  for (int i = 0; i < 3000; ++i) {
    inputs.push_back(fmt::format("{}{}e{}", (g() & 1) ? "-" : "", g() % 100000000000ull, static_cast<int>(g() % 680) - 340));
  }
  // Exact midpoints of neighbouring doubles and floats, and +-10^-60 around them.
  for (int i = 0; i < 1000; ++i) {
    const double d = std::ldexp(static_cast<double>(g() >> 11), static_cast<int>(g() % 200) - 100);
    const rational mid = (value_of(formats::f64, f64_to_bits(d)) + value_of(formats::f64, f64_to_bits(d) + 1)) / 2;
    inputs.push_back(to_decimal_string(mid));
    inputs.push_back(to_decimal_string(mid + rational(1, integer("1" + std::string(60, '0')))));
    inputs.push_back(to_decimal_string(mid - rational(1, integer("1" + std::string(60, '0')))));
    const float f = std::ldexp(static_cast<float>(g() >> 40), static_cast<int>(g() % 200) - 150);  // 24-bit ints, exact
    const rational midf = (value_of(formats::f32, f32_to_bits(f)) + value_of(formats::f32, f32_to_bits(f) + 1)) / 2;
    inputs.push_back(to_decimal_string(midf));
  }
  inputs.push_back(to_decimal_string(pow2(-1075)));  // a tie below the smallest subnormal
  inputs.push_back(to_decimal_string(pow2(-150)));   // the same for f32
  for (const std::string& s : inputs) {
    const exact_number x = parse_decimal(s);
    for (const auto& m : modes) {
      std::fesetround(m.fe);
      const double d = std::strtod(s.c_str(), nullptr);
      const float f = std::strtof(s.c_str(), nullptr);
      std::fesetround(FE_TONEAREST);
      EXPECT_EQ(round_pack(formats::f64, x.window, rounding{m.mode, 0}).bits, f64_to_bits(d)) << s << " " << to_string(m.mode);
      EXPECT_EQ(round_pack(formats::f32, x.window, rounding{m.mode, 0}).bits, f32_to_bits(f)) << s << " " << to_string(m.mode);
    }
  }
}

}  // namespace
