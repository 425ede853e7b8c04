// SPDX-License-Identifier: Apache-2.0
/// @file Independent test oracles: rounding by the two neighbours and the exact midpoint (f64, Boost).
///
/// These oracles never look at the core's window/guard/round/sticky machinery. They find the two
/// neighbouring grid points of the exact value and compare it with the exact midpoint between them:
///  - `f64_oracle`: the exact value is a double-double `hi + lo` (lo from TwoSum, or 0); grid points
///    and midpoints of every format up to 24 bits of precision are doubles, so comparing `hi` with
///    them in f64 (and using the sign of `lo` on equality) is exact. Used by the 2^32 sweeps.
///  - `dyadic`: an exact Boost.Multiprecision cpp_int significand times a power of two; exact sums,
///    products and comparisons of any f64 values. Used for FMA, long sums, f64 -> narrow and random
///    samples of everything.
/// Both feed the same `bracket` (neighbours, midpoint comparison) into `expect_round`, which applies
/// the *definitions* of the modes, IEEE 754 7.4 overflow and the documented options
/// (docs/rounding.md), and encodes the expected bits with its own arithmetic.
#pragma once

#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"

namespace tiebreak::test {

using big = boost::multiprecision::cpp_int;

/// Target parameters derived from the field widths alone.
struct ref_format {
  int p = 0;          ///< precision (with the hidden bit)
  int emin = 0;       ///< smallest normal exponent
  int emax = 0;       ///< largest finite exponent
  int bias = 0;
  int exp_bits = 0, man_bits = 0, pad = 0;
  bool ieee = true;   ///< Inf and NaNs in the all-ones exponent; false: OCP "fn" (e4m3)
  std::uint64_t max_sig = 0;  ///< integer significand (p bits) of the largest finite value
};

constexpr ref_format ref_of(const format_desc& f) {
  ref_format r;
  r.p = f.man_bits + 1;
  r.bias = f.bias;
  r.exp_bits = f.exp_bits;
  r.man_bits = f.man_bits;
  r.pad = f.pad;
  r.ieee = f.special == special_style::ieee;
  r.emin = 1 - f.bias;
  const int all_ones = (1 << f.exp_bits) - 1;
  r.emax = (r.ieee ? all_ones - 1 : all_ones) - f.bias;
  const std::uint64_t all_sig = (std::uint64_t{1} << r.p) - 1;
  r.max_sig = r.ieee ? all_sig : all_sig - 1;  // fn: S.1111.111 is NaN, so 1.110 is the largest
  return r;
}

constexpr std::uint64_t encode(const ref_format& F, bool sign, std::uint64_t exp_field, std::uint64_t frac) {
  const int total = 1 + F.exp_bits + F.man_bits + F.pad;
  return (sign ? std::uint64_t{1} << (total - 1) : 0) | (exp_field << (F.man_bits + F.pad)) | (frac << F.pad);
}
constexpr std::uint64_t expected_inf(const ref_format& F, bool sign) {
  return encode(F, sign, (std::uint64_t{1} << F.exp_bits) - 1, 0);
}
constexpr std::uint64_t expected_max_finite(const ref_format& F, bool sign) {
  const std::uint64_t ef = static_cast<std::uint64_t>(F.emax + F.bias);
  return encode(F, sign, ef, F.max_sig - (std::uint64_t{1} << (F.p - 1)));
}

/// The NaN each policy produces (docs/rounding.md, "NaN policies"). `payload` is the input NaN's
/// fraction left-aligned in 64 bits (bit 63 = quiet bit); `sign` its sign.
constexpr std::uint64_t expected_nan(const ref_format& F, nan_policy pol, bool sign, std::uint64_t payload) {
  const std::uint64_t ef = (std::uint64_t{1} << F.exp_bits) - 1;
  const std::uint64_t all = (std::uint64_t{1} << F.man_bits) - 1;
  if (!F.ieee) return encode(F, pol == nan_policy::preserve && sign, ef, all);
  const std::uint64_t quiet = std::uint64_t{1} << (F.man_bits - 1);
  switch (pol) {
    case nan_policy::canonical: return encode(F, false, ef, all);
    case nan_policy::quiet: return encode(F, false, ef, quiet);
    default: return encode(F, sign, ef, (payload >> (64 - F.man_bits)) | quiet);
  }
}

/// Where the exact magnitude lies: down = n * 2^q <= |x| < up = (n + 1) * 2^q on the result grid
/// (q = max(e, emin) - (p - 1), e the exact binade), and how it compares with the midpoint.
struct bracket {
  std::uint64_t n = 0;
  int q = 0;
  int cmp_mid = 0;        ///< sign of |x| - (down + up) / 2
  bool inexact = false;   ///< |x| != down
  bool tiny = false;      ///< 0 < |x| < 2^emin
  bool guard = false, round_bit = false, sticky = false;  ///< bits of |x| below 2^q (for the trace)
  std::uint32_t top32 = 0;  ///< floor((|x| - down) / 2^q * 2^32)
};

/// The definitions of the modes, stated on the neighbours (not on bits): true = take `up`.
constexpr bool takes_up(const bracket& b, bool sign, rounding r) {
  if (!b.inexact) return false;
  switch (r.mode) {
    case round_mode::rne: return b.cmp_mid > 0 || (b.cmp_mid == 0 && b.n % 2 == 1);  // nearest; tie: even
    case round_mode::rna: return b.cmp_mid >= 0;                                      // nearest; tie: away
    case round_mode::rz: return false;
    case round_mode::ru: return !sign;
    case round_mode::rd: return sign;
    case round_mode::rto: return b.n % 2 == 0;  // the odd one of the two neighbours
    case round_mode::sr:
    default: return static_cast<std::uint64_t>(b.top32) + r.random >= (std::uint64_t{1} << 32);
  }
}

constexpr bool mode_overflows_to_inf(rounding r, bool sign) {
  switch (r.mode) {
    case round_mode::rne: case round_mode::rna: case round_mode::sr: return true;
    case round_mode::ru: return !sign;
    case round_mode::rd: return sign;
    default: return false;
  }
}

struct expected {
  std::uint64_t bits = 0;
  std::uint8_t flags = 0;
  bool up = false;            ///< took the upper neighbour (before overflow handling)
  std::uint64_t n_out = 0;    ///< chosen integer significand on grid q (n or n + 1)
};

/// The outcome of choosing neighbour `up` (false: down) for a finite non-zero exact value described
/// by `b`, with `to_inf` saying where an overflow goes (true: Inf, or NaN without Inf; false: max
/// finite). Applies the result grid, subnormals, flush_output and the overflow rule.
constexpr expected expect_choice(const ref_format& F, bool sign, const bracket& b, bool up, bool to_inf,
                                 const convert_options& o) {
  expected out;
  out.up = up;
  std::uint64_t n = b.n + (up ? 1 : 0);
  out.n_out = n;
  int q = b.q;
  if (b.inexact) out.flags |= flag_inexact;
  if (b.inexact && b.tiny) out.flags |= flag_underflow;
  if (n == (std::uint64_t{1} << F.p)) { n >>= 1; ++q; }  // up crossed into the next binade
  if (n == 0) { out.bits = encode(F, sign, 0, 0); return out; }
  const std::uint64_t hidden = std::uint64_t{1} << (F.p - 1);
  if (n < hidden) {  // subnormal (q is the subnormal grid here)
    if (o.flush_output) {
      out.bits = encode(F, sign, 0, 0);
      out.flags |= flag_underflow | flag_inexact;
    } else {
      out.bits = encode(F, sign, 0, n);
    }
    return out;
  }
  const int e = q + F.p - 1;
  if (e > F.emax || (e == F.emax && n > F.max_sig)) {
    out.flags |= flag_overflow | flag_inexact;
    if (to_inf) {
      out.bits = F.ieee ? expected_inf(F, sign) : expected_nan(F, o.nan, sign, 0);
    } else {
      out.bits = expected_max_finite(F, sign);
    }
    return out;
  }
  out.bits = encode(F, sign, static_cast<std::uint64_t>(e + F.bias), n - hidden);
  return out;
}

/// Rounds a finite non-zero exact value described by `b` into F: the mode picks the neighbour
/// (takes_up), IEEE 754 7.4 and the options decide overflow.
constexpr expected expect_round(const ref_format& F, bool sign, const bracket& b, rounding r,
                                const convert_options& o) {
  return expect_choice(F, sign, b, takes_up(b, sign, r), !o.saturate && mode_overflows_to_inf(r, sign), o);
}

// ------------------------------------------------------------------------------------------------
// f64 oracle: exact value = hi + lo (doubles, |lo| <= half an ulp of hi), target precision <= 24.

/// 2^k as a double, built from its fields (|k| <= 1022: always normal).
inline double pow2(int k) {
  const std::uint64_t b = static_cast<std::uint64_t>(k + 1023) << 52;
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}
/// x * 2^k, exact while the result stays normal (a std::ldexp that inlines); |k| <= 2044.
inline double scale2(double x, int k) {
  if (k > 1022) return x * pow2(1022) * pow2(k - 1022);
  if (k < -1022) return x * pow2(-1022) * pow2(k + 1022);
  return x * pow2(k);
}
/// floor(log2 x) of a positive normal double, from its exponent field.
inline int exponent_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return static_cast<int>((b >> 52) & 0x7ff) - 1023;
}

