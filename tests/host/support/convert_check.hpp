// SPDX-License-Identifier: Apache-2.0
/// @file Checks one f32 -> narrow conversion by round_pack against the f64 oracle: bits, flags,
/// the G/R/S trace, step, discarded bits and the error fields.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak::test {

/// Everything the oracle derives once from an f32 input, shared by all modes: the bracket (the two
/// neighbours and the midpoint comparison) and the mode-independent expected trace and errors of
/// both neighbours. Each mode then only picks a neighbour (expect_round).
/// The fields carry no default initialisers: zeroing this ~200-byte struct per input cost more than
/// the rest of the oracle (a `rep stos` per input). make_f32_case sets x, sign and kind always and
/// every other field for finite inputs, the only ones that read them.
struct f32_case {
  /// One neighbour's expected outcome (a trivial copy of the fields of `expected` that are used).
  struct choice_t {
    std::uint64_t bits;
    std::uint64_t n_out;
    std::uint8_t flags;
  };
  std::uint32_t x;
  bool sign;
  enum kind_t : std::uint8_t { zero, finite, inf, nan } kind;
  double value;     ///< exact value of x
  double mag;       ///< |x|
  int window_exp;   ///< weight of x's last significand bit
  bracket b;
  std::uint64_t want_disc;  ///< (|x| - down) / 2^window_exp: the discarded bits, by arithmetic
  double err[2];            ///< result - x for the down (0) and up (1) neighbour, rounded once
  double err_ulps[2];       ///< the same / 2^q
  choice_t choice[2][2];    ///< [up][to_inf]: expect_choice under default options
};

/// Fills `c` in place (see f64_bracket: no copies of freshly built structs in the sweeps' hot loop).
inline void make_f32_case(const ref_format& F, std::uint32_t x, f32_case& c) {
  c.x = x;
  c.sign = (x >> 31) != 0;
  const std::uint32_t ef = (x >> 23) & 0xff, frac = x & 0x7fffff;
  if (ef == 0xff) { c.kind = frac != 0 ? f32_case::nan : f32_case::inf; return; }
  if (ef == 0 && frac == 0) { c.kind = f32_case::zero; return; }
  c.kind = f32_case::finite;
  // Decoded with the field definitions, in double (exact).
  c.mag = ef == 0 ? scale2(static_cast<double>(frac), -149)
                  : scale2(static_cast<double>(frac | 0x800000u), static_cast<int>(ef) - 150);
  c.value = c.sign ? -c.mag : c.mag;
  c.window_exp = ef == 0 ? -149 : static_cast<int>(ef) - 150;
  f64_bracket(F, c.mag, 0, c.b);
  // Exact in double: |x| - down < 2^q, and x has 24 significant bits.
  c.want_disc = static_cast<std::uint64_t>(static_cast<std::int64_t>(
      scale2(c.mag - scale2(static_cast<double>(static_cast<std::int64_t>(c.b.n)), c.b.q), -c.window_exp)));
  for (int up = 0; up < 2; ++up) {
    // The up neighbour of the largest grid value is 2^(emax+1) (past max finite): only used when the
    // mode does not overflow, so the value here does not matter then.
    const double res_mag = scale2(static_cast<double>(static_cast<std::int64_t>(c.b.n) + up), c.b.q);
    c.err[up] = (c.sign ? -res_mag : res_mag) - c.value;  // one IEEE subtraction: rounded once
    c.err_ulps[up] = scale2(c.err[up], -c.b.q);
    // Where an overflow goes (to_inf) changes the outcome of an overflowing choice only. Every
    // field is written from registers: copying choice[up][0] into choice[up][1] (a 16-byte load
    // over the byte store of `flags` just made) stalled on store forwarding, four times per input,
    // and was two thirds of the oracle's time.
    const expected e0 = expect_choice(F, c.sign, c.b, up != 0, false, convert_options{});
    const expected e1 =
        (e0.flags & flag_overflow) != 0 ? expect_choice(F, c.sign, c.b, up != 0, true, convert_options{}) : e0;
    c.choice[up][0].bits = e0.bits;
    c.choice[up][0].n_out = e0.n_out;
    c.choice[up][0].flags = e0.flags;
    c.choice[up][1].bits = e1.bits;
    c.choice[up][1].n_out = e1.n_out;
    c.choice[up][1].flags = e1.flags;
  }
}
inline f32_case make_f32_case(const ref_format& F, std::uint32_t x) {
  f32_case c;
  make_f32_case(F, x, c);
  return c;
}

