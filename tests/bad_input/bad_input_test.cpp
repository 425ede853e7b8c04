// SPDX-License-Identifier: Apache-2.0
/// @file The bad-input contract of every CLI command, as tables of cases run as processes.
///
/// Each case runs `tiebreak ARGS...` under a 20 s limit (stdin /dev/null) and asserts that it neither
/// hangs nor dies by a signal, and then either
///   - exit code 2, nothing on stdout, exactly one stderr line `tiebreak: error: ...` containing
///     every needle (the tensor, file or option named, and the problem), or
///   - exit code 0 for data that is legal but odd (NaN/Inf inside tensors, empty arrays), with the
///     case's own check of the JSON report: every element is accounted for (counted as finite or
///     non-finite), nothing is dropped silently.
/// Paths starting with "@/" name files of fixture_dir() (fixtures.cpp). Each case is one ctest
/// (label cli); the process that runs it writes the fixtures (well under 0.1 s).
#include "fixtures.hpp"
#include "process.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <sstream>
#include <set>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using testing::HasSubstr;
using testing::StartsWith;
using tiebreak::test::fixture_dir;
using tiebreak::test::process_result;

struct bad_case {
  std::string name;                ///< test name suffix (alphanumeric and _)
  std::vector<std::string> args;   ///< "@/x" is fixture_dir()/x
  int exit_code = 2;
  std::vector<std::string> needles;  ///< exit 2: each must be in the one stderr line
  std::function<void(const process_result&)> check = {};  ///< further checks (the JSON of exit 0)
  bool as_nobody = false;          ///< run without root's permission bypass (unreadable files)
};

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// The one JSON object on stdout (audit --json, analyze --json with one file, round/add --json).
json only_json(const process_result& r) {
  const auto lines = lines_of(r.out);
  EXPECT_EQ(lines.size(), 1u) << r.out.substr(0, 400);
  return lines.empty() ? json() : json::parse(lines.front());
}

// gtest prints a parameter by its bytes unless told otherwise.
void PrintTo(const bad_case& c, std::ostream* os) { *os << c.name; }

bad_case err(std::string name, std::vector<std::string> args, std::vector<std::string> needles) {
  return bad_case{std::move(name), std::move(args), 2, std::move(needles)};
}
bad_case ok(std::string name, std::vector<std::string> args, std::function<void(const process_result&)> check) {
  return bad_case{std::move(name), std::move(args), 0, {}, std::move(check)};
}

// ------------------------------------------------------------------------------------------------
// tiebreak (no command), round, add, mma, demo: options and VALUEs (docs/cli.md).
std::vector<bad_case> top_cases() {
  return {
      err("NoCommand", {}, {"subcommand"}),
      err("UnknownCommand", {"rounds"}, {"unknown subcommand 'rounds'"}),
      err("UnknownTopOption", {"--frobnicate"}, {"unknown option '--frobnicate'"}),
  };
}

std::vector<bad_case> round_cases() {
  return {
      err("MissingTo", {"round", "1"}, {"--to"}),
      err("UnknownFormat", {"round", "--to", "bf17", "1"}, {"--to", "unknown format 'bf17'"}),
      err("FormatWrongCase", {"round", "--to", "BF16", "1"}, {"--to", "'BF16'"}),
      err("UnknownMode", {"round", "--to", "bf16", "--mode", "RNE", "1"}, {"--mode", "'RNE'"}),
      err("UnknownFrom", {"round", "--to", "bf16", "--from", "f128", "bits:0x1"}, {"--from", "'f128'"}),
      err("NoValues", {"round", "--to", "bf16"}, {"values"}),
      err("ToWithoutValue", {"round", "1", "--to"}, {"--to"}),
      err("UnknownOption", {"round", "--to", "bf16", "--round-twice", "1"}, {"--round-twice"}),
      err("MalformedDecimal", {"round", "--to", "bf16", "1.2.3"}, {"invalid number '1.2.3'"}),
      err("EmptyValue", {"round", "--to", "bf16", ""}, {"invalid number ''"}),
      err("BareSign", {"round", "--to", "bf16", "+"}, {"'+'"}),
      err("HexWithoutDigits", {"round", "--to", "bf16", "0x"}, {"'0x'"}),
      err("HexBadExponent", {"round", "--to", "bf16", "0x1p"}, {"'0x1p'"}),
      err("BitsTooWide", {"round", "--to", "f32", "--from", "bf16", "bits:0x1ffff"}, {"'0x1ffff'", "wider than the 16 bits of bf16"}),
      err("BitsEmpty", {"round", "--to", "f32", "bits:"}, {"invalid encoding ''", "no digits"}),
      err("BitsNotHex", {"round", "--to", "f32", "bits:0xzz"}, {"invalid encoding '0xzz'", "'z'"}),
      err("BitsNegative", {"round", "--to", "f32", "bits:-1"}, {"invalid encoding '-1'"}),
      err("NanWithJunk", {"round", "--to", "bf16", "nanx"}, {"'nanx'"}),
      err("ExponentBeyondLimit", {"round", "--to", "bf16", "1e-10001"}, {"'1e-10001'", "not supported"}),
      err("ExponentOverflowsInt", {"round", "--to", "bf16", "1e99999999999999999999"}, {"1e99999999999999999999"}),
      err("HexExponentBeyondLimit", {"round", "--to", "bf16", "0x1p-40001"}, {"0x1p-40001"}),
      err("TooManyDigits", {"round", "--to", "bf16", std::string(10001, '7')}, {"not supported"}),
      err("SeedNotANumber", {"round", "--to", "bf16", "--mode", "sr", "--seed", "abc", "1"}, {"--seed"}),
      err("SeedNegative", {"round", "--to", "bf16", "--mode", "sr", "--seed", "-1", "1"}, {"--seed", "'-1' is not a non-negative integer"}),
      err("SeedBeyond64Bits", {"round", "--to", "bf16", "--seed", "18446744073709551616", "1"}, {"--seed", "beyond 2^64 - 1"}),
      err("BadValueAfterGoodOne", {"round", "--to", "bf16", "1", "x"}, {"invalid number 'x'"}),
      // NaN and Inf as VALUEs are legal (docs/cli.md): a NaN result, or an overflow per the mode.
      ok("NanValueIsLegal", {"round", "--to", "bf16", "--json", "nan"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["exact"], "nan");
           EXPECT_EQ(j["value"], "nan");
           EXPECT_EQ(j["error"], "nan");
           EXPECT_TRUE(j["direction"].is_null());
         }),
      ok("NegativeInfinityIsLegal", {"round", "--to", "e4m3", "--json", "-Infinity"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["exact"], "-inf");
           EXPECT_EQ(j["value"], "nan");  // e4m3 has no Inf
         }),
      ok("InfinitySaturates", {"round", "--to", "bf16", "--saturate", "--json", "inf"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["bits"], "0x7f7f");
           EXPECT_EQ(j["error"], "-inf");
         }),
      ok("OverflowIsNotAnError", {"round", "--to", "e5m2", "--json", "1e300"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["value"], "inf");
           EXPECT_THAT(j["flags"].dump(), HasSubstr("overflow"));
         }),
  };
}

