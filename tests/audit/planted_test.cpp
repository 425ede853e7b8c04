// SPDX-License-Identifier: Apache-2.0
/// @file The audit finds planted bias: an emulated kernel that rounds O toward zero in some heads
/// and to nearest-even in the others is flagged in exactly the planted heads; unbiased kernels are
/// flagged in none (fixed seeds; the measured false-positive rates are stated below and in
/// docs/audit.md). Also: tie-row statistics, delta error, NaN/Inf rows.
#include "audit_fixtures.hpp"

#include <tiebreak/audit/audit.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

namespace {

namespace ref = tiebreak::reference;
namespace audit = tiebreak::audit;
using tiebreak::round_mode;
using tiebreak::test::emulate_kernel;
using tiebreak::test::make_problem;

std::set<std::pair<std::size_t, std::size_t>> flagged(const audit::audit_report& r) {
  std::set<std::pair<std::size_t, std::size_t>> out;
  for (const auto& h : r.heads)
    if (h.biased) out.insert({h.batch, h.head});
  return out;
}

// rz in heads (0,1), (1,2), (1,3); rne elsewhere. V symmetric (mean 0): the signed error averages
// out, the directed (away-from-zero) statistic finds the heads. V skewed positive: both do.
TEST(AuditPlanted, FlagsExactlyTheRoundTowardZeroHeads) {
  const std::set<std::pair<std::size_t, std::size_t>> planted = {{0, 1}, {1, 2}, {1, 3}};
  for (double v_mean : {0.0, 1.0}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(testing::Message() << "v_mean " << v_mean << " causal " << causal);
      const ref::attention_shape s{2, 4, 2, 128, 128, 64, 64};
      const auto in = make_problem(s, 2024 + static_cast<int>(v_mean) + 10 * causal, v_mean);
      const auto dump = emulate_kernel(in, causal, [&](std::size_t b, std::size_t h) {
        return planted.count({b, h}) ? round_mode::rz : round_mode::rne;
      });
      audit::audit_options o;
      o.causal = causal;
      const auto r = audit::run_audit(dump, o);
      EXPECT_EQ(flagged(r), planted);
      EXPECT_EQ(r.heads_biased, planted.size());
      for (const auto& h : r.heads) {
        if (!planted.count({h.batch, h.head})) continue;
        // Toward zero: the directed mean is clearly negative (about −0.3 ulp of the row scale).
        EXPECT_LT(h.o.directed_error.t.mean, -0.1);
        EXPECT_TRUE(h.o.directed_error.biased);
        if (v_mean > 0) {  // O mostly positive: toward zero is downward
          EXPECT_LT(h.o.signed_error.t.mean, -0.1);
          EXPECT_LT(h.o.signed_error.t.t, -10);
        }
      }
    }
  }
}

// Round up (ru) and round-to-odd-free modes: ru plants a positive signed bias, rd a negative one;
// rna is unbiased on continuous values (ties are rare) and must not be flagged.
TEST(AuditPlanted, DirectionOfOtherModes) {
  const ref::attention_shape s{1, 4, 4, 96, 96, 32, 32};
  const auto in = make_problem(s, 77, 0.0);
  const round_mode modes[] = {round_mode::ru, round_mode::rd, round_mode::rna, round_mode::rne};
  const auto dump = emulate_kernel(in, false, [&](std::size_t, std::size_t h) { return modes[h]; });
  const auto r = audit::run_audit(dump);
  EXPECT_TRUE(r.heads[0].biased);
  EXPECT_GT(r.heads[0].o.signed_error.t.mean, 0.1);
  EXPECT_TRUE(r.heads[1].biased);
  EXPECT_LT(r.heads[1].o.signed_error.t.mean, -0.1);
  EXPECT_FALSE(r.heads[2].biased);
  EXPECT_FALSE(r.heads[3].biased);
}