/// Whether the error fields (error, error_ulps, error_sign, error_exact) are checked for mode M on
/// an input of sign `sign`. Those fields are functions of the trace alone (sign, lsb_exp, window_exp,
/// discarded_count, discarded, step, tail, input_sticky, overflow and overflow_error): the mode
/// enters only through which neighbour it took and where an overflow went. rz takes the down
/// neighbour of every input and sends overflow to max finite; ru on positive inputs and rd on
/// negative ones take the up neighbour of every inexact input and send overflow to Inf; ru on
/// negative and rd on positive inputs repeat rz exactly (down neighbour, overflow to max finite).
/// So checking the error fields in rz for every input, in ru for positive and in rd for negative
/// inputs evaluates them on every trace any mode can produce, and the trace of every mode is checked
/// against the oracle field by field: the error fields of rne, rna, rto, sr and of the repeating
/// half of ru and rd are then covered without being recomputed (about 60 % of a sweep's time).
template <round_mode M>
constexpr bool checks_error_fields(bool sign) {
  return M == round_mode::rz || (M == round_mode::ru && !sign) || (M == round_mode::rd && sign);
}

/// Whether mode M ever checks the error fields (compile time: the other modes skip the code).
constexpr bool may_check_error_fields(round_mode m) {
  return m == round_mode::rz || m == round_mode::ru || m == round_mode::rd;
}

/// The hot-path check of one mode under default options: bits, flags and the whole trace, plus the
/// error fields where checks_error_fields says, as one branch-free conjunction of integer and
/// double comparisons (no strings). Returns true when all match; on false the caller re-runs
/// check_f32_case (every field, every mode) for the message.
template <round_mode M>
[[gnu::always_inline]] inline bool f32_case_matches(const ref_format& F, const f32_case& c, const round_result& got,
                                                    rounding r) {
  if (c.kind == f32_case::nan) {
    const std::uint64_t want = expected_nan(F, nan_policy::canonical, c.sign, 0);
    const std::uint8_t wf = ((c.x >> 22) & 1) == 0 ? flag_invalid : 0;  // signalling NaN
    return got.bits == want && got.flags == wf;
  }
  if (c.kind == f32_case::inf) return got.bits == (F.ieee ? expected_inf(F, c.sign) : expected_nan(F, nan_policy::canonical, c.sign, 0)) &&
                                      got.flags == (F.ieee ? 0 : flag_invalid);
  if (c.kind == f32_case::zero) return got.bits == encode(F, c.sign, 0, 0) && got.flags == 0;
  const bool to_inf = mode_overflows_to_inf(r, c.sign);
  const f32_case::choice_t& e = c.choice[takes_up(c.b, c.sign, r)][to_inf];
  bool ok = (got.bits == e.bits) & (got.flags == e.flags) & (got.guard == c.b.guard) &
            (got.round_bit == c.b.round_bit) & (got.sticky == c.b.sticky);
  if (e.flags & flag_overflow) {
    if (!checks_error_fields<M>(c.sign)) return ok;
    const double m = scale2(static_cast<double>(F.max_sig), F.emax - F.p + 1);
    const double want = to_inf ? (c.sign ? -HUGE_VAL : HUGE_VAL) : (c.sign ? -m : m) - c.value;
    const int want_sign = to_inf ? (c.sign ? -1 : 1) : (c.sign ? 1 : -1);
    return ok & (got.error() == want) & (got.error_sign() == want_sign) & !got.error_exact();
  }
  const int up = e.n_out != c.b.n ? 1 : 0;
  ok &= (got.lsb_exp == c.b.q) & (got.window_exp == c.window_exp) & (got.step == up) &
        (got.discarded == static_cast<u128>(c.want_disc)) & !got.input_sticky & (got.tail_sig == 0);
  if constexpr (may_check_error_fields(M)) {
    if (!checks_error_fields<M>(c.sign)) return ok;
    const double want_err = c.err[up];
    const int want_sign = want_err > 0 ? 1 : (want_err < 0 ? -1 : 0);  // exact: the error is a double here
    ok &= (got.error() == want_err) & (got.error_ulps() == c.err_ulps[up]) & (got.error_sign() == want_sign) &
          got.error_exact();
  }
  return ok;
}

/// Inputs per batch of the f32 sweeps: the oracle fills `case_batch` cases, then each mode runs
/// over the whole batch in its own tight loop (mode-major). 512 cases (~100 KB) stay in L2; one
/// loop per mode keeps that mode's code hot and its branches trained, where the input-major order
/// (every mode of one input, then the next input) ran seven large bodies in turn.
inline constexpr std::size_t case_batch = 512;

/// Out of line so that flattened sweep loops do not inline the string building.
[[gnu::noinline, gnu::cold]] inline void report_f32_mismatch(mismatch_log& log, const format_desc& f, rounding r,
                                                              std::uint32_t x, const char* what, double g,
                                                              double want, std::uint64_t bits) {
  log.add(std::string(f.name) + " " + std::string(to_string(r.mode)) + " x=" + hex(x) + " " + what + ": got " +
          std::to_string(g) + " want " + std::to_string(want) + " (bits " + hex(bits) + ")");
}

