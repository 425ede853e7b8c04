// SPDX-License-Identifier: Apache-2.0
// The host twin of the attention kernels (tiebreak/host/flash_twin.hpp): against an f64 softmax,
// and against the invariants the modes and the probe promise. Small shapes: every mma runs
// through the tensor-core model.
#include "tiebreak/host/flash_twin.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attn_inputs.hpp"
#include "support/debias_patterns.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"

namespace {

using namespace tiebreak;
using attn::out_mode;

using test::bf16_of;
double of_bf16(std::uint16_t b) { return bits_to_f32(static_cast<std::uint32_t>(b) << 16); }

struct problem_data {
  attn::problem prob;
  std::vector<std::uint16_t> q, k, v, dout;
};

/// Random bf16 inputs in [-amp, amp); with `planted`, every query row of head 0 repeats its
/// maximum: keys 0..3 of each kv head are copies of one key that every query row aligns with.
problem_data make(attn::shape s, bool causal, std::uint64_t seed, double amp = 1.0, bool planted = false) {
  problem_data p;
  p.prob.shape = s;
  p.prob.mask = causal ? attn::mask_kind::causal : attn::mask_kind::none;
  p.prob.scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  splitmix64_generator g{seed};
  auto fill = [&](std::vector<std::uint16_t>& x, std::size_t n) {
    x.resize(n);
    for (auto& e : x) e = bf16_of(amp * test::uniform_pm1(g));
  };
  fill(p.q, s.q_size());
  fill(p.k, s.k_size());
  fill(p.v, s.v_size());
  fill(p.dout, s.o_size());
  if (planted) {
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t kh = 0; kh < s.kv_heads; ++kh)
        for (std::size_t j = 0; j < 4 && j < s.seq_k; ++j)
          for (std::size_t c = 0; c < s.dim; ++c) p.k[s.k_offset(b, kh, j) + c] = bf16_of(c % 2 ? 2.0 : 0.0);
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t h = 0; h < s.heads; ++h)
        for (std::size_t i = 0; i < s.seq_q; ++i)
          for (std::size_t c = 0; c < s.dim; ++c) p.q[s.q_offset(b, h, i) + c] = bf16_of(c % 2 ? 1.0 : 0.0);
  }
  return p;
}

struct outputs {
  std::vector<std::uint16_t> o;
  std::vector<float> o_f32, lse;
  std::vector<probe::head_counters> counters;
};

outputs forward(const problem_data& p, attn::flash_options opt, bool probed = false, unsigned threads = 0) {
  outputs r;
  const auto& s = p.prob.shape;
  r.o.assign(s.o_size(), 0xdead);
  r.o_f32.assign(s.o_size(), -7.0f);
  r.lse.assign(s.lse_size(), -7.0f);
  r.counters.assign(s.batch * s.heads, {});
  attn::flash_args a{p.prob, opt, {}, probed ? r.counters.data() : nullptr, {}};
  a.t.q = p.q.data();
  a.t.k = p.k.data();
  a.t.v = p.v.data();
  a.t.o_bf16 = r.o.data();
  a.t.o_f32 = r.o_f32.data();
  a.t.lse = r.lse.data();
  host::attention_forward(a, threads);
  return r;
}

/// f64 softmax attention: O and LSE of every row.
void reference(const problem_data& p, std::vector<double>& o, std::vector<double>& lse) {
  const auto& s = p.prob.shape;
  o.assign(s.o_size(), 0);
  lse.assign(s.lse_size(), -INFINITY);
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h)
      for (std::size_t i = 0; i < s.seq_q; ++i) {
        const std::size_t n = p.prob.visible_keys(i), kh = s.kv_head(h);
        if (n == 0) continue;
        std::vector<double> sc(n);
        double mx = -INFINITY;
        for (std::size_t j = 0; j < n; ++j) {
          double d = 0;
          for (std::size_t c = 0; c < s.dim; ++c) d += of_bf16(p.q[s.q_offset(b, h, i) + c]) * of_bf16(p.k[s.k_offset(b, kh, j) + c]);
          sc[j] = d * p.prob.scale;
          mx = std::max(mx, sc[j]);
        }
        double l = 0;
        for (auto& x : sc) l += (x = std::exp(x - mx));
        for (std::size_t c = 0; c < s.dim_v; ++c) {
          double acc = 0;
          for (std::size_t j = 0; j < n; ++j) acc += sc[j] * of_bf16(p.v[s.v_offset(b, kh, j) + c]);
          o[s.o_offset(b, h, i) + c] = acc / l;
        }
        lse[s.q_row(b, h, i)] = mx + std::log(l);
      }
}

struct shape_case {
  attn::shape s;
  bool causal;
};
const shape_case cases[] = {
    {{1, 2, 1, 70, 100, 64, 64}, false},   // GQA, ragged in both sequences
    {{1, 2, 2, 100, 70, 64, 64}, true},    // causal with seq_q > seq_k: 30 rows see no key
    {{2, 1, 1, 65, 129, 128, 128}, true},  // head dim 128, one row past a tile, seq_q < seq_k
};

