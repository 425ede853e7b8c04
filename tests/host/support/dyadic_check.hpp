// SPDX-License-Identifier: Apache-2.0
/// @file Checks of conversions and emulated ops against the exact Boost (cpp_int) dyadic oracle:
/// bits, flags, trace and every error field, including the align/round split of add and fma.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "support/oracle.hpp"
#include "tiebreak/emu/ops.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak::test {

enum class operand_kind { zero, finite, inf, nan };

inline operand_kind kind_of(const format_desc& f, std::uint64_t bits, bool flush_input) {
  const ref_format F = ref_of(f);
  const std::uint64_t ef = (bits >> (F.man_bits + F.pad)) & ((std::uint64_t{1} << F.exp_bits) - 1);
  const std::uint64_t frac = (bits >> F.pad) & ((std::uint64_t{1} << F.man_bits) - 1);
  const std::uint64_t all = (std::uint64_t{1} << F.exp_bits) - 1;
  if (ef == all) {
    if (F.ieee) return frac == 0 ? operand_kind::inf : operand_kind::nan;
    if (frac == (std::uint64_t{1} << F.man_bits) - 1) return operand_kind::nan;
  }
  if (ef == 0 && (frac == 0 || flush_input)) return operand_kind::zero;
  return operand_kind::finite;
}
inline bool sign_bit(const format_desc& f, std::uint64_t bits) {
  const ref_format F = ref_of(f);
  return (bits >> (F.exp_bits + F.man_bits + F.pad)) & 1;
}

/// Checks a finite non-zero rounding `got` of the exact value `x`: bits, flags, lsb_exp, G/R/S and
/// the error fields against (result - x) computed exactly. Returns a description of the first
/// mismatch, or an empty string.
inline std::string check_rounding(const format_desc& to, const dyadic& x, const round_result& got, rounding r,
                                  const convert_options& o) {
  const ref_format F = ref_of(to);
  const bool sign = x.sign() < 0;
  const bracket b = dyadic_bracket(F, x);
  const expected e = expect_round(F, sign, b, r, o);
  auto msg = [&](const char* what) {
    return std::string(what) + " (got bits " + hex(got.bits) + " want " + hex(e.bits) + ", flags " +
           std::to_string(got.flags) + " want " + std::to_string(e.flags) + ", mode " +
           std::string(to_string(r.mode)) + ")";
  };
  if (got.bits != e.bits) return msg("bits");
  if (got.flags != e.flags) return msg("flags");
  if (got.guard != b.guard || got.round_bit != b.round_bit || got.sticky != b.sticky) return msg("guard/round/sticky");
  if (e.flags & flag_overflow) {
    if (got.error_exact()) return msg("overflow error_exact");
    const bool to_inf = !o.saturate && mode_overflows_to_inf(r, sign);
    if (got.error_sign() != (to_inf == sign ? -1 : 1)) return msg("overflow error_sign");
    if (to_inf) {
      if (got.error() != (sign ? -HUGE_VAL : HUGE_VAL)) return msg("overflow error (inf)");
    } else {
      dyadic m;
      m.m = big(F.max_sig);
      m.e = F.emax - F.p + 1;
      if (sign) m = -m;
      // Documented as a double estimate; it is (max - x) rounded once when x itself is a double.
      const expected xd = expect_dyadic(formats::f64, x, rounding{round_mode::rne});
      dyadic xr = decode_exact(formats::f64, xd.bits);
      if (xr == x && !is_rounded_double(m - x, got.error())) return msg("overflow error");
    }
    return {};
  }
  if (got.lsb_exp != b.q) return msg("lsb_exp");
  const bool flushed = o.flush_output && e.n_out != 0 && (e.flags & flag_underflow) &&
                       e.bits == encode(F, sign, 0, 0);
  dyadic res;
  res.m = flushed ? big(0) : big(e.n_out);
  res.e = b.q;
  if (sign) res = -res;
  const dyadic err = res - x;
  if (got.error_sign() != err.sign()) return msg("error_sign");
  if (!is_rounded_double(err, got.error())) return msg("error");
  dyadic err_ulps = err;
  err_ulps.e -= b.q;
  if (!is_rounded_double(err_ulps, got.error_ulps())) return msg("error_ulps");
  if (!got.error_exact()) return msg("error_exact");
  return {};
}

