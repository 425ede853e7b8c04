// SPDX-License-Identifier: Apache-2.0
/// @file The SFU's exponential, `ex2.approx.ftz.f32` (SASS MUFU.EX2) and `ex2.approx.f32`, as a
/// modelled instruction: the rule below, applied to a table of the unit's outputs on [0, 1).
///
/// What was measured on the H200 (sm_90; tools: cuda/sfu/ex2_probe.cu, docs/attention.md "The SFU's
/// exponential"), over all 2^32 inputs:
///   - the input is turned into sign and magnitude, and the magnitude into fixed point with 23
///     fraction bits by truncation (toward zero): q = trunc(|x| 2^23), I = q >> 23, F = q mod 2^23;
///   - x >= 0 (and every x with F = 0): the result is T[F] 2^(±I), T[F] = ex2(F 2^-23) in [1, 2), the
///     unit's table of 2^23 values (its interpolator's output; 64 segments of 2^17 inputs);
///   - x < 0 with F > 0: T[2^23 - 1 - F] 2^(-I-1): the fraction's ones' complement (not 1 - F), the
///     same table;
///   - results below 2^-126 are +0 (ftz), above the range +Inf; NaN gives the canonical NaN
///     0x7fffffff.
/// `ex2.approx.f32` (no .ftz) is, as nvcc 13 compiles it for sm_90, MUFU.EX2 of x/2 squared by an IEEE
/// multiplication when x < -126 (FSETP.GEU, FMUL 0.5, MUFU.EX2, FMUL): so its subnormal results.
/// The table is data, not a formula (the interpolator's coefficients and truncations were not
/// recovered): the host library embeds it (tiebreak/host/sfu.hpp), a kernel that checks the model
/// reads it from global memory; every function here takes it as `table(F)` -> the bits of T[F].
#pragma once

#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/f32_math.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::sfu {

inline constexpr int ex2_frac_bits = 23;                              ///< F's bits
inline constexpr std::uint32_t ex2_table_size = 1u << ex2_frac_bits;  ///< T's entries
inline constexpr std::uint32_t ex2_nan = 0x7fffffffu;                 ///< the canonical NaN

/// ex2.approx.ftz.f32 as bits, from the bits of x. `table(F)` returns T[F]'s bits, in
/// [0x3f800000, 0x3fffffff]; in device code its call operator must be __host__ __device__ (nvcc
/// rejects a __device__-only callable in a constexpr __host__ __device__ function), and in a constant
/// expression constexpr (tests/host/fp/sfu_test.cpp has a table of them with a made-up table).
template <class Table>
TIEBREAK_HDI std::uint32_t ex2_approx_ftz_bits(std::uint32_t u, const Table& table) noexcept {
  const std::uint32_t a = u & 0x7fffffffu;
  const bool neg = (u >> 31) != 0;
  if (a > 0x7f800000u) return ex2_nan;
  if (a >= 0x43000000u) return neg ? 0u : 0x7f800000u;  // |x| >= 128 (Inf included): 2^-128 < 2^-126 flushes
  // q = trunc(|x| 2^23) < 2^30, by shifting the significand: |x| = m 2^(e - 150), m < 2^24.
  const int e = static_cast<int>(a >> 23);
  std::uint32_t q = 0;
  if (e != 0) {  // subnormal inputs (|x| < 2^-126): q = 0
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const int sh = e - 127;  // q = m 2^(e - 127) truncated
    q = sh >= 0 ? m << sh : (sh > -24 ? m >> -sh : 0u);
  }
  const int i = static_cast<int>(q >> ex2_frac_bits);
  const std::uint32_t f = q & (ex2_table_size - 1u);
  std::uint32_t t;
  int n;
  if (!neg || f == 0) {
    t = table(f);
    n = neg ? -i : i;
  } else {
    t = table(ex2_table_size - 1u - f);
    n = -i - 1;
  }
  const int be = 127 + n;  // T in [1, 2): biased exponent 127
  if (be >= 255) return 0x7f800000u;
  if (be <= 0) return 0u;
  return (t & 0x7fffffu) | (static_cast<std::uint32_t>(be) << 23);
}

/// ex2.approx.ftz.f32.
template <class Table>
TIEBREAK_HDI float ex2_approx_ftz(float x, const Table& table) noexcept {
  return bits_to_f32(ex2_approx_ftz_bits(f32_to_bits(x), table));
}

/// ex2.approx.f32 (subnormal results kept): below -126, MUFU.EX2 of x 0.5 (exact: x is a normal
/// number there), then y y rounded to nearest-even with subnormals kept. NaN takes MUFU.EX2 directly,
/// as the hardware's test (FSETP.GEU: x >= -126 or unordered) sends it.
template <class Table>
TIEBREAK_FORCEINLINE TIEBREAK_HD float ex2_approx(float x, const Table& table) noexcept {
  if (!(x < -126.0f)) return ex2_approx_ftz(x, table);
  const float y = ex2_approx_ftz(f32::mul_rn(x, 0.5f), table);  // exact: |x| > 126
  return f32::mul_rn(y, y);
}

}  // namespace tiebreak::sfu
