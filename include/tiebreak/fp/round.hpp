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
/// where `tail = (tail_neg ? -1 : 1) * tail_sig * 2^tail_exp` is the input's exact tail (see
/// exact_value). error() and error_ulps() give that quantity rounded once to double (computed on
/// demand, off the hot path); error_sign() is its exact sign. error_exact() is false when the
/// input carried sticky bits or the result overflowed (then error() is the double estimate).
struct round_result {
  std::uint64_t bits = 0;          ///< encoding in the target format
  std::uint8_t flags = 0;          ///< tiebreak::flag bits
  bool sign = false;               ///< sign of the exact value
  // --- trace of the rounding step (finite inputs) ---
  bool guard = false;              ///< first discarded bit
  bool round_bit = false;          ///< second discarded bit
  bool sticky = false;             ///< OR of every later bit, the tail and the input's sticky flag
  bool finite_input = false;       ///< the terms below describe a finite non-zero input
  bool input_sticky = false;       ///< the input had bits lost before (error not exact)
  bool tail_neg = false;           ///< the input's tail opposes its sign
  int lsb_exp = 0;                 ///< the result grid: one ulp of the result is 2^lsb_exp
  int window_exp = 0;              ///< weight of the input window's lsb
  int discarded_count = 0;         ///< k: window bits below the result lsb (<= 0: none)
  int tail_exp = 0;
  std::int64_t step = 0;           ///< result minus truncated magnitude, in ulps: 0 or 1; -1 when a negative tail borrowed and nothing was added back; -truncated when flushed to zero
  u128 discarded = 0;              ///< the discarded window bits (all of the window when k >= 128)
  u128 tail_sig = 0;               ///< the input's exact tail (0: none)
  double overflow_error = 0;       ///< overflow only: result - exact, rounded to double

  TIEBREAK_HDC bool inexact() const noexcept { return (flags & flag_inexact) != 0; }
  TIEBREAK_HDC bool overflow() const noexcept { return (flags & flag_overflow) != 0; }
  TIEBREAK_HDC bool underflow() const noexcept { return (flags & flag_underflow) != 0; }
  TIEBREAK_HDC bool invalid() const noexcept { return (flags & flag_invalid) != 0; }
  TIEBREAK_HDC bool error_exact() const noexcept { return !input_sticky && !overflow(); }
  /// result - exact, rounded once to double; +-inf for an infinite result of a finite input, 0 for
  /// special inputs.
  TIEBREAK_HDC double error() const noexcept;
  /// error() / 2^lsb_exp.
  TIEBREAK_HDC double error_ulps() const noexcept;
  /// Exact sign of result - exact: -1, 0, +1.
  TIEBREAK_HDC int error_sign() const noexcept;
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
    // x is the NaN input, or the overflowing/infinite value the NaN stands for (no Inf here).
    const bool keep_sign = p == nan_policy::preserve || p == nan_policy::truncate ||
                           (p == nan_policy::canonical_signed_overflow && x.cls != value_class::nan);
    return f.pack(keep_sign ? x.sign : false, f.exp_field_max(), f.frac_mask());
  }
  switch (p) {
    case nan_policy::preserve: {
      std::uint64_t frac = x.nan_payload >> (64 - f.man_bits);
      frac |= std::uint64_t{1} << (f.man_bits - 1);  // quiet
      return f.pack(x.sign, f.exp_field_max(), frac);
    }
    case nan_policy::quiet: return f.pack(false, f.exp_field_max(), std::uint64_t{1} << (f.man_bits - 1));
    case nan_policy::truncate:  // no quiet bit: a zero kept fraction is the Inf encoding
      return f.pack(x.sign, f.exp_field_max(), x.nan_payload >> (64 - f.man_bits));
    case nan_policy::canonical:
    default: return f.pack(false, f.exp_field_max(), f.frac_mask());
  }
}

}  // namespace detail