std::vector<bad_case> add_cases() {
  return {
      err("MissingFormat", {"add", "1", "2"}, {"--format"}),
      err("UnknownFormat", {"add", "--format", "fp8", "1", "2"}, {"--format", "'fp8'"}),
      err("UnknownAccumulate", {"add", "--format", "bf16", "--accumulate", "f128", "1", "2"}, {"--accumulate", "'f128'"}),
      err("UnknownMode", {"add", "--format", "bf16", "--mode", "nearest", "1", "2"}, {"--mode", "'nearest'"}),
      err("OneValue", {"add", "--format", "bf16", "1"}, {"two"}),
      err("NoValues", {"add", "--format", "bf16"}, {"values"}),
      err("MalformedValue", {"add", "--format", "bf16", "1", "0x1.g"}, {"'0x1.g'"}),
      err("BitsTooWide", {"add", "--format", "e4m3", "bits:0x100", "1"}, {"'0x100'", "e4m3"}),
      err("UnknownOption", {"add", "--format", "bf16", "--kahan", "1", "2"}, {"--kahan"}),
      err("SeedNotANumber", {"add", "--format", "bf16", "--seed", "1.5", "1", "2"}, {"--seed"}),
      err("SeedNegative", {"add", "--format", "bf16", "--mode", "sr", "--seed", "-7", "1", "2"}, {"--seed", "'-7'"}),
      ok("NanOperandIsLegal", {"add", "--format", "bf16", "--json", "1", "nan", "2"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["value"], "nan");
           EXPECT_EQ(j["inputs"].size(), 3u);
           EXPECT_EQ(j["steps"].size(), 5u);  // 3 inputs, 2 additions: no step dropped
         }),
      ok("InfMinusInfIsInvalid", {"add", "--format", "f32", "--json", "inf", "-inf"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["value"], "nan");
           EXPECT_THAT(j["flags"].dump(), HasSubstr("invalid"));
         }),
  };
}

std::vector<bad_case> mma_cases() {
  return {
      err("MissingInstr", {"mma", "--a", "1"}, {"--instr"}),
      err("UnknownInstr", {"mma", "--instr", "mma.m16n8k32.bf16"}, {"--instr", "'mma.m16n8k32.bf16'"}),
      err("UnknownArch", {"mma", "--instr", "mma.m16n8k16.bf16", "--arch", "sm80"}, {"--arch", "'sm80'"}),
      err("TooManyValues", {"mma", "--instr", "mma.m16n8k8.tf32", "--a", "1,2,3,4,5,6,7,8,9"}, {"--a/--b", "at most 8"}),
      err("MalformedA", {"mma", "--instr", "mma.m16n8k16.bf16", "--a", "1,zz"}, {"'zz'"}),
      err("MalformedC", {"mma", "--instr", "mma.m16n8k16.bf16", "--c", "1..0"}, {"'1..0'"}),
      err("BitsTooWideForA", {"mma", "--instr", "wgmma.k32.e4m3", "--a", "bits:0x1ff"}, {"'0x1ff'", "e4m3"}),
      err("UnknownOption", {"mma", "--instr", "mma.m16n8k16.bf16", "--d", "1"}, {"--d"}),
      ok("NanInputIsLegal", {"mma", "--instr", "mma.m16n8k16.bf16", "--json", "--a", "nan,1", "--b", "1,1"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_TRUE(j["exact"].is_null());
           EXPECT_TRUE(j["error"].is_null());
           EXPECT_EQ(j["a"].size(), 16u);
         }),
  };
}

std::vector<bad_case> demo_cases() {
  return {
      err("SeedNotANumber", {"demo", "--seed", "abc"}, {"--seed"}),
      err("SeedNegative", {"demo", "--seed", "-1"}, {"--seed", "'-1'"}),
      err("SeedFraction", {"demo", "--seed", "1.5"}, {"--seed"}),
      err("SeedBeyond64Bits", {"demo", "--seed", "99999999999999999999999"}, {"--seed", "beyond 2^64 - 1"}),
      err("SeedMissingValue", {"demo", "--seed"}, {"--seed"}),
      err("UnknownOption", {"demo", "--pairs", "10"}, {"--pairs"}),
      err("StrayArgument", {"demo", "extra"}, {"extra"}),
  };
}

