// SPDX-License-Identifier: Apache-2.0
/// @file Identifying a tensor-core instruction's arithmetic: designed cases, the hypothesis grid, elimination.
///
/// The identification program tiebreak_mma_identify (cuda/mma/identify_main.cpp) runs each case on the hardware and hands the
/// results to mma_eliminator, which keeps the hypotheses (complete parameter sets of mma_model)
/// that predict every result bit for bit and says, case by case, which parameter values a case
/// ruled out. Nothing here needs a GPU: tests/mma/mma_identify_test.cpp feeds it a model in place of
/// the hardware and checks that the cases recover that model's parameters.
/// Host only (std::vector, std::string, std::thread): part of tiebreak::host, header-only, so the
/// identification program also builds without the host library (tools/device-mma.sh).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak::emu {

/// One designed case: one output element d = c + a . b (a, b of length k; unused entries zero).
struct mma_case {
  std::string family;  ///< which question it asks (width, truncation, rounding, grouping, ...)
  std::string what;    ///< the inputs in words
  std::uint64_t c = 0;
  std::vector<std::uint64_t> a, b;
};

/// A compact hypothesis: the parameters the identification decides (formats and shape come from the shape).
struct mma_hyp {
  std::uint8_t group = 1;
  mma_grouping grouping = mma_grouping::contiguous;
  mma_c_order c_order = mma_c_order::first;
  mma_exp_ref exp_ref = mma_exp_ref::nominal;
  std::uint8_t align_bits = 24;  ///< 255: exact
  round_mode align_round = round_mode::rz;
  round_mode step_round = round_mode::rz;
  round_mode out_round = round_mode::rne;
  bool acc_f16 = false;
  std::uint8_t acc_man = 23;     ///< fraction bits of an f32-range accumulator (mma_acc_format)
  bool daz = false, ftz = false, overflow_to_inf = false;
  bool positive_zero = false;
};

/// The model of hypothesis h on instruction shape `shape` (formats, m, n, k).
inline mma_model mma_apply(const mma_model& shape, const mma_hyp& h) {
  mma_model m = shape;
  m.group = h.group;
  m.grouping = h.grouping;
  m.c_order = h.c_order;
  m.exp_ref = h.exp_ref;
  m.align_bits = h.align_bits == 255 ? mma_align_exact : h.align_bits;
  m.align_round = h.align_round;
  m.step_round = h.step_round;
  m.out_round = h.out_round;
  m.acc_fmt = h.acc_f16 ? formats::f16 : h.acc_man == 23 ? formats::f32 : mma_acc_format(h.acc_man);
  m.daz = h.daz;
  m.ftz = h.ftz;
  m.overflow_to_inf = h.overflow_to_inf;
  m.positive_zero = h.positive_zero;
  return m;
}

/// The hypothesis of a model (inverse of mma_apply on the decided parameters).
inline mma_hyp mma_hyp_of(const mma_model& m) {
  mma_hyp h;
  h.group = static_cast<std::uint8_t>(m.group);
  h.grouping = m.grouping;
  h.c_order = m.c_order;
  h.exp_ref = m.exp_ref;
  h.align_bits = m.align_bits >= mma_align_exact ? 255 : static_cast<std::uint8_t>(m.align_bits);
  h.align_round = m.align_round;
  h.step_round = m.step_round;
  h.out_round = m.out_round;
  h.acc_f16 = same_format(m.acc_fmt, formats::f16);
  h.acc_man = static_cast<std::uint8_t>(h.acc_f16 ? 23 : m.acc_fmt.man_bits);
  h.daz = m.daz;
  h.ftz = m.ftz;
  h.overflow_to_inf = m.overflow_to_inf;
  h.positive_zero = m.positive_zero;
  return h;
}