namespace detail {

/// The `n` (< 32) discarded bits just below the window's lsb, which come from the tail: the tail
/// itself when it has the value's sign, else 2^exp - |tail| (the window borrowed one unit).
TIEBREAK_HDC std::uint32_t sr_tail_bits(const exact_value& x, int n) noexcept {
  const int m = (x.exp - n) - x.tail_exp;  // tail bits below the n wanted positions
  const u128 t = x.tail_sig;
  if (!x.tail_neg) {
    return static_cast<std::uint32_t>(m >= 128 ? u128{0} : (m >= 0 ? t >> m : t << -m));
  }
  // floor((2^exp - t) / 2^(exp-n)) = 2^n - ceil(t / 2^m)
  const u128 c = m >= 128 ? u128{1} : (m >= 0 ? (t >> m) + ((t & low_mask128(m)) != 0 ? 1 : 0) : t << -m);
  return static_cast<std::uint32_t>((u128{1} << n) - c);
}

/// The finite, non-zero path of round_pack on a window held in U (uint64_t or u128): the same code
/// for both widths, so a 64-bit window (every conversion and every add of formats up to f64) never
/// pays for 128-bit shifts.
template <class U>
TIEBREAK_HDI round_result round_finite(const format_desc& f, const exact_value& x, rounding r,
                                       const convert_options& o) noexcept {
  // Fold the tail into the window: a same-sign tail is a sticky bit; an opposite-sign tail borrows
  // one unit from the window's lsb and leaves a sticky remainder (2^exp - |tail| > 0).
  const bool has_tail = x.tail_sig != 0;
  const bool borrow = has_tail && x.tail_neg;
  const U sig0 = static_cast<U>(x.sig);
  const U sig = sig0 - (borrow ? U{1} : U{0});

  const int e_lead = x.exp + msb_of(sig);  // the exact value lies in [2^e_lead, 2^(e_lead+1))
  const bool tiny = e_lead < f.emin();
  const int q = (tiny ? f.emin() : e_lead) - f.man_bits;
  const int k = q - x.exp;
  constexpr int W = bit_width_v<U>;

  // kept: the truncated significand on the result grid; g, rb, s: guard, round, sticky.
  std::uint64_t kept;
  bool g = false, rb = false, s = x.sticky || has_tail;
  std::uint32_t top32 = 0;
  u128 discarded = 0;
  if (k <= 0) {
    kept = static_cast<std::uint64_t>(sig << -k);  // -k <= man_bits: fits
  } else {
    const U rem = sig & low_mask<U>(k);
    kept = static_cast<std::uint64_t>(shr(sig, k));
    g = k <= W && ((rem >> (k - 1)) & 1) != 0;
    rb = k >= 2 && k - 2 < W && ((rem >> (k - 2)) & 1) != 0;
    s = s || (rem & low_mask<U>(k - 2)) != 0;
    if (r.mode == round_mode::sr) {
      const int sh = k - 32;  // top32 = discarded bits [k-1 .. k-32] of the exact value
      top32 = sh >= W ? 0u : static_cast<std::uint32_t>(sh >= 0 ? rem >> sh : rem << -sh);
      if (sh < 0 && has_tail) top32 |= sr_tail_bits(x, -sh);
    }
    // The exact terms use the window before the borrow.
    discarded = static_cast<u128>(sig0 & low_mask<U>(k));
  }
  const bool sticky_all = rb || s;
  const bool inexact = g || sticky_all;
  // Truncation of the window before the borrow differs from `kept` only when the borrow crossed
  // the result lsb (all discarded window bits were zero).
  const std::uint64_t t0 = (borrow && k > 0 && discarded == 0) ? kept + 1 : kept;

  if (r.mode == round_mode::rto) {
    kept |= inexact ? 1u : 0u;
  } else if (rounds_up(r, x.sign, (kept & 1) != 0, g, sticky_all, top32)) {
    ++kept;
  }

  std::uint8_t flags = 0;
  if (inexact) flags |= flag_inexact;
  if (tiny && inexact) flags |= flag_underflow;
  std::int64_t step = static_cast<std::int64_t>(kept) - static_cast<std::int64_t>(t0);
  int lsb_exp = q;
  double overflow_error = 0;
  std::uint64_t bits;

  // Encode. A carry out of the significand moves to the next binade (kept was exactly 2^p).
  std::uint64_t out_kept = kept;
  int out_q = q;
  if (out_kept >> (f.man_bits + 1)) { out_kept >>= 1; ++out_q; }
  const int e_out = out_q + f.man_bits;
  const std::uint64_t frac = out_kept & f.frac_mask();
  if (out_kept == 0) {
    bits = f.pack(x.sign, 0, 0);
  } else if ((out_kept >> f.man_bits) == 0) {  // subnormal: out_q == emin - man_bits
    bits = f.pack(x.sign, 0, out_kept);
    if (o.flush_output) {
      bits = f.pack(x.sign, 0, 0);
      flags |= flag_underflow | flag_inexact;
      step = -static_cast<std::int64_t>(t0);
    }
  } else if (e_out < f.emax() || (e_out == f.emax() && frac <= f.max_frac())) {
    bits = f.pack(x.sign, static_cast<std::uint64_t>(e_out + f.bias), frac);
  } else {
    // Overflow (IEEE 754 7.4), off the hot path: the error is estimated in double.
    flags |= flag_overflow | flag_inexact;
    if (!o.saturate && overflows_to_inf(r, x.sign)) {
      bits = f.has_inf() ? f.inf(x.sign) : nan_bits(f, x, o.nan);
      overflow_error = x.sign ? -__builtin_huge_val() : __builtin_huge_val();
    } else {
      bits = f.max_finite(x.sign);
      lsb_exp = f.emax() - f.man_bits;  // one ulp of the max finite result
      const double tail = has_tail ? (x.tail_neg ? -1.0 : 1.0) * ldexp_exact(u128_to_double(x.tail_sig), x.tail_exp)
                                   : 0.0;
      const double exact_mag = ldexp_exact(u128_to_double(x.sig), x.exp) + tail;
      const double max_mag = ldexp_exact(static_cast<double>(f.max_frac() | (std::uint64_t{1} << f.man_bits)),
                                         f.emax() - f.man_bits);
      overflow_error = x.sign ? exact_mag - max_mag : max_mag - exact_mag;
    }
  }
  // One aggregate initialisation of every field (no default-initialised object patched field by
  // field): compilers keep it in registers through an inlined caller.
  return round_result{bits, flags, x.sign, g, rb, s, true, x.sticky, x.tail_neg, lsb_exp, x.exp, k, x.tail_exp,
                      step, discarded, x.tail_sig, overflow_error};
}

}  // namespace detail

