// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the `tiebreak` entry point (src/cli/main.cpp): version, help, usage errors.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "run_cli.hpp"

namespace {

using tiebreak::test::lines_of;
using tiebreak::test::run_cli;

void expect_usage_error(const std::vector<std::string>& args, const std::string& names) {
  const auto r = run_cli(args);
  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.out << r.err;
  EXPECT_EQ(r.out, "") << cmd;
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 1u) << cmd << "\n" << r.err;
  EXPECT_EQ(lines[0].rfind("tiebreak: error: ", 0), 0u) << r.err;
  EXPECT_NE(lines[0].find(names), std::string::npos) << cmd << "\n" << r.err;
}

TEST(Main, VersionAndHelp) {
  const auto v = run_cli({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("tiebreak 0.1.0"), std::string::npos) << v.out;
  const auto h = run_cli({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  for (const char* sub : {"round", "add", "demo"}) EXPECT_NE(h.out.find(sub), std::string::npos) << h.out;
  EXPECT_EQ(run_cli({"round", "--help"}).exit_code, 0);
}

TEST(Main, UnknownFormatOrModeExitsTwoNamingIt) {
  expect_usage_error({"round", "--to", "bf17", "1"}, "'bf17'");
  expect_usage_error({"round", "--to", "bf16", "--from", "fp32", "bits:0x1"}, "'fp32'");
  expect_usage_error({"round", "--to", "bf16", "--mode", "nearest", "1"}, "'nearest'");
  expect_usage_error({"add", "--format", "int8", "1", "2"}, "'int8'");
  expect_usage_error({"add", "--format", "bf16", "--accumulate", "f128", "1", "2"}, "'f128'");
  expect_usage_error({"add", "--format", "bf16", "--mode", "RNE", "1", "2"}, "'RNE'");
}

TEST(Main, UnparsableValuesExitTwoNamingThem) {
  for (const char* bad : {"1.2.3", "abc", "0x", "0x1.8q3", "1e", "--", "1e+", "0x1p", "+", "nanx", "1 2"}) {
    if (std::string(bad) == "--") continue;  // CLI11's separator, not a value
    expect_usage_error({"round", "--to", "bf16", bad}, std::string("'") + bad + "'");
  }
  expect_usage_error({"round", "--to", "bf16", "bits:0xZZ"}, "'0xZZ'");
  expect_usage_error({"round", "--to", "bf16", "--from", "bf16", "bits:0x1ffff"}, "'0x1ffff'");
  expect_usage_error({"round", "--to", "bf16", "bits:0x10000000000000000"}, "more than 64 bits");
  expect_usage_error({"round", "--to", "bf16", "1e999999"}, "'1e999999'");
  expect_usage_error({"add", "--format", "bf16", "1", "x"}, "'x'");
}

TEST(Main, UsageErrorsExitTwoOnOneLine) {
  expect_usage_error({}, "subcommand");
  expect_usage_error({"frobnicate"}, "frobnicate");
  expect_usage_error({"round", "1"}, "--to");
  expect_usage_error({"round", "--to", "bf16"}, "values");
  expect_usage_error({"round", "--to", "bf16", "--bogus", "1"}, "--bogus");
  expect_usage_error({"round", "--to", "bf16", "--seed", "x", "1"}, "x");
  expect_usage_error({"add", "--format", "bf16", "1"}, "at least two values");
  expect_usage_error({"add", "1", "2"}, "--format");
  expect_usage_error({"demo", "--seed", "abc"}, "abc");
  expect_usage_error({"demo", "extra"}, "extra");
}

}  // namespace