/// The shapes a test walks: all three, or at the smoke level (the ASan build, where every modelled
/// mma costs ~20x) only the causal one with rows that see no key.
std::vector<shape_case> active_cases() {
#if TIEBREAK_TEST_LEVEL_SMOKE
  return {cases[1]};
#else
  return {std::begin(cases), std::end(cases)};
#endif
}

TEST(FlashTwin, MatchesF64SoftmaxInEveryMode) {
  for (const auto& sc : active_cases()) {
    const problem_data p = make(sc.s, sc.causal, 11);
    std::vector<double> ro, rl;
    reference(p, ro, rl);
    for (out_mode m : attn::all_out_modes) {
      for (auto scaling : {attn::score_scaling::unfused, attn::score_scaling::fused}) {
        const outputs r = forward(p, {m, scaling, 2.0f, 5});
        double worst = 0;
        for (std::size_t x = 0; x < ro.size(); ++x) {
          const double got = m == out_mode::fp32 ? r.o_f32[x] : of_bf16(r.o[x]);
          worst = std::max(worst, std::abs(got - ro[x]));
        }
        // |O| <= 1 here: P enters P V in bf16 (relative error 2^-9 per term, as in FlashAttention-2),
        // plus O's own bf16 rounding (2^-9) in the bf16 modes.
        EXPECT_LT(worst, m == out_mode::fp32 ? 2e-3 : (m == out_mode::stochastic ? 8e-3 : 4.2e-3))
            << to_string(m) << " " << to_string(scaling) << " dim " << sc.s.dim;
        for (std::size_t x = 0; x < rl.size(); ++x) {
          if (std::isinf(rl[x])) {
            EXPECT_TRUE(std::isinf(r.lse[x]) && r.lse[x] < 0) << x;
          } else {
            EXPECT_NEAR(r.lse[x], rl[x], 1e-5 * (1 + std::abs(rl[x]))) << x;
          }
        }
      }
    }
  }
}

TEST(FlashTwin, FullyMaskedRowsGiveZeroAndMinusInfLse) {
  const problem_data p = make(cases[1].s, true, 3);
  for (out_mode m : attn::all_out_modes) {
    const outputs r = forward(p, {m});
    const auto& s = p.prob.shape;
    for (std::size_t h = 0; h < s.heads; ++h)
      for (std::size_t i = 0; i < 30; ++i) {
        EXPECT_EQ(r.lse[s.q_row(0, h, i)], -INFINITY);
        for (std::size_t c = 0; c < s.dim_v; ++c) {
          if (m == out_mode::fp32) {
            EXPECT_EQ(r.o_f32[s.o_offset(0, h, i) + c], 0.0f);
          } else {
            EXPECT_EQ(r.o[s.o_offset(0, h, i) + c], 0);
          }
        }
      }
  }
}

TEST(FlashTwin, ModesAgreeWhereTheyShouldAndRoundAsNamed) {
  const problem_data p = make(cases[0].s, false, 21);
  const outputs b = forward(p, {out_mode::bf16});
  const outputs f = forward(p, {out_mode::fp32});
  const outputs s1 = forward(p, {out_mode::stochastic, attn::score_scaling::unfused, 2.0f, 1});
  const outputs s1b = forward(p, {out_mode::stochastic, attn::score_scaling::unfused, 2.0f, 1});
  const outputs s2 = forward(p, {out_mode::stochastic, attn::score_scaling::unfused, 2.0f, 2});
  std::size_t up = 0, differ = 0;
  for (std::size_t x = 0; x < b.o.size(); ++x) {
    EXPECT_EQ(f32_to_bits(b.o_f32[x]), f32_to_bits(f.o_f32[x]));  // the same f32 O before rounding
    EXPECT_EQ(b.o[x], f32_bits_to_bf16_rne(f32_to_bits(b.o_f32[x])));
    const std::uint32_t ob = f32_to_bits(s1.o_f32[x]);
    EXPECT_TRUE(s1.o[x] == f32_bits_to_bf16_rz(ob) || s1.o[x] == f32_bits_to_bf16_ru(ob) ||
                s1.o[x] == f32_bits_to_bf16_rd(ob));
    EXPECT_EQ(s1.o[x], s1b.o[x]);  // reproducible
    up += s1.o[x] != f32_bits_to_bf16_rz(ob);
    differ += s1.o[x] != s2.o[x];
  }
  EXPECT_GT(up, b.o.size() / 4);
  EXPECT_GT(differ, b.o.size() / 8);  // another seed, other bits
  // The documented stream (docs/attention.md, "stochastic"): element (b, h, row, col) is rounded with
  // 16 random bits, half col % 2 (0: the high half) of word (col / 8) % 4 of
  // philox{seed}(4 (col / 32) + (col / 2) % 4, row, h, b), whichever thread computed that block.
  // The same with a NaN and an Inf in V (O's columns 3 and 10 non-finite in every row, beside finite
  // ones: the kernel's NaN repair path), element by element through the scalar rounding.
  problem_data pn = p;
  pn.v[pn.prob.shape.v_offset(0, 0, 5) + 3] = 0x7fc0;   // NaN
  pn.v[pn.prob.shape.v_offset(0, 0, 9) + 10] = 0x7f80;  // +Inf
  const outputs sn = forward(pn, {out_mode::stochastic, attn::score_scaling::unfused, 2.0f, 1});
  const auto& sh = p.prob.shape;
  std::size_t checked = 0, nan = 0;
  for (const outputs* so : {&s1, &sn}) {
    for (std::size_t bb = 0; bb < sh.batch; ++bb)
      for (std::size_t h = 0; h < sh.heads; ++h)
        for (std::size_t i = 0; i < sh.seq_q; ++i)
          for (std::size_t col = 0; col < sh.dim_v; ++col) {
            const std::size_t x = sh.o_offset(bb, h, i) + col;
            const philox_block w = philox{1}(static_cast<std::uint32_t>(4 * (col / 32) + (col / 2) % 4),
                                             static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(h),
                                             static_cast<std::uint32_t>(bb));
            const std::uint32_t word = w.w[(col / 8) % 4];
            const std::uint32_t bits16 = col % 2 == 0 ? word >> 16 : word & 0xffffu;
            ASSERT_EQ(so->o[x], f32_bits_to_bf16_sr(f32_to_bits(so->o_f32[x]), bits16 << 16))
                << "b " << bb << " h " << h << " row " << i << " col " << col << (so == &sn ? " (NaN in V)" : "");
            ++checked;
            nan += so->o[x] == 0x7fff;
          }
  }
  EXPECT_EQ(checked, 2 * s1.o.size());
  EXPECT_GE(nan, sh.seq_q);  // column 3 of every row of (0, 0) at least
  for (std::size_t x = 0; x < b.lse.size(); ++x) EXPECT_EQ(f32_to_bits(b.lse[x]), f32_to_bits(f.lse[x]));
}

