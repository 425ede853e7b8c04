// SPDX-License-Identifier: Apache-2.0
/// @file Tests of `tiebreak mma` (src/cli/mma_cmd.cpp) through the built binary.
#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tiebreak/emu/mma.hpp"

namespace {

using namespace tiebreak;

struct run_result {
  int status = -1;
  std::string out;
};

run_result run(const std::string& args) {
  run_result r;
  const std::string cmd = std::string(TIEBREAK_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) r.out += buf.data();
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(MmaCli, NegativeSpecialsAreValues) {
  // "-inf" alone after --a/--b/--c is a value, as in `tiebreak round` (main() shields it from CLI11).
  const run_result r = run("mma --instr mma.m16n8k16.bf16 --c 0 --a -inf --b 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["bits"], "0xff800000");
  const run_result c = run("mma --instr mma.m16n8k16.bf16 --c -inf --a 1 --b 1 --json");
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(nlohmann::json::parse(c.out)["bits"], "0xff800000");
}

TEST(MmaCli, OneElementJson) {
  // C = 1 + 1 * 2^-23: exact in every model with >= 23 alignment bits: 0x3f800001.
  const run_result r = run("mma --instr mma.m16n8k16.bf16 --c 1 --a 1 --b 0x1p-23 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bits"], "0x3f800001");
  EXPECT_DOUBLE_EQ(j["value"].get<double>(), 1.00000011920928955078125);
  EXPECT_EQ(j["exact"], "1.00000011920928955078125");
  EXPECT_EQ(j["error"], "0");
}

TEST(MmaCli, AgreesWithTheModel) {
  // Several values, missing entries zero, a value that rounds into bf16 (0.1).
  const run_result r = run("mma --instr wgmma.k16.bf16 --c 0x1p20 --a 3,-0.1,0x1.8p-9 --b 0x1p-4,7,1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const emu::mma_model& m = emu::mma_entry(emu::mma_instr::wgmma_k16_bf16).model;
  std::vector<std::uint64_t> a(16, 0), b(16, 0);
  a[0] = 0x4040;  // 3
  a[1] = 0xbdcd;  // -0.1 rounded to bf16 (rne): -0.10009765625
  a[2] = 0x3b40;  // 1.5 * 2^-9
  b[0] = 0x3d80;  // 2^-4
  b[1] = 0x40e0;  // 7
  b[2] = 0x3f80;  // 1
  const std::uint64_t want = emu::mma_dot(m, 0x49800000, a.data(), b.data()).bits;
  char hex[24];  // "0x" and up to 16 digits: a 64-bit word
  std::snprintf(hex, sizeof hex, "0x%08llx", static_cast<unsigned long long>(want));
  EXPECT_EQ(j["bits"], hex);
  EXPECT_EQ(j["a"][1], "0xbdcd");
  EXPECT_FALSE(j["notes"].empty());  // 0.1 is not exact in bf16
}

TEST(MmaCli, ListNamesEveryInstructionAndItsStatus) {
  const run_result r = run("mma --list");
  ASSERT_EQ(r.status, 0) << r.out;
  for (emu::mma_instr i : emu::all_mma_instrs) EXPECT_NE(r.out.find(std::string(emu::mma_instr_name(i))), std::string::npos);
  EXPECT_NE(r.out.find("align_bits="), std::string::npos);
  for (const auto& e : emu::mma_models) {
    if (emu::mma_unverified(e) != 0) {
      EXPECT_NE(r.out.find("status: unverified"), std::string::npos);
    }
  }
  const run_result js = run("mma --list --json");
  ASSERT_EQ(js.status, 0);
  EXPECT_EQ(nlohmann::json::parse(js.out).size(), 8u);
}

// An f32-output row: out_round (never pinned) has no observable effect, every parameter that has one
// was pinned by the hardware runs: no warning, and the parameter is named as without effect.
TEST(MmaCli, F32OutputRowIsNotUnverified) {
  ASSERT_NE(emu::mma_entry(emu::mma_instr::mma_m16n8k16_bf16).unknown & emu::mma_param_out_round, 0u);
  const run_result t = run("mma --instr mma.m16n8k16.bf16 --c 1 --a 1 --b 1");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_EQ(t.out.find("UNVERIFIED"), std::string::npos) << t.out;
  const run_result r = run("mma --instr mma.m16n8k16.bf16 --c 1 --a 1 --b 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["model"]["unverified"].empty()) << r.out;
  EXPECT_EQ(j["model"]["no_observable_effect"], nlohmann::json::array({"out_round"})) << r.out;
  const run_result l = run("mma --list");
  EXPECT_NE(l.out.find("mma.m16n8k16.bf16"), std::string::npos);
  const std::string row = l.out.substr(l.out.find("mma.m16n8k16.bf16"));
  EXPECT_EQ(row.find("status: verified on hardware (no observable effect: out_round);"), row.find("status:")) << row;
}

// FP8 wgmma: ftz was not pinned and does change results (a subnormal C): the warning stays, naming
// only ftz (out_round and overflow_to_inf cannot show there).
TEST(MmaCli, Fp8RowKeepsTheWarningForFtz) {
  const run_result t = run("mma --instr wgmma.k32.e4m3 --c 1 --a 1 --b 1");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("[UNVERIFIED on hardware]"), std::string::npos) << t.out;
  const run_result r = run("mma --instr wgmma.k32.e4m3 --c 1 --a 1 --b 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["unverified"], nlohmann::json::array({"ftz"})) << r.out;
  EXPECT_EQ(j["model"]["no_observable_effect"], nlohmann::json::array({"out_round", "overflow_to_inf"})) << r.out;
}

TEST(MmaCli, Errors) {
  EXPECT_EQ(run("mma --instr mma.m16n8k32.bf16 --a 1 --b 1").status, 2);
  EXPECT_EQ(run("mma --instr mma.m16n8k8.tf32 --a 1,2,3,4,5,6,7,8,9 --b 1").status, 2);  // k = 8
  EXPECT_EQ(run("mma --instr mma.m16n8k16.bf16 --arch sm80 --a 1 --b 1").status, 2);
  EXPECT_EQ(run("mma --instr mma.m16n8k16.bf16 --a abc --b 1").status, 2);
}

TEST(MmaCli, SpecialsText) {
  const run_result r = run("mma --instr mma.m16n8k16.f16.f16out --c 0 --a inf --b 0");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("0x7fff"), std::string::npos) << r.out;  // canonical f16 NaN
  EXPECT_NE(r.out.find("undefined"), std::string::npos) << r.out;
}

}  // namespace
