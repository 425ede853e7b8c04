// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the identification logic (tiebreak/host/mma_identify.hpp) with a model as "hardware".
///
/// If the designed cases are any good, feeding them the outputs of a known model must leave that
/// model among the consistent hypotheses and pin down the parameters the cases are meant to decide.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/emu/mma_gen.hpp"
#include "tiebreak/host/mma_identify.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

/// The hypothesis grid of `secret`; in the quick test level only the part that shares the secret's
/// daz, ftz and overflow_to_inf (1/8 of it: those three flags have their own cases, and the full
/// grid costs minutes on two cores).
std::vector<mma_hyp> grid_for(const mma_model& secret) {
  std::vector<mma_hyp> hs = mma_hypotheses(secret);
  if (TIEBREAK_TEST_LEVEL_FULL) return hs;
  std::erase_if(hs, [&](const mma_hyp& h) {
    return h.daz != secret.daz || h.ftz != secret.ftz || h.overflow_to_inf != secret.overflow_to_inf;
  });
  return hs;
}

/// Runs the elimination with `secret` standing in for the hardware; returns the consistent values
/// of each parameter.
std::vector<std::vector<std::string>> identify(const mma_model& secret, std::size_t& survivors, bool& secret_kept) {
  mma_eliminator el(secret, grid_for(secret), 0);
  // All designed cases in one batch (the identification program feeds them one by one to say what each rules out;
  // the survivors are the same).
  // Interleaved (a fixed stride through the list) so that a wrong hypothesis meets a case of every
  // family early and is dropped after a few evaluations instead of after a whole family.
  const auto ordered = mma_identify_cases(secret);
  std::vector<mma_case> cases;
  const std::size_t nc = ordered.size();
  std::size_t stride = 97;
  while (std::gcd(stride, nc) != 1) ++stride;
  for (std::size_t i = 0; i < nc; ++i) cases.push_back(ordered[(i * stride) % nc]);
  std::vector<std::uint64_t> hw_cases;
  for (const mma_case& c : cases) hw_cases.push_back(mma_dot(secret, c.c, c.a.data(), 1, c.b.data(), 1).bits);
  el.feed_batch(cases, hw_cases);
  for (std::uint64_t t = 0; t < 16; ++t) {
    std::vector<mma_case> batch;
    std::vector<std::uint64_t> hw;
    for (int r = 0; r < 8; ++r) {
      mma_case cs;
      cs.c = mma_gen_element(secret, 1, t, mma_operand_kind::c, r, r % 8);
      for (int i = 0; i < secret.k; ++i) {
        cs.a.push_back(mma_gen_element(secret, 1, t, mma_operand_kind::a, r, i));
        cs.b.push_back(mma_gen_element(secret, 1, t, mma_operand_kind::b, i, r % 8));
      }
      hw.push_back(mma_dot(secret, cs.c, cs.a.data(), 1, cs.b.data(), 1).bits);
      batch.push_back(cs);
    }
    el.feed_batch(batch, hw);
  }
  survivors = el.consistent();
  const mma_hyp want = mma_hyp_of(secret);
  const auto s = el.survivors();
  secret_kept = std::any_of(s.begin(), s.end(), [&](const mma_hyp& h) {
    for (int bit = 0; bit < mma_param_count; ++bit)
      if (mma_hyp_value(h, bit) != mma_hyp_value(want, bit)) return false;
    return true;
  });
  return el.values_of_consistent();
}

void expect_decided(const std::vector<std::vector<std::string>>& v, const mma_model& secret, int bit) {
  const std::string want = mma_hyp_value(mma_hyp_of(secret), bit);
  ASSERT_EQ(v[static_cast<std::size_t>(bit)].size(), 1u) << mma_param_name(bit) << " undecided";
  EXPECT_EQ(v[static_cast<std::size_t>(bit)][0], want) << mma_param_name(bit);
}

