// SPDX-License-Identifier: Apache-2.0
/// @file Portability macros and the few integer primitives every core header needs.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define TIEBREAK_HD __host__ __device__
#else
#define TIEBREAK_HD
#endif

/// Marks core functions: usable from host code, device code and constant expressions.
#define TIEBREAK_HDC TIEBREAK_HD constexpr

#if defined(TIEBREAK_NO_FORCEINLINE)
// Sanitizer builds: the compiler's own inlining choice (same code, far less to compile).
#define TIEBREAK_FORCEINLINE inline
#elif defined(__CUDACC__)
#define TIEBREAK_FORCEINLINE __forceinline__
#elif defined(__GNUC__)
#define TIEBREAK_FORCEINLINE [[gnu::always_inline]] inline
#else
#define TIEBREAK_FORCEINLINE inline
#endif
/// Core functions on the hot path of sweeps and emulated kernels: always inlined, so the format
/// descriptor and the rounding mode fold into constants at the call site.
#define TIEBREAK_HDI TIEBREAK_FORCEINLINE TIEBREAK_HD constexpr

namespace tiebreak {

/// 128-bit unsigned integer: wide enough to hold a product of two f64 significands (106 bits) with
/// room for carries. Supported by g++, clang and nvcc (host and device) on 64-bit targets.
using u128 = unsigned __int128;

/// Number of leading zero bits; 64 for zero.
TIEBREAK_HDI int clz64(std::uint64_t x) noexcept {
  if (std::is_constant_evaluated()) {
    if (x == 0) return 64;
    int n = 0;
    for (std::uint64_t m = std::uint64_t{1} << 63; (x & m) == 0; m >>= 1) ++n;
    return n;
  }
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(x));
#else
  return x == 0 ? 64 : __builtin_clzll(x);
#endif
}

/// Number of set bits (POPC on the device).
TIEBREAK_HDI int popcount32(std::uint32_t x) noexcept {
  if (std::is_constant_evaluated()) {
    int n = 0;
    for (; x != 0; x &= x - 1) ++n;
    return n;
  }
#if defined(__CUDA_ARCH__)
  return __popc(x);
#else
  return __builtin_popcount(x);
#endif
}

/// Number of leading zero bits of a 128-bit value; 128 for zero.
TIEBREAK_HDI int clz128(u128 x) noexcept {
  const auto hi = static_cast<std::uint64_t>(x >> 64);
  return hi != 0 ? clz64(hi) : 64 + clz64(static_cast<std::uint64_t>(x));
}

/// Index of the most significant set bit; -1 for zero.
TIEBREAK_HDI int msb128(u128 x) noexcept { return 127 - clz128(x); }

/// Mask of the low n bits, for 0 <= n <= 128.
TIEBREAK_HDI u128 low_mask128(int n) noexcept {
  return n >= 128 ? ~u128{0} : n <= 0 ? u128{0} : (u128{1} << n) - 1;
}

/// Width in bits of an unsigned integer type (64 or 128 here).
template <class U>
inline constexpr int bit_width_v = static_cast<int>(sizeof(U) * 8);

/// Index of the most significant set bit of a 64- or 128-bit value; -1 for zero.
template <class U>
TIEBREAK_HDI int msb_of(U x) noexcept {
  if constexpr (sizeof(U) == 16) return msb128(x);
  else return 63 - clz64(static_cast<std::uint64_t>(x));
}
/// x >> n for any n >= 0 (0 once n reaches the width).
template <class U>
TIEBREAK_HDI U shr(U x, int n) noexcept { return n >= bit_width_v<U> ? U{0} : static_cast<U>(x >> n); }
/// Mask of the low n bits for any n (all ones once n reaches the width, zero for n <= 0).
template <class U>
TIEBREAK_HDI U low_mask(int n) noexcept {
  return n >= bit_width_v<U> ? static_cast<U>(~U{0}) : (n <= 0 ? U{0} : static_cast<U>((U{1} << n) - 1));
}

}  // namespace tiebreak
