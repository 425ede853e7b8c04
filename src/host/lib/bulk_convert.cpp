// SPDX-License-Identifier: Apache-2.0
/// @file Bulk f32 -> bf16 loops, one copy per instruction set, and the run-time choice among them.
#include "tiebreak/host/bulk_convert.hpp"

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/fast.hpp"

namespace tiebreak::host {
namespace {

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

// Per-ISA copies: x86-64 with GCC or Clang only (other targets and compilers get the generic loop).
#if defined(__x86_64__) && defined(__GNUC__)
#define TIEBREAK_BULK_MULTIVERSION 1
__attribute__((target("avx2"), noinline)) void bulk_f32_to_bf16_avx2(
    const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  bulk_f32_to_bf16_any(in, random, out, n, m);
}
__attribute__((target("avx512f,avx512bw,avx512vl"), noinline)) void bulk_f32_to_bf16_avx512(
    const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  bulk_f32_to_bf16_any(in, random, out, n, m);
}
#else
#define TIEBREAK_BULK_MULTIVERSION 0
#endif
[[gnu::noinline]] void bulk_f32_to_bf16_generic(const std::uint32_t* in, const std::uint32_t* random,
                                               std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  bulk_f32_to_bf16_any(in, random, out, n, m);
}

}  // namespace

bool bulk_isa_supported(bulk_isa isa) noexcept {
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

bulk_isa best_bulk_isa() noexcept {
  static const bulk_isa best = bulk_isa_supported(bulk_isa::avx512) ? bulk_isa::avx512
                               : bulk_isa_supported(bulk_isa::avx2) ? bulk_isa::avx2
                                                                    : bulk_isa::generic;
  return best;
}

void convert_f32_to_bf16_with(bulk_isa isa, const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out,
                              std::size_t n, round_mode m) noexcept {
#if TIEBREAK_BULK_MULTIVERSION
  if (isa == bulk_isa::avx512) return bulk_f32_to_bf16_avx512(in, random, out, n, m);
  if (isa == bulk_isa::avx2) return bulk_f32_to_bf16_avx2(in, random, out, n, m);
#endif
  (void)isa;
  bulk_f32_to_bf16_generic(in, random, out, n, m);
}

void convert_f32_to_bf16(const std::uint32_t* in, std::uint16_t* out, std::size_t n, round_mode m) noexcept {
  // sr with zero random bits never carries (top32 + 0 < 2^32): it is truncation, the rz loop.
  convert_f32_to_bf16_with(best_bulk_isa(), in, nullptr, out, n, m == round_mode::sr ? round_mode::rz : m);
}

void convert_f32_to_bf16_sr(const std::uint32_t* in, const std::uint32_t* random, std::uint16_t* out,
                            std::size_t n) noexcept {
  convert_f32_to_bf16_with(best_bulk_isa(), in, random, out, n, round_mode::sr);
}

}  // namespace tiebreak::host