/// convert(to, from, bits, r, o) against the oracle, specials included.
inline std::string check_convert(const format_desc& to, const format_desc& from, std::uint64_t bits, rounding r,
                                 const convert_options& o) {
  const round_result got = convert(to, from, bits, r, o);
  const ref_format F = ref_of(to);
  const bool sign = sign_bit(from, bits);
  auto special = [&](std::uint64_t want, std::uint8_t wf, const char* what) -> std::string {
    if (got.bits == want && got.flags == wf) return {};
    return std::string(what) + ": got " + hex(got.bits) + " flags " + std::to_string(got.flags) + ", want " +
           hex(want) + " flags " + std::to_string(wf);
  };
  switch (kind_of(from, bits, o.flush_input)) {
    case operand_kind::nan: {
      const ref_format S = ref_of(from);
      const std::uint64_t frac = (bits >> S.pad) & ((std::uint64_t{1} << S.man_bits) - 1);
      const std::uint64_t payload = frac << (64 - S.man_bits);
      const bool signalling = S.ieee && (frac >> (S.man_bits - 1)) == 0;
      return special(expected_nan(F, o.nan, sign, S.ieee ? payload : 0), signalling ? flag_invalid : 0, "nan");
    }
    case operand_kind::inf:
      if (o.saturate) return special(expected_max_finite(F, sign), 0, "inf (saturate)");
      if (F.ieee) return special(expected_inf(F, sign), 0, "inf");
      return special(expected_nan(F, o.nan, sign, 0), flag_invalid, "inf to fn");
    case operand_kind::zero: return special(encode(F, sign, 0, 0), 0, "zero");
    default: break;
  }
  const std::string m = check_rounding(to, decode_exact(from, bits), got, r, o);
  return m.empty() ? m : "convert " + std::string(from.name) + " " + hex(bits) + " -> " + std::string(to.name) + ": " + m;
}

/// emu::add / mul / fma on finite non-zero-result operands against the exact sum or product;
/// checks the align/round split of the error for add and fma. Specials go through check_op_special.
enum class op_kind_t { add, sub, mul, fma };

