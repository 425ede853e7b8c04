// SPDX-License-Identifier: Apache-2.0
/// @file The code under test: a hand-written f32 -> bf16 conversion, as found in many frameworks.
#pragma once

#include <cstdint>
#include <cstring>

/// f32 -> bf16, round to nearest even by the carry trick; NaN becomes the quiet NaN 0x7fc0
/// (PyTorch's c10::BFloat16 convention).
inline std::uint16_t my_f32_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
