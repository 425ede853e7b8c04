// SPDX-License-Identifier: Apache-2.0
/// @file The one rounding routine (`round_pack`) every narrowing and every emulated op goes through.
#pragma once

#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak {

/// Result of rounding an exact value into a format. No global state: flags and the trace are here.
///
/// The signed rounding error is `result - exact`. For finite results without overflow it is
/// exactly
///
///   error = (-1)^sign * ( step * 2^lsb_exp  -  discarded * 2^window_exp  -  tail )
///
/// where `tail` is the input's exact tail (signed relative to the value, see exact_value). `error`
/// and `error_ulps` are that quantity rounded once to double; `error_sign` is its exact sign.
/// `error_exact` is false when the input carried sticky bits or when the result overflowed.
struct round_result {
  std::uint64_t bits = 0;          ///< encoding in the target format
  std::uint8_t flags = 0;          ///< tiebreak::flag bits
  bool sign = false;               ///< sign of the exact value
  // --- trace of the rounding step (finite inputs) ---
  int lsb_exp = 0;                 ///< the result grid: one ulp of the result is 2^lsb_exp
  int window_exp = 0;              ///< weight of the input window's lsb
  int discarded_count = 0;         ///< k: window bits below the result lsb (<= 0: none)
  u128 discarded = 0;              ///< the discarded window bits (all of the window when k >= 128)
  bool guard = false;              ///< first discarded bit
  bool round_bit = false;          ///< second discarded bit
  bool sticky = false;             ///< OR of every later bit, the tail and the input's sticky flag
  std::int64_t step = 0;           ///< result minus truncated magnitude, in ulps: 0 or 1 (rz/rto: 0/1 via lsb), -1 only when a negative tail borrowed
  // --- the error ---
  bool error_exact = true;
  int error_sign = 0;              ///< exact sign of (result - exact): -1, 0, +1
  double error = 0;                ///< result - exact, rounded to double (+-inf for an infinite result of a finite input)
  double error_ulps = 0;           ///< error / 2^lsb_exp, rounded to double

  TIEBREAK_HDC bool inexact() const noexcept { return (flags & flag_inexact) != 0; }
  TIEBREAK_HDC bool overflow() const noexcept { return (flags & flag_overflow) != 0; }
  TIEBREAK_HDC bool underflow() const noexcept { return (flags & flag_underflow) != 0; }
  TIEBREAK_HDC bool invalid() const noexcept { return (flags & flag_invalid) != 0; }
};

namespace detail {

TIEBREAK_HDC double ldexp_exact(double x, int e) noexcept {
  // Scaling by powers of two in steps that stay in range; exact unless the result leaves the
  // double range (then it over/underflows the way a single multiplication would).
  while (e > 1000) { x *= 0x1p1000; e -= 1000; }
  while (e < -1000) { x *= 0x1p-1000; e += 1000; if (x == 0) return x; }
  // 2^e as a double built from bits: e is in [-1000, 1000] here.
  return x * bits_to_f64(static_cast<std::uint64_t>(e + 1023) << 52);
}

/// u128 to double, rounded once (to nearest even).
TIEBREAK_HDC double u128_to_double(u128 v) noexcept {
  if (v == 0) return 0.0;
  const int m = msb128(v);
  if (m < 53) return static_cast<double>(static_cast<std::uint64_t>(v));
  const int sh = m - 52;
  std::uint64_t top = static_cast<std::uint64_t>(v >> sh);
  const u128 rem = v & low_mask128(sh);
  const u128 half = u128{1} << (sh - 1);
  if (rem > half || (rem == half && (top & 1))) ++top;  // top may become 2^53: still exact in double
  return ldexp_exact(static_cast<double>(top), sh);
}

/// The NaN a format gets under a policy.
TIEBREAK_HDC std::uint64_t nan_bits(const format_desc& f, const exact_value& x, nan_policy p) noexcept {
  if (f.special == special_style::fn_nan) {
    return f.pack(p == nan_policy::preserve ? x.sign : false, f.exp_field_max(), f.frac_mask());
  }
  switch (p) {
    case nan_policy::preserve: {
      std::uint64_t frac = x.nan_payload >> (64 - f.man_bits);
      frac |= std::uint64_t{1} << (f.man_bits - 1);  // quiet
      return f.pack(x.sign, f.exp_field_max(), frac);
    }
    case nan_policy::quiet: return f.pack(false, f.exp_field_max(), std::uint64_t{1} << (f.man_bits - 1));
    case nan_policy::canonical:
    default: return f.pack(false, f.exp_field_max(), f.frac_mask());
  }
}

}  // namespace detail