TEST(FlashTwin, ThreadCountDoesNotChangeABit) {
  const problem_data p = make(cases[2].s, true, 9, 1.0, true);
  const outputs a = forward(p, {out_mode::debias}, true, 1);
  const outputs b = forward(p, {out_mode::debias}, true, 2);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse.size(), b.lse.size());
  for (std::size_t x = 0; x < a.lse.size(); ++x) EXPECT_EQ(f32_to_bits(a.lse[x]), f32_to_bits(b.lse[x]));
  EXPECT_EQ(a.counters, b.counters);
}

// A row whose scaled maximum overflows: s = 2^100 at key 0 (q and k 2^50 in one column), the other
// keys 2^50 (in the next key tile), scale 2^30, so m ⊗ c = +Inf while every other s ⊗ c is finite.
// Fused, fma(s, c, −Inf) is −Inf for every key, so l = 0 after the first tile, and the offset is
// +Inf: the second tile's alpha is exp2(Inf ⊖ Inf) = NaN, and O and LSE come out NaN. The probed
// kernels skip the offset of rows whose maximum settled, but never with an offset of +Inf: probed and
// unprobed give the same bits in every mode, unfused (NaN from the first tile) and fused.
TEST(FlashTwin, OverflowingScaledMaximumIsNaNProbedOrNot) {
  const attn::shape s{1, 1, 1, 1, 128, 64, 64};
  problem_data p = make(s, false, 21);
  p.prob.scale = 0x1p30;
  std::fill(p.q.begin(), p.q.end(), bf16_of(0.0));
  std::fill(p.k.begin(), p.k.end(), bf16_of(0.0));
  p.q[0] = bf16_of(0x1p50);
  for (std::size_t j = 0; j < s.seq_k; ++j) p.k[s.k_offset(0, 0, j)] = bf16_of(j == 0 ? 0x1p50 : 1.0);
  for (out_mode m : attn::all_out_modes)
    for (attn::score_scaling sc : {attn::score_scaling::unfused, attn::score_scaling::fused}) {
      SCOPED_TRACE(std::string(attn::to_string(m)) + (sc == attn::score_scaling::fused ? " fused" : " unfused"));
      attn::flash_options opt{m};
      opt.scaling = sc;
      const outputs plain = forward(p, opt, false), probed = forward(p, opt, true);
      EXPECT_EQ(plain.o, probed.o);
      for (std::size_t c = 0; c < s.dim_v; ++c) {
        EXPECT_EQ(f32_to_bits(plain.o_f32[c]), f32_to_bits(probed.o_f32[c]));
        if (m == out_mode::fp32) EXPECT_TRUE(std::isnan(plain.o_f32[c]));
        else EXPECT_TRUE(std::isnan(of_bf16(plain.o[c])));
      }
      EXPECT_EQ(f32_to_bits(plain.lse[0]), f32_to_bits(probed.lse[0]));
      EXPECT_TRUE(std::isnan(plain.lse[0]));
    }
}