// ------------------------------------------------------------------------------------------------
// tiebreak analyze spectral|align|bias: .npy files.
std::vector<bad_case> analyze_cases() {
  std::vector<bad_case> c = {
      err("NoSubcommand", {"analyze"}, {"subcommand"}),
      err("UnknownSubcommand", {"analyze", "fourier", "@/good.npy"}, {"analyze: unknown subcommand 'fourier'", "spectral"}),
  };
  // The same broken file through each subcommand: one line naming the file and the problem.
  const std::vector<std::pair<std::string, std::vector<std::string>>> broken = {
      {"missing.npy", {"missing.npy", "no such file"}},
      {"dir.npy", {"dir.npy", "not a regular file"}},
      {"fifo.npy", {"fifo.npy", "not a regular file"}},
      {"empty_file.npy", {"empty_file.npy", "too short"}},
      {"trunc_magic.npy", {"trunc_magic.npy", "truncated file"}},
      {"trunc_header.npy", {"trunc_header.npy", "truncated file: header says"}},
      {"trunc_data.npy", {"trunc_data.npy", "truncated file", "needs 96 data bytes, file has 93"}},
      {"extra_data.npy", {"extra_data.npy", "size mismatch"}},
      {"bad_magic.npy", {"bad_magic.npy", "bad magic"}},
      {"bad_version.npy", {"bad_version.npy", "version 9.0"}},
      {"bad_dict.npy", {"bad_dict.npy", "malformed header"}},
      {"missing_key.npy", {"missing_key.npy", "'shape'"}},
      {"neg_dim.npy", {"neg_dim.npy", "non-negative integers"}},
      {"dims65.npy", {"dims65.npy", "more than 64 dimensions"}},
      {"complex.npy", {"complex.npy", "unsupported dtype '<c16'"}},
      {"string.npy", {"string.npy", "unsupported dtype '|S4'"}},
      {"object.npy", {"object.npy", "unsupported dtype '|O'"}},
      {"huge_2p62_u1.npy", {"huge_2p62_u1.npy", "truncated file", "needs 4611686018427387904 data bytes, file has 0"}},
      {"huge_2p62_f8.npy", {"huge_2p62_f8.npy", "shape overflows"}},
      {"huge_product.npy", {"huge_product.npy", "shape overflows"}},
      {"huge_dim.npy", {"huge_dim.npy", "shape entry too large"}},
      {"sparse_1t.npy", {"sparse_1t.npy", "too large", "exceed the machine's"}},
  };
  auto id = [](std::string f) {
    std::string s;
    bool up = true;
    for (char ch : f.substr(0, f.find('.'))) {
      if (ch == '_') { up = true; continue; }
      s += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
      up = false;
    }
    return s;
  };
  for (const auto& [file, needles] : broken) {
    c.push_back(err("Spectral" + id(file), {"analyze", "spectral", "@/" + file}, needles));
    c.push_back(err("Bias" + id(file), {"analyze", "bias", "@/" + file}, needles));
    c.push_back(err("Align" + id(file), {"analyze", "align", "@/good.npy", "@/" + file}, needles));
  }
  bad_case unreadable = err("SpectralUnreadable", {"analyze", "spectral", "@/unreadable.npy"},
                            {"unreadable.npy", "cannot open file"});
  unreadable.as_nobody = true;
  c.push_back(unreadable);
  unreadable.name = "BiasUnreadable";
  unreadable.args = {"analyze", "bias", "@/unreadable.npy"};
  c.push_back(unreadable);

  const std::vector<bad_case> more = {
      // spectral: shapes and options.
      err("SpectralNanEntries", {"analyze", "spectral", "@/nan.npy"}, {"nan.npy", "NaN or infinite"}),
      err("SpectralSliceNotDividing", {"analyze", "spectral", "@/good.npy", "--rows-per-slice", "2"},
          {"good.npy", "3 rows do not split into slices of 2"}),
      err("SpectralSliceOnStack", {"analyze", "spectral", "@/stack.npy", "--cols-per-slice", "2"},
          {"stack.npy", "need a 2-d matrix", "2x3x4"}),
      err("SpectralSliceZero", {"analyze", "spectral", "@/good.npy", "--rows-per-slice", "0"}, {"--rows-per-slice"}),
      err("SpectralBothSlices", {"analyze", "spectral", "@/mat4x4.npy", "--rows-per-slice", "2", "--cols-per-slice", "2"},
          {"--cols-per-slice", "excludes"}),
      err("SpectralTolNan", {"analyze", "spectral", "@/good.npy", "--tol", "nan"}, {"--tol", "nan"}),
      err("SpectralTolTooLarge", {"analyze", "spectral", "@/good.npy", "--tol", "2"}, {"--tol"}),
      err("SpectralTolText", {"analyze", "spectral", "@/good.npy", "--tol", "tight"}, {"--tol"}),
      err("SpectralUnknownMethod", {"analyze", "spectral", "@/good.npy", "--method", "svd"}, {"--method", "svd"}),
      err("SpectralUnknownOption", {"analyze", "spectral", "@/good.npy", "--frobenius"}, {"--frobenius"}),
      err("SpectralNoFiles", {"analyze", "spectral"}, {"files"}),
      // Empty matrices are legal: their spectral norm is 0 (nothing is dropped: there is nothing).
      ok("SpectralEmptyRows", {"analyze", "spectral", "--json", "@/empty0x4.npy"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["shape"], json::array({0, 4}));
           EXPECT_EQ(j["spectral_norm"], 0.0);
         }),
      ok("SpectralEmptyColsExact", {"analyze", "spectral", "--json", "--exact", "@/empty3x0.npy"},
         [](const process_result& r) { EXPECT_EQ(only_json(r)["exact"]["spectral_norm"], 0.0); }),
      ok("SpectralEmpty1d", {"analyze", "spectral", "--json", "@/empty0.npy"},
         [](const process_result& r) { EXPECT_EQ(only_json(r)["spectral_norm"], 0.0); }),
      ok("SpectralHugeButEmpty", {"analyze", "spectral", "--json", "@/huge_2p62_zero.npy"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["shape"], json::array({4611686018427387904ull, 0}));
           EXPECT_EQ(j["spectral_norm"], 0.0);
         }),
      err("SpectralHugeStackOfEmpty", {"analyze", "spectral", "@/huge_stack_empty.npy"},
          {"huge_stack_empty.npy", "no values in a stack of 4611686018427387904 empty matrices"}),
      err("SpectralStackOfEmpty", {"analyze", "spectral", "@/stack_empty.npy"}, {"stack_empty.npy", "no values in a stack of 2"}),
      err("AlignHugeStackOfEmpty", {"analyze", "align", "@/huge_stack_empty.npy"}, {"huge_stack_empty.npy", "no values in a stack"}),
      ok("SpectralScalarIsAOneByOne", {"analyze", "spectral", "--json", "@/scalar.npy"},
         [](const process_result& r) { EXPECT_EQ(only_json(r)["spectral_norm"], 2.5); }),
      ok("SpectralIntegersAndFortranOrder", {"analyze", "spectral", "--json", "@/fortran.npy"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["shape"], json::array({3, 4}));
           EXPECT_TRUE(j["converged"].get<bool>());
         }),
      // bias: NaN/Inf are counted, never fatal, and never dropped silently.
      ok("BiasNanAndInfAreCounted", {"analyze", "bias", "--json", "@/nan.npy"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["n"], 9);
           EXPECT_EQ(j["nonfinite"], 3);
           EXPECT_EQ(j["bootstrap"]["n"], 9);
           EXPECT_TRUE(j["drift"]["cumulative_sum_final"].is_number()) << j["drift"].dump();
         }),
      ok("BiasAllNanIsCounted", {"analyze", "bias", "--json", "@/all_nan.npy"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["n"], 0);
           EXPECT_EQ(j["nonfinite"], 5);
         }),
      ok("BiasPerRowCountsEveryRow", {"analyze", "bias", "--json", "--per-row", "@/nan.npy"},
         [](const process_result& r) {
           const json j = only_json(r);
           ASSERT_EQ(j["groups"].size(), 3u);
           std::uint64_t n = 0;
           for (const auto& g : j["groups"]) n += g["n"].get<std::uint64_t>();
           EXPECT_EQ(n, 9u);
         }),
      err("BiasEmpty", {"analyze", "bias", "@/empty0.npy"}, {"empty0.npy", "no values"}),
      err("BiasEmpty2d", {"analyze", "bias", "--per-row", "@/empty3x0.npy"}, {"empty3x0.npy", "no values"}),
      err("BiasPerRowOn1d", {"analyze", "bias", "--per-row", "@/vec.npy"}, {"vec.npy", "--per-row needs a 2-d array"}),
      err("BiasConfidenceNan", {"analyze", "bias", "@/good.npy", "--confidence", "nan"}, {"--confidence", "nan"}),
      err("BiasConfidenceOne", {"analyze", "bias", "@/good.npy", "--confidence", "1"}, {"--confidence"}),
      err("BiasResamplesZero", {"analyze", "bias", "@/good.npy", "--resamples", "0"}, {"--resamples"}),
      err("BiasWarmupOne", {"analyze", "bias", "@/good.npy", "--warmup", "1"}, {"--warmup"}),
      err("BiasCusumKNan", {"analyze", "bias", "@/good.npy", "--cusum-k", "nan"}, {"--cusum-k", "nan"}),
      err("BiasCusumHInf", {"analyze", "bias", "@/good.npy", "--cusum-h", "inf"}, {"--cusum-h", "inf"}),
      err("BiasSeedNegative", {"analyze", "bias", "@/good.npy", "--seed", "-5"}, {"--seed", "'-5'"}),
      err("BiasBlockLengthText", {"analyze", "bias", "@/good.npy", "--block-length", "auto"}, {"--block-length"}),
      err("BiasBlockLengthNegative", {"analyze", "bias", "@/good.npy", "--block-length", "-1"}, {"--block-length", "'-1'"}),
      err("BiasSeedBeyond64Bits", {"analyze", "bias", "@/good.npy", "--seed", "18446744073709551616"}, {"--seed", "2^64"}),
      // align: shapes, counts, options.
      err("AlignOneMatrix", {"analyze", "align", "@/good.npy"}, {"at least two matrices"}),
      err("AlignNoFiles", {"analyze", "align"}, {"at least two matrices"}),
      err("AlignVector", {"analyze", "align", "@/good.npy", "@/vec.npy"}, {"vec.npy", "align needs matrices"}),
      err("AlignShapeMismatch", {"analyze", "align", "@/good.npy", "@/mat4x4.npy"}, {"mat4x4.npy", "4x4 differs", "3x4"}),
      err("AlignNanEntries", {"analyze", "align", "@/good.npy", "@/nan.npy"}, {"nan.npy", "NaN or infinite"}),
      ok("AlignEmptyMatrices", {"analyze", "align", "--json", "@/empty0x4.npy", "@/empty0x4.npy"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["count"], 2);
           EXPECT_EQ(j["shape"], json::array({0, 4}));
         }),
      err("AlignKZero", {"analyze", "align", "@/good.npy", "@/good_b.npy", "-k", "0"}, {"-k"}),
      err("AlignRank1TwoFiles", {"analyze", "align", "--rank1", "@/vec.npy", "@/good.npy"}, {"--rank1"}),
      err("AlignRank1WeightsNot1d", {"analyze", "align", "--rank1", "@/good.npy", "@/good.npy", "@/good.npy"},
          {"good.npy", "weights must be 1-d"}),
      err("AlignRank1URows", {"analyze", "align", "--rank1", "@/vec.npy", "@/good.npy", "@/good.npy"},
          {"good.npy", "U must be 4"}),
      err("AlignRank1Nan", {"analyze", "align", "--rank1", "@/vec3.npy", "@/nan.npy", "@/good.npy"},
          {"nan.npy", "NaN or infinite"}),
      err("AlignErrorGradShape", {"analyze", "align", "@/good.npy", "@/good_b.npy", "--error-grad", "@/mat4x4.npy"},
          {"mat4x4.npy", "error gradient has shape 4x4"}),
      err("AlignErrorGradNan", {"analyze", "align", "@/good.npy", "@/good_b.npy", "--error-grad", "@/nan.npy"},
          {"nan.npy", "NaN or infinite"}),
      err("AlignErrorGradMissing", {"analyze", "align", "@/good.npy", "@/good_b.npy", "--error-grad", "@/missing.npy"},
          {"missing.npy", "no such file"}),
      ok("AlignKLargerThanRank", {"analyze", "align", "--json", "@/good.npy", "@/good_b.npy", "-k", "100"},
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["count"], 2);
           EXPECT_EQ(j["steps"].size(), 2u);
         }),
      ok("AlignStackOfTwo", {"analyze", "align", "--json", "@/stack.npy"},
         [](const process_result& r) { EXPECT_EQ(only_json(r)["count"], 2); }),
  };
  c.insert(c.end(), more.begin(), more.end());
  return c;
}

