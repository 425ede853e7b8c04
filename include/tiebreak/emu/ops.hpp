// SPDX-License-Identifier: Apache-2.0
/// @file Emulated add, sub, mul and fma in any format: exact result, one rounding, split error.
#pragma once

#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::emu {

/// Result of one emulated operation.
///
/// The total error `round.error = result - exact` is split into the two losses the mechanism is
/// about (docs/rounding.md):
///  - `align_error`: the bits of the smaller addend that lie below the result's lsb (2^lsb_exp),
///    i.e. what exponent alignment shifts out: T(small) - small, with T truncating toward zero;
///  - `round_error`: the rest, what the final rounding step adds: round(exact) - (big + T(small)).
/// align_error + round_error == round.error exactly (as reals; the doubles are each rounded once).
/// Multiplication has no alignment: align_error is 0.
struct op_result {
  round_result round;            ///< bits, flags, G/R/S, total error
  // --- trace ---
  std::uint64_t a = 0, b = 0, c = 0;  ///< operand encodings (c: fma only)
  bool has_alignment = false;    ///< an addition of two non-zero finite terms took place
  int exp_diff = 0;              ///< leading-exponent difference of the two addends (>= 0)
  int align_exp = 0;             ///< weight of the lsb of `align_bits`
  u128 align_bits = 0;           ///< magnitude of the smaller addend's bits below the result lsb
  bool small_sign = false;       ///< sign of the smaller addend
  TIEBREAK_HDC std::uint64_t bits() const noexcept { return round.bits; }
  /// T(small) - small: minus the shifted-out bits, rounded once to double (its exact sign is
  /// opposite to the smaller addend's, or zero). Exact terms: align_bits * 2^align_exp.
  TIEBREAK_HDC double align_error() const noexcept {
    if (align_bits == 0) return 0.0;
    // A local copy: nvcc cannot bind a reference to the namespace-scope constant in device code.
    constexpr format_desc f64_desc = formats::f64;
    return bits_to_f64(round_pack(f64_desc, make_exact(!small_sign, align_bits, align_exp), rne_t{}).bits);
  }
  /// round.error() - align_error(): the two correctly rounded doubles, subtracted in double. The
  /// exact split is error terms minus align terms; this convenience value may carry one more
  /// rounding.
  TIEBREAK_HDC double round_error() const noexcept { return round.error() - align_error(); }
};