// Every row of the planted problem has its maximum at keys 0..3 (four exact repeats): bf16 mode
// sees P-bar == 1 four times per row, debias never, and both stay accurate.
TEST(FlashTwin, DebiasRemovesPOneInRowsWithRepeatedMaxima) {
  const attn::shape s{1, 2, 1, 64, 96, 64, 64};
  const problem_data p = make(s, false, 4, 0.25, true);
  const outputs b = forward(p, {out_mode::bf16}, true);
  const outputs d = forward(p, {out_mode::debias}, true);
  const outputs fu = forward(p, {out_mode::bf16, attn::score_scaling::fused}, true);
  for (std::size_t h = 0; h < 2; ++h) {
    EXPECT_EQ(b.counters[h].repeated_max_exact, s.seq_q);
    EXPECT_EQ(b.counters[h].p_one, 4 * s.seq_q);
    EXPECT_EQ(d.counters[h].repeated_max_exact, s.seq_q);
    EXPECT_EQ(d.counters[h].p_one, 0u);
    EXPECT_EQ(b.counters[h].output_error.count, s.seq_q * s.dim_v);
    EXPECT_LE(fu.counters[h].p_one, b.counters[h].p_one);
    EXPECT_LE(std::abs(b.counters[h].output_error.sum), 0.5 * s.seq_q * s.dim_v);
  }
  std::vector<double> ro, rl;
  reference(p, ro, rl);
  for (std::size_t x = 0; x < ro.size(); ++x) EXPECT_NEAR(of_bf16(d.o[x]), ro[x], 4e-3);
  for (std::size_t x = 0; x < rl.size(); ++x) EXPECT_NEAR(d.lse[x], rl[x], 1e-5 * (1 + std::abs(rl[x])));
}

// The probe's output_error moments against their definition, computed here from the stored O and
// the f32 O before rounding (the kernel sums integers per thread, then doubles by a tree: on these
// 4 096 errors per head, multiples of 2^-17 ulp, every order gives the exact sums).
TEST(FlashTwin, OutputErrorMomentsMatchTheirDefinition) {
  const attn::shape s{1, 2, 1, 64, 64, 64, 64};
  const problem_data p = make(s, true, 17, 1.0, true);
  for (out_mode m : {out_mode::bf16, out_mode::debias, out_mode::stochastic}) {
    const outputs r = forward(p, {m, attn::score_scaling::unfused, 2.0f, 5}, true);
    for (std::size_t h = 0; h < s.heads; ++h) {
      probe::signed_moments want;
      for (std::size_t i = 0; i < s.seq_q; ++i)
        for (std::size_t c = 0; c < s.dim_v; ++c) {
          const std::size_t x = s.o_offset(0, h, i) + c;
          const double rf = of_bf16(r.o[x]), xf = r.o_f32[x];
          if (!std::isfinite(rf) || !std::isfinite(xf)) continue;
          const int e = std::max((r.o[x] >> 7) & 0xff, 1) - 134;  // ulp of bf16 at the stored value: 2^e
          want.add(std::ldexp(rf - xf, -e));
        }
      const probe::signed_moments& got = r.counters[h].output_error;
      EXPECT_EQ(got.count, s.seq_q * s.dim_v) << to_string(m);
      EXPECT_EQ(got.count, want.count) << to_string(m);
      EXPECT_EQ(got.positive, want.positive) << to_string(m);
      EXPECT_EQ(got.negative, want.negative) << to_string(m);
      EXPECT_EQ(got.sum, want.sum) << to_string(m);
      EXPECT_EQ(got.sum_sq, want.sum_sq) << to_string(m);
      EXPECT_GT(got.positive + got.negative, got.count / 2) << to_string(m);  // most elements were rounded
    }
  }
}

