// SPDX-License-Identifier: Apache-2.0
/// @file Tests of `tiebreak round` (src/cli/round_cmd.cpp), run as a subprocess.
///
/// Oracles are independent of the core: for formats of at most 16 bits, every finite encoding is
/// decoded by hand into a rational and the two neighbours of the exact input are found by search;
/// for f32/f64, glibc's correctly rounded strtof/strtod under fesetround.

#include <cfenv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <boost/multiprecision/cpp_int.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "run_cli.hpp"

namespace {

using tiebreak::test::json_lines;
using tiebreak::test::run_cli;
using rational = boost::multiprecision::cpp_rational;
using integer = boost::multiprecision::cpp_int;

/// `tiebreak round --json OPTS VALUES...` in one process: one JSON object per value, in order.
std::vector<nlohmann::json> round_many(const std::vector<std::string>& opts, const std::vector<std::string>& values) {
  std::vector<std::string> args = {"round", "--json"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.insert(args.end(), values.begin(), values.end());
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto js = json_lines(r.out);
  EXPECT_EQ(js.size(), values.size());
  js.resize(values.size());
  return js;
}

nlohmann::json round_one(const std::vector<std::string>& opts, const std::string& value) {
  return round_many(opts, {value})[0];
}

std::string hex_bits(std::uint64_t v, int digits) { return fmt::format("0x{:0{}x}", v, digits); }

TEST(RoundCmd, TieOfBf16RoundsToEvenWithHalfUlpError) {
  const auto j = round_one({"--to", "bf16", "--mode", "rne"}, "1.00390625");
  EXPECT_EQ(j["bits"], "0x3f80");
  EXPECT_EQ(j["value"], 1.0);
  EXPECT_EQ(j["error_ulps"], -0.5);
  EXPECT_EQ(j["error"], "-0.00390625");
  EXPECT_EQ(j["direction"], "toward");
  EXPECT_EQ(j["flags"], nlohmann::json::array({"inexact"}));
  EXPECT_EQ(j["exact"], "1.00390625");
  EXPECT_EQ(j["exact_hex"], "0x1.01p+0");
}

TEST(RoundCmd, RawBitsOfF32) {
  // M = mantissa kept, G = guard, S = sticky.
  EXPECT_EQ(round_one({"--to", "bf16"}, "bits:0x3f808000")["bits"], "0x3f80");  // G=1 S=0 lsb 0: down
  EXPECT_EQ(round_one({"--to", "bf16"}, "bits:0x3f818000")["bits"], "0x3f82");  // G=1 S=0 lsb 1: up
  EXPECT_EQ(round_one({"--to", "bf16"}, "bits:0x3f808001")["bits"], "0x3f81");  // G=1 S=1: up
  EXPECT_EQ(round_one({"--to", "bf16", "--mode", "rz"}, "bits:0xbf80ffff")["bits"], "0xbf80");
  EXPECT_EQ(round_one({"--to", "bf16", "--mode", "rd"}, "bits:0xbf800001")["bits"], "0xbf81");
  EXPECT_EQ(round_one({"--to", "f16", "--from", "bf16"}, "bits:0x3f80")["bits"], "0x3c00");
}

TEST(RoundCmd, HexFloatsAreExactBeyondSixtyFourBits) {
  EXPECT_EQ(round_one({"--to", "bf16"}, "0x1.01p+0")["bits"], "0x3f80");
  EXPECT_EQ(round_one({"--to", "bf16", "--mode", "rna"}, "0x1.01p+0")["bits"], "0x3f81");
  // 1 + 2^-8 + 2^-120: strtod would round it to the tie 1 + 2^-8 (then 0x3f80); exactly, it is above.
  EXPECT_EQ(round_one({"--to", "bf16"}, "0x1.01000000000000000000000000001p+0")["bits"], "0x3f81");
  // Just below the tie: rna goes down.
  EXPECT_EQ(round_one({"--to", "bf16", "--mode", "rna"}, "0x1.00ffffffffffffffffffffffffffp+0")["bits"], "0x3f80");
  EXPECT_EQ(round_one({"--to", "f32"}, "-0x1p-149")["bits"], "0x80000001");
  EXPECT_EQ(round_one({"--to", "f32"}, "0X1.8P1")["bits"], "0x40400000");
}

TEST(RoundCmd, LongDecimalsAreRoundedOnceFromTheirExactValue) {
  // Both are 1.00390625 as doubles; only the exact value tells them apart.
  EXPECT_EQ(round_one({"--to", "bf16"}, "1.003906250000000000000000000001")["bits"], "0x3f81");
  EXPECT_EQ(round_one({"--to", "bf16", "--mode", "rna"}, "1.003906249999999999999999999999")["bits"], "0x3f80");
  EXPECT_EQ(round_one({"--to", "bf16"}, "1.00390625")["bits"], "0x3f80");
}

// --- independent oracle for narrow formats ------------------------------------------------------

struct narrow_format {
  const char* name;
  int exp_bits, man_bits, bias;
  bool fn_nan;  // e4m3: no Inf, only S.1111.111 is NaN
};

rational pow2(int e) { return e >= 0 ? rational(integer(1) << e) : rational(integer(1), integer(1) << -e); }

/// Finite non-negative encodings and their values, by hand from the fields.
std::vector<std::pair<std::uint64_t, rational>> finite_values(const narrow_format& f) {
  std::vector<std::pair<std::uint64_t, rational>> out;
  const std::uint64_t emax_field = (1u << f.exp_bits) - 1, fmax = (1u << f.man_bits) - 1;
  for (std::uint64_t ef = 0; ef <= emax_field; ++ef) {
    for (std::uint64_t fr = 0; fr <= fmax; ++fr) {
      if (!f.fn_nan && ef == emax_field) continue;
      if (f.fn_nan && ef == emax_field && fr == fmax) continue;
      const rational v = ef == 0 ? rational(fr) * pow2(1 - f.bias - f.man_bits)
                                 : rational((1u << f.man_bits) + fr) * pow2(static_cast<int>(ef) - f.bias - f.man_bits);
      out.emplace_back((ef << f.man_bits) | fr, v);
    }
  }
  return out;
}

/// Expected encoding of positive x (below the largest finite value) under a deterministic mode;
/// `vals` is finite_values(f), built once per format by the caller (rebuilding its 32640 bf16
/// rationals for each of the 72 values of a format was most of the test's time).
std::uint64_t expected_narrow(const narrow_format& f, const std::vector<std::pair<std::uint64_t, rational>>& vals,
                              const rational& x, const std::string& mode, bool negative) {
  std::pair<std::uint64_t, rational> lo{0, 0}, hi{0, 0};
  bool have_hi = false;
  for (const auto& p : vals) {
    if (p.second <= x && p.second >= lo.second) lo = p;
    if (p.second >= x && (!have_hi || p.second < hi.second)) { hi = p; have_hi = true; }
  }
  EXPECT_TRUE(have_hi) << "oracle needs an in-range value";
  std::uint64_t mag;
  if (lo.second == x) mag = lo.first;
  else if (mode == "rz") mag = lo.first;
  else if (mode == "ru") mag = negative ? lo.first : hi.first;
  else if (mode == "rd") mag = negative ? hi.first : lo.first;
  else if (mode == "rto") mag = (lo.first & 1) ? lo.first : hi.first;
  else {
    const rational dl = x - lo.second, dh = hi.second - x;
    if (dl < dh) mag = lo.first;
    else if (dh < dl) mag = hi.first;
    else mag = mode == "rna" ? hi.first : ((lo.first & 1) ? hi.first : lo.first);
  }
  return mag | (negative ? (std::uint64_t{1} << (f.exp_bits + f.man_bits)) : 0);
}

TEST(RoundCmd, DecimalsInEveryModeMatchAnEnumerationOracle) {
  const narrow_format fmts[] = {{"bf16", 8, 7, 127, false}, {"f16", 5, 10, 15, false},
                                {"e4m3", 4, 3, 7, true},    {"e5m2", 5, 2, 15, false}};
  struct dec { const char* text; rational value; };
  const dec decs[] = {{"0.1", rational(1, 10)},       {"0.3", rational(3, 10)},
                      {"3.14159", rational(314159, 100000)}, {"1e-3", rational(1, 1000)},
                      {"2.5e-6", rational(25, 10000000)},    {"7.0625", rational(113, 16)}};
  // One process per (format, mode) with every value (a process start is most of the cost, ~0.3 s
  // each under the sanitizers).
  for (const auto& f : fmts) {
    const auto vals = finite_values(f);
    for (const char* mode : {"rne", "rna", "rz", "ru", "rd", "rto"}) {
      std::vector<std::string> texts;
      for (const auto& d : decs)
        for (bool neg : {false, true}) texts.push_back(std::string(neg ? "-" : "") + d.text);
      const auto js = round_many({"--to", f.name, "--mode", mode}, texts);
      const int digits = (1 + f.exp_bits + f.man_bits + 3) / 4;
      std::size_t k = 0;
      for (const auto& d : decs) {
        for (bool neg : {false, true}) {
          EXPECT_EQ(js[k]["bits"], hex_bits(expected_narrow(f, vals, d.value, mode, neg), digits))
              << f.name << " " << mode << " " << texts[k];
          ++k;
        }
      }
    }
  }
}

TEST(RoundCmd, DecimalsInEveryModeMatchStrtodForF32AndF64) {
  const char* decs[] = {"0.1", "-0.1", "3.14159", "1e-40", "-2.2250738585072011e-308", "123456789.123456789",
                        "1e-320", "0.30000000000000004"};
  const struct { const char* name; int fe; } modes[] = {
      {"rne", FE_TONEAREST}, {"rz", FE_TOWARDZERO}, {"ru", FE_UPWARD}, {"rd", FE_DOWNWARD}};
  for (const char* d : decs) {
    std::uint32_t f32[4];
    std::uint64_t f64[4];
    for (int m = 0; m < 4; ++m) {
      std::fesetround(modes[m].fe);
      const float f = std::strtof(d, nullptr);
      const double g = std::strtod(d, nullptr);
      std::memcpy(&f32[m], &f, 4);
      std::memcpy(&f64[m], &g, 8);
    }
    std::fesetround(FE_TONEAREST);
    for (int m = 0; m < 4; ++m) {
      EXPECT_EQ(round_one({"--to", "f32", "--mode", modes[m].name}, d)["bits"], hex_bits(f32[m], 8)) << d << " " << modes[m].name;
      EXPECT_EQ(round_one({"--to", "f64", "--mode", modes[m].name}, d)["bits"], hex_bits(f64[m], 16)) << d << " " << modes[m].name;
    }
    // rto: truncation with the lsb forced to 1 when inexact (ru != rd), derived from the above.
    const bool neg = d[0] == '-';
    const std::uint32_t rz32 = f32[1], away32 = neg ? f32[3] : f32[2];
    const std::uint32_t rto32 = f32[2] == f32[3] ? f32[2] : ((rz32 & 1) ? rz32 : away32);
    EXPECT_EQ(round_one({"--to", "f32", "--mode", "rto"}, d)["bits"], hex_bits(rto32, 8)) << d;
  }
}

TEST(RoundCmd, F64SourceIsRoundedOnceNotThroughF32) {
  // 1 + 2^-8 + 2^-40: directly to bf16 it is above the tie (0x3f81); through f32 it would become the
  // tie 1 + 2^-8 first and then round to even (0x3f80).
  EXPECT_EQ(round_one({"--to", "bf16", "--from", "f64"}, "bits:0x3ff0100000001000")["bits"], "0x3f81");
  const double x = 1.0 + 0x1p-8 + 0x1p-40;
  const float via_f32 = static_cast<float>(x);
  std::uint32_t b;
  std::memcpy(&b, &via_f32, 4);
  EXPECT_EQ(b, 0x3f808000u);
  EXPECT_EQ(round_one({"--to", "bf16"}, fmt::format("bits:{:#x}", b))["bits"], "0x3f80");
}

TEST(RoundCmd, E4m3OverflowAndSaturation) {
  const auto a = round_one({"--to", "e4m3"}, "464");  // midpoint of 448 and (NaN slot) 480: even -> 448
  EXPECT_EQ(a["bits"], "0x7e");
  EXPECT_EQ(a["error_ulps"], -0.5);
  const auto b = round_one({"--to", "e4m3"}, "465");
  EXPECT_EQ(b["bits"], "0x7f");
  EXPECT_EQ(b["value"], "nan");
  EXPECT_EQ(b["flags"], nlohmann::json::array({"inexact", "overflow"}));
  EXPECT_EQ(round_one({"--to", "e4m3", "--saturate"}, "1e6")["bits"], "0x7e");
  EXPECT_EQ(round_one({"--to", "e4m3", "--saturate"}, "-1e6")["bits"], "0xfe");
  EXPECT_EQ(round_one({"--to", "e5m2"}, "1e6")["bits"], "0x7c");
  EXPECT_EQ(round_one({"--to", "e5m2", "--mode", "rz"}, "1e6")["bits"], "0x7b");
}

TEST(RoundCmd, OutOfRangeIsNotAnError) {
  const auto big = round_one({"--to", "bf16"}, "1e400");
  EXPECT_EQ(big["bits"], "0x7f80");
  EXPECT_EQ(big["error_ulps"], "inf");
  EXPECT_EQ(round_one({"--to", "bf16", "--mode", "rz"}, "1e400")["bits"], "0x7f7f");
  const auto tiny = round_one({"--to", "bf16"}, "-1e-400");
  EXPECT_EQ(tiny["bits"], "0x8000");
  EXPECT_EQ(tiny["flags"], nlohmann::json::array({"inexact", "underflow"}));
  EXPECT_EQ(round_one({"--to", "bf16", "--mode", "rd"}, "-1e-400")["bits"], "0x8001");
}

TEST(RoundCmd, SpecialsAreAccepted) {
  EXPECT_EQ(round_one({"--to", "bf16"}, "nan")["bits"], "0x7fff");
  EXPECT_EQ(round_one({"--to", "bf16"}, "inf")["bits"], "0x7f80");
  EXPECT_EQ(round_one({"--to", "bf16"}, "-inf")["bits"], "0xff80");
  EXPECT_EQ(round_one({"--to", "bf16"}, "-Infinity")["bits"], "0xff80");
  EXPECT_EQ(round_one({"--to", "f16"}, "-nan")["value"], "nan");
  const auto e = round_one({"--to", "e4m3"}, "inf");
  EXPECT_EQ(e["bits"], "0x7f");
  EXPECT_EQ(e["flags"], nlohmann::json::array({"invalid"}));
  EXPECT_EQ(round_one({"--to", "e4m3", "--saturate"}, "-inf")["bits"], "0xfe");
  EXPECT_EQ(round_one({"--to", "bf16"}, "-0")["bits"], "0x8000");
}

TEST(RoundCmd, HumanOutputShowsExactValueResultErrorAndFlags) {
  const auto r = run_cli({"round", "--to", "bf16", "--mode", "rne", "1.00390625", "0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("exact   1.00390625 (0x1.01p+0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result  0x3f80 = 1 (0x1p+0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error   -0.00390625 = -0.5 ulp (toward zero)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("flags   inexact"), std::string::npos) << r.out;
  // 0.1 -> 0x3dcd = 0.10009765625: error 0.10009765625 - 0.1 exactly.
  EXPECT_NE(r.out.find("error   0.00009765625 = 0.2 ulp (away from zero)"), std::string::npos) << r.out;
}

TEST(RoundCmd, StochasticRoundingIsSeededAndUsesBothNeighbours) {
  std::vector<std::string> args = {"round", "--json", "--to", "bf16", "--mode", "sr", "--seed", "7"};
  for (int i = 0; i < 64; ++i) args.emplace_back("1.00390625");
  const auto a = run_cli(args), b = run_cli(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  int up = 0, down = 0;
  for (const auto& j : json_lines(a.out)) {
    if (j["bits"] == "0x3f81") ++up;
    else if (j["bits"] == "0x3f80") ++down;
    else ADD_FAILURE() << j.dump();
  }
  // A tie rounds up with probability 1/2: all 64 on one side has probability 2^-63.
  EXPECT_GT(up, 0);
  EXPECT_GT(down, 0);
}

}  // namespace
