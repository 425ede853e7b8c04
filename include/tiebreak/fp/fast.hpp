// SPDX-License-Identifier: Apache-2.0
/// @file Branch-free f32 -> bf16 narrowing on raw bits, per value, host and device.
///
/// These are specialisations of round_pack(formats::bf16, ...) with default options (subnormals kept,
/// no saturation, canonical NaN 0x7fff). bf16 has f32's exponent range, so one narrowing is a
/// 16-bit shift of the encoding plus a carry into it; subnormals, overflow and the max-finite
/// boundary need no special case. They are proven equal to round_pack for all 2^32 inputs in every
/// mode (tests/host/fp/fast_exhaustive_test.cpp, label exhaustive), so round_pack stays the source of
/// truth. The bulk loops over arrays, per CPU instruction set, are host code in tiebreak::host
/// (tiebreak/host/bulk_convert.hpp), built from these functions and proven the same way.
#pragma once

#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak {

namespace detail {
TIEBREAK_HDC bool f32_bits_is_nan(std::uint32_t x) noexcept { return (x & 0x7fffffffu) > 0x7f800000u; }
}  // namespace detail

///   x = [s | e(8) | m(7) | G | R..(15)]; lsb = bit 16.
///   rne: add 0x7fff + lsb: carries exactly when G && (S || lsb).
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rne(std::uint32_t x) noexcept {
  const std::uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}
///   rna: add 0x8000: carries exactly when G.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rna(std::uint32_t x) noexcept {
  const std::uint32_t r = (x + 0x8000u) >> 16;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}
///   rz: drop the low half.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rz(std::uint32_t x) noexcept {
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(x >> 16);
}
///   ru: positive magnitudes add 0xffff (carry iff any discarded bit); negative ones truncate.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_ru(std::uint32_t x) noexcept {
  const std::uint32_t add = (x >> 31) ? 0u : 0xffffu;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>((x + add) >> 16);
}
///   rd: the mirror image of ru.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rd(std::uint32_t x) noexcept {
  const std::uint32_t add = (x >> 31) ? 0xffffu : 0u;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>((x + add) >> 16);
}
///   rto: truncate, OR the sticky into the lsb (never reaches Inf: max finite has an odd lsb).
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rto(std::uint32_t x) noexcept {
  const std::uint32_t r = (x >> 16) | ((x & 0xffffu) != 0 ? 1u : 0u);
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}
///   sr: top32 + random >= 2^32  <=>  (x & 0xffff) + (random >> 16) >= 2^16, since the low 16 bits
///   of top32 = (x & 0xffff) << 16 are zero. Added to the magnitude; it cannot reach the sign bit.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_sr(std::uint32_t x, std::uint32_t random) noexcept {
  const std::uint32_t mag = ((x & 0x7fffffffu) + (random >> 16)) >> 16;
  const std::uint32_t r = (x >> 16 & 0x8000u) | mag;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}

/// Two adjacent elements rounded stochastically by one 32-bit random word and packed as a bf16x2
/// word (`lo` in the low half): exactly
///   f32_bits_to_bf16_sr(lo, random) | f32_bits_to_bf16_sr(hi, random << 16) << 16,
/// i.e. `lo` takes the word's high 16 random bits and `hi` its low 16 (the attention forward's
/// stochastic output, flash.hpp), for `lo` and `hi` not NaN. Cheaper per element than the scalar
/// form: for a non-NaN x, (x & 0x7fffffff) + r <= 0x7f800000 + 0xffff < 2^31, so the sum on x itself
/// never carries into the sign bit and (x + r) >> 16 is the scalar's sign | mag; the two high halves
/// are then packed with one byte permutation. Also exact for the NaN 0x7fff0000, which any 16 random
/// bits leave at the canonical 0x7fff (f32x2_bits_to_bf16x2_sr maps every NaN there first).
TIEBREAK_HDC std::uint32_t f32x2_bits_to_bf16x2_sr_not_nan(std::uint32_t lo, std::uint32_t hi,
                                                           std::uint32_t random) noexcept {
  const std::uint32_t a = lo + (random >> 16), b = hi + (random & 0xffffu);
  return (a >> 16) | (b & 0xffff0000u);
}

/// The same for any inputs: a NaN becomes 0x7fff0000 first (as a float, x != x: a compare and a
/// select per element). Equal to the scalar form for all 2^32 `lo`, each with a second input as `hi`
/// (tests/host/fp/fast_exhaustive_test.cpp).
TIEBREAK_HDC std::uint32_t f32x2_bits_to_bf16x2_sr(std::uint32_t lo, std::uint32_t hi, std::uint32_t random) noexcept {
  const float flo = bits_to_f32(lo), fhi = bits_to_f32(hi);
  return f32x2_bits_to_bf16x2_sr_not_nan(flo != flo ? 0x7fff0000u : lo, fhi != fhi ? 0x7fff0000u : hi, random);
}

/// f32 -> bf16 by runtime mode (sr takes `random`).
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16(std::uint32_t x, rounding r) noexcept {
  switch (r.mode) {
    case round_mode::rne: return f32_bits_to_bf16_rne(x);
    case round_mode::rna: return f32_bits_to_bf16_rna(x);
    case round_mode::rz: return f32_bits_to_bf16_rz(x);
    case round_mode::ru: return f32_bits_to_bf16_ru(x);
    case round_mode::rd: return f32_bits_to_bf16_rd(x);
    case round_mode::rto: return f32_bits_to_bf16_rto(x);
    default: return f32_bits_to_bf16_sr(x, r.random);
  }
}

static_assert(f32_bits_to_bf16_rne(0x3f808000u) == 0x3f80);  // 1 + 2^-8: tie, lsb 0 -> down
static_assert(f32_bits_to_bf16_rne(0x3f818000u) == 0x3f82);  // tie, lsb 1 -> up
static_assert(f32_bits_to_bf16_rne(0x3f808001u) == 0x3f81);  // above the tie -> up
static_assert(f32_bits_to_bf16_rne(0x7f7fffffu) == 0x7f80);  // max f32 -> Inf
static_assert(f32_bits_to_bf16_rz(0x7f7fffffu) == 0x7f7f);
static_assert(f32_bits_to_bf16_rz(0x7f800001u) == 0x7fff);   // NaN never truncates to Inf

}  // namespace tiebreak