/// x >= c for x = hi + (something of sign lo_sign, smaller than any gap between doubles).
inline bool ge_perturbed(double x, double c, int lo_sign) { return lo_sign < 0 ? x > c : x >= c; }

/// Bracket of |hi + lo| (lo_sign: sign of lo relative to the magnitude). Needs hi != 0. Writes every
/// field of `b` in place: the sweeps fill arrays of cases, and building a bracket elsewhere and
/// copying it (a 16-byte load over fresh byte stores) stalls on store forwarding.
inline void f64_bracket(const ref_format& F, double a, int lo_sign, bracket& b) {
  int e = exponent_of(a);
  if (lo_sign < 0 && a == pow2(e)) --e;  // just below a power of two
  b.tiny = e < F.emin;
  b.q = (e < F.emin ? F.emin : e) - (F.p - 1);
  const double s = scale2(a, -b.q);  // exact: power-of-two scaling, no over/underflow here
  // floor(s) for 0 < s < 2^p (p <= 24 here) by a truncating conversion: the same value as
  // std::floor, which x86-64 without SSE4.1 compiles to a libm call (a third of a sweep's oracle).
  // Signed conversions throughout: every value here is below 2^33, and x86-64 without AVX-512 has
  // no unsigned double <-> 64-bit conversion (the compiler emits a branch and a fix-up for each).
  double fl = static_cast<double>(static_cast<std::int64_t>(s));
  double frac = s - fl;                   // exact
  if (lo_sign < 0 && frac == 0) { fl -= 1; frac = 1; }  // "1 - epsilon"
  b.n = static_cast<std::uint64_t>(static_cast<std::int64_t>(fl));
  b.inexact = frac != 0 || lo_sign != 0;
  b.cmp_mid = frac > 0.5 ? 1 : (frac < 0.5 ? -1 : lo_sign);
  b.guard = ge_perturbed(frac, 0.5, lo_sign);
  const double r1 = b.guard ? frac - 0.5 : frac;
  b.round_bit = ge_perturbed(r1, 0.25, lo_sign);
  const double r2 = b.round_bit ? r1 - 0.25 : r1;
  b.sticky = r2 != 0 || lo_sign != 0;
  const double t = frac * 4294967296.0;
  double t0 = static_cast<double>(static_cast<std::int64_t>(t));  // floor: 0 <= t < 2^32
  if (t0 == t && lo_sign < 0) t0 -= 1;
  b.top32 = static_cast<std::uint32_t>(static_cast<std::int64_t>(t0));
}
inline bracket f64_bracket(const ref_format& F, double a, int lo_sign) {
  bracket b;
  f64_bracket(F, a, lo_sign, b);
  return b;
}