// ------------------------------------------------------------------------------------------------
// tiebreak audit: safetensors files and .npy folders (docs/audit.md).
std::vector<bad_case> audit_cases() {
  auto a = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"audit"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  std::vector<bad_case> c = {
      err("NoInput", a({}), {"input"}),
      err("TwoInputs", a({"@/good.safetensors", "@/good.safetensors"}), {"good.safetensors"}),
      err("Missing", a({"@/missing.safetensors"}), {"missing.safetensors", "no such file"}),
      err("Fifo", a({"@/st_fifo.safetensors"}), {"st_fifo.safetensors", "not a regular file"}),
      err("DirectoryWithoutTensors", a({"@/empty_folder"}), {"missing tensor 'q'", "no q.npy in the folder"}),
      err("DirectoryNamedSafetensors", a({"@/st_dir.safetensors"}), {"missing tensor 'q'"}),
      err("Short", a({"@/st_short.safetensors"}), {"st_short.safetensors", "too short"}),
      err("TextFile", a({"@/st_text.safetensors"}), {"st_text.safetensors", "header length"}),
      err("HeaderLength2p62", a({"@/st_hlen_2p62.safetensors"}), {"st_hlen_2p62.safetensors", "header length 4611686018427387904"}),
      err("TruncatedHeader", a({"@/st_trunc_header.safetensors"}), {"st_trunc_header.safetensors", "truncated file: header says"}),
      err("TruncatedData", a({"@/st_trunc_data.safetensors"}), {"st_trunc_data.safetensors", "out of range (truncated file?"}),
      err("BrokenJson", a({"@/st_bad_json.safetensors"}), {"st_bad_json.safetensors", "not valid JSON"}),
      err("JsonArray", a({"@/st_array.safetensors"}), {"st_array.safetensors", "not a JSON object"}),
      err("EntryNotObject", a({"@/st_entry_number.safetensors"}), {"tensor 'q'", "not an object"}),
      err("NoDtype", a({"@/st_no_dtype.safetensors"}), {"tensor 'q'", "'dtype'"}),
      err("UnknownDtype", a({"@/st_unknown_dtype.safetensors"}), {"tensor 'q'", "unknown dtype 'F128'"}),
      err("NegativeDim", a({"@/st_neg_dim.safetensors"}), {"tensor 'q'", "non-negative integers"}),
      err("FractionalDim", a({"@/st_float_dim.safetensors"}), {"tensor 'q'", "non-negative integers"}),
      err("OffsetsReversed", a({"@/st_offsets_reversed.safetensors"}), {"tensor 'q'", "begin 16 > end 0"}),
      err("OffsetsPastEnd", a({"@/st_offsets_past_end.safetensors"}), {"tensor 'q'", "out of range"}),
      err("OffsetsDisagreeWithShape", a({"@/st_offsets_size.safetensors"}), {"tensor 'q'", "shape needs 16 bytes"}),
      err("Shape2p62Elements", a({"@/st_huge_2p62.safetensors"}), {"tensor 'q'", "shape needs 4611686018427387904 bytes"}),
      err("ShapeProductOverflows", a({"@/st_huge_product.safetensors"}), {"tensor 'q'", "shape overflows"}),
      err("DimBeyond64Bits", a({"@/st_huge_dim.safetensors"}), {"tensor 'q'", "non-negative integers"}),
      err("MetadataNotObject", a({"@/st_metadata_array.safetensors"}), {"__metadata__"}),
      err("DuplicateTensorName", a({"@/st_dup_key.safetensors"}), {"tensor 'q'", "more than once"}),
      err("IntegerDtype", a({"@/st_int_q.safetensors"}), {"tensor 'q'", "dtype I32 is not supported"}),
      err("ThreeDims", a({"@/st_q_3d.safetensors"}), {"tensor 'q'", "expected 4 dimensions"}),
      err("EmptyTensor", a({"@/st_q_empty.safetensors"}), {"tensor 'q'", "empty dimension"}),
      err("MissingK", a({"@/st_no_k.safetensors"}), {"missing tensor 'k'"}),
      err("DimMismatch", a({"@/st_k_dim.safetensors"}), {"tensor 'k'", "dim 8", "q has 4"}),
      err("HeadsDoNotDivide", a({"@/st_heads.safetensors"}), {"tensor 'k'", "3 key/value heads"}),
      err("SparseTerabyte", a({"@/st_sparse_1t.safetensors"}), {"tensor 'q'", "too large", "549755813888 elements"}),
      err("TooManyScores", a({"@/st_seq_limit.safetensors"}), {"seq_q 32768 x seq_k 16384", "too large"}),
      err("LseShape", a({"@/st_lse_shape.safetensors"}), {"tensor 'lse'", "must be [batch, heads, seq_q]"}),
      err("GradientWithoutDo", a({"@/st_dq_no_do.safetensors"}), {"tensor 'dq'", "'do'"}),
      err("NpyTruncated", a({"@/npy_q_trunc"}), {"q.npy", "truncated file", "tensor 'q'"}),
      err("NpyIntegerDtype", a({"@/npy_q_int"}), {"q.npy", "tensor 'q'", "dtype i4 is not supported"}),
      err("NpyFortranOrder", a({"@/npy_q_fortran"}), {"q.npy", "tensor 'q'", "Fortran-order"}),
      err("NpyTensorIsDirectory", a({"@/npy_q_dir"}), {"q.npy", "not a regular file", "tensor 'q'"}),
      err("NpyTensorIsFifo", a({"@/npy_q_fifo"}), {"q.npy", "not a regular file", "tensor 'q'"}),
      err("NpyShape2p62", a({"@/npy_q_huge"}), {"q.npy", "shape overflows"}),
      err("NpyBadMagic", a({"@/npy_v_bad_magic"}), {"v.npy", "bad magic", "tensor 'v'"}),
      // Options.
      err("UnknownLayout", a({"@/good.safetensors", "--layout", "sbhd"}), {"--layout", "sbhd"}),
      err("UnknownOutFormat", a({"@/good.safetensors", "--out-format", "bf17"}), {"--out-format", "bf17"}),
      err("ScaleNan", a({"@/good.safetensors", "--scale", "nan"}), {"--scale", "nan"}),
      err("ScaleInf", a({"@/good.safetensors", "--scale", "inf"}), {"--scale", "inf"}),
      err("ScaleText", a({"@/good.safetensors", "--scale", "auto"}), {"--scale"}),
      err("AlphaNan", a({"@/good.safetensors", "--alpha", "nan"}), {"--alpha", "nan"}),
      err("AlphaZero", a({"@/good.safetensors", "--alpha", "0"}), {"--alpha"}),
      err("AlphaTooLarge", a({"@/good.safetensors", "--alpha", "0.9"}), {"--alpha"}),
      err("MinEffectNegative", a({"@/good.safetensors", "--min-effect", "-1"}), {"--min-effect"}),
      err("MinEffectNan", a({"@/good.safetensors", "--min-effect", "nan"}), {"--min-effect", "nan"}),
      err("TieToleranceNan", a({"@/good.safetensors", "--tie-tolerance", "nan"}), {"--tie-tolerance", "nan"}),
      err("ThreadsNegative", a({"@/good.safetensors", "--threads", "-1"}), {"--threads", "'-1'"}),
      err("ThreadsText", a({"@/good.safetensors", "--threads", "many"}), {"--threads"}),
      err("OutputIsDirectory", a({"@/good.safetensors", "-q", "-o", "@/empty_folder"}), {"empty_folder", "cannot open for writing"}),
      err("OutputInMissingFolder", a({"@/good.safetensors", "-q", "-o", "@/nowhere/r.json"}), {"r.json", "cannot open for writing"}),
      err("UnknownOption", a({"@/good.safetensors", "--bias-only"}), {"--bias-only"}),
      // Legal but odd: non-finite values are counted in the report; the run succeeds.
      ok("NanAndInfInOutputAreCounted", a({"@/nan_o.safetensors", "--json", "-q"}),
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["summary"]["nonfinite"]["o"], 3);
           EXPECT_EQ(j["summary"]["excluded_rows"], 3);
           std::uint64_t rows = 0;
           for (const auto& h : j["heads"]) rows += h["rows"].get<std::uint64_t>() + h["excluded_rows"].get<std::uint64_t>();
           EXPECT_EQ(rows, 16u) << "every row is either used or counted as excluded";
         }),
      ok("NanInQueryIsCounted", a({"@/nan_q.safetensors", "--json", "-q"}),
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["summary"]["nonfinite"]["q"], 1);
           EXPECT_GE(j["summary"]["excluded_rows"].get<int>(), 1);
         }),
      ok("NpyFolderIsLegal", a({"@/good_npy", "--json", "-q"}),
         [](const process_result& r) { EXPECT_EQ(only_json(r)["heads"].size(), 2u); }),
  };
  bad_case unreadable = err("Unreadable", a({"@/st_unreadable.safetensors"}), {"st_unreadable.safetensors", "cannot open file"});
  unreadable.as_nobody = true;
  c.push_back(unreadable);
  return c;
}


