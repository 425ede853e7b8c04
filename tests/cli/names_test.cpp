// SPDX-License-Identifier: Apache-2.0
/// @file The names the CLI accepts and prints are the core's tables (fp/names.hpp): every format,
/// mode and instruction of the tables is accepted where such a name is asked for, and the
/// "expected one of" lists and help texts print exactly the tables, so the lists cannot drift.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "run_cli.hpp"
#include "tiebreak/emu/mma.hpp"
#include "tiebreak/fp/names.hpp"

namespace {

using tiebreak::test::lines_of;
using tiebreak::test::run_cli;
namespace tb = tiebreak;

std::string name_of(tb::format_id id) { return std::string(tb::desc_of(id).name); }
std::string name_of(tb::round_mode m) { return std::string(tb::to_string(m)); }

void expect_accepted(const std::vector<std::string>& args) {
  const auto r = run_cli(args);
  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
}

/// The one error line for an unknown name, with the whole list.
void expect_rejected_listing(const std::vector<std::string>& args, const std::string& line) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2);
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0], line);
}

TEST(CliNames, EveryFormatOfTheTableIsAccepted) {
  for (tb::format_id id : tb::all_format_ids) {
    const std::string f = name_of(id);
    expect_accepted({"round", "--to", f, "1"});
    expect_accepted({"round", "--to", "f64", "--from", f, "bits:0x0"});
    expect_accepted({"add", "--format", f, "1", "1"});
    expect_accepted({"add", "--format", "bf16", "--accumulate", f, "1", "1"});
  }
}

TEST(CliNames, EveryModeOfTheTableIsAccepted) {
  for (tb::round_mode m : tb::all_round_modes) {
    expect_accepted({"round", "--to", "bf16", "--mode", name_of(m), "1.00390625"});
    expect_accepted({"add", "--format", "bf16", "--mode", name_of(m), "1", "0.00390625"});
  }
}

TEST(CliNames, EveryInstructionOfTheTableIsAccepted) {
  for (tb::emu::mma_instr i : tb::emu::all_mma_instrs)
    expect_accepted({"mma", "--instr", std::string(tb::emu::mma_instr_name(i)), "--a", "1", "--b", "1"});
}

TEST(CliNames, ErrorsListExactlyTheTables) {
  const std::string formats(tb::format_names.view()), modes(tb::round_mode_names.view());
  expect_rejected_listing({"round", "--to", "bf17", "1"},
                          "tiebreak: error: --to: unknown format 'bf17' (expected one of " + formats + ")");
  expect_rejected_listing({"round", "--to", "bf16", "--from", "BF16", "bits:0x0"},
                          "tiebreak: error: --from: unknown format 'BF16' (expected one of " + formats + ")");
  expect_rejected_listing({"add", "--format", "bf16", "--accumulate", "f128", "1", "2"},
                          "tiebreak: error: --accumulate: unknown format 'f128' (expected one of " + formats + ")");
  expect_rejected_listing({"round", "--to", "bf16", "--mode", "RNE", "1"},
                          "tiebreak: error: --mode: unknown rounding mode 'RNE' (expected one of " + modes + ")");
  expect_rejected_listing({"add", "--format", "bf16", "--mode", "nearest", "1", "2"},
                          "tiebreak: error: --mode: unknown rounding mode 'nearest' (expected one of " + modes + ")");
  expect_rejected_listing(
      {"mma", "--instr", "mma.m16n8k32.bf16"},
      "tiebreak: error: --instr: unknown instruction 'mma.m16n8k32.bf16' (expected one of " +
          std::string(tb::joined_names<tb::emu::all_mma_instrs, tb::emu::mma_instr_name>.view()) + ")");
}

TEST(CliNames, HelpListsTheTables) {
  const auto round = run_cli({"round", "--help"});
  EXPECT_NE(round.out.find("Target format: " + std::string(tb::format_names.view())), std::string::npos) << round.out;
  EXPECT_NE(round.out.find("Rounding mode: " + std::string(tb::round_mode_names.view())), std::string::npos) << round.out;
  const auto add = run_cli({"add", "--help"});
  EXPECT_NE(add.out.find("Rounding mode of every step: " + std::string(tb::round_mode_names.view())), std::string::npos)
      << add.out;
  const auto mma = run_cli({"mma", "--help"});
  EXPECT_NE(mma.out.find("Instruction: " + std::string(tb::joined_names<tb::emu::all_mma_instrs, tb::emu::mma_instr_name>.view())),
            std::string::npos)
      << mma.out;
}

}  // namespace
