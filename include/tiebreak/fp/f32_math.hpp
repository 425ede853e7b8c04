// SPDX-License-Identifier: Apache-2.0
/// @file Named binary32 arithmetic and the software exponential and logarithm shared by kernels and twins.
///
/// Every operation here is one IEEE 754 binary32 operation rounded to nearest-even (or, for the
/// software exp2/log2, a fixed sequence of such operations), written so that the device and the host
/// compute the same bits:
///   - on the device the `__f*_rn` intrinsics, which nvcc never contracts or reorders whatever
///     `--fmad` says;
///   - on the host the plain operators and std::fma. The host side relies on the build's
///     `-ffp-contract=off` (tiebreak_numerics_flags) and on SSE2 binary32 arithmetic (x86-64; no x87
///     excess precision), which is IEEE binary32 with round-to-nearest-even, subnormals kept.
/// Subnormals are kept on both sides (no FTZ: the project compiles without fast-math and with
/// `-ftz=false`).
///
/// The software exp2 gives the same bits on every GPU and on the host; the hardware exponential
/// (`ex2.approx.ftz.f32` on the SFU) is modelled in fp/sfu.hpp from a table captured on the H200
/// (STYLE.md, principle 6), so only there. exp2_sw is range reduction to n + f with |f| <= 1/2,
/// a degree-6 polynomial for 2^f in Horner form with one fma per coefficient, and a scale by 2^n
/// through the exponent field. Accuracy: at most 0.9516 ulp on every input in [-126, 128) (measured
/// exhaustively: TIEBREAK_F32_MATH_EXHAUSTIVE=1 tests/host/fp/f32_math_test.cpp); exp2_sw(0) == 1 exactly, so P-bar = exp(s - max)
/// is exactly 1 at the maximum as with the hardware instruction.
#pragma once

#include <cmath>
#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::f32 {