/// Value of parameter `bit` (mma_param_*) of h as text.
inline std::string mma_hyp_value(const mma_hyp& h, int bit) {
  switch (bit) {
    case 0: return std::to_string(h.group);
    case 1: return std::string(to_string(h.grouping));
    case 2: return std::string(to_string(h.c_order));
    case 3: return std::string(to_string(h.exp_ref));
    case 4: return h.align_bits == 255 ? std::string("exact") : std::to_string(h.align_bits);
    case 5: return std::string(to_string(h.align_round));
    case 6: return std::string(to_string(h.step_round));
    case 7: return std::string(to_string(h.out_round));
    case 8: return h.acc_f16 ? "f16" : std::string(mma_acc_format(h.acc_man).name);
    case 9: return h.daz ? "true" : "false";
    case 10: return h.ftz ? "true" : "false";
    case 11: return h.overflow_to_inf ? "true" : "false";
    default: return h.positive_zero ? "true" : "false";
  }
}

/// Every hypothesis the identification considers for an instruction of this shape: group in {1,2,4,...,k},
/// contiguous or strided groups, C first or last, nominal or lead exponent, align_bits 8..48 or
/// exact, align_round rz/rd/rne, step_round rz/rne/rna/ru/rd, daz, ftz, overflow_to_inf,
/// positive_zero; the accumulator: for an f16 C f32 (with out_round rz/rne/rna/ru/rd) or f16; for
/// 8-bit inputs also mma_acc_format(10..22) (narrower than f32: the H200 run of 2026-11-29 showed
/// 13 fraction bits for FP8 wgmma). Size: 302400 (16-bit inputs, f32 C) to 2.7 M (FP8).
inline std::vector<mma_hyp> mma_hypotheses(const mma_model& shape) {
  std::vector<mma_hyp> out;
  const bool c16 = same_format(shape.c_fmt, formats::f16);
  const round_mode steps[] = {round_mode::rz, round_mode::rne, round_mode::rna, round_mode::ru, round_mode::rd};
  const round_mode aligns[] = {round_mode::rz, round_mode::rd, round_mode::rne};
  std::vector<int> widths;
  for (int w = 8; w <= mma_align_max; ++w) widths.push_back(w);
  widths.push_back(255);
  // Accumulators: 0 = f16, otherwise the fraction bits of an f32-range one.
  std::vector<int> accs{23};
  if (c16) accs.push_back(0);
  if (shape.a_fmt.man_bits <= 3)
    for (int a = 10; a <= 22; ++a) accs.push_back(a);
  for (int g = 1; g <= shape.k; g *= 2) {
    if (shape.k % g != 0) continue;
    for (int gr = 0; gr < 2; ++gr) {
      if (gr == 1 && (g == 1 || g == shape.k)) continue;
      for (int co = 0; co < 2; ++co) {
        if (co == 1 && g == shape.k) continue;
        for (int er = 0; er < 2; ++er)
          for (int w : widths)
            for (round_mode ar : aligns)
              for (round_mode sr : steps)
                for (int acc : accs)
                  for (int oi = 0; oi < ((c16 && acc != 0) ? 5 : 1); ++oi)
                    for (int flags = 0; flags < 16; ++flags) {
                      mma_hyp h;
                      h.group = static_cast<std::uint8_t>(g);
                      h.grouping = gr ? mma_grouping::strided : mma_grouping::contiguous;
                      h.c_order = co ? mma_c_order::last : mma_c_order::first;
                      h.exp_ref = er ? mma_exp_ref::lead : mma_exp_ref::nominal;
                      h.align_bits = static_cast<std::uint8_t>(w);
                      h.align_round = ar;
                      h.step_round = sr;
                      h.acc_f16 = acc == 0;
                      h.acc_man = static_cast<std::uint8_t>(acc == 0 ? 23 : acc);
                      h.out_round = (c16 && acc != 0) ? steps[oi] : round_mode::rne;
                      h.daz = (flags & 1) != 0;
                      h.ftz = (flags & 2) != 0;
                      h.overflow_to_inf = (flags & 4) != 0;
                      h.positive_zero = (flags & 8) != 0;
                      out.push_back(h);
                    }
      }
    }
  }
  return out;
}