// ------------------------------------------------------------------------------------------------
// tiebreak audit-gemm: safetensors files and .npy folders (docs/gemm-audit.md).
std::vector<bad_case> audit_gemm_cases() {
  auto a = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"audit-gemm"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  return {
      err("NoInput", a({}), {"input"}),
      err("Missing", a({"@/missing.safetensors"}), {"missing.safetensors", "no such file"}),
      err("NotSafetensors", a({"@/st_text.safetensors"}), {"st_text.safetensors", "header length"}),
      err("Truncated", a({"@/gemm_trunc.safetensors"}), {"gemm_trunc.safetensors", "out of range (truncated file?"}),
      err("MissingD", a({"@/gemm_no_d.safetensors"}), {"missing tensor 'd'"}),
      err("EmptyFolder", a({"@/empty_folder"}), {"missing tensor 'a'", "no a.npy in the folder"}),
      err("InnerDimsDisagree", a({"@/gemm_inner.safetensors"}), {"inner dimensions disagree", "K = 32", "K = 16"}),
      err("InnerDimsDisagreeColMajorB", a({"@/gemm_good.safetensors", "--b-layout", "col"}),
          {"inner dimensions disagree", "col-major", "K = 8"}),
      err("WrongShapeD", a({"@/gemm_d_shape.safetensors"}), {"tensor 'd'", "[4, 4]", "must be [M, N] = [4, 8]"}),
      err("ThreeDimsA", a({"@/gemm_a_3d.safetensors"}), {"tensor 'a'", "expected 2 dimensions"}),
      err("IntegerDtype", a({"@/gemm_a_i32.safetensors"}), {"tensor 'a'", "dtype I32 is not supported"}),
      err("TooLargeForMemory", a({"@/gemm_huge.safetensors"}), {"1048576 x 1048576 x 65536", "too large", "bytes, the machine has"}),
      err("NpyF8", a({"@/gemm_npy_f8"}), {"a.npy", "tensor 'a'", "dtype f8 is not supported"}),
      err("UnknownLayout", a({"@/gemm_good.safetensors", "--a-layout", "diag"}), {"--a-layout", "diag"}),
      err("TilesZero", a({"@/gemm_good.safetensors", "--tiles", "0"}), {"--tiles"}),
      err("AlphaNan", a({"@/gemm_good.safetensors", "--alpha", "nan"}), {"--alpha", "nan"}),
      err("OutputIsDirectory", a({"@/gemm_good.safetensors", "-q", "-o", "@/empty_folder"}), {"empty_folder", "cannot open for writing"}),
      ok("NanAndInfAreCounted", a({"@/gemm_nan.safetensors", "--json", "-q"}),
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["tensors"]["a"]["nonfinite"], 1);
           EXPECT_EQ(j["tensors"]["d"]["nonfinite"], 1);
           EXPECT_EQ(j["elements"]["excluded"], 9) << "row 0 (NaN in a) and d[3, 7] (Inf)";
           EXPECT_EQ(j["elements"]["above"].get<int>() + j["elements"]["below"].get<int>() + j["elements"]["exact"].get<int>(), 32 - 9);
         }),
      err("ScaleAShape", a({"@/gemm_scale_a_shape.safetensors"}), {"tensor 'scale_a' has shape [3]", "expected one element or one of [4], [4, 1]"}),
      err("ScaleBShape", a({"@/gemm_scale_b_shape.safetensors"}), {"tensor 'scale_b' has shape [2, 8]", "[1, 8]"}),
      err("ScaleBlockMismatch", a({"@/gemm_blockscale.safetensors"}), {"tensor 'scale_a' has shape [4, 2]", "[4, 1]", "scale block 128"}),
      err("ScaleBlockZero", a({"@/gemm_blockscale.safetensors", "--scale-block", "0"}), {"--scale-block"}),
      err("UnknownScheme", a({"@/gemm_good.safetensors", "--scheme", "mma.m16n8k16.bf16, promote every 3"}),
          {"--scheme", "is not a candidate"}),
      ok("RowAndColumnScalesAlongK", a({"@/gemm_rowscale.safetensors", "--json", "-q", "--identify", "--k-block", "16"}),
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["scales"]["a"], "outer");
           EXPECT_EQ(j["scales"]["b"], "outer");
           EXPECT_EQ(j["elements"]["exact"], 32);
           ASSERT_TRUE(j["identification"]["explained"].get<bool>());
           const json& k = j["along_k"];
           EXPECT_EQ(k["basis"], "measured");
           ASSERT_EQ(k["blocks"].size(), 2u) << "marks at K = 16 and 32";
           EXPECT_EQ(k["blocks"][1]["k_end"], 32);
           for (const json& b : k["blocks"]) EXPECT_EQ(b["max_abs_ulps"], 0.0) << "sums of small integers are exact";
         }),
      ok("BlockScalesAreIdentified", a({"@/gemm_blockscale.safetensors", "--json", "-q", "--identify", "--scale-block", "32"}),
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["scales"]["a"], "block");
           EXPECT_EQ(j["scales"]["block"], 32);
           EXPECT_EQ(j["elements"]["exact"], 32);
           ASSERT_TRUE(j["identification"]["explained"].get<bool>());
           std::set<int> promotes;
           for (const json& c : j["identification"]["candidates"]) promotes.insert(c["promote"].get<int>());
           EXPECT_EQ(promotes, (std::set<int>{32})) << "wgmma.k32: k = 32 times 2^i dividing the scale block 32";
           EXPECT_EQ(j["along_k"]["basis"], "measured");
           EXPECT_EQ(j["along_k"]["k_block"], 128);
         }),
      ok("ChosenSchemeIsModelled", a({"@/gemm_nan.safetensors", "--json", "-q", "--scheme", "mma.m16n8k16.bf16, no promotion, split-K 2 (in order)"}),
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["along_k"]["basis"], "modelled") << "D holds an Inf the scheme does not make";
           EXPECT_EQ(j["along_k"]["excluded"], 8) << "row 0 (NaN in a)";
           ASSERT_EQ(j["along_k"]["blocks"].size(), 2u) << "the end of each part";
           EXPECT_EQ(j["along_k"]["blocks"][1]["part_start"], 16);
         }),
      ok("ExactDIsReproducedByEveryScheme", a({"@/gemm_good.safetensors", "--json", "-q", "--identify"}),
         [](const process_result& r) {
           const json j = only_json(r);
           EXPECT_EQ(j["elements"]["exact"], 32);
           EXPECT_EQ(j["identification"]["elements"], 32);
           EXPECT_TRUE(j["identification"]["explained"].get<bool>());
         }),
  };
}