/// Rounds an exact value into format `f` under rounding `r` (SoftFloat's roundPack).
///
/// Preconditions: `f` has 1 <= man_bits <= 52; a finite `x` has sig != 0.
/// Policy: `r` decides every inexact case; overflow follows IEEE 754 7.4 per mode (rne, rna, sr: to
/// Inf; rz, rto: to max finite; ru/rd: by sign) and goes to max finite under `o.saturate`, to NaN in
/// formats without Inf (e4m3). Underflow is signalled when the exact value is tiny (below the normal
/// range, before rounding) and the result inexact. `o.flush_output` turns subnormal results into
/// signed zeros. NaN inputs give the NaN of `o.nan`; a signalling NaN also raises invalid. Infinite
/// inputs stay infinite, or become max finite under `o.saturate`, or NaN in formats without Inf.
TIEBREAK_HDI round_result round_pack(const format_desc& f, const exact_value& x, rounding r,
                                     const convert_options& o = {}) noexcept {
  switch (x.cls) {
    case value_class::finite:
      if (static_cast<std::uint64_t>(x.sig >> 64) == 0) return detail::round_finite<std::uint64_t>(f, x, r, o);
      return detail::round_finite<u128>(f, x, r, o);
    case value_class::nan: {
      round_result res;
      res.sign = x.sign;
      res.bits = detail::nan_bits(f, x, o.nan);
      if (x.nan_signaling) res.flags |= flag_invalid;
      return res;
    }
    case value_class::inf: {
      round_result res;
      res.sign = x.sign;
      if (o.saturate) res.bits = f.max_finite(x.sign);
      else if (f.has_inf()) res.bits = f.inf(x.sign);
      else { res.bits = detail::nan_bits(f, x, o.nan); res.flags |= flag_invalid; }
      return res;
    }
    default: {
      round_result res;
      res.sign = x.sign;
      res.bits = f.pack(x.sign, 0, 0);
      return res;
    }
  }
}

