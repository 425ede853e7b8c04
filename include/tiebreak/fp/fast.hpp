// SPDX-License-Identifier: Apache-2.0
/// @file Branch-free f32 -> bf16 narrowing on raw bits, for bulk conversion at memory speed.
///
/// These are specialisations of round_pack(formats::bf16, ...) with default options (subnormals kept,
/// no saturation, canonical NaN 0x7fff). bf16 has f32's exponent range, so one narrowing is a
/// 16-bit shift of the encoding plus a carry into it; subnormals, overflow and the max-finite
/// boundary need no special case. They are proven equal to round_pack for all 2^32 inputs in every
/// mode, scalar and bulk, every bulk instruction set the CPU has (tests/host/fp/fast_exhaustive_test.cpp,
/// label exhaustive), so round_pack stays the source of truth.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/policy.hpp"

namespace tiebreak {

namespace detail {
TIEBREAK_HDC bool f32_bits_is_nan(std::uint32_t x) noexcept { return (x & 0x7fffffffu) > 0x7f800000u; }
}  // namespace detail

///   x = [s | e(8) | m(7) | G | R..(15)]; lsb = bit 16.
///   rne: add 0x7fff + lsb: carries exactly when G && (S || lsb).
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rne(std::uint32_t x) noexcept {
  const std::uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}
///   rna: add 0x8000: carries exactly when G.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rna(std::uint32_t x) noexcept {
  const std::uint32_t r = (x + 0x8000u) >> 16;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}
///   rz: drop the low half.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rz(std::uint32_t x) noexcept {
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(x >> 16);
}
///   ru: positive magnitudes add 0xffff (carry iff any discarded bit); negative ones truncate.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_ru(std::uint32_t x) noexcept {
  const std::uint32_t add = (x >> 31) ? 0u : 0xffffu;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>((x + add) >> 16);
}
///   rd: the mirror image of ru.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rd(std::uint32_t x) noexcept {
  const std::uint32_t add = (x >> 31) ? 0xffffu : 0u;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>((x + add) >> 16);
}
///   rto: truncate, OR the sticky into the lsb (never reaches Inf: max finite has an odd lsb).
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_rto(std::uint32_t x) noexcept {
  const std::uint32_t r = (x >> 16) | ((x & 0xffffu) != 0 ? 1u : 0u);
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}
///   sr: top32 + random >= 2^32  <=>  (x & 0xffff) + (random >> 16) >= 2^16, since the low 16 bits
///   of top32 = (x & 0xffff) << 16 are zero. Added to the magnitude; it cannot reach the sign bit.
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16_sr(std::uint32_t x, std::uint32_t random) noexcept {
  const std::uint32_t mag = ((x & 0x7fffffffu) + (random >> 16)) >> 16;
  const std::uint32_t r = (x >> 16 & 0x8000u) | mag;
  return detail::f32_bits_is_nan(x) ? std::uint16_t{0x7fff} : static_cast<std::uint16_t>(r);
}

/// f32 -> bf16 by runtime mode (sr takes `random`).
TIEBREAK_HDC std::uint16_t f32_bits_to_bf16(std::uint32_t x, rounding r) noexcept {
  switch (r.mode) {
    case round_mode::rne: return f32_bits_to_bf16_rne(x);
    case round_mode::rna: return f32_bits_to_bf16_rna(x);
    case round_mode::rz: return f32_bits_to_bf16_rz(x);
    case round_mode::ru: return f32_bits_to_bf16_ru(x);
    case round_mode::rd: return f32_bits_to_bf16_rd(x);
    case round_mode::rto: return f32_bits_to_bf16_rto(x);
    default: return f32_bits_to_bf16_sr(x, r.random);
  }
}

/// Instruction sets the bulk loops below are compiled for. The loops are the scalar functions above
/// in a plain loop, compiled once per instruction set (GCC/Clang `target` attributes on x86-64
/// host code; elsewhere, and under nvcc, only `generic` exists) and chosen at run time, so they
/// vectorise with 512-bit vectors where the CPU has AVX-512 BW without raising the baseline of
/// the rest of the program. Every variant is the same source and is checked against round_pack
/// for all 2^32 inputs (tests/host/fp/fast_exhaustive_test.cpp). VCVTNEPS2BF16 (AVX-512 BF16) is
/// not used: it reads subnormal inputs as zero (DAZ) and does not give the canonical NaN, which the
/// default options require (docs/rounding.md).
enum class bulk_isa : std::uint8_t {
  generic,  ///< the compiler's baseline for the translation unit (SSE2 on plain x86-64)
  avx2,     ///< 256-bit vectors
  avx512,   ///< 512-bit vectors (AVX-512 F + BW)
};

namespace detail {

/// The bulk loops, one per mode; the mode is a template parameter so each loop body is branch-free.
template <round_mode M>
TIEBREAK_FORCEINLINE void bulk_f32_to_bf16(const std::uint32_t* __restrict in, const std::uint32_t* __restrict random,
                                           std::uint16_t* __restrict out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (M == round_mode::rne) out[i] = f32_bits_to_bf16_rne(in[i]);
    else if constexpr (M == round_mode::rna) out[i] = f32_bits_to_bf16_rna(in[i]);
    else if constexpr (M == round_mode::rz) out[i] = f32_bits_to_bf16_rz(in[i]);
    else if constexpr (M == round_mode::ru) out[i] = f32_bits_to_bf16_ru(in[i]);
    else if constexpr (M == round_mode::rd) out[i] = f32_bits_to_bf16_rd(in[i]);
    else if constexpr (M == round_mode::rto) out[i] = f32_bits_to_bf16_rto(in[i]);
    else out[i] = f32_bits_to_bf16_sr(in[i], random[i]);
  }
}