namespace detail {

/// The encoding of x (a double) in f, or false when x is not exactly representable there.
inline bool mma_enc(const format_desc& f, double x, std::uint64_t& bits) {
  const round_result r = f64_bits_to(f, f64_to_bits(x), rounding{round_mode::rne, 0});
  bits = r.bits;
  return !r.inexact() && !r.overflow() && !f.is_inf(r.bits) && !f.is_nan(r.bits);
}

/// Splits product p into a * b with a, b exact in f (a keeps p's significand). False if impossible.
inline bool mma_split(const format_desc& f, double p, std::uint64_t& a, std::uint64_t& b) {
  if (p == 0) { a = 0; b = 0; return true; }
  const int e = std::ilogb(p);
  for (int d = 0; d < 600; ++d) {
    for (int sgn = 0; sgn < 2; ++sgn) {
      const int eb = e / 2 + (sgn ? -d : d);
      if (mma_enc(f, std::ldexp(1.0, eb), b) && mma_enc(f, std::ldexp(p, -eb), a)) return true;
    }
  }
  return false;
}

}  // namespace detail

/// Builds a case from exact doubles; returns false (and adds nothing) when an input is not exactly
/// representable (the case does not apply to this format).
inline bool mma_add_case(std::vector<mma_case>& out, const mma_model& shape, std::string family, std::string what,
                         double c, const std::vector<std::pair<int, double>>& products) {
  mma_case cs;
  cs.family = std::move(family);
  cs.what = std::move(what);
  cs.a.assign(static_cast<std::size_t>(shape.k), 0);
  cs.b.assign(static_cast<std::size_t>(shape.k), 0);
  if (!detail::mma_enc(shape.c_fmt, c, cs.c)) return false;
  for (const auto& [pos, p] : products) {
    if (pos < 0 || pos >= shape.k) return false;
    if (!detail::mma_split(shape.a_fmt, p, cs.a[static_cast<std::size_t>(pos)], cs.b[static_cast<std::size_t>(pos)]))
      return false;
  }
  out.push_back(std::move(cs));
  return true;
}

/// Builds a case from explicit factor pairs {position, a, b} (exact doubles); false as above.
inline bool mma_add_case_ab(std::vector<mma_case>& out, const mma_model& shape, std::string family, std::string what,
                            double c, const std::vector<std::tuple<int, double, double>>& factors) {
  mma_case cs;
  cs.family = std::move(family);
  cs.what = std::move(what);
  cs.a.assign(static_cast<std::size_t>(shape.k), 0);
  cs.b.assign(static_cast<std::size_t>(shape.k), 0);
  if (!detail::mma_enc(shape.c_fmt, c, cs.c)) return false;
  for (const auto& [pos, x, y] : factors) {
    if (pos < 0 || pos >= shape.k) return false;
    if (!detail::mma_enc(shape.a_fmt, x, cs.a[static_cast<std::size_t>(pos)]) ||
        !detail::mma_enc(shape.b_fmt, y, cs.b[static_cast<std::size_t>(pos)]))
      return false;
  }
  out.push_back(std::move(cs));
  return true;
}