namespace detail {

/// Restores exact_value's tail precondition (sig >= 2^60 when a tail exists) by moving the window
/// up and pulling the tail's leading bits into it. The value is unchanged.
TIEBREAK_HDC void pull_tail(exact_value& v) noexcept {
  while (v.tail_sig != 0 && (v.sig >> 60) == 0) {
    const int s = 64 - msb128(v.sig);  // the window's msb moves to bit 64
    const int new_exp = v.exp - s;
    const int sh = new_exp - v.tail_exp;  // tail bits that stay below the new window
    u128 hi, lo;
    if (sh <= 0) { hi = v.tail_sig << -sh; lo = 0; }  // < 2^s: the tail is below 2^exp
    else if (sh >= 128) { hi = 0; lo = v.tail_sig; }
    else { hi = v.tail_sig >> sh; lo = v.tail_sig & low_mask128(sh); }
    v.sig <<= s;
    v.sig = v.tail_neg ? v.sig - hi : v.sig + hi;  // stays >= 1: hi < 2^s <= v.sig
    v.exp = new_exp;
    v.tail_sig = lo;
  }
}

/// The rounding error (result - exact) of a finite, non-overflowed result as an exact value, to be
/// rounded once into whatever format shows it. `exp_shift` is subtracted from every exponent
/// (lsb_exp gives the error in ulps). Exact except when more than 128 window bits were discarded
/// with a round-up, where the far bits are folded into a same-sign sticky bit (rounding stays
/// correct) and for inputs that carried a sticky bit.
TIEBREAK_HDC exact_value error_value(const round_result& r, int exp_shift) noexcept {
  const int k = r.discarded_count;
  const u128 d = r.discarded;
  // e = sgn_w * |W| * 2^exp - t_rel (relative to the value's sign), W = step * 2^k - d.
  exact_value ev;
  ev.cls = value_class::finite;
  ev.exp = r.window_exp;
  int sgn_w = 0;
  bool approx_sticky = false;
  bool tail_folded = false;
  if (k <= 0) {
    sgn_w = r.step > 0 ? 1 : (r.step < 0 ? -1 : 0);
    ev.sig = static_cast<u128>(r.step < 0 ? -r.step : r.step);
    ev.exp = r.lsb_exp;
  } else if (r.step == 0) {
    sgn_w = d != 0 ? -1 : 0;
    ev.sig = d;
  } else if (r.step < 0) {
    // Flushed to zero (|W| is the whole window, < 2^128) or a borrow with nothing added back (d == 0).
    sgn_w = -1;
    ev.sig = (static_cast<u128>(-r.step) << k) + d;
  } else if (k < 128) {
    sgn_w = 1;
    ev.sig = (u128{1} << k) - d;
  } else if (k == 128) {
    sgn_w = 1;
    if (d == 0) { ev.sig = 1; ev.exp += 128; }
    else ev.sig = ~d + 1;  // 2^128 - d
  } else {
    // 2^k - d - t_rel/2^exp with k > 128: keep 125 bits, fold the rest into a sticky bit.
    sgn_w = 1;
    const int rsh = k - 125;
    const u128 low = d & low_mask128(rsh);
    const bool t_pos = r.tail_sig != 0 && !r.tail_neg;
    const u128 c = shr(d, rsh) + ((low != 0 || t_pos) ? 1 : 0);
    ev.sig = (u128{1} << 125) - c;
    ev.exp += rsh;
    approx_sticky = low != 0 || r.tail_sig != 0;
    tail_folded = true;
  }
  if (!tail_folded && r.tail_sig != 0) {
    // t_rel = (tail_neg ? -1 : 1) * tail; the tail term of e is -t_rel.
    if (sgn_w == 0) {
      ev.sig = r.tail_sig;
      ev.exp = r.tail_exp;
      ev.sign = !r.tail_neg;  // e = -t_rel
    } else {
      ev.sign = sgn_w < 0;
      ev.tail_sig = r.tail_sig;
      ev.tail_exp = r.tail_exp;
      ev.tail_neg = (sgn_w > 0) != r.tail_neg;  // -sgn_w * t_rel opposes the window when sgn_w * t_rel > 0
      pull_tail(ev);
    }
  } else {
    ev.sign = sgn_w < 0;
  }
  ev.sticky = approx_sticky || (r.input_sticky && sgn_w < 0);  // input sticky grows |e| only then
  if (ev.sig == 0 && ev.tail_sig == 0) return make_zero(false);
  if (r.sign) ev.sign = !ev.sign;
  ev.exp -= exp_shift;
  ev.tail_exp -= exp_shift;
  return ev;
}

}  // namespace detail

namespace detail {

/// Fast path of error(), error_ulps() and error_sign() (performance only, same values): when the
/// input had no tail and no sticky bit, at most 52 window bits were discarded and |step| <= 1, the
/// error relative to the value's sign is the integer W = step * 2^k - discarded (k <= 0: W = step)
/// times a power of two, |W| <= 2^52. Sets `w` (with the value's sign applied) and `e` (the weight
/// of its lsb) and returns true; false sends the caller to the general error_value path. Taken by
/// every narrowing of a plain encoding into a format at most 52 bits narrower (all of
/// f32 -> bf16/f16/e4m3 except inputs > 52 bits below the target's subnormal grid). It builds no
/// exact_value and rounds nothing: the double it leads to is exact (below).
TIEBREAK_HDC bool error_as_int(const round_result& r, std::int64_t& w, int& e) noexcept {
  const int k = r.discarded_count;
  if (r.tail_sig != 0 || r.input_sticky || k > 52 || r.step > 1 || r.step < -1) return false;
  if (k <= 0) {
    w = r.step;
    e = r.lsb_exp;
  } else {
    w = r.step * (std::int64_t{1} << k) - static_cast<std::int64_t>(r.discarded);
    e = r.window_exp;
  }
  if (r.sign) w = -w;
  return true;
}

/// w * 2^e as a double when that is exact and normal or zero (|w| <= 2^53 holds for error_as_int);
/// false otherwise.
TIEBREAK_HDC bool int_times_pow2(std::int64_t w, int e, double& out) noexcept {
  if (e < -1022 || e > 1023 - 54) return false;
  out = static_cast<double>(w) * bits_to_f64(static_cast<std::uint64_t>(e + 1023) << 52);
  return true;
}

}  // namespace detail