namespace detail {

/// NaN propagation: the first NaN operand (for nan_policy::preserve), invalid when any signals.
TIEBREAK_HDC exact_value propagate_nan(const exact_value* v, int n, std::uint8_t& flags) noexcept {
  exact_value out;
  bool found = false;
  for (int i = 0; i < n; ++i) {
    if (v[i].cls == value_class::nan) {
      if (v[i].nan_signaling) flags |= flag_invalid;
      if (!found) { out = v[i]; found = true; }
    }
  }
  out.nan_signaling = false;
  return out;
}

/// Sign of an exact zero sum of operands of signs sa, sb (IEEE 754 6.3).
TIEBREAK_HDC bool zero_sum_sign(bool sa, bool sb, rounding r) noexcept {
  if (sa == sb) return sa;
  return r.mode == round_mode::rd;
}

struct sum_info {
  exact_value value;
  bool exact_zero = false;
  int exp_diff = 0;
  bool small_sign = false;  ///< the smaller addend: sign, lsb weight and significand
  int small_exp = 0;
  u128 small_sig = 0;
};

/// Exact sum of two finite non-zero plain windows (no tail, no sticky) held in U.
/// Preconditions: |a| >= |b|; asig, bsig < 2^(W-3) for U of W bits. The larger addend is
/// left-justified to bit W-3 (two bits of headroom for the carry); the part of b below the window
/// becomes the exact tail, which then lies >= W-3-53 >= 60 bits below the window's msb.
/// Scalars rather than exact_value references, so that the whole operation stays in registers.
template <class U>
TIEBREAK_HDI void add_exact_in(bool asign, int aexp0, U asig0, bool bsign, int bexp, U bsig,
                               sum_info& info) noexcept {
  constexpr int W = bit_width_v<U>;
  const int sa = (W - 3) - msb_of(asig0);
  const U asig = asig0 << sa;
  const int aexp = aexp0 - sa;
  const int shift = bexp - aexp;  // position of b's lsb inside a's window
  const bool same = asign == bsign;
  exact_value& r = info.value;
  r.cls = value_class::finite;
  r.sign = asign;
  r.exp = aexp;
  U bw;
  if (shift >= 0) {
    bw = bsig << shift;  // b's msb <= a's msb: fits
  } else {
    bw = shr(bsig, -shift);
    r.tail_sig = static_cast<u128>(bsig) & low_mask128(-shift);
    r.tail_exp = bexp;
    r.tail_neg = !same;
  }
  const U sum = same ? asig + bw : asig - bw;
  r.sig = sum;
  info.exact_zero = sum == 0 && r.tail_sig == 0;
}

/// Exact sum of two finite non-zero plain windows (sig < 2^107 each, no tail, no sticky).
TIEBREAK_HDI sum_info add_exact(const exact_value& x, const exact_value& y) noexcept {
  const bool swap = compare_magnitude(x, y) < 0;
  const bool asign = swap ? y.sign : x.sign, bsign = swap ? x.sign : y.sign;
  const int aexp = swap ? y.exp : x.exp, bexp = swap ? x.exp : y.exp;
  const u128 asig = swap ? y.sig : x.sig, bsig = swap ? x.sig : y.sig;
  sum_info info;
  info.small_sign = bsign;
  info.small_exp = bexp;
  info.small_sig = bsig;
  info.exp_diff = (aexp + msb128(asig)) - (bexp + msb128(bsig));
  if (static_cast<std::uint64_t>((asig | bsig) >> 60) == 0) {
    add_exact_in<std::uint64_t>(asign, aexp, static_cast<std::uint64_t>(asig), bsign, bexp,
                                static_cast<std::uint64_t>(bsig), info);
  } else {
    add_exact_in<u128>(asign, aexp, asig, bsign, bexp, bsig, info);
  }
  return info;
}

TIEBREAK_HDI void fill_alignment(op_result& out, const sum_info& s) noexcept {
  out.has_alignment = true;
  out.exp_diff = s.exp_diff;
  out.small_sign = s.small_sign;
  const int n = out.round.lsb_exp - s.small_exp;  // small's bits below the result lsb
  if (n > 0) {
    out.align_bits = s.small_sig & low_mask128(n);
    out.align_exp = s.small_exp;
  }
}

/// a + b on decoded values, with every special case; `negate_b` turns it into a - b.
TIEBREAK_HDI op_result add_values(const format_desc& f, const exact_value& a, const exact_value& b, rounding r,
                                  const convert_options& o) noexcept {
  op_result out;
  if (a.cls == value_class::nan || b.cls == value_class::nan) {
    std::uint8_t flags = 0;
    const exact_value both[2] = {a, b};
    out.round = round_pack(f, propagate_nan(both, 2, flags), r, o);
    out.round.flags |= flags;
    return out;
  }
  if (a.cls == value_class::inf || b.cls == value_class::inf) {
    if (a.cls == value_class::inf && b.cls == value_class::inf && a.sign != b.sign) {
      out.round = round_pack(f, make_nan(), r, o);
      out.round.flags |= flag_invalid;
      return out;
    }
    out.round = round_pack(f, make_inf(a.cls == value_class::inf ? a.sign : b.sign), r, o);
    return out;
  }
  if (a.cls == value_class::zero && b.cls == value_class::zero) {
    out.round = round_pack(f, make_zero(zero_sum_sign(a.sign, b.sign, r)), r, o);
    return out;
  }
  if (a.cls == value_class::zero || b.cls == value_class::zero) {
    out.round = round_pack(f, a.cls == value_class::zero ? b : a, r, o);
    return out;
  }
  const sum_info s = add_exact(a, b);
  if (s.exact_zero) {
    out.round = round_pack(f, make_zero(zero_sum_sign(a.sign, b.sign, r)), r, o);
  } else {
    out.round = round_pack(f, s.value, r, o);
  }
  fill_alignment(out, s);
  return out;
}

/// Exact product of two decoded values (finite non-zero path): sig < 2^106.
TIEBREAK_HDI exact_value mul_exact(const exact_value& a, const exact_value& b) noexcept {
  return make_exact(a.sign != b.sign, a.sig * b.sig, a.exp + b.exp);
}

}  // namespace detail