/// The designed cases for an instruction of this shape, in the order they are best asked.
inline std::vector<mma_case> mma_identify_cases(const mma_model& shape) {
  std::vector<mma_case> out;
  const format_desc& f = shape.a_fmt;
  const int k = shape.k;
  // The largest power of two that is a product of two inputs, kept below the accumulator's range.
  const int emax_p = std::min(2 * f.emax(), same_format(shape.c_fmt, formats::f16) ? 14 : 100);
  const int emin_p = 2 * (f.emin() - f.man_bits);
  const auto P = [](int e) { return std::ldexp(1.0, e); };
  const int X = std::min(emax_p - 2, 20);  // a big addend, exponent X
  const std::string sx = "2^" + std::to_string(X);

  // 1. Alignment width: X - X + 2^(X-j): the small product survives iff j <= width (results exact).
  for (int j = 1; j <= 60 && X - j >= emin_p; ++j)
    mma_add_case(out, shape, "width", sx + " - " + sx + " + 2^(" + std::to_string(X) + "-" + std::to_string(j) + ")", 0.0,
                 {{0, P(X)}, {1, -P(X)}, {2, P(X - j)}});
  // 1b. The same with a product whose significand is in [2, 4) (1.5 * 1.5): nominal vs lead
  //     reference exponent.
  const int xa = X / 2, xb = X - X / 2;
  for (int j = 1; j <= 60 && X - j >= emin_p; ++j)
    mma_add_case_ab(out, shape, "width-2.25", "(1.5*2^" + std::to_string(xa) + ")(1.5*2^" + std::to_string(xb) + ") - same + 2^(" +
                    std::to_string(X) + "-" + std::to_string(j) + ")",
                    0.0, {{0, 1.5 * P(xa), 1.5 * P(xb)}, {1, -1.5 * P(xa), 1.5 * P(xb)}, {2, P(X - j), 1.0}});
  // 1c. C as the big addend: C = X, product -X, small product.
  for (int j = 1; j <= 60 && X - j >= emin_p; ++j)
    mma_add_case(out, shape, "width-c", "C=" + sx + ", -" + sx + " + 2^(" + std::to_string(X) + "-" + std::to_string(j) + ")",
                 P(X), {{0, -P(X)}, {1, P(X - j)}});
  // 1d. Accumulator width: n products 2^X (their sum 2^(X + log2 n) carries above X) and a small
  //     2^(X-j) that survives the alignment (j <= align_bits): the normalised sum keeps it iff the
  //     accumulator has >= j + log2 n fraction bits (FP8 wgmma: 13; f32: 23).
  for (int n : {2, 4})
    for (int j = 1; j <= 40 && X - j >= emin_p && n < k; ++j) {
      std::vector<std::pair<int, double>> ps;
      for (int i = 0; i < n; ++i) ps.push_back({i, P(X)});
      ps.push_back({n, P(X - j)});
      mma_add_case(out, shape, "acc-width", std::to_string(n) + " x " + sx + " + 2^(" + std::to_string(X) + "-" + std::to_string(j) + ")",
                   0.0, ps);
    }
  // 2. Truncation vs rounding at alignment: a multi-bit small product (1.75 * 1.25 = 10.0011b), both
  //    signs, straddling the cut.
  for (int j = 4; j <= 56 && X - j - 4 >= emin_p; ++j)
    for (double sg : {1.0, -1.0})
      mma_add_case_ab(out, shape, "align-round", sx + " - " + sx + " " + (sg > 0 ? "+ " : "- ") + "1.75*1.25*2^(" + std::to_string(X) + "-" + std::to_string(j) + ")",
                      0.0, {{0, P(xa), P(xb)}, {1, -P(xa), P(xb)}, {2, sg * 1.75 * P((X - j) / 2), 1.25 * P(X - j - (X - j) / 2)}});
  // 2b. Small addend and a big one that does not cancel: truncation at the alignment plus the final
  //     normalisation, both signs of the small addend.
  for (int j = 4; j <= 40 && X - j - 4 >= emin_p; ++j)
    for (double sg : {1.0, -1.0})
      mma_add_case_ab(out, shape, "align-round", "C=1.5*" + sx + " " + (sg > 0 ? "+ " : "- ") + "1.75*1.25*2^(" + std::to_string(X) + "-" + std::to_string(j) + ")",
                      1.5 * P(X), {{0, sg * 1.75 * P((X - j) / 2), 1.25 * P(X - j - (X - j) / 2)}});
  // 3. Normalisation rounding: ties, near-ties, both signs, on the accumulator's grid.
  for (int pacc : {23, 10}) {
    for (double sg : {1.0, -1.0}) {
      const int e = std::min(X, 14);
      const double c0 = sg * P(e), c1 = sg * (P(e) + P(e - pacc));
      const double half = P(e - pacc - 1);
      for (double c : {c0, c1}) {
        mma_add_case(out, shape, "step-round", "C + half ulp (tie)", c, {{0, sg * half}});
        mma_add_case(out, shape, "step-round", "C + half ulp + 2^-6 ulp", c, {{0, sg * half}, {1, sg * half / 64}});
        mma_add_case(out, shape, "step-round", "C + half ulp - 2^-6 ulp", c, {{0, sg * half}, {1, -sg * half / 64}});
        mma_add_case(out, shape, "step-round", "C - half ulp", c, {{0, -sg * half}});
        mma_add_case(out, shape, "step-round", "C + 3/4 ulp", c, {{0, sg * 1.5 * half}});
        mma_add_case(out, shape, "step-round", "C + 1/4 ulp", c, {{0, sg * 0.5 * half}});
        // The same through two products (C zero): the sum of two exact products rounds.
        mma_add_case(out, shape, "step-round", "p + tie (two products)", 0.0, {{0, c}, {1, sg * half}});
        mma_add_case(out, shape, "step-round", "p + tie (two products, 1.5)", 0.0, {{0, 1.5 * c}, {1, sg * half}});
      }
    }
  }
  // 3b. Double rounding through an f32 accumulator into an f16 C (f16 accumulate): the exact sum
  //     just above an f16 tie, the excess below f32's lsb.
  for (int j = 24; j <= 30; ++j)
    for (double sg : {1.0, -1.0})
      for (double c : {1.0, 1.0 + P(-10)}) {
        mma_add_case(out, shape, "double-round", "C + 2^-11 + 2^-" + std::to_string(j), sg * c, {{0, sg * P(-11)}, {1, sg * P(-j)}});
        mma_add_case(out, shape, "double-round", "C + 2^-11 - 2^-" + std::to_string(j), sg * c, {{0, sg * P(-11)}, {1, -sg * P(-j)}});
      }
  // 4. Grouping across k: X at i, -X at i+1 (mod k), a small product at q: which positions share a
  //    fused step, and in which order the steps run.
  for (int q = 0; q < k; ++q)
    for (int i = 0; i < k; ++i) {
      const int j = (i + 1 + (i + 1 == q ? 1 : 0)) % k;
      if (i == q || j == q || i == j) continue;
      mma_add_case(out, shape, "grouping",
                   sx + "@" + std::to_string(i) + ", -" + sx + "@" + std::to_string(j) + ", 2^(" + std::to_string(X) + "-" +
                       std::to_string(std::min(X - emin_p, 50)) + ")@" + std::to_string(q),
                   0.0, {{i, P(X)}, {j, -P(X)}, {q, P(X - std::min(X - emin_p, 50))}});
    }
  // 4b. C's step: C small, X and -X at i, i+1.
  for (int i = 0; i + 1 < k; ++i)
    mma_add_case(out, shape, "c-order", "C=2^(" + std::to_string(X) + "-50), " + sx + "@" + std::to_string(i) + ", -" + sx + "@" + std::to_string(i + 1),
                 P(X - std::min(X - emin_p, 50)), {{i, P(X)}, {i + 1, -P(X)}});
  // 5. Specials: zeros, subnormals, Inf, NaN, overflow.
  const double sub_a = P(f.emin() - f.man_bits);  // smallest subnormal input
  mma_add_case(out, shape, "special", "(-0) + (+0)*1", -0.0, {{0, 0.0}});
  {
    mma_case cs;
    cs.family = "special";
    cs.what = "C=-0, products -0 (a=-0, b=1)";
    cs.a.assign(static_cast<std::size_t>(k), 0);
    cs.b.assign(static_cast<std::size_t>(k), 0);
    detail::mma_enc(shape.c_fmt, -0.0, cs.c);
    for (int i = 0; i < k; ++i) {
      detail::mma_enc(f, -0.0, cs.a[static_cast<std::size_t>(i)]);
      detail::mma_enc(f, 1.0, cs.b[static_cast<std::size_t>(i)]);
    }
    out.push_back(cs);
  }
  mma_add_case(out, shape, "special", "1 - 1 (exact cancellation)", 1.0, {{0, -1.0}});
  mma_add_case(out, shape, "special", "-1 + 1 (exact cancellation)", -1.0, {{0, 1.0}});
  {
    // Subnormal input times 1 (DAZ?), and times 2^j (a normal product of a subnormal input).
    for (int j : {0, 3, f.man_bits}) {
      mma_case cs;
      cs.family = "subnormal";
      cs.what = "min subnormal * 2^" + std::to_string(j);
      cs.a.assign(static_cast<std::size_t>(k), 0);
      cs.b.assign(static_cast<std::size_t>(k), 0);
      cs.c = 0;
      if (detail::mma_enc(f, sub_a, cs.a[0]) && detail::mma_enc(f, P(j), cs.b[0])) out.push_back(cs);
    }
  }
  mma_add_case(out, shape, "subnormal", "C = 1.5 * 2^-140 (subnormal C), no products", 1.5 * P(-140), {});
  mma_add_case(out, shape, "subnormal", "product 2^-130 (subnormal f32 result)", 0.0, {{0, P(-130)}});
  mma_add_case(out, shape, "subnormal", "product 1.5 * 2^-148 (f32 subnormal, rounds)", 0.0, {{0, 1.5 * P(-149)}, {1, P(-152)}});
  mma_add_case(out, shape, "subnormal", "product -2^-150 (below f32's subnormals)", 0.0, {{0, -P(-150)}});
  mma_add_case(out, shape, "subnormal", "f16: product 2^-20 (f16 subnormal result)", 0.0, {{0, P(-20)}});
  mma_add_case(out, shape, "subnormal", "f16: product 1.5 * 2^-25", 0.0, {{0, 1.5 * P(-25)}});
  mma_add_case(out, shape, "subnormal", "f16: product -2^-26", 0.0, {{0, -P(-26)}});
  {
    const double inf = HUGE_VAL, nan = std::nan("");
    struct sp { const char* what; double c, a0, b0, a1, b1; };
    const sp sps[] = {{"Inf * 1", 0, inf, 1, 0, 0},         {"-Inf * 1", 0, -inf, 1, 0, 0},
                      {"Inf * 0", 0, inf, 0, 0, 0},         {"Inf * 1 - Inf * 1", 0, inf, 1, -inf, 1},
                      {"NaN * 1", 0, nan, 1, 0, 0},         {"C = Inf", inf, 1, 1, 0, 0},
                      {"C = -Inf, Inf * 1", -inf, inf, 1, 0, 0}, {"C = NaN", nan, 1, 1, 0, 0}};
    for (const sp& x : sps) {
      mma_case cs;
      cs.family = "special";
      cs.what = x.what;
      cs.a.assign(static_cast<std::size_t>(k), 0);
      cs.b.assign(static_cast<std::size_t>(k), 0);
      const auto enc_any = [](const format_desc& fd, double v) {
        return f64_bits_to(fd, f64_to_bits(v), rounding{round_mode::rne, 0}).bits;  // Inf, NaN as they are
      };
      if (!f.has_inf() && (std::isinf(x.a0) || std::isinf(x.a1))) continue;  // e4m3 has no Inf
      cs.c = enc_any(shape.c_fmt, x.c);
      cs.a[0] = enc_any(f, x.a0);
      cs.b[0] = enc_any(f, x.b0);
      cs.a[1] = enc_any(f, x.a1);
      cs.b[1] = enc_any(f, x.b1);
      out.push_back(cs);
    }
  }
  // Overflow of the accumulator: products beyond its range (where the inputs allow), rounding up.
  for (int e : {127, 128, 130, 15, 16, 17})
    mma_add_case(out, shape, "overflow", "product 1.75 * 2^" + std::to_string(e), 0.0, {{0, 1.75 * P(e)}});
  mma_add_case(out, shape, "overflow", "C = max finite, product 2^104 (one ulp)", static_cast<double>(3.4028234663852886e38),
               {{0, P(104)}});
  mma_add_case(out, shape, "overflow", "C = f16 max, product 32 (one ulp)", 65504.0, {{0, 32.0}});
  // 6. Carries: every product at the largest significand, C too.
  {
    const double top = 2.0 - P(-f.man_bits);
    std::vector<std::pair<int, double>> ps;
    for (int i = 0; i < k; ++i) ps.push_back({i, top * top * P(std::min(X, 10))});
    mma_add_case(out, shape, "carry", "all products (2-ulp)^2 * 2^" + std::to_string(std::min(X, 10)) + ", C = same", top * P(std::min(X, 10)), ps);
    for (auto& p : ps) p.second = -p.second;
    mma_add_case(out, shape, "carry", "all products -(2-ulp)^2, C = 2^(X+5)", P(std::min(X, 10) + 5), ps);
  }
  return out;
}

