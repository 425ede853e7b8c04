// SPDX-License-Identifier: Apache-2.0
/// @file emu::sum: the tie demo of the mechanism (a bf16 tie broken by an f32 tail), and long sums
/// in every order against a step-by-step exact oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/emu/sum.hpp"

namespace tiebreak::test {
namespace {

/// Two same-sign bf16 values of one binade [2^e, 2^(e+1)) with integer significands A, B in
/// [128, 256): their sum (A + B) * 2^(e-7) lies in the next binade, whose grid is 2^(e-6), so it is
/// a round-to-nearest-even tie exactly when A + B is odd.
struct tie_pair {
  std::uint64_t a, b;
  bool sign;
  std::uint64_t down, up;  // the two bf16 neighbours of the tie (magnitudes as encodings)
  bool even_is_up;
};

tie_pair make_tie(splitmix64& g) {
  tie_pair t;
  const std::uint64_t e_field = 100 + g() % 40;  // binades around 1
  std::uint64_t A = 128 + g() % 128, B = 128 + g() % 128;
  if ((A + B) % 2 == 0) B = B == 255 ? 254 : B + 1;
  if ((A + B) % 2 == 0) B -= 2;
  t.sign = g() & 1;
  const std::uint64_t s = t.sign ? 0x8000 : 0;
  t.a = s | (e_field << 7) | (A - 128);
  t.b = s | (e_field << 7) | (B - 128);
  const std::uint64_t half = (A + B) / 2;  // sum = (half + 1/2) * 2^(e-6); half in [128, 255]
  t.down = s | ((e_field + 1) << 7) | (half - 128);
  t.up = s | ((e_field + 1) << 7) | (half + 1 - 128);  // half + 1 == 256 carries into the exponent
  if (half + 1 == 256) t.up = s | ((e_field + 2) << 7);
  t.even_is_up = (half % 2) == 1;
  return t;
}

emu::sum_config demo_config(emu::sum_order order) {
  emu::sum_config c;
  c.input = formats::bf16;
  c.accum = formats::f32;
  c.output = formats::bf16;
  c.accum_rounding = rounding{round_mode::rne};
  c.output_rounding = rounding{round_mode::rne};
  c.order = order;
  c.block = 4;
  return c;
}

// The mechanism: P-bar == 1 makes the large terms exact bf16 values; their sum is a tie; the many
// tiny terms accumulated in f32 set the sticky bit, so the tie always breaks the same way.
TEST(sum, tie_demo_tail_decides_every_time) {
  splitmix64 g(2024);
  int away = 0, toward = 0, even_up = 0, even_down = 0;
  for (int i = 0; i < 2000; ++i) {
    const tie_pair t = make_tie(g);
    const std::uint64_t s = t.sign ? 0x8000 : 0;
    const std::uint64_t a_exp = (t.a >> 7) & 0xff;
    // Tail terms: 16 values of about 2^-12 relative (2^-16 each), in bf16, same or opposite sign.
    auto with_tail = [&](bool same) {
      std::vector<std::uint64_t> xs = {t.a, t.b};
      for (int k = 0; k < 16; ++k) xs.push_back((same ? s : (s ^ 0x8000)) | ((a_exp - 16) << 7) | (g() & 0x7f));
      return xs;
    };
    for (emu::sum_order order : {emu::sum_order::sequential, emu::sum_order::pairwise, emu::sum_order::blocked}) {
      const emu::sum_config c = demo_config(order);
      const auto same = with_tail(true), opposite = with_tail(false);
      const std::uint64_t plain[] = {t.a, t.b};
      const auto r_same = emu::sum(c, same.data(), same.size(), emu::no_steps{});
      const auto r_opp = emu::sum(c, opposite.data(), opposite.size(), emu::no_steps{});
      const auto r_plain = emu::sum(c, plain, 2, emu::no_steps{});
      EXPECT_EQ(r_same.bits, t.up) << "same-sign tail: away from zero";
      EXPECT_EQ(r_opp.bits, t.down) << "opposite-sign tail: toward zero";
      EXPECT_EQ(r_plain.bits, t.even_is_up ? t.up : t.down) << "no tail: ties to even";
      away += r_same.bits == t.up;
      toward += r_opp.bits == t.down;
      (r_plain.bits == t.up ? even_up : even_down) += 1;
      // The f32 accumulator holds the tie plus the tail exactly: one rounding at the output.
      EXPECT_TRUE(r_plain.output.guard && !r_plain.output.round_bit && !r_plain.output.sticky);
      EXPECT_TRUE(r_same.output.guard && (r_same.output.round_bit || r_same.output.sticky));
    }
  }
  std::printf("[ tie demo ] away %d/6000 with same-sign tail, toward %d/6000 with opposite tail, "
              "no tail: %d up / %d down\n", away, toward, even_up, even_down);
  // Without a tail the ties split between up and down (to even): neither direction always wins.
  EXPECT_GT(even_up, 0);
  EXPECT_GT(even_down, 0);
}

/// Exact reference of a sum with per-step rounding: each addition rounded by the dyadic oracle.
std::uint64_t oracle_add(const format_desc& f, std::uint64_t a, std::uint64_t b, rounding r) {
  const dyadic x = decode_exact(f, a), y = decode_exact(f, b);
  const dyadic s = x + y;
  const ref_format F = ref_of(f);
  const bool sa = (a >> (f.storage_bits() - 1)) & 1, sb = (b >> (f.storage_bits() - 1)) & 1;
  if (s.sign() == 0) return encode(F, sa == sb ? sa : r.mode == round_mode::rd, 0, 0);
  return expect_dyadic(f, s, r).bits;
}

std::uint64_t oracle_seq(const emu::sum_config& c, const std::vector<std::uint64_t>& xs, std::size_t lo, std::size_t hi) {
  std::uint64_t acc = expect_dyadic(c.accum, decode_exact(c.input, xs[lo]), c.accum_rounding, {},
                                    (xs[lo] >> (c.input.storage_bits() - 1)) & 1).bits;
  for (std::size_t i = lo + 1; i < hi; ++i) {
    const std::uint64_t x = expect_dyadic(c.accum, decode_exact(c.input, xs[i]), c.accum_rounding, {},
                                          (xs[i] >> (c.input.storage_bits() - 1)) & 1).bits;
    acc = oracle_add(c.accum, acc, x, c.accum_rounding);
  }
  return acc;
}
std::uint64_t oracle_pairwise(const emu::sum_config& c, const std::vector<std::uint64_t>& xs, std::size_t lo,
                              std::size_t hi) {
  if (hi - lo == 1) return oracle_seq(c, xs, lo, hi);
  const std::size_t mid = lo + (hi - lo) / 2;
  return oracle_add(c.accum, oracle_pairwise(c, xs, lo, mid), oracle_pairwise(c, xs, mid, hi), c.accum_rounding);
}

// Long sums (bf16 inputs, f32 accumulation, bf16 output) in every order and accumulation mode,
// with ties, repeated maxima and cancellation, against the step-by-step oracle; the final narrowing
// is the oracle's rounding of the oracle's accumulator.
TEST(sum, long_sums_every_order_against_oracle) {
  mismatch_log log;
  parallel_sweep("long_sums", full_level ? 600 : 60, 1, [&](std::uint64_t i) {
    splitmix64 g(i + 99);
    const std::size_t n = 1 + static_cast<std::size_t>(g() % 300);
    std::vector<std::uint64_t> xs(n);
    const std::uint64_t big_term = 0x3f80 | (g() & 0x7f);
    for (auto& x : xs) {
      const std::uint64_t r = g();
      if (r % 5 == 0) x = big_term;                                             // repeated maximum
      else if (r % 5 == 1) x = big_term ^ 0x8000;                               // cancellation
      else x = ((r >> 8) & 0x8000) | ((100 + (r >> 20) % 30) << 7) | ((r >> 40) & 0x7f);
    }
    for (emu::sum_order order : {emu::sum_order::sequential, emu::sum_order::pairwise, emu::sum_order::blocked}) {
      for (round_mode m : deterministic_round_modes) {
        emu::sum_config c = demo_config(order);
        c.accum_rounding = rounding{m};
        c.output_rounding = rounding{round_mode::rne};
        c.block = 16;
        std::uint64_t want;
        if (order == emu::sum_order::pairwise) {
          want = oracle_pairwise(c, xs, 0, n);
        } else if (order == emu::sum_order::blocked && c.block < n) {
          want = oracle_seq(c, xs, 0, c.block);
          for (std::size_t lo = c.block; lo < n; lo += c.block)
            want = oracle_add(c.accum, want, oracle_seq(c, xs, lo, std::min(n, lo + c.block)), c.accum_rounding);
        } else {
          want = oracle_seq(c, xs, 0, n);
        }
        std::size_t adds = 0;
        const auto got = emu::sum(c, xs.data(), n, [&](const emu::sum_step& st) { adds += st.kind == emu::step_kind::add; });
        if (got.accum_bits != want) log.add("sum accum: case " + std::to_string(i) + " order " + std::to_string(static_cast<int>(order)) + " mode " + std::string(to_string(m)));
        const std::uint64_t out = expect_dyadic(c.output, decode_exact(c.accum, want), c.output_rounding, {},
                                                (want >> 31) & 1).bits;
        if (got.bits != out) log.add("sum output: case " + std::to_string(i));
        if (adds != n - 1 || got.additions != n - 1) log.add("sum additions: case " + std::to_string(i));
      }
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

// ---- stochastic rounding with fresh words per step ------------------------------------------------

// sr_source::philox: step k of a sum of n inputs draws philox_word(seed, stream, k), with the load of
// x[i] at step i, addition j at n + j and the output at 2n - 1. Replayed step by step with the
// oracle (f32 inputs, bf16 accumulation, e5m2 output: every kind of step rounds).
TEST(sum, sr_per_step_words_follow_the_documented_steps) {
  mismatch_log log;
  for (std::uint64_t i = 0; i < 200; ++i) {
    splitmix64 g(i + 7000);
    const std::size_t n = 1 + static_cast<std::size_t>(g() % 40);
    std::vector<std::uint64_t> xs(n);
    for (auto& x : xs) {
      const std::uint64_t r = g();
      x = ((r & 1) << 31) | ((120 + (r >> 8) % 10) << 23) | ((r >> 20) & 0x7fffff);
    }
    emu::sum_config c;
    c.input = formats::f32;
    c.accum = formats::bf16;
    c.output = formats::e5m2;
    c.accum_rounding = sr_t{0};
    c.output_rounding = sr_t{0};
    const std::uint64_t seed = g(), stream = g() % 5;
    c.random = sr_source::philox(seed, stream);
    const auto word = [&](std::uint64_t k) { return rounding{round_mode::sr, philox_word(seed, stream, k)}; };
    const auto load = [&](std::size_t k) {
      return expect_dyadic(c.accum, decode_exact(c.input, xs[k]), word(k), {}, (xs[k] >> 31) & 1).bits;
    };
    std::uint64_t acc = load(0);
    for (std::size_t k = 1; k < n; ++k) acc = oracle_add(c.accum, acc, load(k), word(n + k - 1));
    const std::uint64_t out = expect_dyadic(c.output, decode_exact(c.accum, acc), word(2 * n - 1), {}, (acc >> 15) & 1).bits;
    const auto got = emu::sum(c, xs.data(), n, emu::no_steps{});
    if (got.accum_bits != acc || got.bits != out) log.add("sr per-step replay: case " + std::to_string(i));
    // Same (seed, stream): same bits.
    const auto again = emu::sum(c, xs.data(), n, emu::no_steps{});
    if (again.accum_bits != got.accum_bits || again.bits != got.bits) log.add("sr not reproducible: case " + std::to_string(i));
  }
  EXPECT_EQ(log.count(), 0u) << log.report();
}

// The default source keeps the word of each `rounding` at every step (sr_t{w} as before).
TEST(sum, sr_fixed_word_is_the_default) {
  std::vector<std::uint64_t> xs(64, 0x3b00);  // bf16 2^-9: a quarter ulp of the sum's binade [1, 2)
  xs[0] = 0x3f80;                             // 1
  emu::sum_config c;
  c.accum = formats::bf16;
  for (std::uint32_t w : {0x00000000u, 0xbfffffffu, 0xc0000000u, 0xffffffffu}) {
    c.accum_rounding = sr_t{w};
    const auto r = emu::sum(c, xs.data(), xs.size(), emu::no_steps{});
    // Each addition discards a quarter ulp: all round up (1 + 63 * 2^-7) when w >= 0.75 * 2^32,
    // all round down (1) otherwise.
    EXPECT_EQ(r.bits, w >= 0xc0000000u ? 0x3fbfu : 0x3f80u) << w;
  }
}

// Expected value: with a fresh uniform word per step, each rounding is unbiased given the past, so
// E[sum] is the exact sum. 1 + 63 terms of 2^-9 (1 + k/8), bf16 accumulation: rne stagnates at 1
// (every term is below half an ulp), 22.75 ulps short; the sr mean over S = 4000 seeds must be
// within t = 0.8 ulp. Bound: the errors of all S * 63 roundings form a martingale difference
// sequence with |d| <= 1 ulp = 2^-7 (the partial sums stay in [1, 2); pairwise partial sums are
// smaller, with smaller ulps), so by Azuma-Hoeffding P(|mean - exact| >= t ulp) <=
// 2 exp(-t^2 S / (2 * 63)) = 3.3e-9: the false-failure rate for seeds drawn at random, treating
// Philox words as independent uniform draws. The seeds are fixed (1 .. 4000).
TEST(sum, sr_per_step_mean_is_the_exact_sum) {
  std::vector<std::uint64_t> xs(64);
  xs[0] = 0x3f80;
  double exact = 1;
  for (std::size_t k = 1; k < xs.size(); ++k) {
    const std::uint64_t frac = (k % 8) << 4;  // 1 + (k % 8) / 8
    xs[k] = (std::uint64_t{127 - 9} << 7) | frac;
    exact += std::ldexp(1.0 + static_cast<double>(k % 8) / 8, -9);
  }
  const double ulp = std::ldexp(1.0, -7);
  for (emu::sum_order order : {emu::sum_order::sequential, emu::sum_order::pairwise}) {
    emu::sum_config c;
    c.accum = formats::bf16;
    c.order = order;
    c.accum_rounding = rne_t{};
    const double rne_err = to_double(formats::bf16, emu::sum(c, xs.data(), xs.size(), emu::no_steps{}).bits) - exact;
    c.accum_rounding = sr_t{0};
    constexpr int seeds = 4000;
    double total = 0;
    std::set<std::uint64_t> outcomes;
    for (int s = 1; s <= seeds; ++s) {
      c.random = sr_source::philox(static_cast<std::uint64_t>(s), 0);
      const std::uint64_t bits = emu::sum(c, xs.data(), xs.size(), emu::no_steps{}).bits;
      outcomes.insert(bits);
      total += to_double(formats::bf16, bits);
    }
    const double mean_err_ulps = (total / seeds - exact) / ulp;
    std::printf("[sum sr] order %d: exact %.9g, rne error %.3f ulp, sr mean error %.4f ulp over %d seeds, %zu outcomes\n",
                static_cast<int>(order), exact, rne_err / ulp, mean_err_ulps, seeds, outcomes.size());
    EXPECT_LT(std::fabs(mean_err_ulps), 0.8);
    if (order == emu::sum_order::sequential) {
      EXPECT_LT(rne_err / ulp, -10.0);  // the stagnation sr removes
      // Fresh words: 63 independent decisions spread the outcomes (measured: 28 distinct sums);
      // one shared word makes the additions of a quarter ulp all go one way (sr_fixed_word_is_the_default).
      EXPECT_GT(outcomes.size(), 8u);
    }
  }
}

}  // namespace
}  // namespace tiebreak::test
