// SPDX-License-Identifier: Apache-2.0
/// @file Exact values (significand + exponent + optional exact tail), unpacking of encodings.
#pragma once

#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/format.hpp"

namespace tiebreak {

enum class value_class : std::uint8_t { zero, finite, inf, nan };

/// An exact real value, or a special:
///
///   value = (-1)^sign * (sig * 2^exp  +  (tail_neg ? -1 : +1) * tail_sig * 2^tail_exp)  (+ sticky)
///
/// The *window* `sig * 2^exp` holds up to 128 bits. The optional *tail* is a second exact term
/// strictly below the window (tail_sig * 2^tail_exp < 2^exp); it lets an addition of operands far
/// apart (or an FMA) stay exact without a 2000-bit integer. `tail_neg` means the tail opposes the
/// value's sign. Preconditions when the tail is non-zero: sig >= 2^64 (the window is far wider than
/// any target precision, so the tail can only influence rounding through the sticky bit).
/// `sticky` marks bits lost below window and tail (same sign as the value): rounding stays correct,
/// but the reported error is then no longer exact (round_result::error_exact is false).
struct exact_value {
  value_class cls = value_class::zero;
  bool sign = false;
  int exp = 0;
  u128 sig = 0;
  bool tail_neg = false;
  int tail_exp = 0;
  u128 tail_sig = 0;
  bool sticky = false;
  /// NaN only: fraction left-aligned in 64 bits (bit 63 is the IEEE quiet bit) and whether it signals.
  std::uint64_t nan_payload = 0;
  bool nan_signaling = false;
};

// The constructors below build the value in one aggregate initialisation (designated fields; the
// others take their default initialisers): a default-constructed exact_value patched field by field
// is first cleared as a block (`rep stos` on x86-64, ~30 cycles of start-up each), which was half
// the time of a bf16 emu::add; this form lets an inlined caller keep the fields in registers.
TIEBREAK_HDI exact_value make_zero(bool sign) noexcept { return exact_value{.cls = value_class::zero, .sign = sign}; }
TIEBREAK_HDI exact_value make_inf(bool sign) noexcept { return exact_value{.cls = value_class::inf, .sign = sign}; }
/// A quiet NaN with no payload (the default NaN of invalid operations before the NaN policy applies).
TIEBREAK_HDI exact_value make_nan(bool sign = false) noexcept {
  return exact_value{.cls = value_class::nan, .sign = sign, .nan_payload = std::uint64_t{1} << 63};
}
/// (-1)^sign * sig * 2^exp, optionally with bits already lost below it (`sticky`).
TIEBREAK_HDI exact_value make_exact(bool sign, u128 sig, int exp, bool sticky = false) noexcept {
  if (sig == 0 && !sticky) return make_zero(sign);
  return exact_value{.cls = value_class::finite, .sign = sign, .exp = exp, .sig = sig, .sticky = sticky};
}

/// Decodes an encoding of format `f` into an exact value. `flush_input` reads subnormals as signed
/// zeros (DAZ). Bits outside f.encoding_mask() and inside the tf32 padding are ignored.
TIEBREAK_HDI exact_value unpack(const format_desc& f, std::uint64_t bits, bool flush_input = false) noexcept {
  const bool sign = f.sign_of(bits);
  const std::uint64_t ef = f.exp_field_of(bits);
  const std::uint64_t frac = f.frac_of(bits);
  if (f.is_nan(bits)) {
    exact_value v = make_nan(sign);
    v.nan_payload = f.man_bits == 0 ? 0 : frac << (64 - f.man_bits);
    v.nan_signaling = f.special == special_style::ieee && (frac >> (f.man_bits - 1)) == 0;
    return v;
  }
  if (f.is_inf(bits)) return make_inf(sign);
  if (ef == 0) {
    if (frac == 0 || flush_input) return make_zero(sign);
    return make_exact(sign, frac, f.emin() - f.man_bits);
  }
  return make_exact(sign, frac | (std::uint64_t{1} << f.man_bits),
                    static_cast<int>(ef) - f.bias - f.man_bits);
}

/// Magnitude comparison of two finite non-zero windows without tails: -1, 0, +1 for |a| <,=,> |b|.
TIEBREAK_HDI int compare_magnitude(const exact_value& a, const exact_value& b) noexcept {
  const int ma = a.exp + msb128(a.sig), mb = b.exp + msb128(b.sig);
  if (ma != mb) return ma < mb ? -1 : 1;
  // Same leading exponent: align both to the smaller exponent; the shift is below 128 bits here.
  const int e = a.exp < b.exp ? a.exp : b.exp;
  const u128 sa = a.sig << (a.exp - e), sb = b.sig << (b.exp - e);
  return sa == sb ? 0 : (sa < sb ? -1 : 1);
}

/// Host/device bit casts between float/double and their encodings.
TIEBREAK_HDC std::uint32_t f32_to_bits(float x) noexcept { return __builtin_bit_cast(std::uint32_t, x); }
TIEBREAK_HDC float bits_to_f32(std::uint32_t b) noexcept { return __builtin_bit_cast(float, b); }
TIEBREAK_HDC std::uint64_t f64_to_bits(double x) noexcept { return __builtin_bit_cast(std::uint64_t, x); }
TIEBREAK_HDC double bits_to_f64(std::uint64_t b) noexcept { return __builtin_bit_cast(double, b); }

}  // namespace tiebreak