// A repeated maximum far from 0 (scaled ±128, log2 shift ±184.7 under the paper's unbounded offset):
// the offset is bounded (debias_max_shift), so P-bar at the maximum is 2^-64, not flushed to 0 with
// the rest of the row (the unbounded offset gave O = 0/0 = NaN here), no P-bar is 1, and O and the LSE
// keep their f64 accuracy. Negative: keys 4.. are further below than the four planted ones.
TEST(FlashTwin, DebiasOffsetIsBoundedForLargeRepeatedMaxima) {
  const attn::shape s{1, 2, 1, 64, 96, 64, 64};
  for (double qa : {16.0, -16.0}) {
    problem_data p = make(s, false, 4, 0.25, true);
    for (std::size_t h = 0; h < s.heads; ++h)
      for (std::size_t i = 0; i < s.seq_q; ++i)
        for (std::size_t c = 1; c < s.dim; c += 2) p.q[s.q_offset(0, h, i) + c] = bf16_of(qa);
    if (qa < 0)
      for (std::size_t j = 4; j < s.seq_k; ++j)
        for (std::size_t c = 1; c < s.dim; c += 2) p.k[s.k_offset(0, 0, j) + c] = bf16_of(3.0);
    std::vector<double> ro, rl;
    reference(p, ro, rl);
    const outputs b = forward(p, {out_mode::bf16}, true);
    const outputs d = forward(p, {out_mode::debias}, true);
    const auto& r0 = s.q_row(0, 0, 0);
    ASSERT_NEAR(rl[r0], 128.0 * (qa > 0 ? 1 : -1) + std::log(4.0), 1e-3);  // the planted maximum rules the row
    for (std::size_t h = 0; h < s.heads; ++h) {
      EXPECT_EQ(d.counters[h].repeated_max_exact, s.seq_q);
      EXPECT_EQ(d.counters[h].p_one, 0u);
      EXPECT_EQ(b.counters[h].p_one, 4 * s.seq_q);
    }
    for (std::size_t x = 0; x < ro.size(); ++x) {
      ASSERT_TRUE(std::isfinite(of_bf16(d.o[x]))) << "qa " << qa << " element " << x;
      EXPECT_NEAR(of_bf16(d.o[x]), ro[x], 4e-3) << x;
      EXPECT_NEAR(of_bf16(b.o[x]), ro[x], 4e-3) << x;
    }
    for (std::size_t x = 0; x < rl.size(); ++x) EXPECT_NEAR(d.lse[x], rl[x], 1e-5 * (1 + std::abs(rl[x])));
    // A smaller bound is honoured: the offset in force is the maximum's + max_shift (dumped rows).
    attn::flash_options o8{out_mode::debias};
    o8.debias_max_shift = 8.0f;
    const outputs d8 = forward(p, o8, true);
    for (std::size_t x = 0; x < ro.size(); ++x) EXPECT_NEAR(of_bf16(d8.o[x]), ro[x], 4e-3) << x;
    EXPECT_EQ(d8.counters[0].p_one, 0u);
  }
}

// debias reads whether a row's maximum repeats, and the probed and unprobed forward count the repeats
// in different code (the probed kernel skips rows whose maximum settled; at D = 64 it builds its
// masks by predicated ors): both must give the same offsets, so the same bits, in each pattern of
// support/debias_patterns.hpp (repeats in one lane, across lanes, in a later tile; a new maximum
// after repeats; none). Heads whose maximum repeats move their O under debias away from bf16's; a
// head whose maximum never repeats keeps bf16's bits. At the smoke level (the ASan build, where this
// took 64 s with both exponentials) non-causal, unfused and the software exponential only.
TEST(FlashTwin, DebiasProbedAndUnprobedAgreeInEveryRepeatPattern) {
  const attn::shape s{1, test::debias_pattern_heads, test::debias_pattern_heads, 70, 200, 64, 64};
  for (bool causal : {false, true}) {
    if (TIEBREAK_TEST_LEVEL_SMOKE && causal) continue;
    problem_data p = make(s, causal, 31, 0.25);
    test::plant_debias_patterns(s, p.q, p.k, 77);
    std::vector<double> ro, rl;
    reference(p, ro, rl);
    for (attn::score_scaling sc : {attn::score_scaling::unfused, attn::score_scaling::fused})
      for (attn::exp2_policy e : {attn::exp2_policy::software, attn::exp2_policy::sfu}) {
        if (TIEBREAK_TEST_LEVEL_SMOKE && (sc == attn::score_scaling::fused || e == attn::exp2_policy::sfu)) continue;
        SCOPED_TRACE(std::string(causal ? "causal " : "") + (sc == attn::score_scaling::fused ? "fused" : "unfused") +
                     (e == attn::exp2_policy::sfu ? " sfu" : " software"));
        attn::flash_options opt{out_mode::debias};
        opt.scaling = sc;
        opt.exp = e;
        attn::flash_options ob = opt;
        ob.mode = out_mode::bf16;
        const outputs plain = forward(p, opt, false), counted = forward(p, opt, true), b = forward(p, ob, false);
        ASSERT_EQ(plain.o, counted.o);
        for (std::size_t x = 0; x < plain.lse.size(); ++x) ASSERT_EQ(f32_to_bits(plain.lse[x]), f32_to_bits(counted.lse[x])) << x;
        // The patterns did what they say: the last row of each head sees every key (causal too,
        // seq_q < seq_k); its O moved under debias exactly where the maximum repeats.
        for (std::size_t h = 0; h < s.heads; ++h) {
          const std::size_t row = s.o_offset(0, h, s.seq_q - 1);
          bool same = true;
          for (std::size_t c = 0; c < s.dim_v; ++c) same = same && plain.o[row + c] == b.o[row + c];
          if (h == 4) {
            EXPECT_TRUE(same) << "head " << h;
          } else if (h != 3) {
            EXPECT_FALSE(same) << "head " << h;
          }
          // Non-causal, every row sees every key: the probe counts each row of heads 0, 1, 2 and 5
          // as repeating its maximum, none of heads 3 and 4.
          if (!causal) {
            EXPECT_EQ(counted.counters[h].repeated_max_exact, h == 3 || h == 4 ? 0u : s.seq_q) << "head " << h;
          }
        }
        for (std::size_t x = 0; x < ro.size(); ++x) EXPECT_NEAR(of_bf16(plain.o[x]), ro[x], 4e-3) << x;
      }
  }
}