inline std::string check_op(const format_desc& f, op_kind_t k, std::uint64_t a, std::uint64_t b, std::uint64_t c,
                            rounding r, const convert_options& o = {}) {
  emu::op_result got;
  switch (k) {
    case op_kind_t::add: got = emu::add(f, a, b, r, o); break;
    case op_kind_t::sub: got = emu::sub(f, a, b, r, o); break;
    case op_kind_t::mul: got = emu::mul(f, a, b, r, o); break;
    default: got = emu::fma(f, a, b, c, r, o); break;
  }
  const char* names[] = {"add", "sub", "mul", "fma"};
  // Appended piece by piece: `" " + hex(c)` (literal + temporary) trips a GCC 12 -Wrestrict false
  // positive once this is inlined into a caller.
  std::string where = names[static_cast<int>(k)];
  where.append(" ").append(f.name).append(" ").append(hex(a)).append(" ").append(hex(b));
  if (k == op_kind_t::fma) where.append(" ").append(hex(c));
  where.append(": ");
  const operand_kind ka = kind_of(f, a, o.flush_input), kb = kind_of(f, b, o.flush_input),
                     kc = k == op_kind_t::fma ? kind_of(f, c, o.flush_input) : operand_kind::zero;
  if (ka == operand_kind::nan || kb == operand_kind::nan || kc == operand_kind::nan || ka == operand_kind::inf ||
      kb == operand_kind::inf || kc == operand_kind::inf)
    return {};  // specials: see the tables in ops_test.cpp
  const dyadic x = ka == operand_kind::zero ? dyadic{} : decode_exact(f, a);
  dyadic y = kb == operand_kind::zero ? dyadic{} : decode_exact(f, b);
  const dyadic z = (k == op_kind_t::fma && kc != operand_kind::zero) ? decode_exact(f, c) : dyadic{};
  bool ys = sign_bit(f, b);
  if (k == op_kind_t::sub) { y = -y; ys = !ys; }
  dyadic exact, big_term, small_term;
  bool sa = sign_bit(f, a), sb = ys;  // signs of the two addends, for the zero-sum rule
  bool addition = true;
  if (k == op_kind_t::mul) {
    exact = x * y;
    addition = false;
    sa = sb = sign_bit(f, a) != sign_bit(f, b);
  } else if (k == op_kind_t::fma) {
    const dyadic p = x * y;
    exact = p + z;
    sa = sign_bit(f, a) != sign_bit(f, b);
    sb = sign_bit(f, c);
    big_term = p;
    small_term = z;
    addition = p.sign() != 0 && z.sign() != 0;
  } else {
    exact = x + y;
    big_term = x;
    small_term = y;
    addition = x.sign() != 0 && y.sign() != 0;
  }
  if (exact.sign() == 0) {
    const bool zs = sa == sb ? sa : r.mode == round_mode::rd;
    const std::uint64_t want = encode(ref_of(f), zs, 0, 0);
    if (got.bits() != want || got.round.flags != 0) return where + "exact zero: got " + hex(got.bits()) + " want " + hex(want);
    return {};
  }
  std::string m = check_rounding(f, exact, got.round, r, o);
  if (!m.empty()) return where + m;
  if (got.round.flags & flag_overflow) return {};
  // The exact error terms (round_result): error = (-1)^sign (step 2^lsb_exp - discarded 2^window_exp
  // - t), t = (tail_neg ? -1 : 1) tail_sig 2^tail_exp, exactly result - exact whenever error_exact().
  const dyadic total = decode_exact(f, got.bits()) - exact;  // finite result (zero included)
  if (got.round.error_exact()) {
    const round_result& rr = got.round;
    dyadic terms;
    terms.m = big(rr.step < 0 ? -rr.step : rr.step);
    if (rr.step < 0) terms.m = -terms.m;
    terms.e = rr.lsb_exp;
    dyadic disc;
    disc.m = big(static_cast<std::uint64_t>(rr.discarded >> 64));
    disc.m <<= 64;
    disc.m += big(static_cast<std::uint64_t>(rr.discarded));
    disc.e = rr.window_exp;
    terms = terms - disc;
    if (rr.tail_sig != 0) {
      dyadic t;
      t.m = big(static_cast<std::uint64_t>(rr.tail_sig >> 64));
      t.m <<= 64;
      t.m += big(static_cast<std::uint64_t>(rr.tail_sig));
      t.e = rr.tail_exp;
      terms = rr.tail_neg ? terms + t : terms - t;
    }
    if (rr.sign) terms = -terms;
    if (!(terms == total)) return where + "exact error terms (step, discarded, tail) != result - exact";
  }
  if (!addition) return {};
  // Split of the error: align = T(small) - small, T truncating toward zero on the result grid.
  if (compare(dyadic{abs(big_term.m), big_term.e}, dyadic{abs(small_term.m), small_term.e}) < 0) std::swap(big_term, small_term);
  const int q = got.round.lsb_exp;
  dyadic mag = small_term;
  mag.m = abs(mag.m);
  dyadic t;
  if (mag.e >= q) t.m = mag.m << (mag.e - q);
  else t.m = mag.m >> (q - mag.e);
  t.e = q;
  dyadic align = t - mag;  // <= 0 for a positive small term
  if (small_term.sign() < 0) align = -align;
  // The exact align terms: -(+-align_bits 2^align_exp), opposite in sign to the smaller addend.
  dyadic align_terms;
  align_terms.m = big(static_cast<std::uint64_t>(got.align_bits >> 64));
  align_terms.m <<= 64;
  align_terms.m += big(static_cast<std::uint64_t>(got.align_bits));
  align_terms.e = got.align_exp;
  if (!got.small_sign) align_terms = -align_terms;
  if (!(align_terms == align)) return where + "exact align terms (align_bits, align_exp) != T(small) - small";
  if (!is_rounded_double(align, got.align_error())) return where + "align_error";
  // round_error() is defined as error() - align_error() computed in double (docs/rounding.md); the
  // exact round error is total - align, which the two exact checks above pin.
  if (got.round_error() != got.round.error() - got.align_error()) return where + "round_error != error - align_error";
  return {};
}

}  // namespace tiebreak::test