/// Runtime mode -> loop. `random` is read only for round_mode::sr.
TIEBREAK_FORCEINLINE void bulk_f32_to_bf16_any(const std::uint32_t* in, const std::uint32_t* random,
                                               std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  switch (m) {
    case round_mode::rne: bulk_f32_to_bf16<round_mode::rne>(in, random, out, n); break;
    case round_mode::rna: bulk_f32_to_bf16<round_mode::rna>(in, random, out, n); break;
    case round_mode::rz: bulk_f32_to_bf16<round_mode::rz>(in, random, out, n); break;
    case round_mode::ru: bulk_f32_to_bf16<round_mode::ru>(in, random, out, n); break;
    case round_mode::rd: bulk_f32_to_bf16<round_mode::rd>(in, random, out, n); break;
    case round_mode::rto: bulk_f32_to_bf16<round_mode::rto>(in, random, out, n); break;
    default: bulk_f32_to_bf16<round_mode::sr>(in, random, out, n); break;
  }
}

// Per-ISA copies: host x86-64 code compiled by GCC or Clang only (nvcc's host pass and other
// compilers get the generic loop).
#if !defined(__CUDACC__) && defined(__x86_64__) && defined(__GNUC__)
#define TIEBREAK_BULK_MULTIVERSION 1
__attribute__((target("avx2"), noinline)) inline void bulk_f32_to_bf16_avx2(
    const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  bulk_f32_to_bf16_any(in, random, out, n, m);
}
__attribute__((target("avx512f,avx512bw,avx512vl"), noinline)) inline void bulk_f32_to_bf16_avx512(
    const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  bulk_f32_to_bf16_any(in, random, out, n, m);
}
#else
#define TIEBREAK_BULK_MULTIVERSION 0
#endif
[[gnu::noinline]] inline void bulk_f32_to_bf16_generic(const std::uint32_t* in, const std::uint32_t* random,
                                                      std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  bulk_f32_to_bf16_any(in, random, out, n, m);
}

}  // namespace detail

/// True when this build has a loop for `isa` and the CPU it runs on can execute it.
inline bool bulk_isa_supported(bulk_isa isa) noexcept {
#if TIEBREAK_BULK_MULTIVERSION
  switch (isa) {
    case bulk_isa::avx2: return __builtin_cpu_supports("avx2");
    case bulk_isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    default: return true;
  }
#else
  return isa == bulk_isa::generic;
#endif
}

/// The widest supported instruction set (decided once per process).
inline bulk_isa best_bulk_isa() noexcept {
  static const bulk_isa best = bulk_isa_supported(bulk_isa::avx512) ? bulk_isa::avx512
                               : bulk_isa_supported(bulk_isa::avx2) ? bulk_isa::avx2
                                                                    : bulk_isa::generic;
  return best;
}

/// Bulk f32 -> bf16 with the loop compiled for `isa`. Preconditions: bulk_isa_supported(isa);
/// `random` has n entries when m is round_mode::sr (otherwise it may be null). Policy: `m`, default
/// options (subnormals kept, no saturation); NaN -> canonical 0x7fff. Equal to round_pack for every
/// input (tests/host/fp/fast_exhaustive_test.cpp checks each variant the CPU supports).
inline void convert_f32_to_bf16_with(bulk_isa isa, const std::uint32_t* in, const std::uint32_t* random,
                                     std::uint16_t* out, std::size_t n, round_mode m) noexcept {
#if TIEBREAK_BULK_MULTIVERSION
  if (isa == bulk_isa::avx512) return detail::bulk_f32_to_bf16_avx512(in, random, out, n, m);
  if (isa == bulk_isa::avx2) return detail::bulk_f32_to_bf16_avx2(in, random, out, n, m);
#endif
  (void)isa;
  detail::bulk_f32_to_bf16_generic(in, random, out, n, m);
}

/// Bulk f32 -> bf16 in one deterministic mode, on the widest instruction set the CPU has. Policy
/// `m` (round_mode::sr here means random bits 0, i.e. truncation; use convert_f32_to_bf16_sr),
/// default options, NaN -> 0x7fff.
inline void convert_f32_to_bf16(const std::uint32_t* in, std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  // sr with zero random bits never carries (top32 + 0 < 2^32): it is truncation, the rz loop.
  convert_f32_to_bf16_with(best_bulk_isa(), in, nullptr, out, n, m == round_mode::sr ? round_mode::rz : m);
}
/// Bulk stochastic rounding f32 -> bf16 with one 32-bit random word per element (policy sr_t,
/// definition in docs/rounding.md), on the widest instruction set the CPU has. NaN -> 0x7fff.
inline void convert_f32_to_bf16_sr(const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out,
                                   std::size_t n) noexcept {
  convert_f32_to_bf16_with(best_bulk_isa(), in, random, out, n, round_mode::sr);
}

static_assert(f32_bits_to_bf16_rne(0x3f808000u) == 0x3f80);  // 1 + 2^-8: tie, lsb 0 -> down
static_assert(f32_bits_to_bf16_rne(0x3f818000u) == 0x3f82);  // tie, lsb 1 -> up
static_assert(f32_bits_to_bf16_rne(0x3f808001u) == 0x3f81);  // above the tie -> up
static_assert(f32_bits_to_bf16_rne(0x7f7fffffu) == 0x7f80);  // max f32 -> Inf
static_assert(f32_bits_to_bf16_rz(0x7f7fffffu) == 0x7f7f);
static_assert(f32_bits_to_bf16_rz(0x7f800001u) == 0x7fff);   // NaN never truncates to Inf

}  // namespace tiebreak
