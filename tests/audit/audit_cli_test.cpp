// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak audit` end to end: .npy folders and safetensors files written to a temporary
/// directory, the JSON report and Markdown table, and exit code 2 with one-line messages on bad input.
#include "../cli/run_cli.hpp"
#include "audit_fixtures.hpp"

#include <tiebreak/audit/audit.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

namespace {

namespace ref = tiebreak::reference;
namespace io = tiebreak::io;
using namespace tiebreak::test;
using testing::HasSubstr;
using tiebreak::round_mode;

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

void expect_one_line_error(const cli_result& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tiebreak: error: "));
  EXPECT_THAT(r.err, HasSubstr(needle));
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
}

std::set<std::pair<int, int>> flagged(const nlohmann::json& j) {
  std::set<std::pair<int, int>> out;
  for (const auto& h : j["heads"])
    if (h["biased"].get<bool>()) out.insert({h["batch"].get<int>(), h["head"].get<int>()});
  return out;
}

// A .npy folder (bf16 values stored as f4), bhsd: heads (0,2) and (1,0) round toward zero.
TEST(AuditCli, NpyFolderEndToEnd) {
  const auto dir = temp_dir("cli_npy");
  const ref::attention_shape s{2, 3, 3, 96, 96, 32, 32};
  const auto in = make_problem(s, 404, 0.5);
  const std::set<std::pair<int, int>> planted = {{0, 2}, {1, 0}};
  const auto d = emulate_kernel(in, false, [&](std::size_t b, std::size_t h) {
    return planted.count({static_cast<int>(b), static_cast<int>(h)}) ? round_mode::rz : round_mode::rne;
  });
  write_dump_npy(dir / "dump", d, false);
  const auto r = run_cli({"audit", (dir / "dump").string(), "-o", (dir / "report.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| batch | head | rows | O mean (ulp) | O t |"));
  EXPECT_THAT(r.out, HasSubstr("verdict: 2 of 6 heads biased"));
  const auto j = read_json(dir / "report.json");
  EXPECT_EQ(j["schema"], "tiebreak.audit/2");
  ASSERT_EQ(j["heads"].size(), 6u);
  for (const auto& h : j["heads"])
    for (const char* key : {"batch", "head", "o_mean_error_ulps", "o_t", "tie_row_share", "biased"})
      EXPECT_TRUE(h.contains(key)) << key;
  EXPECT_EQ(flagged(j), planted);
  EXPECT_EQ(j["summary"]["heads_biased"], 2);
  EXPECT_EQ(j["summary"]["verdict"], "biased");
  EXPECT_EQ(j["tensors"]["o"]["value_format"], "bf16");
  EXPECT_EQ(j["tensors"]["o"]["dtype"], "f32");
  EXPECT_FALSE(j.contains("certificate"));
}

// A BF16 safetensors file in bshd layout, causal, grouped-query, with every gradient and LSE:
// exact gradients (rne) are unbiased; --certify adds the certificate; --json prints the report.
TEST(AuditCli, SafetensorsBshdWithGradients) {
  const auto dir = temp_dir("cli_st");
  const ref::attention_shape s{1, 4, 2, 24, 24, 16, 16};
  const auto in = make_problem(s, 5, 0.0, true);
  auto d = emulate_kernel(in, true, [](std::size_t, std::size_t) { return round_mode::rne; });
  ref::attention_options o;
  o.causal = true;
  const auto g = ref::attention_f64(in, o);
  auto bf = [](const std::vector<double>& x) {
    std::vector<double> y(x);
    for (double& e : y) e = round_to(tiebreak::formats::bf16, e, round_mode::rne);
    return y;
  };
  d.dq = bf(g.dq);
  d.dk = bf(g.dk);
  d.dv = bf(g.dv);
  d.lse = g.lse;
  for (double& e : d.lse) e = round_to(tiebreak::formats::f32, e, round_mode::rne);
  write_dump_safetensors(dir / "dump.safetensors", d, true);
  const auto r = run_cli({"audit", (dir / "dump.safetensors").string(), "--layout", "bshd", "--causal", "--certify",
                          "--json", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"], "bshd");
  EXPECT_EQ(j["causal"], true);
  EXPECT_EQ(j["shape"]["kv_heads"], 2);
  EXPECT_EQ(j["summary"]["heads_biased"], 0);
  EXPECT_EQ(j["summary"]["heads_delta_biased"], 0);
  ASSERT_EQ(j["kv_heads"].size(), 2u);
  EXPECT_TRUE(j["kv_heads"][0].contains("dk"));
  EXPECT_FALSE(j["kv_heads"][0]["dk"]["biased"].get<bool>());
  EXPECT_TRUE(j["heads"][0].contains("dq"));
  EXPECT_TRUE(j["heads"][0].contains("lse"));
  EXPECT_LE(j["heads"][0]["lse"]["max_abs_error_ulps"].get<double>(), 0.5 + 1e-9);
  EXPECT_LE(j["heads"][0]["o"]["max_abs_error_ulps"].get<double>(), 0.5 + 1e-9);
  ASSERT_TRUE(j.contains("certificate"));
  EXPECT_LT(j["certificate"]["max_rel_row"].get<double>(), 1e-13);
  EXPECT_THAT(r.err, HasSubstr("certified"));
}

// --scale reaches the reference: a kernel run with scale 0.3 is unbiased when audited with 0.3 and
// wildly off with the default 1/sqrt(32).
TEST(AuditCli, ScaleOption) {
  const auto dir = temp_dir("cli_scale");
  const ref::attention_shape s{1, 2, 2, 32, 32, 32, 32};
  const auto d = emulate_kernel(make_problem(s, 12), false, [](std::size_t, std::size_t) { return round_mode::rne; }, 0.3);
  write_dump_safetensors(dir / "d.safetensors", d, false);
  const auto good = run_cli({"audit", (dir / "d.safetensors").string(), "--scale", "0.3", "--json", "-q"});
  ASSERT_EQ(good.exit_code, 0) << good.err;
  const auto jg = nlohmann::json::parse(good.out);
  EXPECT_DOUBLE_EQ(jg["scale"].get<double>(), 0.3);
  EXPECT_EQ(jg["summary"]["heads_biased"], 0);
  EXPECT_LE(jg["heads"][0]["o"]["max_abs_error_ulps"].get<double>(), 0.5 + 1e-9);
  const auto bad = run_cli({"audit", (dir / "d.safetensors").string(), "--json", "-q"});
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_GT(nlohmann::json::parse(bad.out)["heads"][0]["o"]["max_abs_error_ulps"].get<double>(), 10);
}

// NaN/Inf in the kernel's output: counted and reported, the run succeeds.
TEST(AuditCli, NonFiniteValuesAreReportedNotFatal) {
  const auto dir = temp_dir("cli_nan");
  const ref::attention_shape s{1, 2, 2, 32, 32, 16, 16};
  auto d = emulate_kernel(make_problem(s, 6), false, [](std::size_t, std::size_t) { return round_mode::rne; });
  d.o[5] = NAN;
  d.o[40] = INFINITY;  // same head, row 2
  write_dump_safetensors(dir / "d.safetensors", d, false);
  const auto r = run_cli({"audit", (dir / "d.safetensors").string(), "-o", (dir / "r.json").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 rows excluded; 2 NaN/Inf values"));
  const auto j = read_json(dir / "r.json");
  EXPECT_EQ(j["summary"]["nonfinite"]["o"], 2);
  EXPECT_EQ(j["summary"]["excluded_rows"], 2);
  EXPECT_EQ(j["heads"][0]["excluded_rows"], 2);
}

// A path is bytes; JSON text is UTF-8. Found by fuzz_report: such a path made the report's dump throw
// nlohmann's type_error 316, so `tiebreak audit` exited 2 on a good file and wrote no report.
TEST(AuditCli, PathThatIsNotUtf8IsEscapedInTheReport) {
  const auto dir = temp_dir("cli_utf8");
  const ref::attention_shape s{1, 1, 1, 8, 8, 4, 4};
  const auto d = emulate_kernel(make_problem(s, 3), false, [](std::size_t, std::size_t) { return round_mode::rne; });
  const std::string name = std::string("d\xff\xfe") + "\xc3\xa9" + "\xed\xa0\x80.safetensors";  // bad, bad, é, surrogate
  write_dump_safetensors(dir / name, d, false);
  const auto r = run_cli({"audit", (dir / name).string(), "-o", (dir / "r.json").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string source = read_json(dir / "r.json")["source"];
  EXPECT_THAT(source, HasSubstr("d\\xff\\xfe\xc3\xa9\\xed\\xa0\\x80.safetensors"));
  const auto js = run_cli({"audit", (dir / name).string(), "--json", "-q"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  EXPECT_EQ(nlohmann::json::parse(js.out)["source"], source);
}

TEST(AuditReport, JsonSafeTextKeepsUtf8AndEscapesTheRest) {
  using tiebreak::audit::json_safe_text;
  EXPECT_EQ(json_safe_text("plain/path.npy"), "plain/path.npy");
  EXPECT_EQ(json_safe_text("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");  // é € 😀
  EXPECT_EQ(json_safe_text("\xff"), "\\xff");
  EXPECT_EQ(json_safe_text("\xc0\x80"), "\\xc0\\x80");          // overlong NUL
  EXPECT_EQ(json_safe_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate U+D800
  EXPECT_EQ(json_safe_text("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(json_safe_text("a\xe2\x82"), "a\\xe2\\x82");        // truncated at the end
  EXPECT_EQ(json_safe_text(std::string("\0x", 2)), std::string("\0x", 2));  // NUL is valid UTF-8
  EXPECT_NO_THROW((void)nlohmann::json(json_safe_text("\x80\xbf\xfe")).dump());
}

TEST(AuditCli, BadInputsExitTwoWithOneLine) {
  const auto dir = temp_dir("cli_bad");
  const ref::attention_shape s{1, 2, 2, 8, 8, 4, 4};
  const auto d = emulate_kernel(make_problem(s, 7), false, [](std::size_t, std::size_t) { return round_mode::rne; });
  write_dump_safetensors(dir / "good.safetensors", d, false);
  expect_one_line_error(run_cli({"audit", (dir / "absent.safetensors").string()}), "no such file");
  {
    std::ofstream(dir / "junk.safetensors") << "this is not a safetensors file at all";
    expect_one_line_error(run_cli({"audit", (dir / "junk.safetensors").string()}), "header length");
  }
  {
    auto t = dump_tensors(d, false);
    t.erase("o");
    std::map<std::string, io::st_tensor_data> st;
    for (auto& [n, nt] : t) st[n] = {io::st_dtype::bf16, nt.shape, encode_as(tiebreak::formats::bf16, nt.values)};
    io::write_safetensors(dir / "no_o.safetensors", st);
    expect_one_line_error(run_cli({"audit", (dir / "no_o.safetensors").string()}), "missing tensor 'o'");
  }
  {
    std::filesystem::copy_file(dir / "good.safetensors", dir / "cut.safetensors");
    std::filesystem::resize_file(dir / "cut.safetensors", std::filesystem::file_size(dir / "good.safetensors") - 3);
    expect_one_line_error(run_cli({"audit", (dir / "cut.safetensors").string()}), "out of range (truncated file?");
  }
  // A folder without the tensors.
  std::filesystem::create_directories(dir / "empty");
  expect_one_line_error(run_cli({"audit", (dir / "empty").string()}), "missing tensor 'q' (no q.npy in the folder)");
  // --device cuda without a usable GPU (CI) or without CUDA in the build: exit 2, one line, the reason.
  if (!ref::device_unavailable_reason().empty()) {
    const auto r = run_cli({"audit", (dir / "good.safetensors").string(), "--device", "cuda"});
    expect_one_line_error(r, "--device cuda: ");
    EXPECT_THAT(r.err, HasSubstr("use --device cpu"));
    EXPECT_THAT(r.err, testing::AnyOf(HasSubstr("no usable GPU"), HasSubstr("built without CUDA")));
  }
  expect_one_line_error(run_cli({"audit", (dir / "good.safetensors").string(), "--layout", "sbhd"}), "--layout");
  expect_one_line_error(run_cli({"audit", (dir / "good.safetensors").string(), "-o", (dir / "nodir" / "x.json").string()}),
                        "cannot open for writing");
  const auto ok = run_cli({"audit", (dir / "good.safetensors").string(), "-q"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
}

}  // namespace