// ------------------------------------------------------------------------------------------------
// tiebreak attention: options, shapes and input files (docs/attention.md). --emulate throughout: the
// host twin on small shapes (the GPU path's own refusal is a CLI test, tests/cli/attention_cmd_test.cpp).
std::vector<bad_case> attention_cases() {
  auto a = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"attention", "--emulate", "-q", "-o", "@/attn_out.safetensors"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  auto probe = [] {
    std::ifstream in(fixture_dir() / "attn_out.probe.json");
    return json::parse(in);
  };
  return {
      err("MissingMode", {"attention", "--emulate", "--shape", "1,1,64,64", "-o", "@/attn_out.safetensors"}, {"--mode"}),
      err("MissingOutput", {"attention", "--emulate", "--mode", "bf16", "--shape", "1,1,64,64"}, {"--output"}),
      err("UnknownMode", a({"--mode", "fp16", "--shape", "1,1,64,64"}), {"--mode", "'fp16'", "bf16 fp32 debias stochastic"}),
      err("NeitherShapeNorInputs", a({"--mode", "bf16"}), {"--shape", "--inputs"}),
      err("BothShapeAndInputs", a({"--mode", "bf16", "--shape", "1,2,64,64", "--inputs", "@/attn_no_do.safetensors"}),
          {"exactly one"}),
      err("ShapeThreeParts", a({"--mode", "bf16", "--shape", "1,2,64"}), {"--shape", "B,H,S,D", "'1,2,64'"}),
      err("ShapeZero", a({"--mode", "bf16", "--shape", "1,0,64,64"}), {"--shape", "'1,0,64,64'"}),
      err("ShapeText", a({"--mode", "bf16", "--shape", "1,2,sixty,64"}), {"--shape", "'1,2,sixty,64'"}),
      err("ShapeNegative", a({"--mode", "bf16", "--shape", "1,-2,64,64"}), {"--shape"}),
      err("ShapeHuge", a({"--mode", "bf16", "--shape", "4294967296,1,64,64"}), {"--shape"}),
      err("ShapeBeyondMemory", a({"--mode", "bf16", "--shape", "65536,256,65536,128"}), {"--shape", "bytes of host memory"}),
      err("HeadDim32", a({"--mode", "bf16", "--shape", "1,2,64,32"}), {"--shape", "head dim 32", "64 and 128"}),
      err("HeadDim96", a({"--mode", "fp32", "--shape", "1,2,64,96"}), {"head dim 96", "64 and 128"}),
      err("KvHeadsDoNotDivide", a({"--mode", "bf16", "--shape", "1,4,64,64", "--kv-heads", "3"}),
          {"--kv-heads", "3 key/value heads for the 4 heads", "kv_heads must divide heads"}),
      err("KvHeadsZero", a({"--mode", "bf16", "--shape", "1,4,64,64", "--kv-heads", "0"}),
          {"--kv-heads", "0 key/value heads", "every size must be positive"}),
      err("KvHeadsWithInputs", a({"--mode", "bf16", "--inputs", "@/attn_no_do.safetensors", "--kv-heads", "1"}),
          {"--kv-heads", "only with --shape"}),
      err("BetaOne", a({"--mode", "debias", "--beta", "1", "--shape", "1,1,64,64"}), {"--beta", "greater than 1"}),
      err("BetaNan", a({"--mode", "debias", "--beta", "nan", "--shape", "1,1,64,64"}), {"--beta", "nan"}),
      err("BetaText", a({"--mode", "debias", "--beta", "two", "--shape", "1,1,64,64"}), {"--beta"}),
      err("DebiasShiftZero", a({"--mode", "debias", "--debias-max-shift", "0", "--shape", "1,1,64,64"}),
          {"--debias-max-shift", "between 1 and 100"}),
      err("DebiasShiftHuge", a({"--mode", "debias", "--debias-max-shift", "200", "--shape", "1,1,64,64"}),
          {"--debias-max-shift", "between 1 and 100"}),
      err("NearToleranceNegative", a({"--mode", "bf16", "--near-tolerance", "-0.5", "--shape", "1,1,64,64"}),
          {"--near-tolerance", "not negative"}),
      err("NearToleranceNan", a({"--mode", "bf16", "--near-tolerance", "nan", "--shape", "1,1,64,64"}), {"--near-tolerance"}),
      err("NearToleranceHugeForScale", a({"--mode", "bf16", "--near-tolerance", "1e38", "--scale", "1e-5", "--shape", "1,1,64,64"}),
          {"--near-tolerance", "scale"}),
      err("ScaleZero", a({"--mode", "bf16", "--scale", "0", "--shape", "1,1,64,64"}), {"--scale"}),
      err("ScaleInf", a({"--mode", "bf16", "--scale", "inf", "--shape", "1,1,64,64"}), {"--scale", "inf"}),
      err("ScaleUnderflows", a({"--mode", "bf16", "--scale", "1e-400", "--shape", "1,1,64,64"}), {"--scale", "'1e-400'"}),
      err("ScaleBeyondKernels", a({"--mode", "bf16", "--scale", "1e35", "--shape", "1,1,64,64"}),
          {"the scale must be finite and positive"}),
      err("TieShareAboveOne", a({"--mode", "bf16", "--tie-share", "1.5", "--shape", "1,1,64,64"}), {"--tie-share"}),
      err("TieShareNan", a({"--mode", "bf16", "--tie-share", "nan", "--shape", "1,1,64,64"}), {"--tie-share", "nan"}),
      err("SeedNegative", a({"--mode", "stochastic", "--seed", "-1", "--shape", "1,1,64,64"}), {"--seed", "'-1'"}),
      err("ThreadsText", a({"--mode", "bf16", "--threads", "all", "--shape", "1,1,64,64"}), {"--threads"}),
      err("UnknownLayout", a({"--mode", "bf16", "--inputs", "@/attn_no_do.safetensors", "--layout", "sbhd"}), {"--layout"}),
      err("OutputInMissingFolder",
          {"attention", "--emulate", "--mode", "bf16", "--shape", "1,1,64,64", "-o", "@/nowhere/x.safetensors"},
          {"x.safetensors", "cannot open for writing"}),
      err("OutputIsDirectory", {"attention", "--emulate", "--mode", "bf16", "--shape", "1,1,64,64", "-o", "@/empty_folder"},
          {"empty_folder", "cannot open for writing"}),
      // Input files: everything the audit's reader refuses, and what the kernels do not support.
      err("InputMissing", a({"--mode", "bf16", "--inputs", "@/missing.safetensors"}), {"missing.safetensors", "no such file"}),
      err("InputTruncated", a({"--mode", "bf16", "--inputs", "@/st_trunc_data.safetensors"}), {"st_trunc_data.safetensors"}),
      err("InputBrokenJson", a({"--mode", "bf16", "--inputs", "@/st_bad_json.safetensors"}), {"not valid JSON"}),
      err("InputIntegerDtype", a({"--mode", "bf16", "--inputs", "@/st_int_q.safetensors"}), {"tensor 'q'", "dtype I32"}),
      err("InputThreeDims", a({"--mode", "bf16", "--inputs", "@/st_q_3d.safetensors"}), {"tensor 'q'", "4 dimensions"}),
      err("InputMissingK", a({"--mode", "bf16", "--inputs", "@/st_no_k.safetensors"}), {"missing tensor 'k'"}),
      err("InputHeadsDoNotDivide", a({"--mode", "bf16", "--inputs", "@/st_heads.safetensors"}), {"tensor 'k'", "3 key/value heads"}),
      err("InputHeadDim4", a({"--mode", "bf16", "--inputs", "@/good.safetensors"}), {"good.safetensors", "head dim 4", "64 and 128"}),
      err("InputHeadDim32", a({"--mode", "bf16", "--inputs", "@/attn_dim32.safetensors"}), {"attn_dim32.safetensors", "head dim 32"}),
      err("InputDimVDiffers", a({"--mode", "bf16", "--inputs", "@/attn_dim_v.safetensors"}),
          {"attn_dim_v.safetensors", "head dim 64, v has 128", "dim_v == dim"}),
      err("InputNotBf16", a({"--mode", "bf16", "--inputs", "@/attn_q_not_bf16.safetensors"}),
          {"attn_q_not_bf16.safetensors", "tensor 'q'", "not a bf16 value", "element 7", "0.1"}),
      err("InputDoShape", a({"--mode", "bf16", "--inputs", "@/attn_do_shape.safetensors"}),
          {"tensor 'do'", "[1, 2, 64, 32]", "must be [batch, heads, seq_q, dim_v] = [1, 2, 64, 64]"}),
      err("InputNpyTruncated", a({"--mode", "bf16", "--inputs", "@/npy_q_trunc"}), {"q.npy", "truncated file"}),
      // Legal: no `do` (drawn from the seed, said on stderr), NaN/Inf in the inputs (counted).
      ok("InputWithoutDo", {"attention", "--emulate", "--mode", "bf16", "--inputs", "@/attn_no_do.safetensors", "-o",
                            "@/attn_out.safetensors"},
         [probe](const process_result& r) {
           EXPECT_THAT(r.err, HasSubstr("no 'do': dO drawn from the seed"));
           EXPECT_EQ(probe()["inputs"]["do"], "drawn");
           EXPECT_EQ(lines_of(r.out).size(), 3u) << "the per-head table: header and 2 heads";
         }),
      ok("InputNanAndInfAreCounted", a({"--mode", "fp32", "--inputs", "@/attn_nan_k.safetensors"}),
         [probe](const process_result&) {
           const json j = probe();
           EXPECT_EQ(j["inputs"]["nonfinite"]["k"], 2);
           EXPECT_EQ(j["inputs"]["nonfinite"]["q"], 0);
           EXPECT_EQ(j["heads"].size(), 2u);
           EXPECT_EQ(j["heads"][0]["delta_error"]["count"].get<int>() + j["heads"][1]["delta_error"]["count"].get<int>(),
                     128) << "every row is accounted for";
         }),
  };
}

