// SPDX-License-Identifier: Apache-2.0
/// @file Replays the recorded H200 tensor-core results against the default models (emu::mma_models).
///
/// tests/mma/data/h200_2026-11-29.txt holds every designed case and every recorded random element
/// of the H200 run of 2026-11-29 (tools/device-mma.sh; inputs and hardware bits). Each default row
/// must reproduce every one bit for bit, and every parameter the row marks as established must be
/// decided by these records: changing it alone to any other value of the hypothesis grid
/// (emu::mma_hypotheses) must mispredict at least one record.
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/host/mma_identify.hpp"

#ifndef TIEBREAK_MMA_DATA_DIR
#error "TIEBREAK_MMA_DATA_DIR must name tests/mma/data"
#endif

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

struct record {
  std::string source;  ///< designed family or random:<scenario>
  std::uint64_t hw = 0;
  mma_case cs;
};

/// The records of the run, per instruction.
const std::map<mma_instr, std::vector<record>>& records() {
  static const std::map<mma_instr, std::vector<record>> all = [] {
    std::map<mma_instr, std::vector<record>> out;
    std::ifstream in(std::string(TIEBREAK_MMA_DATA_DIR) + "/h200_2026-11-29.txt");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string name, hw, c, pos;
      record r;
      ls >> name >> r.source >> hw >> c;
      mma_instr id{};
      if (!parse_mma_instr(name, id)) continue;  // counted below: every line must parse
      const int k = mma_entry(id).model.k;
      r.hw = std::stoull(hw, nullptr, 16);
      r.cs.c = std::stoull(c, nullptr, 16);
      r.cs.a.assign(static_cast<std::size_t>(k), 0);
      r.cs.b.assign(static_cast<std::size_t>(k), 0);
      while (ls >> pos) {
        const auto p1 = pos.find(':'), p2 = pos.rfind(':');
        const auto i = std::stoul(pos.substr(0, p1), nullptr, 16);
        if (i >= static_cast<unsigned long>(k)) continue;
        r.cs.a[i] = std::stoull(pos.substr(p1 + 1, p2 - p1 - 1), nullptr, 16);
        r.cs.b[i] = std::stoull(pos.substr(p2 + 1), nullptr, 16);
      }
      out[id].push_back(std::move(r));
    }
    return out;
  }();
  return all;
}

/// Number of records of `id` model `m` mispredicts (stops after `stop`).
std::size_t wrong(const mma_model& m, mma_instr id, std::size_t stop = ~std::size_t{0}) {
  std::size_t n = 0;
  for (const record& r : records().at(id)) {
    if (mma_dot(m, r.cs.c, r.cs.a.data(), 1, r.cs.b.data(), 1).bits != r.hw && ++n >= stop) break;
  }
  return n;
}

TEST(MmaReplay, DataCoversEveryInstruction) {
  std::size_t total = 0;
  for (mma_instr id : all_mma_instrs) {
    ASSERT_TRUE(records().count(id)) << mma_instr_name(id);
    EXPECT_GT(records().at(id).size(), 500u) << mma_instr_name(id);
    total += records().at(id).size();
  }
  EXPECT_EQ(total, 7466u);  // 6970 designed cases + 512 random elements, 16 duplicates listed once
}

TEST(MmaReplay, DefaultModelsReproduceEveryRecord) {
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    std::size_t bad = 0;
    for (const record& r : records().at(id)) {
      const std::uint64_t got = mma_dot(m, r.cs.c, r.cs.a.data(), 1, r.cs.b.data(), 1).bits;
      const std::uint64_t slow = mma_dot_with<false>(m, r.cs.c, emu::detail::mma_raw_ops<std::uint64_t, std::uint64_t>{
                                                                  m, r.cs.a.data(), 1, r.cs.b.data(), 1}).bits;
      EXPECT_EQ(got, slow) << mma_instr_name(id) << " fast and general paths differ (" << r.source << ")";
      if (got != r.hw && ++bad <= 3)
        ADD_FAILURE() << mma_instr_name(id) << " " << r.source << ": hw 0x" << std::hex << r.hw << " model 0x" << got;
    }
    EXPECT_EQ(bad, 0u) << mma_instr_name(id);
  }
}

/// The records contradict the previous hypotheses where the analysis says they do: the -0 case, and
/// (FP8) the f32 accumulator.
TEST(MmaReplay, RecordsRefuteTheOldHypotheses) {
  for (mma_instr id : all_mma_instrs) {
    mma_model m = mma_entry(id).model;
    m.positive_zero = false;
    EXPECT_GE(wrong(m, id), 1u) << mma_instr_name(id) << ": IEEE zero signs should mispredict C=-0, products -0";
  }
  for (mma_instr id : {mma_instr::wgmma_k32_e4m3, mma_instr::wgmma_k32_e5m2}) {
    mma_model m = mma_entry(id).model;
    m.acc_fmt = formats::f32;
    EXPECT_GE(wrong(m, id), 5u) << mma_instr_name(id) << ": an f32 accumulator should mispredict random elements";
  }
}

/// Every parameter not in the row's `unknown` mask is decided by the records: any other value of
/// the grid, the rest of the row unchanged, mispredicts at least one record.
/// The smoke level (the sanitizer build, where all eight took 28 s of its ctest) checks one
/// instruction of each kind: bf16 and tf32 mma.sync, e4m3 wgmma; the Release build checks all eight.
TEST(MmaReplay, EstablishedParametersAreDecidedByTheRecords) {
  for (mma_instr id : all_mma_instrs) {
    if (TIEBREAK_TEST_LEVEL_SMOKE && id != mma_instr::mma_m16n8k16_bf16 && id != mma_instr::mma_m16n8k8_tf32 &&
        id != mma_instr::wgmma_k32_e4m3)
      continue;
    const mma_model_entry& e = mma_entry(id);
    const mma_hyp row = mma_hyp_of(e.model);
    std::map<int, std::map<std::string, bool>> alive;  // param -> value -> some single change survives
    for (const mma_hyp& h : mma_hypotheses(e.model)) {
      int diff = -1, ndiff = 0;
      for (int bit = 0; bit < mma_param_count; ++bit) {
        if (mma_hyp_value(h, bit) != mma_hyp_value(row, bit)) { diff = bit; ++ndiff; }
      }
      // acc_fmt and out_round move together for an f16 C (out_round only applies to a wider acc).
      if (ndiff != 1) continue;
      const bool survives = wrong(mma_apply(e.model, h), id, 1) == 0;
      alive[diff][mma_hyp_value(h, diff)] = alive[diff][mma_hyp_value(h, diff)] || survives;
    }
    for (int bit = 0; bit < mma_param_count; ++bit) {
      if (e.unknown & (1u << bit)) continue;
      for (const auto& [value, survives] : alive[bit])
        EXPECT_FALSE(survives) << mma_instr_name(id) << ": " << mma_param_name(bit) << "=" << value
                               << " fits every record too, yet the row marks " << mma_param_name(bit) << " established";
    }
  }
}

}  // namespace
