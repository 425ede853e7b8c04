// SPDX-License-Identifier: Apache-2.0
/// @file The SFU exponential's table as captured on the H200, embedded as the oracle of the core's
/// interpolator, and the modelled instructions (include/tiebreak/fp/sfu.hpp has the rule, the
/// interpolator and what was measured).
#pragma once

#include <cstdint>
#include <span>

#include "tiebreak/fp/sfu.hpp"

namespace tiebreak::host {

/// T of ex2.approx on sm_90 as captured on the H200 by cuda/sfu/ex2_probe.cu (the rule with it then
/// matched the unit on all 2^32 inputs, tests/gpu/fp/sfu_gpu_test.cu): 2^23 words, T[F] the bits of
/// ex2.approx.ftz.f32(F 2^-23). Data, kept as the independent oracle of the core's interpolator
/// (sfu::ex2_sm90_entry equals it on every entry, tests/host/fp/sfu_test.cpp); the modelled
/// instructions below do not read it. Decoded from the embedded 2-bit steps on first use (32 MiB,
/// once per process, thread-safe).
std::span<const std::uint32_t> ex2_approx_sm90_table();

/// The table as sfu::ex2_approx*'s `table(F)`.
struct ex2_table_view {
  const std::uint32_t* t;
  std::uint32_t operator()(std::uint32_t f) const noexcept { return t[f]; }
};

/// ex2.approx.ftz.f32 and ex2.approx.f32 of sm_90, bit for bit: the core's sfu::ex2_approx_ftz_sm90
/// and sfu::ex2_approx_sm90 (the interpolator evaluated per call), compiled once here.
float ex2_approx_ftz_sm90(float x);
float ex2_approx_sm90(float x);

}  // namespace tiebreak::host