// Unbiased kernels (rne everywhere) over 20 seeds × 8 heads: the verdict flags none (the effect
// threshold makes a false flag need |mean| ≥ 0.05 ulp, at least 9 standard errors here: every
// se ≤ 0.0055 ulp). The t test alone is calibrated: at level 0.05 it rejects in about 5 % of heads
// (measured 6/160 = 3.8 % for the signed and 10/160 = 6.3 % for the directed statistic with these
// seeds).
TEST(AuditPlanted, UnbiasedKernelsAreFlaggedNowhere) {
  std::size_t heads = 0, flagged_heads = 0, sig_signed = 0, sig_directed = 0;
  double max_se = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const ref::attention_shape s{1, 8, 8, 64, 64, 32, 32};
    const auto in = make_problem(s, 1000 + seed, seed % 2 ? 0.5 : 0.0);
    const auto dump = emulate_kernel(in, seed % 3 == 0, [](std::size_t, std::size_t) { return round_mode::rne; });
    audit::audit_options o;
    o.causal = seed % 3 == 0;
    const auto r = audit::run_audit(dump, o);
    for (const auto& h : r.heads) {
      ++heads;
      flagged_heads += h.biased;
      sig_signed += h.o.signed_error.t.p_value < 0.05;
      sig_directed += h.o.directed_error.t.p_value < 0.05;
      EXPECT_LT(std::abs(h.o.signed_error.t.mean), 0.02);
      max_se = std::max(max_se, h.o.signed_error.t.se);
    }
  }
  std::printf("unbiased: %zu heads, flagged %zu; t test p < 0.05: signed %zu, directed %zu; largest se %.4f ulp\n",
              heads, flagged_heads, sig_signed, sig_directed, max_se);
  EXPECT_EQ(flagged_heads, 0u);
  // Calibration: Binomial(160, 0.05) lies in [1, 17] with probability > 0.999.
  EXPECT_GE(sig_signed, 1u);
  EXPECT_LE(sig_signed, 17u);
  EXPECT_GE(sig_directed, 1u);
  EXPECT_LE(sig_directed, 17u);
}

// Rows whose score maximum repeats: two identical keys aligned with every query give a tie in every
// row; a near-duplicate (scores 1e-4 apart) is a near tie but not an exact one.
TEST(AuditPlanted, TieRowStatistics) {
  const ref::attention_shape s{1, 3, 3, 32, 32, 16, 16};
  auto in = make_problem(s, 5);
  for (std::size_t h = 0; h < 2; ++h) {
    for (std::size_t i = 0; i < 32; ++i)
      for (std::size_t d = 0; d < 16; ++d) in.q[(h * 32 + i) * 16 + d] = d == 0 ? 1.0 : 0.0;
    for (std::size_t j = 0; j < 32; ++j) in.k[(h * 32 + j) * 16] = j < 2 ? 8.0 : 1.0;  // keys 0, 1 tie
    if (h == 1) in.k[(h * 32 + 1) * 16] = 8.0 - 1.0 / 256;  // bf16 neighbour below 8: score gap 1/1024
  }
  auto dump = emulate_kernel(in, false, [](std::size_t, std::size_t) { return round_mode::rne; });
  audit::audit_options o;
  o.tie_tolerance = 1e-3;
  const auto r = audit::run_audit(dump, o);
  EXPECT_EQ(r.heads[0].tie_rows, 32u);
  EXPECT_EQ(r.heads[0].tie_row_share, 1.0);
  EXPECT_EQ(r.heads[0].near_tie_rows, 32u);
  EXPECT_EQ(r.heads[1].tie_rows, 0u);
  EXPECT_EQ(r.heads[1].near_tie_rows, 32u);
  EXPECT_EQ(r.heads[2].tie_rows, 0u);
  EXPECT_EQ(r.heads[0].o_tie_signed.moments.n, 32u);
  EXPECT_EQ(r.heads[0].o_rest_signed.moments.n, 0u);
  EXPECT_EQ(r.heads[2].o_rest_signed.moments.n, 32u);
  // V sign skew: all-positive feature → +1.
  in.v.assign(in.v.size(), 0.5);
  in.v[0] = -0.5;
  dump = emulate_kernel(in, false, [](std::size_t, std::size_t) { return round_mode::rne; });
  const auto r2 = audit::run_audit(dump);
  EXPECT_DOUBLE_EQ(r2.heads[0].v_sign_skew[0], 30.0 / 32);
  EXPECT_DOUBLE_EQ(r2.heads[0].v_sign_skew[1], 1.0);
}

