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

namespace tiebreak {

/// 128-bit unsigned integer: wide enough to hold a product of two f64 significands (106 bits) with
/// room for carries. Supported by g++, clang and nvcc (host and device) on 64-bit targets.
using u128 = unsigned __int128;

/// Number of leading zero bits; 64 for zero.
TIEBREAK_HDC int clz64(std::uint64_t x) noexcept {
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

/// Number of leading zero bits of a 128-bit value; 128 for zero.
TIEBREAK_HDC int clz128(u128 x) noexcept {
  const auto hi = static_cast<std::uint64_t>(x >> 64);
  return hi != 0 ? clz64(hi) : 64 + clz64(static_cast<std::uint64_t>(x));
}

/// Index of the most significant set bit; -1 for zero.
TIEBREAK_HDC int msb128(u128 x) noexcept { return 127 - clz128(x); }

/// Mask of the low n bits, for 0 <= n <= 128.
TIEBREAK_HDC u128 low_mask128(int n) noexcept {
  return n >= 128 ? ~u128{0} : n <= 0 ? u128{0} : (u128{1} << n) - 1;
}

}  // namespace tiebreak