// row_offset, every case of its definition: the offset as the kernels and the twin compute it (by
// selects under debias), against the paper's rule written out with the same f32 roundings.
TEST(FlashRowOffset, EveryCaseOfTheDefinition) {
  attn::flash_consts c;
  c.scale_log2 = 0x1.715476p-3f;  // (1/8) log2 e, rounded as make_consts would
  c.beta = 2.0f;
  c.max_shift = 64.0f;
  const auto mul = [](float a, float b) { return f32::mul_rn(a, b); };
  const float inf = f32::inf;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto same = [](float a, float b) { return f32_to_bits(a) == f32_to_bits(b); };
  for (std::uint32_t count : {0u, 1u, 2u, 7u}) {
    // m = -Inf (no visible key): 0 in every mode, whatever the count.
    EXPECT_TRUE(same(attn::row_offset<out_mode::debias>(-inf, count, c), 0.0f)) << count;
    EXPECT_TRUE(same(attn::row_offset<out_mode::bf16>(-inf, count, c), 0.0f)) << count;
    for (float m : {3.5f, -3.5f, 0.0f, -0.0f, 1000.0f, inf, nan}) {
      const float mc = mul(m, c.scale_log2);
      EXPECT_TRUE(same(attn::row_offset<out_mode::bf16>(m, count, c), mc)) << m << " " << count;
      EXPECT_TRUE(same(attn::row_offset<out_mode::stochastic>(m, count, c), mc)) << m << " " << count;
      float want = mc;  // no repeat, m = 0 or NaN: the maximum's own offset
      if (count > 1 && m > 0.0f) {
        const float o = mul(mul(c.beta, m), c.scale_log2), cap = f32::add_rn(mc, c.max_shift);
        want = o > cap ? cap : o;
      } else if (count > 1 && m < 0.0f) {
        want = 0.0f;
      }
      EXPECT_TRUE(same(attn::row_offset<out_mode::debias>(m, count, c), want)) << m << " " << count;
    }
  }
  // The bound: at m = 1000 the paper's offset (β - 1) m c = 180 above the maximum's is capped at +64.
  const float big = attn::row_offset<out_mode::debias>(1000.0f, 2, c);
  EXPECT_EQ(big, f32::add_rn(mul(1000.0f, c.scale_log2), 64.0f));
  // Below the bound the paper's offset itself: β m c at m = 3.5.
  EXPECT_EQ(attn::row_offset<out_mode::debias>(3.5f, 2, c), mul(mul(2.0f, 3.5f), c.scale_log2));
  // A repeated negative maximum: offset 0; m = +Inf: +Inf.
  EXPECT_EQ(attn::row_offset<out_mode::debias>(-3.5f, 2, c), 0.0f);
  EXPECT_EQ(attn::row_offset<out_mode::debias>(inf, 2, c), inf);
  EXPECT_TRUE(std::isnan(attn::row_offset<out_mode::debias>(nan, 2, c)));
}

// Gradients against f64: P, dP = dO Vᵀ, delta = rowsum(dO ∘ O), dS = P ∘ (dP − delta),
// dQ = scale dS K, dK = scale dSᵀ Q, dV = Pᵀ dO, all in double from the bf16 inputs.
TEST(FlashTwin, BackwardMatchesF64) {
  for (const auto& sc : active_cases()) {
    const problem_data p = make(sc.s, sc.causal, 17);
    const auto& s = sc.s;
    std::vector<double> ro, rl;
    reference(p, ro, rl);
    std::vector<double> dq(s.q_size(), 0), dk(s.k_size(), 0), dv(s.v_size(), 0);
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t h = 0; h < s.heads; ++h)
        for (std::size_t i = 0; i < s.seq_q; ++i) {
          const std::size_t n = p.prob.visible_keys(i), kh = s.kv_head(h);
          if (n == 0) continue;
          double delta = 0;
          for (std::size_t c = 0; c < s.dim_v; ++c) delta += of_bf16(p.dout[s.o_offset(b, h, i) + c]) * ro[s.o_offset(b, h, i) + c];
          for (std::size_t j = 0; j < n; ++j) {
            double d = 0, dp = 0;
            for (std::size_t c = 0; c < s.dim; ++c) d += of_bf16(p.q[s.q_offset(b, h, i) + c]) * of_bf16(p.k[s.k_offset(b, kh, j) + c]);
            for (std::size_t c = 0; c < s.dim_v; ++c) dp += of_bf16(p.dout[s.o_offset(b, h, i) + c]) * of_bf16(p.v[s.v_offset(b, kh, j) + c]);
            const double pr = std::exp(d * p.prob.scale - rl[s.q_row(b, h, i)]);
            const double ds = pr * (dp - delta);
            for (std::size_t c = 0; c < s.dim; ++c) {
              dq[s.q_offset(b, h, i) + c] += p.prob.scale * ds * of_bf16(p.k[s.k_offset(b, kh, j) + c]);
              dk[s.k_offset(b, kh, j) + c] += p.prob.scale * ds * of_bf16(p.q[s.q_offset(b, h, i) + c]);
              dv[s.v_offset(b, kh, j) + c] += pr * of_bf16(p.dout[s.o_offset(b, h, i) + c]);
            }
          }
        }
    for (out_mode m : {out_mode::bf16, out_mode::fp32, out_mode::debias}) {
      outputs r = forward(p, {m});
      std::vector<std::uint16_t> gq(s.q_size()), gk(s.k_size()), gv(s.v_size());
      std::vector<float> delta(s.lse_size());
      std::vector<probe::head_counters> counters(s.batch * s.heads);
      attn::flash_args a{p.prob, {m}, {}, counters.data(), {}};
      a.t = {p.q.data(), p.k.data(), p.v.data(), p.dout.data(), r.o.data(), r.o_f32.data(), r.lse.data(),
             delta.data(), gq.data(), gk.data(), gv.data()};
      host::attention_backward(a);
      auto worst = [](const std::vector<std::uint16_t>& got, const std::vector<double>& want) {
        double w = 0, scale = 1e-30;
        for (std::size_t x = 0; x < got.size(); ++x) {
          w = std::max(w, std::abs(of_bf16(got[x]) - want[x]));
          scale = std::max(scale, std::abs(want[x]));
        }
        return w / scale;
      };
      EXPECT_LT(worst(gq, dq), 2e-2) << to_string(m);
      EXPECT_LT(worst(gk, dk), 2e-2) << to_string(m);
      EXPECT_LT(worst(gv, dv), 2e-2) << to_string(m);
      for (const auto& hc : counters) {
        EXPECT_GT(hc.delta_error.count, 0u);
        if (m == out_mode::fp32) {
          EXPECT_EQ(hc.delta_error.sum_sq, 0.0);
        }
      }
    }
  }
}