TIEBREAK_HDC double round_result::error() const noexcept {
  if (overflow()) return overflow_error;
  if (!finite_input) return 0.0;
  std::int64_t w;
  int e;
  double d;
  if (detail::error_as_int(*this, w, e) && detail::int_times_pow2(w, e, d)) return d;
  // A local copy: nvcc cannot bind a reference to the namespace-scope constant in device code.
  constexpr format_desc f64_desc = formats::f64;
  return bits_to_f64(round_pack(f64_desc, detail::error_value(*this, 0), rne_t{}).bits);
}

TIEBREAK_HDC double round_result::error_ulps() const noexcept {
  if (overflow()) {
    const double e = overflow_error;
    return (e - e != 0) ? e : detail::ldexp_exact(e, -lsb_exp);
  }
  if (!finite_input) return 0.0;
  std::int64_t w;
  int e;
  double d;
  if (detail::error_as_int(*this, w, e) && detail::int_times_pow2(w, e - lsb_exp, d)) return d;
  // A local copy: nvcc cannot bind a reference to the namespace-scope constant in device code.
  constexpr format_desc f64_desc = formats::f64;
  return bits_to_f64(round_pack(f64_desc, detail::error_value(*this, lsb_exp), rne_t{}).bits);
}

TIEBREAK_HDC int round_result::error_sign() const noexcept {
  if (overflow()) return overflow_error > 0 ? 1 : (overflow_error < 0 ? -1 : 0);
  if (!finite_input) return 0;
  std::int64_t w;
  int e;
  if (detail::error_as_int(*this, w, e)) return w > 0 ? 1 : (w < 0 ? -1 : 0);
  // With a tail and no sticky bit: e = (W * 2^window_exp - t_rel) with |t_rel| < 2^window_exp, so
  // W != 0 decides the sign alone and W == 0 leaves -t_rel (performance only: the general path
  // below gives the same answer by building the error as an exact value).
  if (tail_sig != 0 && !input_sticky && discarded_count > 0 && discarded_count <= 62 && step >= 0 && step <= 1) {
    const std::int64_t wt = step * (std::int64_t{1} << discarded_count) - static_cast<std::int64_t>(discarded);
    const int rel = wt > 0 ? 1 : (wt < 0 ? -1 : (tail_neg ? 1 : -1));
    return sign ? -rel : rel;
  }
  const exact_value ev = detail::error_value(*this, 0);
  if (ev.cls == value_class::zero) return input_sticky ? (sign ? 1 : -1) : 0;
  return ev.sign ? -1 : 1;
}

/// Runtime-typed convenience: rounds an encoding of `from` into `to`.
TIEBREAK_HDI round_result convert(const format_desc& to, const format_desc& from, std::uint64_t bits,
                                  rounding r, const convert_options& o = {}) noexcept {
  return round_pack(to, unpack(from, bits, o.flush_input), r, o);
}

/// f32 -> any format, from a float's bits.
TIEBREAK_HDI round_result f32_bits_to(const format_desc& to, std::uint32_t bits, rounding r,
                                      const convert_options& o = {}) noexcept {
  // A local copy, not a reference to the namespace-scope constant: nvcc cannot bind a reference
  // to a host variable in device code ("identifier formats::f32 is undefined in device code").
  constexpr format_desc from = formats::f32;
  return convert(to, from, bits, r, o);
}
/// f64 -> any format, rounded once (never through f32).
TIEBREAK_HDI round_result f64_bits_to(const format_desc& to, std::uint64_t bits, rounding r,
                                      const convert_options& o = {}) noexcept {
  constexpr format_desc from = formats::f64;  // a copy, for device code (see f32_bits_to)
  return convert(to, from, bits, r, o);
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