/// The state of the elimination over the hypotheses of one instruction.
class mma_eliminator {
 public:
  /// `max_fails`: a hypothesis is dropped after more than this many wrong predictions (0 keeps
  /// exactly the consistent ones; 2 also reports near misses when none is consistent).
  mma_eliminator(const mma_model& shape, std::vector<mma_hyp> hyps, int max_fails = 2)
      : shape_(shape), hyps_(std::move(hyps)), fails_(hyps_.size(), 0), max_fails_(max_fails) {}

  /// Result of feeding one case.
  struct step {
    std::size_t consistent_before = 0, consistent_after = 0;
    std::vector<std::string> ruled_out;  ///< "param=value" no consistent hypothesis has any more
  };

  /// Compares every live hypothesis with the hardware's `hw` (encoding of c_fmt) for case `cs`.
  step feed(const mma_case& cs, std::uint64_t hw) {
    std::vector<mma_case> one{cs};
    std::vector<std::uint64_t> h{hw};
    return feed_batch(one, h);
  }

  /// The same for several cases at once (in parallel over the hypotheses).
  step feed_batch(const std::vector<mma_case>& cases, const std::vector<std::uint64_t>& hw) {
    step st;
    const auto before = values_of_consistent();
    st.consistent_before = consistent();
    const std::size_t n = hyps_.size();
    const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (std::size_t i = t; i < n; i += threads) {
          if (fails_[i] > max_fails_) continue;
          const mma_model m = mma_apply(shape_, hyps_[i]);
          for (std::size_t c = 0; c < cases.size() && fails_[i] <= max_fails_; ++c) {
            const mma_case& cs = cases[c];
            if (mma_dot(m, cs.c, cs.a.data(), 1, cs.b.data(), 1).bits != hw[c]) ++fails_[i];
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    st.consistent_after = consistent();
    const auto after = values_of_consistent();
    for (int bit = 0; bit < mma_param_count; ++bit)
      for (const std::string& v : before[static_cast<std::size_t>(bit)])
        if (std::find(after[static_cast<std::size_t>(bit)].begin(), after[static_cast<std::size_t>(bit)].end(), v) ==
            after[static_cast<std::size_t>(bit)].end())
          st.ruled_out.push_back(std::string(mma_param_name(bit)) + "=" + v);
    return st;
  }

  /// Hypotheses with no wrong prediction.
  std::size_t consistent() const {
    return static_cast<std::size_t>(std::count(fails_.begin(), fails_.end(), 0));
  }
  std::vector<mma_hyp> survivors() const {
    std::vector<mma_hyp> out;
    for (std::size_t i = 0; i < hyps_.size(); ++i)
      if (fails_[i] == 0) out.push_back(hyps_[i]);
    return out;
  }
  /// The hypotheses with the fewest wrong predictions (all with that count) and the count.
  std::vector<mma_hyp> best(int& fails) const {
    fails = max_fails_ + 1;
    for (int f : fails_) fails = std::min(fails, f);
    std::vector<mma_hyp> out;
    for (std::size_t i = 0; i < hyps_.size(); ++i)
      if (fails_[i] == fails) out.push_back(hyps_[i]);
    return out;
  }
  /// For each parameter, the values the consistent hypotheses still take (in grid order).
  std::vector<std::vector<std::string>> values_of_consistent() const {
    // Deduplicate on a small integer code per field; text only for one representative of each.
    std::vector<std::vector<std::size_t>> rep(mma_param_count);  // [bit][code] -> hyp index + 1
    for (std::size_t i = 0; i < hyps_.size(); ++i) {
      if (fails_[i] != 0) continue;
      for (int bit = 0; bit < mma_param_count; ++bit) {
        const std::size_t code = field_code(hyps_[i], bit);
        auto& r = rep[static_cast<std::size_t>(bit)];
        if (r.size() <= code) r.resize(code + 1, 0);
        if (r[code] == 0) r[code] = i + 1;
      }
    }
    std::vector<std::vector<std::string>> v(mma_param_count);
    for (int bit = 0; bit < mma_param_count; ++bit) {
      std::vector<std::size_t> firsts;
      for (std::size_t idx : rep[static_cast<std::size_t>(bit)])
        if (idx != 0) firsts.push_back(idx - 1);
      std::sort(firsts.begin(), firsts.end());
      for (std::size_t i : firsts) v[static_cast<std::size_t>(bit)].push_back(mma_hyp_value(hyps_[i], bit));
    }
    return v;
  }

 private:
  /// A small integer that tells the values of field `bit` apart (mma_hyp_value's argument).
  static std::size_t field_code(const mma_hyp& h, int bit) {
    switch (bit) {
      case 0: return h.group;
      case 1: return static_cast<std::size_t>(h.grouping);
      case 2: return static_cast<std::size_t>(h.c_order);
      case 3: return static_cast<std::size_t>(h.exp_ref);
      case 4: return h.align_bits;
      case 5: return static_cast<std::size_t>(h.align_round);
      case 6: return static_cast<std::size_t>(h.step_round);
      case 7: return static_cast<std::size_t>(h.out_round);
      case 8: return h.acc_f16 ? 0 : h.acc_man;
      case 9: return h.daz;
      case 10: return h.ftz;
      case 11: return h.overflow_to_inf;
      default: return h.positive_zero;
    }
  }

  mma_model shape_;
  std::vector<mma_hyp> hyps_;
  std::vector<int> fails_;
  int max_fails_;
};

/// Mask of the parameters (mma_param_*) on which the hypotheses in `hs` differ.
inline std::uint32_t mma_undecided(const std::vector<mma_hyp>& hs) {
  std::uint32_t mask = 0;
  for (const mma_hyp& h : hs)
    for (int bit = 0; bit < mma_param_count; ++bit)
      if (mma_hyp_value(h, bit) != mma_hyp_value(hs.front(), bit)) mask |= 1u << bit;
  return mask;
}

/// The C++ text of a table row of mma_models (include/tiebreak/emu/mma.hpp) for model m.
inline std::string mma_table_row(mma_instr id, const mma_model& m, std::uint32_t unknown, const std::string& evidence) {
  const auto fmt = [](const format_desc& f) {
    if (same_format(f, formats::bf16)) return std::string("formats::bf16");
    if (same_format(f, formats::f16)) return std::string("formats::f16");
    if (same_format(f, formats::tf32)) return std::string("formats::tf32");
    if (same_format(f, formats::e4m3)) return std::string("formats::e4m3");
    if (same_format(f, formats::e5m2)) return std::string("formats::e5m2");
    if (f.exp_bits == 8 && f.man_bits < 23) return "mma_acc_format(" + std::to_string(f.man_bits) + ")";
    return std::string("formats::f32");
  };
  const auto rm = [](round_mode r) { return "round_mode::" + std::string(to_string(r)); };
  const char* names[] = {"mma_m16n8k16_bf16", "mma_m16n8k16_f16", "mma_m16n8k8_tf32", "mma_m16n8k16_f16_f16out",
                         "wgmma_k16_bf16", "wgmma_k16_f16", "wgmma_k32_e4m3", "wgmma_k32_e5m2"};
  std::string unk;
  for (int bit = 0; bit < mma_param_count; ++bit)
    if (unknown & (1u << bit)) unk += (unk.empty() ? "" : " | ") + std::string("mma_param_") + std::string(mma_param_name(bit));
  if (unk.empty()) unk = "0";
  if (unknown == mma_param_all) unk = "mma_param_all";
  std::string s = "    {mma_instr::" + std::string(names[static_cast<int>(id)]) + ", \"" + std::string(mma_entry(id).ptx) + "\",\n";
  s += "     mma_make(" + fmt(m.a_fmt) + ", " + fmt(m.c_fmt) + ", " + fmt(m.acc_fmt) + ", " + std::to_string(m.m) + ", " +
       std::to_string(m.n) + ", " + std::to_string(m.k) + ", " + std::to_string(m.group) + ", mma_grouping::" +
       std::string(to_string(m.grouping)) + ", mma_c_order::" + std::string(to_string(m.c_order)) + ",\n";
  s += "              mma_exp_ref::" + std::string(to_string(m.exp_ref)) + ", " +
       (m.align_bits >= mma_align_exact ? std::string("mma_align_exact") : std::to_string(m.align_bits)) + ", " +
       rm(m.align_round) + ", " + rm(m.step_round) + ", " + rm(m.out_round) + ", " + (m.daz ? "true" : "false") + ", " +
       (m.ftz ? "true" : "false") + ", " + (m.overflow_to_inf ? "true" : "false") + ", " +
       (m.positive_zero ? "true" : "false") + "),\n";
  s += "     " + unk + ", \"" + evidence + "\"},";
  return s;
}

}  // namespace tiebreak::emu