// Dumped rows: every key's raw score, P-bar and offset; the P-bar == 1 keys of a planted row are
// exactly its four repeated maxima, and under debias none is 1 while exp(score·scale − offset·ln2)
// is what was computed.
TEST(FlashTwin, DumpsChosenRows) {
  const attn::shape s{1, 2, 1, 64, 96, 64, 64};
  const problem_data p = make(s, false, 4, 0.25, true);
  for (out_mode m : {out_mode::bf16, out_mode::debias}) {
    std::vector<std::uint16_t> o(s.o_size());
    std::vector<float> lse(s.lse_size());
    std::vector<probe::head_counters> counters(2);
    const std::uint64_t rows[2] = {s.q_row(0, 0, 5), s.q_row(0, 1, 63)};
    std::vector<float> score(2 * s.seq_k, -7), pbar(2 * s.seq_k, -7), offset(2 * s.seq_k, -7);
    attn::flash_args a{p.prob, {m}, {}, counters.data(), {}};
    a.t.q = p.q.data();
    a.t.k = p.k.data();
    a.t.v = p.v.data();
    a.t.o_bf16 = o.data();
    a.t.lse = lse.data();
    a.dump = {rows, 2, score.data(), pbar.data(), offset.data()};
    host::attention_forward(a);
    for (int r = 0; r < 2; ++r) {
      int ones = 0;
      for (std::size_t j = 0; j < s.seq_k; ++j) {
        const std::size_t at = r * s.seq_k + j;
        ASSERT_NE(score[at], -7.0f) << j;
        ones += pbar[at] == 1.0f;
        if (m == out_mode::bf16 && j < 4) {
          EXPECT_EQ(pbar[at], 1.0f);
        }
        const double want = std::exp2(static_cast<double>(score[at]) * p.prob.scale * 1.4426950408889634 - offset[at]);
        EXPECT_NEAR(pbar[at], want, 1e-5 * (1 + want)) << j;
      }
      EXPECT_EQ(ones, m == out_mode::bf16 ? 4 : 0);
    }
  }
}