TEST(MmaIdentify, RecoversTableModels) {
  for (mma_instr id : all_mma_instrs) {
    // Quick level: one mma.sync, the f16-accumulate one and one FP8 wgmma (the others share their
    // case generator and grid shape). Smoke level (the sanitizer build, where the three took 51 s
    // of CPU, the FP8 wgmma 38 s of it): the bf16 mma.sync alone; RecoversOtherParameterSets runs
    // FP8 wgmma and tf32 models there.
    if (!TIEBREAK_TEST_LEVEL_FULL && id != mma_instr::mma_m16n8k16_bf16 && id != mma_instr::mma_m16n8k16_f16_f16out &&
        id != mma_instr::wgmma_k32_e4m3)
      continue;
    if (TIEBREAK_TEST_LEVEL_SMOKE && id != mma_instr::mma_m16n8k16_bf16) continue;
    const mma_model& secret = mma_entry(id).model;
    std::size_t n = 0;
    bool kept = false;
    const auto v = identify(secret, n, kept);
    EXPECT_TRUE(kept) << mma_instr_name(id);
    EXPECT_GE(n, 1u);
    // group, c_order, align_bits, align_round, acc_fmt, positive_zero
    for (int bit : {0, 2, 4, 5, 8, 12}) expect_decided(v, secret, bit);
  }
}

TEST(MmaIdentify, RecoversOtherParameterSets) {
  // Alternatives the hardware might show: smaller groups, two's-complement truncation, rounding at
  // the normalisation, the lead-bit reference, C in the last step.
  mma_model a = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  a.group = 8;
  a.align_bits = 27;
  a.align_round = round_mode::rd;
  a.step_round = round_mode::rne;
  a.exp_ref = mma_exp_ref::lead;
  mma_model b = mma_entry(mma_instr::mma_m16n8k8_tf32).model;
  b.group = 4;
  b.align_bits = 23;
  b.c_order = mma_c_order::last;
  b.daz = true;
  b.positive_zero = false;
  // FP8 with a wider accumulator and rounding at the normalisation.
  mma_model c = mma_entry(mma_instr::wgmma_k32_e5m2).model;
  c.acc_fmt = mma_acc_format(16);
  c.align_bits = 15;
  c.step_round = round_mode::rne;
  for (const mma_model& secret : {a, b, c}) {
    std::size_t n = 0;
    bool kept = false;
    const auto v = identify(secret, n, kept);
    EXPECT_TRUE(kept);
    for (int bit : {0, 1, 2, 3, 4, 5, 6, 8, 9, 12}) expect_decided(v, secret, bit);
  }
}

TEST(MmaIdentify, CasesAreExactInTheirFormats) {
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    const auto cases = mma_identify_cases(m);
    EXPECT_GT(cases.size(), 100u) << mma_instr_name(id);
    for (const mma_case& c : cases) {
      ASSERT_EQ(c.a.size(), static_cast<std::size_t>(m.k));
      ASSERT_EQ(c.b.size(), static_cast<std::size_t>(m.k));
      for (auto x : c.a) ASSERT_EQ(x & ~m.a_fmt.encoding_mask(), 0u) << c.what;
    }
  }
}

TEST(MmaIdentify, TableRowRoundTrips) {
  const mma_model& m = mma_entry(mma_instr::wgmma_k32_e4m3).model;
  const std::string row = mma_table_row(mma_instr::wgmma_k32_e4m3, m, mma_param_step_round | mma_param_ftz, "x");
  EXPECT_NE(row.find("mma_make(formats::e4m3, formats::f32, mma_acc_format(13), 64, 8, 32, 32"), std::string::npos) << row;
  EXPECT_NE(row.find("false, false, false, true),"), std::string::npos) << row;  // daz ftz overflow positive_zero
  EXPECT_NE(row.find("mma_param_step_round | mma_param_ftz"), std::string::npos) << row;
}

}  // namespace
