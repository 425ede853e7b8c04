// SPDX-License-Identifier: Apache-2.0
/// @file Tests of `tiebreak add` (src/cli/add_cmd.cpp), run as a subprocess.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "run_cli.hpp"
#include "tiebreak/emu/sum.hpp"
#include "tiebreak/fp/random.hpp"

namespace {

using tiebreak::test::json_lines;
using tiebreak::test::run_cli;

nlohmann::json add_json(std::vector<std::string> args) {
  args.insert(args.begin(), {"add", "--json"});
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto js = json_lines(r.out);
  EXPECT_EQ(js.size(), 1u) << r.out;
  return js.empty() ? nlohmann::json{} : js[0];
}

// The tie example: 1 + 2^-8 is a bf16 tie; the tail 2^-22 breaks it only if it survives.
const std::vector<std::string> tie_values = {"1", "0.00390625", "0x1p-22"};

TEST(AddCmd, SequentialBf16RoundsTheTieToEvenAndLosesTheTail) {
  std::vector<std::string> args = {"--format", "bf16"};
  args.insert(args.end(), tie_values.begin(), tie_values.end());
  const auto j = add_json(args);
  EXPECT_EQ(j["bits"], "0x3f80");
  EXPECT_EQ(j["accumulate"], "bf16");
  EXPECT_EQ(j["exact"], "1.0039064884185791015625");  // 1 + 2^-8 + 2^-22
  ASSERT_EQ(j["steps"].size(), 5u);                   // 3 inputs, 2 additions
  const auto& s1 = j["steps"][3];
  EXPECT_EQ(s1["kind"], "add");
  EXPECT_EQ(s1["exact"], "1.00390625");
  EXPECT_EQ(s1["bits"], "0x3f80");
  EXPECT_EQ(s1["error_ulps"], -0.5);
  EXPECT_EQ(s1["align_exp_diff"], 8);
  EXPECT_EQ(s1["align_lost_bits"], 1);            // 2^-8 lies one bit below bf16's lsb 2^-7
  EXPECT_EQ(s1["align_error"], "-0.00390625");
  EXPECT_EQ(s1["round_error"], "0");              // the tie was rounded down: all of the loss is alignment
  const auto& s2 = j["steps"][4];
  EXPECT_EQ(s2["exact"], "1.0000002384185791015625");
  EXPECT_EQ(s2["bits"], "0x3f80");
  EXPECT_EQ(s2["direction"], "toward");
}

TEST(AddCmd, F32AccumulationCarriesTheTailAndBreaksTheTieAway) {
  std::vector<std::string> args = {"--format", "bf16", "--accumulate", "f32"};
  args.insert(args.end(), tie_values.begin(), tie_values.end());
  const auto j = add_json(args);
  EXPECT_EQ(j["bits"], "0x3f81");
  ASSERT_EQ(j["steps"].size(), 6u);  // 3 inputs, 2 exact f32 additions, 1 output rounding
  EXPECT_EQ(j["steps"][3]["bits"], "0x3f808000");
  EXPECT_EQ(j["steps"][3]["error"], "0");
  EXPECT_EQ(j["steps"][4]["bits"], "0x3f808002");
  EXPECT_EQ(j["steps"][4]["exact"], "1.0039064884185791015625");
  EXPECT_EQ(j["steps"][5]["kind"], "output");
  EXPECT_EQ(j["steps"][5]["direction"], "away");
  EXPECT_EQ(j["error"], "0.0039060115814208984375");  // 1.0078125 - (1 + 2^-8 + 2^-22)
  EXPECT_EQ(j["error_ulps"], 0.499969482421875);
}

TEST(AddCmd, HumanOutputPrintsEveryStepsExactValue) {
  const auto r = run_cli({"add", "--format", "bf16", "--accumulate", "f32", "1", "0.00390625", "0x1p-22"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("exact      1.00390625\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exact      1.0039064884185791015625\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: 0x3f81 = 1.0078125"), std::string::npos) << r.out;
  const auto s = run_cli({"add", "--format", "bf16", "1", "0.00390625"});
  EXPECT_NE(s.out.find("1 bit below the result lsb (0b1) = 0.00390625, alignment error -0.00390625"), std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("error -0.00390625 = -0.5 ulp (toward zero)"), std::string::npos) << s.out;
}

TEST(AddCmd, InputsAreReadInTheFormatAndBitsAreEncodingsOfIt) {
  const auto j = add_json({"--format", "bf16", "0.1", "bits:0x3f80"});
  EXPECT_EQ(j["steps"][0]["bits"], "0x3dcd");  // 0.1 rounded to bf16 once
  EXPECT_EQ(j["steps"][0]["direction"], "away");
  EXPECT_EQ(j["steps"][1]["bits"], "0x3f80");
  EXPECT_EQ(j["steps"][2]["exact"], "1.10009765625");
  EXPECT_EQ(j["bits"], "0x3f8d");  // 1.10009765625 -> 1.1015625 (up: 0.2 ulp vs 0.8)
}

TEST(AddCmd, DirectedModesAndSpecials) {
  EXPECT_EQ(add_json({"--format", "bf16", "--mode", "rz", "1", "0.00390625", "0.00390625"})["bits"], "0x3f80");
  EXPECT_EQ(add_json({"--format", "bf16", "--mode", "ru", "1", "0x1p-30"})["bits"], "0x3f81");
  EXPECT_EQ(add_json({"--format", "bf16", "inf", "-inf"})["bits"], "0x7fff");
  EXPECT_EQ(add_json({"--format", "bf16", "1", "nan"})["value"], "nan");
  EXPECT_EQ(add_json({"--format", "e4m3", "448", "16"})["bits"], "0x7e");  // 464: tie of 448 and 480, even 448
  EXPECT_EQ(add_json({"--format", "e4m3", "448", "32"})["bits"], "0x7f");  // 480: beyond 448, NaN (no Inf)
  EXPECT_EQ(add_json({"--format", "e4m3", "448", "40"})["bits"], "0x7f");  // 488 -> 480: overflow, NaN
  EXPECT_EQ(add_json({"--format", "e4m3", "--saturate", "448", "448"})["bits"], "0x7e");
  EXPECT_EQ(add_json({"--format", "bf16", "-1", "-inf"})["bits"], "0xff80");
}

TEST(AddCmd, StochasticRoundingIsReproducibleWithASeed) {
  const std::vector<std::string> args = {"--format", "bf16", "--mode", "sr", "--seed", "3", "1", "0.00390625", "0.00390625"};
  EXPECT_EQ(add_json(args).dump(), add_json(args).dump());
}

// The sr words are the documented ones (docs/cli.md): the sum is emu::sum with
// sr_source::philox(seed, 1), a fresh word per addition. 1 + 2^-8 + 2^-8 in bf16: each addition is
// a tie, so its direction is the top bit of its word; over 16 seeds both results appear.
TEST(AddCmd, StochasticRoundingDrawsPhiloxWordsPerStep) {
  const std::uint64_t xs[] = {0x3f80, 0x3b80, 0x3b80};
  int up = 0, down = 0;
  for (std::uint64_t seed = 0; seed < 16; ++seed) {
    const auto j = add_json({"--format", "bf16", "--mode", "sr", "--seed", std::to_string(seed), "1", "0.00390625", "0.00390625"});
    tiebreak::emu::sum_config c;
    c.accum = tiebreak::formats::bf16;
    c.accum_rounding = tiebreak::sr_t{0};
    c.output_rounding = tiebreak::sr_t{0};
    c.random = tiebreak::sr_source::philox(seed, 1);
    const std::uint64_t want = tiebreak::emu::sum(c, xs, 3, tiebreak::emu::no_steps{}).bits;
    EXPECT_EQ(j["bits"], want == 0x3f80 ? "0x3f80" : (want == 0x3f81 ? "0x3f81" : "0x3f82")) << seed;
    // The first addition (step n + 0 = 3 of stream 1) rounds up iff its word's top bit is set.
    const bool first_up = (tiebreak::philox_word(seed, 1, 3) >> 31) != 0;
    EXPECT_EQ(j["steps"][3]["bits"], first_up ? "0x3f81" : "0x3f80") << seed;
    (want == 0x3f80 ? down : up) += 1;
  }
  EXPECT_GT(up, 0);
  EXPECT_GT(down, 0);
}

}  // namespace