// The probe's counters against the row dumps of the same call, every row dumped: P-bar == 1 events
// are the dumped P-bar equal to 1, and the repeats are replayed here from the dumped raw scores key
// tile by key tile (64 keys: attn::fwd_keys), as docs/attention.md defines them (a new maximum
// restarts both counts; exact: equal to it; near: at or above it minus the tolerance, in raw units,
// rounded to f32 once). Tolerances 0 and 1e-9 leave no gap between the maximum and the scores whose
// P-bar may be 1, 1e-3 is the default (one score near the maximum, in most rows of random inputs),
// 0.5 makes many scores near: the kernel's shortcuts for one score near the maximum and its
// per-score compares both run.
TEST(FlashTwin, ProbeCountsMatchTheDumpedScores) {
  for (const shape_case& sc : active_cases()) {
    const attn::shape& s = sc.s;
    for (bool planted : {false, true}) {
      const problem_data p = make(s, sc.causal, 23, planted ? 0.25 : 2.0, planted);
      for (float tol : {0.0f, 1e-9f, 1e-3f, 0.5f})
        for (out_mode m : {out_mode::bf16, out_mode::debias})
          for (attn::score_scaling scal : {attn::score_scaling::unfused, attn::score_scaling::fused})
            for (attn::exp2_policy ex : {attn::exp2_policy::software, attn::exp2_policy::sfu}) {
              const std::size_t rows_n = s.batch * s.heads * s.seq_q;
              std::vector<std::uint64_t> rows(rows_n);
              for (std::size_t i = 0; i < rows_n; ++i) rows[i] = i;
              std::vector<float> score(rows_n * s.seq_k, -7), pbar(rows_n * s.seq_k, -7);
              std::vector<std::uint16_t> o(s.o_size());
              std::vector<float> lse(s.lse_size());
              std::vector<probe::head_counters> counters(s.batch * s.heads);
              attn::flash_options opt{m, scal};
              opt.near_tolerance = tol;
              opt.exp = ex;
              attn::flash_args a{p.prob, opt, {}, counters.data(), {}};
              a.t.q = p.q.data();
              a.t.k = p.k.data();
              a.t.v = p.v.data();
              a.t.o_bf16 = o.data();
              a.t.lse = lse.data();
              a.dump = {rows.data(), static_cast<std::uint32_t>(rows_n), score.data(), pbar.data(), nullptr};
              host::attention_forward(a);
              const float near_raw = static_cast<float>(static_cast<double>(tol) / p.prob.scale);
              for (std::size_t b = 0; b < s.batch; ++b)
                for (std::size_t h = 0; h < s.heads; ++h) {
                  std::uint64_t ones = 0, exact_rows = 0, near_rows = 0;
                  for (std::size_t i = 0; i < s.seq_q; ++i) {
                    const std::size_t at = s.q_row(b, h, i) * s.seq_k, vis = p.prob.visible_keys(i);
                    float mx = -INFINITY;
                    std::uint32_t exact = 0, near = 0;
                    for (std::size_t k0 = 0; k0 < vis; k0 += attn::fwd_keys) {
                      const std::size_t k1 = std::min<std::size_t>(k0 + attn::fwd_keys, vis);
                      float tmax = -INFINITY;
                      for (std::size_t j = k0; j < k1; ++j) tmax = std::fmax(tmax, score[at + j]);
                      const float mn = std::fmax(mx, tmax), lo = mn - near_raw;
                      if (mn > mx || mx == -INFINITY) exact = near = 0;
                      if (mn != -INFINITY)
                        for (std::size_t j = k0; j < k1; ++j) {
                          exact += score[at + j] == mn;
                          near += score[at + j] >= lo;
                        }
                      mx = mn;
                    }
                    for (std::size_t j = 0; j < vis; ++j) ones += pbar[at + j] == 1.0f;
                    if (mx != -INFINITY) {
                      exact_rows += exact > 1;
                      near_rows += near > 1;
                    }
                  }
                  const std::string what = std::string(to_string(m)) + " tol " + std::to_string(tol) +
                                           (planted ? " planted" : "") + " head " + std::to_string(h);
                  const probe::head_counters& got = counters[b * s.heads + h];
                  EXPECT_EQ(got.p_one, ones) << what;
                  EXPECT_EQ(got.repeated_max_exact, exact_rows) << what;
                  EXPECT_EQ(got.repeated_max_near, near_rows) << what;
                  if (planted && h == 0 && m == out_mode::bf16 && scal == attn::score_scaling::unfused) {
                    EXPECT_GT(got.p_one, 0u) << what;  // the four planted keys of every row
                  }
                }
            }
    }
  }
}

TEST(FlashTwin, RejectsWhatTheKernelsDoNotSupport) {
  problem_data p = make({1, 1, 1, 8, 8, 64, 64}, false, 1);
  std::vector<std::uint16_t> o(p.prob.shape.o_size());
  std::vector<float> lse(p.prob.shape.lse_size());
  attn::flash_args a{p.prob, {}, {}, nullptr, {}};
  a.t.q = p.q.data();
  a.t.k = p.k.data();
  a.t.v = p.v.data();
  a.t.o_bf16 = o.data();
  a.t.lse = lse.data();
  EXPECT_NO_THROW(host::attention_forward(a));
  auto bad = a;
  bad.prob.shape.dim = 32;
  bad.prob.shape.dim_v = 32;
  EXPECT_THROW(host::attention_forward(bad), std::invalid_argument);
  bad = a;
  bad.opt.mode = out_mode::fp32;  // needs o_f32
  EXPECT_THROW(host::attention_forward(bad), std::invalid_argument);
  bad = a;
  bad.opt.mode = out_mode::debias;
  bad.opt.beta = 1.0f;
  EXPECT_THROW(host::attention_forward(bad), std::invalid_argument);
  for (float shift : {0.5f, 100.5f, std::nanf("")}) {
    bad = a;
    bad.opt.mode = out_mode::debias;
    bad.opt.debias_max_shift = shift;
    EXPECT_THROW(host::attention_forward(bad), std::invalid_argument) << shift;
  }
  bad = a;
  bad.prob.scale = std::nan("");
  EXPECT_THROW(host::attention_forward(bad), std::invalid_argument);
}

}  // namespace
