// SPDX-License-Identifier: Apache-2.0
/// @file Rounding policies (types and the runtime enum), conversion options and IEEE flags.
#pragma once

#include <cstdint>
#include <string_view>

#include "tiebreak/fp/config.hpp"

namespace tiebreak {

/// Runtime rounding mode; names as used by the CLI, JSON and Python.
enum class round_mode : std::uint8_t {
  rne,  ///< to nearest, ties to even (IEEE roundTiesToEven, PTX .rn)
  rna,  ///< to nearest, ties away from zero (IEEE roundTiesToAway, PTX .rna)
  rz,   ///< toward zero (truncation, PTX .rz)
  ru,   ///< toward +infinity (PTX .rp)
  rd,   ///< toward -infinity (PTX .rm)
  rto,  ///< round to odd: truncate, then set the lsb if anything was discarded
  sr,   ///< stochastic: away from zero with probability (discarded fraction), random bits from the caller (reproducible ones: fp/random.hpp)
};

inline constexpr round_mode all_round_modes[] = {round_mode::rne, round_mode::rna, round_mode::rz,
                                                  round_mode::ru,  round_mode::rd,  round_mode::rto,
                                                  round_mode::sr};
inline constexpr round_mode deterministic_round_modes[] = {round_mode::rne, round_mode::rna,
                                                            round_mode::rz,  round_mode::ru,
                                                            round_mode::rd,  round_mode::rto};

constexpr std::string_view to_string(round_mode m) noexcept {
  constexpr std::string_view names[] = {"rne", "rna", "rz", "ru", "rd", "rto", "sr"};
  return names[static_cast<int>(m)];
}
constexpr bool parse_round_mode(std::string_view s, round_mode& out) noexcept {
  for (round_mode m : all_round_modes) {
    if (to_string(m) == s) { out = m; return true; }
  }
  return false;
}

/// A rounding decision's inputs and outputs are described by this runtime value. `random` is used by
/// round_mode::sr only: the result is rounded away from zero iff
///   top32(discarded fraction) + random >= 2^32,
/// where top32 is the first 32 discarded bits (bits further down are ignored, as in hardware SR).
/// For uniformly random `random` the probability of rounding away is top32 / 2^32.
struct rounding {
  round_mode mode = round_mode::rne;
  std::uint32_t random = 0;
};

/// Policy types: each compiles to a constant `rounding`. Use them where the mode is known at compile
/// time (kernels, emulators); the runtime enum dispatches to the same code.
struct rne_t { static constexpr round_mode mode = round_mode::rne; TIEBREAK_HDC operator rounding() const noexcept { return {mode, 0}; } };
struct rna_t { static constexpr round_mode mode = round_mode::rna; TIEBREAK_HDC operator rounding() const noexcept { return {mode, 0}; } };
struct rz_t  { static constexpr round_mode mode = round_mode::rz;  TIEBREAK_HDC operator rounding() const noexcept { return {mode, 0}; } };
struct ru_t  { static constexpr round_mode mode = round_mode::ru;  TIEBREAK_HDC operator rounding() const noexcept { return {mode, 0}; } };
struct rd_t  { static constexpr round_mode mode = round_mode::rd;  TIEBREAK_HDC operator rounding() const noexcept { return {mode, 0}; } };
struct rto_t { static constexpr round_mode mode = round_mode::rto; TIEBREAK_HDC operator rounding() const noexcept { return {mode, 0}; } };
struct sr_t {
  static constexpr round_mode mode = round_mode::sr;
  std::uint32_t random;
  TIEBREAK_HDC operator rounding() const noexcept { return {mode, random}; }
};

/// What a NaN result looks like. Hardware, ml_dtypes and PyTorch disagree (docs/rounding.md):
enum class nan_policy : std::uint8_t {
  canonical,  ///< NVIDIA: positive, all-ones exponent and fraction (bf16 0x7fff, f16 0x7fff, f32 0x7fffffff, e4m3 0x7f, e5m2 0x7f)
  /// IEEE 754 6.2.3: keep the sign and the leading payload bits, set the quiet bit. Not what
  /// ml_dtypes 0.6 does: it keeps the sign but drops the payload (f32 0x7fa00000 -> bf16 0x7fc0,
  /// preserve gives 0x7fe0); the two agree only for NaNs without payload bits the target can hold.
  preserve,
  quiet,      ///< PyTorch c10::BFloat16: positive, quiet bit only (bf16 0x7fc0, f16 0x7e00)
  /// As canonical, except that the NaN a format without Inf (e4m3) gets for an overflow or an
  /// infinite input keeps that value's sign: -500 and -Inf -> e4m3 0xff, NaN inputs -> 0x7f.
  /// CUDA's __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3) does this (a software path in
  /// cuda_fp8.hpp; docs/hardware.md). Same as canonical for formats with Inf.
  canonical_signed_overflow,
  /// The NaN's encoding narrowed like a finite number's bits, by truncation: sign and leading
  /// payload bits kept, the quiet bit not set, so a NaN whose payload lay only in the dropped bits
  /// comes out as Inf (f32 0x7f800001 -> tf32 0x7f800000). ptxas emits cvt.rna.tf32.f32 on sm_90 as
  /// integer code that does this (docs/hardware.md). Formats without Inf: as preserve.
  truncate,
};

/// Options of a narrowing. Defaults: subnormals kept, no saturation, NVIDIA canonical NaN.
struct convert_options {
  bool saturate = false;     ///< overflow (and +-Inf) go to the largest finite value; NaN stays NaN
  bool flush_output = false; ///< FTZ: a subnormal result (after rounding) becomes a signed zero
  bool flush_input = false;  ///< DAZ: subnormal inputs are read as signed zeros
  nan_policy nan = nan_policy::canonical;
};

/// IEEE 754 exception flags, returned (never stored globally).
enum flag : std::uint8_t {
  flag_none = 0,
  flag_inexact = 1,
  flag_underflow = 2,  ///< tiny (nonzero result below the normal range, before rounding) and inexact
  flag_overflow = 4,
  flag_invalid = 8,
};

/// Round-up decision: returns true when the magnitude must be incremented by one ulp.
/// `lsb` is the last kept bit, `guard` the first discarded bit, `sticky` the OR of all later
/// discarded bits (and of any bits lost before), `top32` the first 32 discarded bits.
///
///   mode | increments when
///   rne  | G && (S || lsb)
///   rna  | G
///   rz   | never
///   ru   | (G || S) && !sign
///   rd   | (G || S) && sign
///   rto  | never (the caller ORs (G || S) into the lsb instead)
///   sr   | top32 + random carries out of 32 bits
TIEBREAK_HDI bool rounds_up(rounding r, bool sign, bool lsb, bool guard, bool sticky,
                            std::uint32_t top32) noexcept {
  switch (r.mode) {
    case round_mode::rne: return guard && (sticky || lsb);
    case round_mode::rna: return guard;
    case round_mode::rz: return false;
    case round_mode::ru: return (guard || sticky) && !sign;
    case round_mode::rd: return (guard || sticky) && sign;
    case round_mode::rto: return false;
    case round_mode::sr:
    default: return (static_cast<std::uint64_t>(top32) + r.random) >> 32 != 0;
  }
}

/// True when a mode sends an overflowing magnitude of this sign to infinity (IEEE 754 7.4);
/// otherwise it goes to the largest finite value.
TIEBREAK_HDI bool overflows_to_inf(rounding r, bool sign) noexcept {
  switch (r.mode) {
    case round_mode::rne:
    case round_mode::rna:
    case round_mode::sr: return true;
    case round_mode::ru: return !sign;
    case round_mode::rd: return sign;
    default: return false;  // rz, rto
  }
}

}  // namespace tiebreak