// ------------------------------------------------------------------------------------------------
class BadInput : public testing::TestWithParam<bad_case> {};

TEST_P(BadInput, Contract) {
  const bad_case& c = GetParam();
  std::vector<std::string> args;
  for (const std::string& s : c.args) args.push_back(s.rfind("@/", 0) == 0 ? (fixture_dir() / s.substr(2)).string() : s);
  const process_result r = tiebreak::test::run_tiebreak(args, std::chrono::seconds(20), c.as_nobody);
  ASSERT_FALSE(r.timed_out) << "hang: " << describe(r);
  ASSERT_EQ(r.signal, 0) << "crash: " << describe(r);
  ASSERT_EQ(r.exit_code, c.exit_code) << describe(r) << "\nstdout: " << r.out.substr(0, 400);
  if (c.exit_code == 2) {
    EXPECT_EQ(r.out, "") << "an error prints nothing on stdout";
    const auto lines = lines_of(r.err);
    ASSERT_EQ(lines.size(), 1u) << r.err;
    EXPECT_THAT(lines[0], StartsWith("tiebreak: error: "));
    for (const std::string& n : c.needles) EXPECT_THAT(lines[0], HasSubstr(n));
  }
  if (c.check) c.check(r);
}

std::string case_name(const testing::TestParamInfo<bad_case>& i) { return i.param.name; }

INSTANTIATE_TEST_SUITE_P(Top, BadInput, testing::ValuesIn(top_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Round, BadInput, testing::ValuesIn(round_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Add, BadInput, testing::ValuesIn(add_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Mma, BadInput, testing::ValuesIn(mma_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Demo, BadInput, testing::ValuesIn(demo_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Analyze, BadInput, testing::ValuesIn(analyze_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Audit, BadInput, testing::ValuesIn(audit_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Attention, BadInput, testing::ValuesIn(attention_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(AuditGemm, BadInput, testing::ValuesIn(audit_gemm_cases()), case_name);

}  // namespace