/// Error-free sum: s + e == a + b exactly (Knuth's TwoSum; needs no overflow).
inline void two_sum(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// ------------------------------------------------------------------------------------------------
// Dyadic oracle: m * 2^e with a Boost cpp_int m, exact for every operation the tests need.

struct dyadic {
  big m = 0;  ///< signed significand
  int e = 0;

  static dyadic of_double(double x) {  // finite x
    dyadic d;
    if (x == 0) return d;
    int ex = 0;
    const double fr = std::frexp(std::fabs(x), &ex);       // fr in [0.5, 1)
    const auto mant = static_cast<std::uint64_t>(std::ldexp(fr, 53));  // exact
    d.m = big(mant);
    d.e = ex - 53;
    if (x < 0) d.m = -d.m;
    return d;
  }
  static dyadic pow2(int k) { dyadic d; d.m = 1; d.e = k; return d; }
  int sign() const { return m == 0 ? 0 : (m < 0 ? -1 : 1); }
};

inline dyadic operator-(const dyadic& a) { dyadic r = a; r.m = -r.m; return r; }
inline dyadic operator+(const dyadic& a, const dyadic& b) {
  if (a.m == 0) return b;
  if (b.m == 0) return a;
  dyadic r;
  r.e = a.e < b.e ? a.e : b.e;
  r.m = (a.m << (a.e - r.e)) + (b.m << (b.e - r.e));
  return r;
}
inline dyadic operator-(const dyadic& a, const dyadic& b) { return a + (-b); }
inline dyadic operator*(const dyadic& a, const dyadic& b) {
  dyadic r;
  r.m = a.m * b.m;
  r.e = a.e + b.e;
  return r;
}
inline int compare(const dyadic& a, const dyadic& b) { return (a - b).sign(); }
inline bool operator==(const dyadic& a, const dyadic& b) { return compare(a, b) == 0; }

/// floor(log2 |x|) for x != 0.
inline int ilog2(const dyadic& x) {
  const big a = abs(x.m);
  return x.e + static_cast<int>(boost::multiprecision::msb(a));
}

/// Bracket of |x| on F's grid (x != 0), by exact comparisons with the neighbours and the midpoint.
inline bracket dyadic_bracket(const ref_format& F, const dyadic& x) {
  bracket b;
  dyadic a = x;
  a.m = abs(a.m);
  const int e = ilog2(a);
  b.tiny = e < F.emin;
  b.q = (e < F.emin ? F.emin : e) - (F.p - 1);
  // n = floor(|x| / 2^q)
  big n;
  if (a.e >= b.q) n = a.m << (a.e - b.q);
  else n = a.m >> (b.q - a.e);
  b.n = static_cast<std::uint64_t>(n);
  dyadic down;
  down.m = n;
  down.e = b.q;
  const dyadic rest = a - down;  // in [0, 2^q)
  b.inexact = rest.sign() != 0;
  b.cmp_mid = compare(rest, dyadic::pow2(b.q - 1));
  b.guard = b.cmp_mid >= 0;
  const dyadic r1 = b.guard ? rest - dyadic::pow2(b.q - 1) : rest;
  const int c2 = compare(r1, dyadic::pow2(b.q - 2));
  b.round_bit = c2 >= 0;
  const dyadic r2 = b.round_bit ? r1 - dyadic::pow2(b.q - 2) : r1;
  b.sticky = r2.sign() != 0;
  // top32 = floor(rest * 2^(32 - q))
  big t;
  const int sh = rest.e - b.q + 32;
  if (sh >= 0) t = rest.m << sh;
  else t = rest.m >> -sh;
  b.top32 = static_cast<std::uint32_t>(t);
  return b;
}

/// Expected rounding of an exact dyadic (zero gives +-0 with `zero_sign`).
inline expected expect_dyadic(const format_desc& f, const dyadic& x, rounding r, const convert_options& o = {},
                              bool zero_sign = false) {
  const ref_format F = ref_of(f);
  if (x.sign() == 0) {
    expected z;
    z.bits = encode(F, zero_sign, 0, 0);
    return z;
  }
  return expect_round(F, x.sign() < 0, dyadic_bracket(F, x), r, o);
}

/// The exact value of a finite encoding of `f`, decoded from the field definitions.
inline dyadic decode_exact(const format_desc& f, std::uint64_t bits) {
  const ref_format F = ref_of(f);
  const int total = 1 + F.exp_bits + F.man_bits + F.pad;
  const bool sign = (bits >> (total - 1)) & 1;
  const std::uint64_t ef = (bits >> (F.man_bits + F.pad)) & ((std::uint64_t{1} << F.exp_bits) - 1);
  const std::uint64_t frac = (bits >> F.pad) & ((std::uint64_t{1} << F.man_bits) - 1);
  dyadic d;
  if (ef == 0) {
    d.m = big(frac);
    d.e = F.emin - F.man_bits;
  } else {
    d.m = big(frac + (std::uint64_t{1} << F.man_bits));
    d.e = static_cast<int>(ef) - F.bias - F.man_bits;
  }
  if (sign) d.m = -d.m;
  return d;
}

/// True when `d` is the double nearest to `x` (ties to even): the core's error fields are defined as
/// the exact error rounded once to double.
inline bool is_rounded_double(const dyadic& x, double d) {
  const expected e = expect_dyadic(formats::f64, x, rounding{round_mode::rne}, {}, std::signbit(d));
  std::uint64_t db;
  std::memcpy(&db, &d, sizeof db);
  if (x.sign() == 0) return d == 0;
  return e.bits == db;
}

inline std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace tiebreak::test
