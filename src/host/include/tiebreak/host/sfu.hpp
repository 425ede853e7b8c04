// SPDX-License-Identifier: Apache-2.0
/// @file The SFU exponential's table as the host library embeds it, and the modelled instructions
/// with it (include/tiebreak/fp/sfu.hpp has the rule and what was measured).
#pragma once

#include <cstdint>
#include <span>

#include "tiebreak/fp/sfu.hpp"

namespace tiebreak::host {

/// T of ex2.approx on sm_90 (captured on the H200 by cuda/sfu/ex2_probe.cu; the model then matched
/// the unit on all 2^32 inputs, tests/gpu/fp/sfu_gpu_test.cu): 2^23 words, T[F] the bits of
/// ex2.approx.ftz.f32(F 2^-23). Decoded from the embedded 2-bit steps on first use (32 MiB, once per
/// process, thread-safe).
std::span<const std::uint32_t> ex2_approx_sm90_table();

/// The table as sfu::ex2_approx*'s `table(F)`.
struct ex2_table_view {
  const std::uint32_t* t;
  std::uint32_t operator()(std::uint32_t f) const noexcept { return t[f]; }
};

/// T[F] computed by the unit's interpolator as recovered from the captured table (2026-12-05; equal
/// to ex2_approx_sm90_table() on all 2^23 entries, tests/host/fp/sfu_test.cpp): segment s = F >> 17
/// (64), xl = F mod 2^17, and with integers C1, C2, C0 of the segment
///   T[F] = 0x3f800000 + floor((C1 xl 2^17 + C2 sq(xl) + C0 2^32 + 3057 2^20) / 2^34),
/// sq(xl) = xl^2 without the partial-product bits below 2^19 (a truncated squarer: the pair products
/// b_i b_j 2^(i+j+1), i < j, with i + j + 1 < 19 and the squares b_i 2^(2i) with i < 10 dropped).
/// Host only for now (the kernels use the instruction; the twin the table).
std::uint32_t ex2_sm90_interpolated(std::uint32_t f);

/// ex2.approx.ftz.f32 and ex2.approx.f32 of sm_90, bit for bit.
float ex2_approx_ftz_sm90(float x);
float ex2_approx_sm90(float x);

}  // namespace tiebreak::host
