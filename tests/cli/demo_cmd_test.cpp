// SPDX-License-Identifier: Apache-2.0
/// @file Tests of `tiebreak demo` (src/cli/demo_cmd.cpp), run as a subprocess.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "run_cli.hpp"

namespace {

using tiebreak::test::json_lines;
using tiebreak::test::run_cli;

// The documented domain (docs/cli.md): exponent fields 13..252, both signs, all fraction pairs.
constexpr unsigned exp_lo = 13, exp_hi = 252;

/// Ties counted independently: pairs of bf16 encodings of one sign and exponent field whose
/// fraction fields have an odd sum (the 9-bit sum 256 + fa + fb is odd).
std::uint64_t count_ties(std::uint64_t& pairs) {
  std::uint64_t ties = 0;
  pairs = 0;
  for (unsigned sign = 0; sign < 2; ++sign) {
    for (unsigned e = exp_lo; e <= exp_hi; ++e) {
      for (unsigned a = 0; a < 128; ++a) {
        for (unsigned b = 0; b < 128; ++b) {
          const unsigned xa = sign << 15 | e << 7 | a, xb = sign << 15 | e << 7 | b;
          const unsigned sum = (0x80u | (xa & 0x7f)) + (0x80u | (xb & 0x7f));
          ++pairs;
          if (sum & 1u) ++ties;
        }
      }
    }
  }
  return ties;
}

const nlohmann::json& row(const nlohmann::json& j, const char* accum, const char* tail, const char* mode) {
  for (const auto& r : j["rows"]) {
    if (r["accumulate"] == accum && r["tail"] == tail && r["mode"] == mode) return r;
  }
  static const nlohmann::json none;
  ADD_FAILURE() << "no row " << accum << " " << tail << " " << mode;
  return none;
}

#ifdef TIEBREAK_HAVE_AUDIT
/// The attention part's entry of `mode`.
const nlohmann::json& attention_mode(const nlohmann::json& j, const char* mode) {
  for (const auto& m : j["attention"]["modes"]) {
    if (m["mode"] == mode) return m;
  }
  static const nlohmann::json none;
  ADD_FAILURE() << "no attention mode " << mode;
  return none;
}

// The workload has one key tile (seq_k 64) and pairs of identical keys: a row's P-bar == 1 events
// are exactly the occurrences of its maximum (unfused scaling), two in a row whose maximum repeats.
// (Checked on the output of the JSON test below: one demo run, CI time is scarce.)
void check_attention(const nlohmann::json& j) {
  ASSERT_TRUE(j.contains("attention"));
  const auto& a = j["attention"];
  const std::size_t heads = a["shape"]["heads"], rows = a["shape"]["seq_q"];
  ASSERT_EQ(a["shape"]["seq_k"], 64);
  ASSERT_EQ(a["modes"].size(), 4u);
  const auto& bf16 = attention_mode(j, "bf16");
  const auto& fp32 = attention_mode(j, "fp32");
  const auto& debias = attention_mode(j, "debias");
  const auto& sr = attention_mode(j, "stochastic");
  std::uint64_t planted_seen = 0;
  for (std::size_t h = 0; h < heads; ++h) {
    SCOPED_TRACE(h);
    const auto& b = bf16["heads"][h];
    const std::uint64_t rep = b["repeated_max_exact"];
    planted_seen += rep;
    EXPECT_EQ(b["rows"], rows);
    EXPECT_GT(rep, 0u);
    // The probe (f32 scores in the kernel) and the audit (f64 scores) agree on the repeated maxima.
    EXPECT_EQ(b["tie_rows"], rep);
    // bf16: one P-bar == 1 per row, two in a row whose maximum repeats; debias: none in those rows,
    // the other rows untouched.
    EXPECT_EQ(b["p_one"].get<std::uint64_t>(), rows + rep);
    EXPECT_EQ(debias["heads"][h]["repeated_max_exact"], rep);
    EXPECT_EQ(debias["heads"][h]["p_one"].get<std::uint64_t>(), rows - rep);
    // bf16 rounds the ties of those rows one way: a positive mean error of O and of delta.
    EXPECT_GT(b["o_mean_ulps"].get<double>(), 0.05);
    EXPECT_GT(b["delta_mean_ulps"].get<double>(), 0.0);
    // fp32 O: no rounding of O, no bias on the bf16 scale (the error left is P's rounding, ~1e-3 ulp).
    EXPECT_LT(std::abs(fp32["heads"][h]["o_mean_ulps"].get<double>()), 0.01);
    EXPECT_EQ(fp32["heads"][h]["probe_output_error"]["positive"], 0);
  }
  EXPECT_GE(planted_seen, a["planted_rows"].get<std::uint64_t>());
  // The audit's verdicts (t test at alpha 1e-3 and |mean| >= 0.05 ulp): bf16 biased in every head
  // (t ~ 8 per head here); debias, stochastic and fp32 in none. For an unbiased mode a head is
  // flagged with probability below 1e-3, so the three modes' heads together fail with probability
  // below 1 % in principle; the seed is fixed, so the outcome is too.
  EXPECT_EQ(bf16["heads_biased"], heads);
  EXPECT_EQ(fp32["heads_biased"], 0);
  EXPECT_EQ(debias["heads_biased"], 0);
  EXPECT_EQ(sr["heads_biased"], 0);
}
#endif

TEST(DemoCmd, JsonTableHasTheIndependentTieCountsAndTheSameSignTailAlwaysRoundsAway) {
  const auto r = run_cli({"demo", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto js = json_lines(r.out);
  ASSERT_EQ(js.size(), 1u);
  const auto& j = js[0];
  std::uint64_t pairs = 0;
  const std::uint64_t ties = count_ties(pairs);
  EXPECT_EQ(j["domain"]["exp_field_min"], exp_lo);
  EXPECT_EQ(j["domain"]["exp_field_max"], exp_hi);
  EXPECT_EQ(j["pairs"], pairs);
  EXPECT_EQ(j["ties"], ties);
  ASSERT_EQ(j["rows"].size(), 18u);
  for (const auto& rw : j["rows"]) {
    EXPECT_EQ(rw["ties"], ties);
    EXPECT_EQ(rw["pairs"], pairs);
  }
  const auto& same = row(j, "f32", "same-sign", "rne");
  EXPECT_EQ(same["ties_away"], ties);
  EXPECT_EQ(same["share_away"], 1.0);
  EXPECT_GT(same["mean_error_ulps_ties"].get<double>(), 0.45);
  const auto& opp = row(j, "f32", "opposite-sign", "rne");
  EXPECT_EQ(opp["ties_toward"], ties);
  // Without a tail, ties go to even: exactly half up in every binade (m = (fa+fb)>>1 odd or even).
  const auto& none = row(j, "f32", "none", "rne");
  EXPECT_EQ(none["ties_away"].get<std::uint64_t>() * 2, ties);
  EXPECT_EQ(none["mean_error_ulps_ties"], 0.0);
  // Sequential bf16 accumulation loses the tail before it can break the tie.
  const auto& seq = row(j, "bf16", "same-sign", "rne");
  EXPECT_EQ(seq["ties_away"].get<std::uint64_t>() * 2, ties);
  for (const char* tail : {"none", "same-sign", "opposite-sign"}) {
    EXPECT_EQ(row(j, "f32", tail, "rz")["ties_toward"], ties);
  }
  // sr: unbiased in expectation. With n = 3932160 ties and |error| <= 1 ulp, the mean's standard
  // deviation is below 0.0006; the bound 0.005 is > 8 sigma (false-failure rate < 1e-15), seed fixed.
  for (const char* tail : {"none", "same-sign", "opposite-sign"}) {
    EXPECT_LT(std::abs(row(j, "f32", tail, "sr")["mean_error_ulps_ties"].get<double>()), 0.005) << tail;
  }
#ifdef TIEBREAK_HAVE_AUDIT
  check_attention(j);
#endif
}


TEST(DemoCmd, TextTableRunsAndShowsTheCounts) {
  const auto r = run_cli({"demo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::uint64_t pairs = 0;
  const std::uint64_t ties = count_ties(pairs);
  EXPECT_NE(r.out.find(fmt::format("all {} ordered pairs", pairs)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("{} pairs (odd fraction sum)", ties)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("f32 -> bf16 same-sign      rne"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("100.00%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("P-bar = 1"), std::string::npos) << r.out;
#ifdef TIEBREAK_HAVE_AUDIT
  EXPECT_NE(r.out.find("Flash attention, forward and backward"), std::string::npos) << r.out;
  // One summary line per mode, in the table's order.
  std::vector<std::string> summaries;
  for (const std::string& line : tiebreak::test::lines_of(r.out))
    if (line.find(" heads biased in O, ") != std::string::npos) summaries.push_back(line.substr(0, line.find(' ')));
  EXPECT_EQ(summaries, (std::vector<std::string>{"bf16", "fp32", "debias", "stochastic"})) << r.out;
#endif
}

}  // namespace