/// Rounds an exact value into format `f` under rounding `r` (SoftFloat's roundPack).
///
/// Preconditions: `f` has 1 <= man_bits <= 52; a finite `x` has sig != 0 or sticky set.
/// Policy: `r` decides every inexact case; overflow follows IEEE 754 7.4 per mode (rne, rna, sr: to
/// Inf; rz, rto: to max finite; ru/rd: by sign) and goes to max finite under `o.saturate`, to NaN in
/// formats without Inf (e4m3). Underflow is signalled when the exact value is tiny (below the normal
/// range, before rounding) and the result inexact. `o.flush_output` turns subnormal results into
/// signed zeros. NaN inputs give the NaN of `o.nan`; a signalling NaN also raises invalid. Infinite
/// inputs stay infinite, or become max finite under `o.saturate`, or NaN in formats without Inf.
TIEBREAK_HDC round_result round_pack(const format_desc& f, const exact_value& x, rounding r,
                                     const convert_options& o = {}) noexcept {
  round_result res;
  res.sign = x.sign;
  switch (x.cls) {
    case value_class::nan:
      res.bits = detail::nan_bits(f, x, o.nan);
      if (x.nan_signaling) res.flags |= flag_invalid;
      return res;
    case value_class::inf:
      if (o.saturate) res.bits = f.max_finite(x.sign);
      else if (f.has_inf()) res.bits = f.inf(x.sign);
      else { res.bits = detail::nan_bits(f, x, o.nan); res.flags |= flag_invalid; }
      return res;
    case value_class::zero:
      res.bits = f.pack(x.sign, 0, 0);
      return res;
    default: break;
  }

  // Fold the tail into the window: a same-sign tail is a sticky bit; an opposite-sign tail borrows
  // one unit from the window's lsb and leaves a sticky remainder (2^exp - |tail| > 0).
  const bool has_tail = x.tail_sig != 0;
  u128 sig = x.sig;
  bool in_sticky = x.sticky || has_tail;
  if (has_tail && x.tail_neg) sig -= 1;

  const int msb = msb128(sig);
  const int e_lead = x.exp + msb;  // the exact value lies in [2^e_lead, 2^(e_lead+1))
  const bool tiny = e_lead < f.emin();
  int q = (tiny ? f.emin() : e_lead) - f.man_bits;
  const int k = q - x.exp;

  std::uint64_t kept;
  u128 rem = 0;
  bool g = false, rb = false, s = in_sticky;
  std::uint32_t top32 = 0;
  if (k <= 0) {
    kept = static_cast<std::uint64_t>(sig << -k);
  } else {
    kept = k >= 128 ? 0 : static_cast<std::uint64_t>(sig >> k);
    rem = k >= 128 ? sig : (sig & low_mask128(k));
    g = k - 1 < 128 && ((rem >> (k - 1)) & 1) != 0;
    rb = k >= 2 && k - 2 < 128 && ((rem >> (k - 2)) & 1) != 0;
    s = s || (rem & low_mask128(k - 2)) != 0;
    const int sh = k - 32;  // top32 = discarded bits [k-1 .. k-32]
    if (sh >= 128) top32 = 0;
    else if (sh >= 0) top32 = static_cast<std::uint32_t>(rem >> sh);
    else top32 = static_cast<std::uint32_t>(rem << -sh);
  }
  const bool sticky_all = rb || s;
  const bool inexact = g || sticky_all;

  // Truncation of the *unadjusted* window, for the exact error terms.
  const u128 d0 = k <= 0 ? u128{0} : (k >= 128 ? x.sig : (x.sig & low_mask128(k)));
  const std::uint64_t t0 = k <= 0 ? static_cast<std::uint64_t>(x.sig << -k)
                                  : (k >= 128 ? 0 : static_cast<std::uint64_t>(x.sig >> k));

  const bool lsb = (kept & 1) != 0;
  if (r.mode == round_mode::rto) {
    if (inexact) kept |= 1;
  } else if (rounds_up(r, x.sign, lsb, g, sticky_all, top32)) {
    ++kept;
  }

  res.lsb_exp = q;
  res.window_exp = x.exp;
  res.discarded_count = k;
  res.discarded = d0;
  res.guard = g;
  res.round_bit = rb;
  res.sticky = s;
  res.step = static_cast<std::int64_t>(kept) - static_cast<std::int64_t>(t0);
  if (inexact) res.flags |= flag_inexact;
  if (tiny && inexact) res.flags |= flag_underflow;

  // Encode. A carry out of the significand moves to the next binade (kept was exactly 2^p).
  std::uint64_t out_kept = kept;
  int out_q = q;
  if (out_kept >> (f.man_bits + 1)) { out_kept >>= 1; ++out_q; }
  bool overflow = false;
  if (out_kept == 0) {
    res.bits = f.pack(x.sign, 0, 0);
  } else if ((out_kept >> f.man_bits) == 0) {
    res.bits = f.pack(x.sign, 0, out_kept);  // subnormal: out_q == emin - man_bits
    if (o.flush_output) {
      res.bits = f.pack(x.sign, 0, 0);
      res.flags |= flag_underflow | flag_inexact;
      res.step = -static_cast<std::int64_t>(t0);
    }
  } else {
    const int e_out = out_q + f.man_bits;
    const std::uint64_t frac = out_kept & f.frac_mask();
    if (e_out > f.emax() || (e_out == f.emax() && frac > f.max_frac())) {
      overflow = true;
    } else {
      res.bits = f.pack(x.sign, static_cast<std::uint64_t>(e_out + f.bias), frac);
    }
  }

  // Error terms: error = sign * (step * 2^q - d0 * 2^exp - tail_rel).
  const double tail_rel = has_tail ? (x.tail_neg ? -1.0 : 1.0) * detail::ldexp_exact(detail::u128_to_double(x.tail_sig), x.tail_exp)
                                   : 0.0;
  if (overflow) {
    res.flags |= flag_overflow | flag_inexact;
    res.error_exact = false;
    const double exact_mag = detail::ldexp_exact(detail::u128_to_double(x.sig), x.exp) + tail_rel;
    if (!o.saturate && overflows_to_inf(r, x.sign)) {
      if (f.has_inf()) res.bits = f.inf(x.sign);
      else res.bits = detail::nan_bits(f, x, o.nan);
      res.error = x.sign ? -__builtin_huge_val() : __builtin_huge_val();
      res.error_ulps = res.error;
    } else {
      res.bits = f.max_finite(x.sign);
      const double max_mag = detail::ldexp_exact(static_cast<double>((f.max_frac() | (std::uint64_t{1} << f.man_bits))),
                                                 f.emax() - f.man_bits);
      const double e = max_mag - exact_mag;
      res.error = x.sign ? -e : e;
      res.error_ulps = detail::ldexp_exact(res.error, -(f.emax() - f.man_bits));
    }
    res.error_sign = res.error > 0 ? 1 : (res.error < 0 ? -1 : 0);
    return res;
  }
  res.error_exact = !x.sticky;

  // diff = step * 2^k - d0, in units of 2^exp. |step| > 1 only for flushed results (d0 < 2^k).
  double diff;  // in units of 2^exp
  int diff_sign;
  if (k <= 0) {
    diff = static_cast<double>(res.step);  // d0 = 0, and step is 0 here unless flushed
    diff = detail::ldexp_exact(diff, -k);
    diff_sign = res.step > 0 ? 1 : (res.step < 0 ? -1 : 0);
  } else if (res.step == 0) {
    diff = -detail::u128_to_double(d0);
    diff_sign = d0 != 0 ? -1 : 0;
  } else if (res.step == 1) {
    // 2^k - d0 > 0 (d0 < 2^k).
    if (k < 128) diff = detail::u128_to_double((u128{1} << k) - d0);
    else if (k == 128) diff = detail::u128_to_double(~d0 + 1) + (d0 == 0 ? 0x1p128 : 0.0);
    else diff = detail::ldexp_exact(1.0, k) - detail::u128_to_double(d0);
    diff_sign = 1;
  } else {
    // step <= -1: -(|step| * 2^k + d0) < 0.
    diff = -(detail::ldexp_exact(static_cast<double>(-res.step), k) + detail::u128_to_double(d0));
    diff_sign = -1;
  }
  const double mag_err = detail::ldexp_exact(diff, x.exp) - tail_rel;
  res.error = x.sign ? -mag_err : mag_err;
  res.error_ulps = x.sign ? -(detail::ldexp_exact(diff, -k) - detail::ldexp_exact(tail_rel, -q))
                          : detail::ldexp_exact(diff, -k) - detail::ldexp_exact(tail_rel, -q);
  // Exact sign: the tail only decides when the window part is zero (|tail| < 2^exp <= any non-zero diff).
  int sgn = diff_sign != 0 ? diff_sign : (has_tail ? (x.tail_neg ? 1 : -1) : 0);
  if (x.sticky && diff_sign == 0) sgn = -1;
  res.error_sign = x.sign ? -sgn : sgn;
  return res;
}

