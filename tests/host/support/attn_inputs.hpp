// SPDX-License-Identifier: Apache-2.0
/// @file How the attention tests make their bf16 inputs (the twin's tests, its pinned digests, the
/// device's tests and support/debias_patterns.hpp): one definition, so that their inputs, and the
/// digests pinned on them, come from the same roundings.
#pragma once

#include <cstdint>

#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::test {

/// x narrowed twice, each to nearest even: double -> f32 (C++'s conversion), then f32 -> bf16
/// (fp/fast.hpp's f32_bits_to_bf16_rne).
inline std::uint16_t bf16_of(double x) { return f32_bits_to_bf16_rne(f32_to_bits(static_cast<float>(x))); }

/// A draw uniform in [-1, 1): the top 53 bits of the generator's next word, exact in double.
inline double uniform_pm1(splitmix64_generator& g) { return static_cast<double>(g() >> 11) * 0x1p-53 * 2 - 1; }

}  // namespace tiebreak::test