/// Checks round_pack(f, unpack(f32, x), r, o) against the oracle. Returns false on a mismatch
/// (logged). `check_trace` adds G/R/S, step, discarded and the error fields.
[[gnu::always_inline]] inline bool check_f32_case(const format_desc& f, const ref_format& F, const f32_case& c,
                                                  const round_result& got, rounding r, const convert_options& o,
                                                  mismatch_log& log, bool check_trace = true) {
  auto fail = [&](const char* what, double g, double want) {
    report_f32_mismatch(log, f, r, c.x, what, g, want, got.bits);
    return false;
  };
  if (c.kind == f32_case::nan) {
    const std::uint64_t payload = static_cast<std::uint64_t>(c.x & 0x7fffffu) << 41;
    const std::uint64_t want = expected_nan(F, o.nan, c.sign, payload);
    const std::uint8_t wf = ((c.x >> 22) & 1) == 0 ? flag_invalid : 0;  // signalling NaN
    if (got.bits != want) return fail("nan bits", static_cast<double>(got.bits), static_cast<double>(want));
    if (got.flags != wf) return fail("nan flags", got.flags, wf);
    return true;
  }
  if (c.kind == f32_case::inf) {
    const std::uint64_t want = o.saturate ? expected_max_finite(F, c.sign)
                               : F.ieee   ? expected_inf(F, c.sign)
                                          : expected_nan(F, o.nan, c.sign, 0);
    const std::uint8_t wf = (!o.saturate && !F.ieee) ? flag_invalid : 0;
    if (got.bits != want) return fail("inf bits", static_cast<double>(got.bits), static_cast<double>(want));
    if (got.flags != wf) return fail("inf flags", got.flags, wf);
    return true;
  }
  if (c.kind == f32_case::zero) {
    if (got.bits != encode(F, c.sign, 0, 0) || got.flags != 0) return fail("zero", static_cast<double>(got.bits), 0);
    return true;
  }
  const expected e = expect_round(F, c.sign, c.b, r, o);
  if (got.bits != e.bits) return fail("bits", static_cast<double>(got.bits), static_cast<double>(e.bits));
  if (got.flags != e.flags) return fail("flags", got.flags, e.flags);
  if (!check_trace) return true;
  if (got.guard != c.b.guard || got.round_bit != c.b.round_bit || got.sticky != c.b.sticky)
    return fail("guard/round/sticky", got.guard * 4 + got.round_bit * 2 + got.sticky,
                c.b.guard * 4 + c.b.round_bit * 2 + c.b.sticky);
  const bool overflow = (e.flags & flag_overflow) != 0;
  if (overflow) {
    // Inf (or NaN) results: error +-inf; max-finite results: M - x rounded once.
    const bool to_inf = !o.saturate && mode_overflows_to_inf(r, c.sign);
    const double m = scale2(static_cast<double>(F.max_sig), F.emax - F.p + 1);
    const double want = to_inf ? (c.sign ? -HUGE_VAL : HUGE_VAL) : (c.sign ? -m : m) - c.value;
    if (got.error() != want) return fail("overflow error", got.error(), want);
    const int want_sign = to_inf ? (c.sign ? -1 : 1) : (c.sign ? 1 : -1);
    if (got.error_sign() != want_sign) return fail("overflow error_sign", got.error_sign(), want_sign);
    if (got.error_exact()) return fail("overflow error_exact", 1, 0);
    return true;
  }
  if (got.lsb_exp != c.b.q) return fail("lsb_exp", got.lsb_exp, c.b.q);
  if (got.window_exp != c.window_exp) return fail("window_exp", got.window_exp, c.window_exp);
  const bool flushed = o.flush_output && e.n_out != 0 && e.bits == encode(F, c.sign, 0, 0);
  const std::int64_t want_step = flushed ? -static_cast<std::int64_t>(c.b.n)
                                         : static_cast<std::int64_t>(e.n_out - c.b.n);
  if (got.step != want_step) return fail("step", static_cast<double>(got.step), static_cast<double>(want_step));
  // discarded = (|x| - n 2^q) / 2^window_exp
  const double want_disc = scale2(c.mag - scale2(static_cast<double>(c.b.n), c.b.q), -c.window_exp);
  if (static_cast<double>(got.discarded) != want_disc)
    return fail("discarded", static_cast<double>(got.discarded), want_disc);
  // error = result - x, rounded once (one IEEE subtraction of two exact doubles).
  const double res_mag = flushed ? 0.0 : scale2(static_cast<double>(e.n_out), c.b.q);
  const double res = c.sign ? -res_mag : res_mag;
  const double want_err = res - c.value;
  if (got.error() != want_err) return fail("error", got.error(), want_err);
  const double want_ulps = scale2(want_err, -c.b.q);
  if (got.error_ulps() != want_ulps) return fail("error_ulps", got.error_ulps(), want_ulps);
  const int want_sign = res > c.value ? 1 : (res < c.value ? -1 : 0);
  if (got.error_sign() != want_sign) return fail("error_sign", got.error_sign(), want_sign);
  if (!got.error_exact()) return fail("error_exact", 0, 1);
  return true;
}

}  // namespace tiebreak::test