/// a + b in format `f`, rounded once under `r` (IEEE 754 addition).
/// Preconditions: a, b are encodings of `f`. NaN: the NaN of `o.nan` (invalid for a signalling
/// operand); Inf - Inf is invalid. Exact zero sums are +0, or -0 under rd (and for (-0) + (-0)).
/// `o.flush_input` reads subnormal operands as zero; `o.flush_output` flushes subnormal results.
TIEBREAK_HDI op_result add(const format_desc& f, std::uint64_t a, std::uint64_t b, rounding r,
                           const convert_options& o = {}) noexcept {
  op_result out = detail::add_values(f, unpack(f, a, o.flush_input), unpack(f, b, o.flush_input), r, o);
  out.a = a;
  out.b = b;
  return out;
}

/// a - b in format `f`: a + (-b) with b's sign flipped (NaN operands keep their sign for preserve).
TIEBREAK_HDI op_result sub(const format_desc& f, std::uint64_t a, std::uint64_t b, rounding r,
                           const convert_options& o = {}) noexcept {
  exact_value vb = unpack(f, b, o.flush_input);
  if (vb.cls != value_class::nan) vb.sign = !vb.sign;
  op_result out = detail::add_values(f, unpack(f, a, o.flush_input), vb, r, o);
  out.a = a;
  out.b = b;
  return out;
}

/// a * b in format `f`, rounded once. NaN as for add; 0 * Inf is invalid.
TIEBREAK_HDI op_result mul(const format_desc& f, std::uint64_t a, std::uint64_t b, rounding r,
                           const convert_options& o = {}) noexcept {
  op_result out;
  out.a = a;
  out.b = b;
  const exact_value va = unpack(f, a, o.flush_input), vb = unpack(f, b, o.flush_input);
  const bool sign = va.sign != vb.sign;
  std::uint8_t flags = 0;
  const exact_value both[2] = {va, vb};
  if (va.cls == value_class::nan || vb.cls == value_class::nan) {
    out.round = round_pack(f, detail::propagate_nan(both, 2, flags), r, o);
  } else if ((va.cls == value_class::inf && vb.cls == value_class::zero) ||
             (va.cls == value_class::zero && vb.cls == value_class::inf)) {
    out.round = round_pack(f, make_nan(), r, o);
    flags |= flag_invalid;
  } else if (va.cls == value_class::inf || vb.cls == value_class::inf) {
    out.round = round_pack(f, make_inf(sign), r, o);
  } else if (va.cls == value_class::zero || vb.cls == value_class::zero) {
    out.round = round_pack(f, make_zero(sign), r, o);
  } else {
    out.round = round_pack(f, detail::mul_exact(va, vb), r, o);
  }
  out.round.flags |= flags;
  return out;
}

/// a * b + c in format `f` with a single rounding (the product is exact, never rounded first).
/// NaN as for add; 0 * Inf is invalid whatever c is; Inf * x + (-Inf) is invalid.
TIEBREAK_HDI op_result fma(const format_desc& f, std::uint64_t a, std::uint64_t b, std::uint64_t c,
                           rounding r, const convert_options& o = {}) noexcept {
  const exact_value va = unpack(f, a, o.flush_input), vb = unpack(f, b, o.flush_input),
                    vc = unpack(f, c, o.flush_input);
  const bool psign = va.sign != vb.sign;
  op_result out;
  std::uint8_t flags = 0;
  const bool prod_invalid = (va.cls == value_class::inf && vb.cls == value_class::zero) ||
                            (va.cls == value_class::zero && vb.cls == value_class::inf);
  const exact_value all[3] = {va, vb, vc};
  if (prod_invalid) {
    detail::propagate_nan(all, 3, flags);
    out.round = round_pack(f, make_nan(), r, o);
    flags |= flag_invalid;
  } else if (va.cls == value_class::nan || vb.cls == value_class::nan || vc.cls == value_class::nan) {
    out.round = round_pack(f, detail::propagate_nan(all, 3, flags), r, o);
  } else {
    exact_value p;
    if (va.cls == value_class::inf || vb.cls == value_class::inf) p = make_inf(psign);
    else if (va.cls == value_class::zero || vb.cls == value_class::zero) p = make_zero(psign);
    else p = detail::mul_exact(va, vb);
    out = detail::add_values(f, p, vc, r, o);
  }
  out.round.flags |= flags;
  out.a = a;
  out.b = b;
  out.c = c;
  return out;
}

/// Runtime dispatch by name, for the CLI and bindings.
enum class op_kind : std::uint8_t { add, sub, mul, fma };

}  // namespace tiebreak::emu