/// Runtime-typed convenience: rounds an encoding of `from` into `to`.
TIEBREAK_HDC round_result convert(const format_desc& to, const format_desc& from, std::uint64_t bits,
                                  rounding r, const convert_options& o = {}) noexcept {
  return round_pack(to, unpack(from, bits, o.flush_input), r, o);
}

/// f32 -> any format, from a float's bits.
TIEBREAK_HDC round_result f32_bits_to(const format_desc& to, std::uint32_t bits, rounding r,
                                      const convert_options& o = {}) noexcept {
  return convert(to, formats::f32, bits, r, o);
}
/// f64 -> any format, rounded once (never through f32).
TIEBREAK_HDC round_result f64_bits_to(const format_desc& to, std::uint64_t bits, rounding r,
                                      const convert_options& o = {}) noexcept {
  return convert(to, formats::f64, bits, r, o);
}

/// Value of an encoding as a double (exact for every format up to f64; NaN keeps its sign).
TIEBREAK_HDC double to_double(const format_desc& f, std::uint64_t bits) noexcept {
  const exact_value v = unpack(f, bits);
  switch (v.cls) {
    case value_class::nan: return v.sign ? -__builtin_nan("") : __builtin_nan("");
    case value_class::inf: return v.sign ? -__builtin_huge_val() : __builtin_huge_val();
    case value_class::zero: return v.sign ? -0.0 : 0.0;
    default: {
      const double m = detail::ldexp_exact(static_cast<double>(static_cast<std::uint64_t>(v.sig)), v.exp);
      return v.sign ? -m : m;
    }
  }
}

}  // namespace tiebreak
