// SPDX-License-Identifier: Apache-2.0
/// @file The one JSON convention for non-finite numbers (tiebreak/io/json.hpp, docs/json.md): every
/// JSON writer — io::json_number itself, the analysis results, the audit report, and the CLI's
/// round, add, mma and analyze --json — writes +inf, -inf and NaN as "inf", "-inf", "nan", never as
/// null or as a bare token, and io::number_from_json reads them back.
#include <tiebreak/analysis/json.hpp>
#include <tiebreak/audit/audit.hpp>
#include <tiebreak/io/json.hpp>
#include <tiebreak/io/npy.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "../cli/run_cli.hpp"

namespace {

namespace an = tiebreak::analysis;
namespace io = tiebreak::io;
using nlohmann::json;

constexpr double inf = std::numeric_limits<double>::infinity();
const double nan = std::numeric_limits<double>::quiet_NaN();

/// No null and no non-finite number token anywhere in `j` (nlohmann would dump one as null).
void expect_no_null(const json& j, const std::string& where = "") {
  if (j.is_null()) {
    ADD_FAILURE() << "null at " << where;
  }
  if (j.is_number_float()) {
    EXPECT_TRUE(std::isfinite(j.get<double>())) << "non-finite number at " << where;
  }
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) expect_no_null(it.value(), where + "/" + it.key());
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i) expect_no_null(j[i], where + "/" + std::to_string(i));
}

/// `j` is the convention's spelling of `x`, and reads back as `x`.
void expect_spelled(const json& j, double x, const std::string& what) {
  const char* s = std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
  EXPECT_EQ(j, s) << what << ": " << j.dump();
  const double back = io::number_from_json(j);
  if (std::isnan(x)) {
    EXPECT_TRUE(std::isnan(back)) << what;
  } else {
    EXPECT_EQ(back, x) << what;
  }
}

TEST(JsonConvention, NumberAndReader) {
  expect_spelled(io::json_number(inf), inf, "+inf");
  expect_spelled(io::json_number(-inf), -inf, "-inf");
  expect_spelled(io::json_number(nan), nan, "nan");
  expect_spelled(io::json_number(-nan), nan, "-nan");  // NaN has no sign in the convention
  for (double x : {0.0, -0.0, 1.5, -2.25e-308, 4.9e-324, 1.7976931348623157e308}) {
    const json j = io::json_number(x);
    EXPECT_TRUE(j.is_number()) << x;
    EXPECT_EQ(io::number_from_json(json::parse(j.dump())), x) << x;  // exact through text
    EXPECT_EQ(std::signbit(io::number_from_json(json::parse(j.dump()))), std::signbit(x)) << x;
  }
  // Through text and back: strings compare equal where NaN numbers would not.
  const json a = {io::json_number(inf), io::json_number(-inf), io::json_number(nan)};
  EXPECT_EQ(json::parse(a.dump()), a);
  EXPECT_EQ(a.dump(), R"(["inf","-inf","nan"])");
  EXPECT_THROW((void)io::number_from_json(json(nullptr)), std::invalid_argument);
  EXPECT_THROW((void)io::number_from_json(json("Infinity")), std::invalid_argument);
  EXPECT_THROW((void)io::number_from_json(json(true)), std::invalid_argument);
  // The analysis library writes through the same function (one home).
  json (*const analysis_writer)(double) = &an::json_number;
  EXPECT_EQ(analysis_writer, &io::json_number);
}

TEST(JsonConvention, AnalysisResults) {
  an::t_test_result t;
  t.t = inf;
  t.cohen_d = -inf;
  t.p_value = nan;
  const json jt = t;
  expect_no_null(jt, "t_test");
  expect_spelled(jt["t"], inf, "t");
  expect_spelled(jt["cohen_d"], -inf, "cohen_d");
  expect_spelled(jt["p_value"], nan, "p_value");

  an::running_moments m;  // as produced: infinite extremes
  m.push(std::vector<double>{1.0, 2.0});
  m.min = -inf;
  m.max = inf;
  m.mean = nan;
  const json jm = m;
  expect_no_null(jm, "moments");
  expect_spelled(jm["min"], -inf, "min");
  expect_spelled(jm["max"], inf, "max");
  expect_spelled(jm["mean"], nan, "mean");

  an::sign_test_result s;
  s.sign_skew = nan;
  an::bootstrap_result b;
  b.ci_low = -inf;
  b.ci_high = inf;
  an::drift_step d;
  d.cumulative_sum = -inf;
  an::spectral_norm_result sn;
  sn.sigma = nan;
  sn.residual = inf;
  an::coherence_result c;
  c.coherence = nan;
  c.weight_sum = -inf;
  an::growth_fit g;
  g.slope = inf;
  const json js = s, jb = b, jd = d, jsn = sn, jc = c, jg = g;
  for (const json* x : {&js, &jb, &jd, &jsn, &jc, &jg}) expect_no_null(*x, x->dump());
  expect_spelled(js["sign_skew"], nan, "sign_skew");
  expect_spelled(jb["ci_low"], -inf, "ci_low");
  expect_spelled(jb["ci_high"], inf, "ci_high");
  expect_spelled(jd["cumulative_sum"], -inf, "cumulative_sum");
  expect_spelled(jsn["spectral_norm"], nan, "spectral_norm");
  expect_spelled(jsn["residual"], inf, "residual");
  expect_spelled(jc["coherence"], nan, "coherence");
  expect_spelled(jc["weight_sum"], -inf, "weight_sum");
  expect_spelled(jg["slope"], inf, "slope");

  // As a computation produces them: identical values off mu0 are infinitely significant.
  an::running_moments up, down;
  up.push(std::vector<double>{0.5, 0.5, 0.5});
  down.push(std::vector<double>{-0.5, -0.5});
  expect_spelled(json(an::t_test(up))["t"], inf, "t of constant +0.5");
  expect_spelled(json(an::t_test(down))["t"], -inf, "t of constant -0.5");
}