// --- one IEEE binary32 operation, rounded to nearest-even ----------------------------------------
TIEBREAK_FORCEINLINE TIEBREAK_HD float add_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
TIEBREAK_FORCEINLINE TIEBREAK_HD float sub_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
TIEBREAK_FORCEINLINE TIEBREAK_HD float mul_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TIEBREAK_FORCEINLINE TIEBREAK_HD float div_rn(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
/// a * b + c with one rounding.
TIEBREAK_FORCEINLINE TIEBREAK_HD float fma_rn(float a, float b, float c) noexcept {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
/// The integer nearest to x, ties to even (exact; NaN and Inf unchanged).
TIEBREAK_FORCEINLINE TIEBREAK_HD float rint(float x) noexcept {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::nearbyint(x);  // the default rounding mode: to nearest, ties to even
#endif
}
/// maxNum: the larger of a and b; a NaN operand is ignored (NaN only when both are); +0 > -0.
/// The device's max.f32 (FMNMX) has exactly these semantics.
TIEBREAK_FORCEINLINE TIEBREAK_HD float max(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  if (a != a) return b;
  if (b != b) return a;
  if (a == b) return (f32_to_bits(a) >> 31) ? b : a;  // +0 wins over -0
  return a > b ? a : b;
#endif
}
TIEBREAK_FORCEINLINE TIEBREAK_HD bool is_nan(float x) noexcept { return x != x; }

inline constexpr float inf = __builtin_huge_valf();

// --- software exp2 / log2 --------------------------------------------------------------------------
/// Coefficients of 2^f ~ 1 + f (c1 + f (c2 + ... f c6)) on [-1/2, 1/2] (a weighted least-squares
/// minimax fit, rounded to binary32; relative error of the polynomial 2.0e-9, below the rounding).
inline constexpr float exp2_c1 = 0x1.62e430p-1f;
inline constexpr float exp2_c2 = 0x1.ebfbdcp-3f;
inline constexpr float exp2_c3 = 0x1.c6aee8p-5f;
inline constexpr float exp2_c4 = 0x1.3b2d4cp-7f;
inline constexpr float exp2_c5 = 0x1.5f3e54p-10f;
inline constexpr float exp2_c6 = 0x1.41fbbcp-13f;

/// The arithmetic of exp2_sw (below) for an x it has clamped: range reduction, Horner, exponent.
TIEBREAK_FORCEINLINE TIEBREAK_HD float exp2_core(float xc) noexcept {
  constexpr float magic = 0x1.8p23f;
  const float t = add_rn(xc, magic);
  const float n = sub_rn(t, magic);  // rint(xc), exact
  const float f = sub_rn(xc, n);     // exact, |f| <= 1/2
  float p = exp2_c6;
  p = fma_rn(p, f, exp2_c5);
  p = fma_rn(p, f, exp2_c4);
  p = fma_rn(p, f, exp2_c3);
  p = fma_rn(p, f, exp2_c2);
  p = fma_rn(p, f, exp2_c1);
  p = fma_rn(p, f, 1.0f);
  return bits_to_f32(f32_to_bits(p) + (f32_to_bits(t) << 23));
}

/// 2^x in binary32, the same bits on host and device. Special cases: NaN -> NaN (quiet, x's bits
/// with the quiet bit set), x < -126 -> +0 (results below the normal range are flushed, as
/// ex2.approx.ftz does; -Inf gives +0), x >= 128 -> +Inf. Otherwise n = rint(x), f = x - n (exact,
/// |f| <= 1/2), p = Horner(f) with fma_rn, result = p * 2^n by adding n to p's exponent field.
///
/// Branch-free (it runs once per attention score): x is first clamped to -127 (below -126, and NaN)
/// or 128 (at and above 128); n = (xc + 1.5·2^23) - 1.5·2^23 is rint(xc) (the sum lands in [2^23,
/// 2^24), where binary32's spacing is 1, and rounds to nearest-even), and t = xc + 1.5·2^23 holds n in
/// its low fraction bits, so that bits(t) << 23 == n << 23 (mod 2^32). The exponent field of
/// p · 2^n is then bits(p) + (n << 23): exact for n in [-126, 127] (p in [0.70, 1.42], the result is
/// normal; p < 1 when n = 128, so 127.5 <= x < 128 stays finite), +Inf for the clamp 128 (p = 1:
/// 0x3f800000 + 0x40000000) and +0 for the clamp -127 (p = 1: 0x3f800000 - 0x3f800000). The earlier
/// branching form (explicit range tests and exponent checks) gives the same bits on every one of
/// the 2^32 inputs (checked when this form replaced it).
TIEBREAK_FORCEINLINE TIEBREAK_HD float exp2_sw(float x) noexcept {
  const float xc = x >= -126.0f ? (x < 128.0f ? x : 128.0f) : -127.0f;  // NaN -> -127 (restored below)
  const float r = exp2_core(xc);
  return is_nan(x) ? bits_to_f32(f32_to_bits(x) | 0x00400000u) : r;
}

/// exp2_sw(x) for x in [-126, 128) (not NaN), without the clamp and the NaN repair, which are the
/// identity there: the same operations on the same value, so the same bits (the attention kernels
/// take it for a tile whose every x lies in that range; tests/host/fp/f32_math_test.cpp compares the
/// two). Outside that range the result is meaningless.
TIEBREAK_FORCEINLINE TIEBREAK_HD float exp2_sw_in_range(float x) noexcept { return exp2_core(x); }

/// min(a, b), NaN when either is NaN (-0 < +0): the device's min.NaN.f32.
TIEBREAK_FORCEINLINE TIEBREAK_HD float min_nan(float a, float b) noexcept {
#if defined(__CUDA_ARCH__)
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  if (a != a || b != b) return bits_to_f32(0x7fffffffu);
  if (a == b) return (f32_to_bits(a) >> 31) ? a : b;  // -0 wins over +0
  return a < b ? a : b;
#endif
}

/// Coefficients of log2(m) = u * (k0 + u^2 (k1 + u^2 (k2 + u^2 (k3 + u^2 k4)))), u = (m-1)/(m+1),
/// k_i = 2 / ((2i+1) ln 2) rounded to binary32 (the atanh series; |u| <= 0.1716 for m in
/// [sqrt(1/2), sqrt(2)), truncation error below 2^-28 relative).
inline constexpr float log2_k0 = 0x1.715476p+1f;
inline constexpr float log2_k1 = 0x1.ec709ep-1f;
inline constexpr float log2_k2 = 0x1.2776c6p-1f;
inline constexpr float log2_k3 = 0x1.a61762p-2f;
inline constexpr float log2_k4 = 0x1.484b14p-2f;

/// log2(x) in binary32, the same bits on host and device (accuracy a few ulp; used for the LSE).
/// Special cases: NaN -> NaN, x < 0 -> NaN (0x7fffffff), +-0 -> -Inf, +Inf -> +Inf. Subnormal x is
/// scaled by 2^24 first (exact).
TIEBREAK_FORCEINLINE TIEBREAK_HD float log2_sw(float x) noexcept {
  if (is_nan(x)) return bits_to_f32(f32_to_bits(x) | 0x00400000u);
  if (x == 0.0f) return -inf;
  if (x < 0.0f) return bits_to_f32(0x7fffffffu);
  if (x == inf) return inf;
  std::uint32_t b = f32_to_bits(x);
  std::int32_t e = 0;
  if ((b >> 23) == 0) {  // subnormal: scale into the normal range
    b = f32_to_bits(mul_rn(x, 0x1p24f));
    e = -24;
  }
  e += static_cast<std::int32_t>(b >> 23) - 127;
  float m = bits_to_f32((b & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 0x1.6a09e6p0f) {                                  // > sqrt(2): use m / 2 (exact)
    m = mul_rn(m, 0.5f);
    ++e;
  }
  const float u = div_rn(sub_rn(m, 1.0f), add_rn(m, 1.0f));
  const float u2 = mul_rn(u, u);
  float p = log2_k4;
  p = fma_rn(p, u2, log2_k3);
  p = fma_rn(p, u2, log2_k2);
  p = fma_rn(p, u2, log2_k1);
  p = fma_rn(p, u2, log2_k0);
  return fma_rn(u, p, static_cast<float>(e));  // e is exact in binary32 (|e| <= 149)
}

}  // namespace tiebreak::f32
