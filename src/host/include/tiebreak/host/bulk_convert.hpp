// SPDX-License-Identifier: Apache-2.0
/// @file Bulk f32 -> bf16 conversion of arrays, per CPU instruction set, chosen at run time (host only).
///
/// The loops are the portable per-value functions of tiebreak/fp/fast.hpp in a plain loop, compiled
/// once per instruction set in src/host/lib/bulk_convert.cpp (GCC/Clang `target` attributes on
/// x86-64; elsewhere only `generic` exists) and chosen at run time with `__builtin_cpu_supports`,
/// so they vectorise with 512-bit vectors where the CPU has AVX-512 BW without raising the baseline
/// of the rest of the program. Every variant is the same source and is checked against round_pack
/// for all 2^32 inputs (tests/host/fp/fast_exhaustive_test.cpp). VCVTNEPS2BF16 (AVX-512 BF16) is
/// not used: it reads subnormal inputs as zero (DAZ) and does not give the canonical NaN, which the
/// default options require (docs/rounding.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tiebreak/fp/policy.hpp"

namespace tiebreak::host {

/// Instruction sets the bulk loops are compiled for.
enum class bulk_isa : std::uint8_t {
  generic,  ///< the compiler's baseline for the host library (SSE2 on plain x86-64)
  avx2,     ///< 256-bit vectors
  avx512,   ///< 512-bit vectors (AVX-512 F + BW)
};

/// True when this build has a loop for `isa` and the CPU it runs on can execute it.
bool bulk_isa_supported(bulk_isa isa) noexcept;

/// The widest supported instruction set (decided once per process).
bulk_isa best_bulk_isa() noexcept;

/// Bulk f32 -> bf16 with the loop compiled for `isa`. Preconditions: bulk_isa_supported(isa);
/// `random` has n entries when m is round_mode::sr (otherwise it may be null). Policy: `m`, default
/// options (subnormals kept, no saturation); NaN -> canonical 0x7fff. Equal to round_pack for every
/// input (tests/host/fp/fast_exhaustive_test.cpp checks each variant the CPU supports).
void convert_f32_to_bf16_with(bulk_isa isa, const std::uint32_t* in, const std::uint32_t* random,
                              std::uint16_t* out, std::size_t n, round_mode m) noexcept;

/// Bulk f32 -> bf16 in one deterministic mode, on the widest instruction set the CPU has. Policy
/// `m` (round_mode::sr here means random bits 0, i.e. truncation; use convert_f32_to_bf16_sr),
/// default options, NaN -> 0x7fff.
void convert_f32_to_bf16(const std::uint32_t* in, std::uint16_t* out, std::size_t n, round_mode m) noexcept;

/// Bulk stochastic rounding f32 -> bf16 with one 32-bit random word per element (policy sr_t,
/// definition in docs/rounding.md), on the widest instruction set the CPU has. NaN -> 0x7fff.
void convert_f32_to_bf16_sr(const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out,
                            std::size_t n) noexcept;

}  // namespace tiebreak::host