TEST(JsonConvention, AuditReport) {
  tiebreak::audit::audit_report r;
  r.scale = inf;
  tiebreak::audit::head_report h;
  h.o.signed_error.t.t = inf;
  h.o.signed_error.t.p_value = nan;
  h.o.directed_error.t.t = -inf;
  h.o.max_abs_error_ulps = inf;
  h.v_sign_skew = {nan, -inf, 0.25};
  r.heads.push_back(h);
  r.o_signed_all.push(std::vector<double>{1.0, 1.0});      // summary t: +inf
  r.o_directed_all.push(std::vector<double>{-1.0, -1.0});  // summary directed t: -inf
  const json j = tiebreak::audit::to_json(r);
  expect_no_null(j, "report");
  expect_spelled(j["scale"], inf, "scale");
  const json& e = j["heads"][0];
  expect_spelled(e["o_t"], inf, "o_t");
  expect_spelled(e["o_p_value"], nan, "o_p_value");
  expect_spelled(e["o_directed_t"], -inf, "o_directed_t");
  expect_spelled(e["o"]["max_abs_error_ulps"], inf, "max_abs_error_ulps");
  expect_spelled(e["v_sign_skew"][0], nan, "v_sign_skew[0]");
  expect_spelled(e["v_sign_skew"][1], -inf, "v_sign_skew[1]");
  expect_spelled(j["summary"]["o_t"], inf, "summary o_t");
  expect_spelled(j["summary"]["o_directed_t"], -inf, "summary o_directed_t");
  EXPECT_EQ(json::parse(j.dump(2)), j);  // what the report fuzz target checks
}

json only_json(const std::vector<std::string>& args) {
  const auto r = tiebreak::test::run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto lines = tiebreak::test::json_lines(r.out);
  EXPECT_EQ(lines.size(), 1u) << r.out;
  return lines.empty() ? json() : lines[0];
}

TEST(JsonConvention, CliRoundAddMma) {
  // round: the result value, and the error in ulps (a double field).
  const json pinf = only_json({"round", "--to", "bf16", "--json", "1e300"});
  expect_spelled(pinf["value"], inf, "round value");
  expect_spelled(pinf["error_ulps"], inf, "round error_ulps");
  const json ninf = only_json({"round", "--to", "f32", "--json", "-inf"});
  expect_spelled(ninf["value"], -inf, "round value");
  const json sat = only_json({"round", "--to", "bf16", "--saturate", "--json", "inf"});
  expect_spelled(sat["error_ulps"], -inf, "round saturated error_ulps");
  const json qnan = only_json({"round", "--to", "f16", "--json", "nan"});
  expect_spelled(qnan["value"], nan, "round value");
  expect_spelled(qnan["error_ulps"], nan, "round error_ulps");
  // add: the final value and every step's.
  expect_spelled(only_json({"add", "--format", "f32", "--json", "inf", "1"})["value"], inf, "add value");
  expect_spelled(only_json({"add", "--format", "f32", "--json", "-inf", "1"})["value"], -inf, "add value");
  const json a = only_json({"add", "--format", "f32", "--json", "inf", "-inf"});
  expect_spelled(a["value"], nan, "add value");
  for (const json& s : a["steps"]) EXPECT_TRUE(s["value"].is_string() || s["value"].is_number()) << s.dump();
  // mma: the result value.
  expect_spelled(only_json({"mma", "--instr", "mma.m16n8k16.bf16", "--json", "--a", "inf", "--b", "1"})["value"], inf, "mma");
  expect_spelled(only_json({"mma", "--instr", "mma.m16n8k16.bf16", "--json", "--a", "0,-inf", "--b", "1,1"})["value"], -inf, "mma");
  expect_spelled(only_json({"mma", "--instr", "mma.m16n8k16.bf16", "--json", "--a", "inf,-inf", "--b", "1,1"})["value"], nan,
                 "mma");
}

TEST(JsonConvention, CliAnalyze) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tiebreak_json_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string up = (dir / "up.npy").string(), down = (dir / "down.npy").string();
  const std::vector<double> u{0.5, 0.5, 0.5, 0.5}, d{-0.25, -0.25, -0.25};
  io::write_npy<double>(up, u, std::vector<std::size_t>{u.size()});
  io::write_npy<double>(down, d, std::vector<std::size_t>{d.size()});
  const json ju = only_json({"analyze", "bias", "--json", up});
  const json jd = only_json({"analyze", "bias", "--json", down});
  expect_spelled(ju["t"], inf, "analyze bias t");
  expect_spelled(ju["cohen_d"], inf, "analyze bias cohen_d");
  expect_spelled(jd["t"], -inf, "analyze bias t");
  // The text form reads the JSON back through io::number_from_json: the infinity keeps its sign.
  const auto text = tiebreak::test::run_cli({"analyze", "bias", down});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(" t -inf "), std::string::npos) << text.out;
  fs::remove_all(dir);
}

}  // namespace