// A kernel biased only in rows whose maximum repeats (the mechanism's trigger): the error conditioned
// on tie rows shows the bias, the error on the other rows does not.
TEST(AuditPlanted, BiasConditionedOnTieRows) {
  const ref::attention_shape s{1, 2, 2, 128, 64, 32, 32};
  auto in = make_problem(s, 88, 0.0);
  for (std::size_t h = 0; h < 2; ++h) {
    for (std::size_t i = 0; i < 64; ++i)  // rows 0..63 align with keys 0 and 1: a repeated maximum
      for (std::size_t d = 0; d < 32; ++d) in.q[(h * 128 + i) * 32 + d] = d == 0 ? 1.0 : 0.0;
    for (std::size_t j = 0; j < 64; ++j) in.k[(h * 64 + j) * 32] = j < 2 ? 16.0 : 0.5;
  }
  const auto rne = emulate_kernel(in, false, [](std::size_t, std::size_t) { return round_mode::rne; });
  const auto rz = emulate_kernel(in, false, [](std::size_t, std::size_t) { return round_mode::rz; });
  auto dump = rne;
  for (std::size_t i = 0; i < 64; ++i)  // head 0: tie rows toward zero
    for (std::size_t e = 0; e < 32; ++e) dump.o[i * 32 + e] = rz.o[i * 32 + e];
  const auto r = audit::run_audit(dump);
  const auto& h0 = r.heads[0];
  EXPECT_EQ(h0.tie_rows, 64u);
  EXPECT_EQ(h0.o_tie_directed.moments.n, 64u);
  EXPECT_TRUE(h0.o_tie_directed.biased);
  EXPECT_LT(h0.o_tie_directed.t.mean, -0.1);
  EXPECT_FALSE(h0.o_rest_directed.significant);
  EXPECT_LT(std::abs(h0.o_rest_directed.t.mean), 0.05);
  EXPECT_TRUE(h0.biased);  // half the rows at about −0.3 ulp: the head mean is still past 0.05
  const auto& h1 = r.heads[1];
  EXPECT_EQ(h1.tie_rows, 64u);
  EXPECT_FALSE(h1.o_tie_directed.biased);
  EXPECT_FALSE(h1.biased);
}

// delta error: with O > 0 and dO > 0, rounding toward zero lowers every δ: the delta test is biased
// (negative) in the planted heads only, and the per-head sum Σ e_δ is negative there.
TEST(AuditPlanted, DeltaErrorFollowsThePlantedBias) {
  const ref::attention_shape s{1, 4, 4, 64, 64, 32, 32};
  const auto in = make_problem(s, 31, 2.0, true, 2.0);
  const auto dump = emulate_kernel(in, false, [](std::size_t, std::size_t h) { return h % 2 ? round_mode::rz : round_mode::rne; });
  const auto r = audit::run_audit(dump);
  for (const auto& h : r.heads) {
    ASSERT_TRUE(h.delta.has_value());
    EXPECT_EQ(h.delta_biased, h.head % 2 == 1) << h.head;
    if (h.head % 2) {
      EXPECT_LT(h.delta->t.mean, -0.1);
      EXPECT_LT(h.delta_error_sum, 0);
    }
  }
}

// The whole audit is deterministic: one thread or several, the same numbers bit for bit.
TEST(AuditPlanted, DeterministicAcrossThreadCounts) {
  const ref::attention_shape s{2, 4, 2, 48, 48, 16, 16};
  const auto in = make_problem(s, 61, 0.5, true);
  const auto dump = emulate_kernel(in, true, [](std::size_t, std::size_t h) { return h == 2 ? round_mode::rz : round_mode::rne; });
  audit::audit_options one, many;
  one.causal = many.causal = true;
  one.threads = 1;
  many.threads = 3;
  auto a = audit::to_json(audit::run_audit(dump, one)), b = audit::to_json(audit::run_audit(dump, many));
  a.erase("timing_s");
  b.erase("timing_s");
  EXPECT_EQ(a, b);
}

// NaN/Inf: counted, their rows excluded, the verdict unchanged; never an exception.
TEST(AuditPlanted, NonFiniteRowsAreExcludedAndCounted) {
  const ref::attention_shape s{1, 2, 2, 64, 64, 32, 32};
  auto in = make_problem(s, 9, 1.0, true);
  in.q[(1 * 64 + 5) * 32 + 3] = INFINITY;  // head 1, row 5
  in.d_o[(0 * 64 + 7) * 32] = NAN;          // head 0, row 7: delta only
  auto dump = emulate_kernel(in, false, [](std::size_t, std::size_t h) { return h ? round_mode::rz : round_mode::rne; });
  dump.o[(0 * 64 + 3) * 32 + 1] = NAN;  // head 0, row 3
  dump.o[(0 * 64 + 4) * 32 + 2] = -INFINITY;  // head 0, row 4
  const auto r = audit::run_audit(dump);
  EXPECT_EQ(r.heads[0].o.excluded_rows, 2u);
  EXPECT_EQ(r.heads[0].o.rows, 62u);
  EXPECT_EQ(r.heads[1].o.excluded_rows, 1u);
  EXPECT_EQ(r.heads[0].delta_excluded_rows, 3u);
  EXPECT_EQ(r.excluded_rows, 3u);
  EXPECT_FALSE(r.heads[0].biased);
  EXPECT_TRUE(r.heads[1].biased);
  EXPECT_TRUE(std::isfinite(r.heads[0].o.signed_error.t.mean));
}

}  // namespace
