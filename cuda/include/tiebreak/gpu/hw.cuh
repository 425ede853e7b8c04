// SPDX-License-Identifier: Apache-2.0
/// @file The hardware side of every instruction of tiebreak/emu/instr_table.hpp: the CUDA intrinsic or inline PTX, on raw bits (device only).
///
/// Intrinsics are used where CUDA has one (that is what users call); inline PTX where it has none.
/// Each asm statement is `volatile`-free and has no memory clobber: it is a pure function of its
/// inputs, so the compiler may schedule it but cannot merge it with the core's integer code.
/// Compiled with --fmad=false; the single-instruction kernels leave nothing to contract, and the
/// SASS actually tested is listed in docs/hardware.md (tools/device-check.sh dumps it).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "tiebreak/emu/instr_table.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "tiebreak GPU instruction kernels need sm_90 (cvt.rm/rp.bf16.f32, cvt.rn/rz.tf32.f32, add.rn.bf16)"
#endif

namespace tiebreak::gpu::hw {

__device__ __forceinline__ float f32(std::uint32_t x) { return __uint_as_float(x); }
__device__ __forceinline__ std::uint16_t bits(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
__device__ __forceinline__ std::uint16_t bits(__half h) { return __half_as_ushort(h); }
__device__ __forceinline__ __nv_bfloat16 bf16(std::uint64_t x) { return __ushort_as_bfloat16(static_cast<unsigned short>(x)); }
__device__ __forceinline__ __half f16(std::uint64_t x) { return __ushort_as_half(static_cast<unsigned short>(x)); }

#define TIEBREAK_HW_CVT16_(ptx)                                            \
  [](std::uint32_t x) {                                                    \
    unsigned short r;                                                      \
    asm(ptx " %0, %1;" : "=h"(r) : "f"(__uint_as_float(x)));               \
    return static_cast<std::uint32_t>(r);                                  \
  }(static_cast<std::uint32_t>(in))
#define TIEBREAK_HW_CVT32_(ptx)                                            \
  [](std::uint32_t x) {                                                    \
    unsigned r;                                                            \
    asm(ptx " %0, %1;" : "=r"(r) : "f"(__uint_as_float(x)));               \
    return static_cast<std::uint32_t>(r);                                  \
  }(static_cast<std::uint32_t>(in))
// f32 pair -> fp8x2: PTX puts operand a in the upper byte, b in the lower one.
#define TIEBREAK_HW_F8X2_F32_(ptx)                                                       \
  [](std::uint32_t x) {                                                                  \
    unsigned short r;                                                                    \
    asm(ptx " %0, %1, %2;" : "=h"(r) : "f"(__uint_as_float(rotl16(x))), "f"(__uint_as_float(x))); \
    return static_cast<std::uint32_t>(r);                                                \
  }(static_cast<std::uint32_t>(in))
#define TIEBREAK_HW_F8X2_F16X2_(ptx)                                       \
  [](std::uint32_t x) {                                                    \
    unsigned short r;                                                      \
    asm(ptx " %0, %1;" : "=h"(r) : "r"(x));                                \
    return static_cast<std::uint32_t>(r);                                  \
  }(static_cast<std::uint32_t>(in))

/// The instruction's full output register for input `in` (layout: instr_kind).
template <instr_op Op>
__device__ __forceinline__ std::uint32_t result(std::uint64_t in) {
  const auto x = static_cast<std::uint32_t>(in);
  const std::uint16_t a = static_cast<std::uint16_t>(in >> 16), b = static_cast<std::uint16_t>(in);
  if constexpr (Op == instr_op::f32_to_bf16_rn || Op == instr_op::fast_f32_to_bf16_rn) return bits(__float2bfloat16_rn(f32(x)));
  else if constexpr (Op == instr_op::f32_to_bf16_rz || Op == instr_op::fast_f32_to_bf16_rz) return bits(__float2bfloat16_rz(f32(x)));
  else if constexpr (Op == instr_op::f32_to_bf16_rd || Op == instr_op::fast_f32_to_bf16_rd) return bits(__float2bfloat16_rd(f32(x)));
  else if constexpr (Op == instr_op::f32_to_bf16_ru || Op == instr_op::fast_f32_to_bf16_ru) return bits(__float2bfloat16_ru(f32(x)));
  else if constexpr (Op == instr_op::f32_to_bf16_rn_relu) return TIEBREAK_HW_CVT16_("cvt.rn.relu.bf16.f32");
  else if constexpr (Op == instr_op::f32_to_bf16_rn_satfinite) return TIEBREAK_HW_CVT16_("cvt.rn.satfinite.bf16.f32");
  else if constexpr (Op == instr_op::f32_to_bf16_rz_satfinite) return TIEBREAK_HW_CVT16_("cvt.rz.satfinite.bf16.f32");
  else if constexpr (Op == instr_op::f32_to_f16_rn) return bits(__float2half_rn(f32(x)));
  else if constexpr (Op == instr_op::f32_to_f16_rz) return bits(__float2half_rz(f32(x)));
  else if constexpr (Op == instr_op::f32_to_f16_rd) return bits(__float2half_rd(f32(x)));
  else if constexpr (Op == instr_op::f32_to_f16_ru) return bits(__float2half_ru(f32(x)));
  else if constexpr (Op == instr_op::f32_to_f16_rn_relu) return TIEBREAK_HW_CVT16_("cvt.rn.relu.f16.f32");
  else if constexpr (Op == instr_op::f32_to_f16_rn_satfinite) return TIEBREAK_HW_CVT16_("cvt.rn.satfinite.f16.f32");
  else if constexpr (Op == instr_op::f32_to_tf32_rna) return TIEBREAK_HW_CVT32_("cvt.rna.tf32.f32");
  else if constexpr (Op == instr_op::f32_to_tf32_rna_satfinite) return TIEBREAK_HW_CVT32_("cvt.rna.satfinite.tf32.f32");
  else if constexpr (Op == instr_op::f32_to_tf32_rn) return TIEBREAK_HW_CVT32_("cvt.rn.tf32.f32");
  else if constexpr (Op == instr_op::f32_to_tf32_rz) return TIEBREAK_HW_CVT32_("cvt.rz.tf32.f32");
  else if constexpr (Op == instr_op::f32_to_tf32_rn_relu) return TIEBREAK_HW_CVT32_("cvt.rn.relu.tf32.f32");
  else if constexpr (Op == instr_op::f32_to_tf32_rz_relu) return TIEBREAK_HW_CVT32_("cvt.rz.relu.tf32.f32");
  else if constexpr (Op == instr_op::f32_to_e4m3_sat) return __nv_cvt_float_to_fp8(f32(x), __NV_SATFINITE, __NV_E4M3);
  else if constexpr (Op == instr_op::f32_to_e5m2_sat) return __nv_cvt_float_to_fp8(f32(x), __NV_SATFINITE, __NV_E5M2);
  else if constexpr (Op == instr_op::f32_to_e4m3_nosat) return __nv_cvt_float_to_fp8(f32(x), __NV_NOSAT, __NV_E4M3);
  else if constexpr (Op == instr_op::f32_to_e5m2_nosat) return __nv_cvt_float_to_fp8(f32(x), __NV_NOSAT, __NV_E5M2);
  else if constexpr (Op == instr_op::f32x2_to_e4m3x2_sat) return TIEBREAK_HW_F8X2_F32_("cvt.rn.satfinite.e4m3x2.f32");
  else if constexpr (Op == instr_op::f32x2_to_e5m2x2_sat) return TIEBREAK_HW_F8X2_F32_("cvt.rn.satfinite.e5m2x2.f32");
  else if constexpr (Op == instr_op::f32x2_to_e4m3x2_sat_relu) return TIEBREAK_HW_F8X2_F32_("cvt.rn.satfinite.relu.e4m3x2.f32");
  else if constexpr (Op == instr_op::f32x2_to_e5m2x2_sat_relu) return TIEBREAK_HW_F8X2_F32_("cvt.rn.satfinite.relu.e5m2x2.f32");
  else if constexpr (Op == instr_op::f16_to_e4m3_sat || Op == instr_op::f16_to_e5m2_sat) {
    constexpr __nv_fp8_interpretation_t t = Op == instr_op::f16_to_e4m3_sat ? __NV_E4M3 : __NV_E5M2;
    __half_raw lo, hi;
    lo.x = static_cast<unsigned short>(x);
    hi.x = static_cast<unsigned short>(x >> 16);
    return static_cast<std::uint32_t>(__nv_cvt_halfraw_to_fp8(lo, __NV_SATFINITE, t)) |
           (static_cast<std::uint32_t>(__nv_cvt_halfraw_to_fp8(hi, __NV_SATFINITE, t)) << 8);
  }
  else if constexpr (Op == instr_op::f16x2_to_e4m3x2_sat_relu) return TIEBREAK_HW_F8X2_F16X2_("cvt.rn.satfinite.relu.e4m3x2.f16x2");
  else if constexpr (Op == instr_op::f16x2_to_e5m2x2_sat_relu) return TIEBREAK_HW_F8X2_F16X2_("cvt.rn.satfinite.relu.e5m2x2.f16x2");
  else if constexpr (Op == instr_op::bf16_add) return bits(__hadd(bf16(a), bf16(b)));
  else if constexpr (Op == instr_op::bf16_add_rn) return bits(__hadd_rn(bf16(a), bf16(b)));
  else if constexpr (Op == instr_op::bf16_mul) return bits(__hmul(bf16(a), bf16(b)));
  else if constexpr (Op == instr_op::bf16_mul_rn) return bits(__hmul_rn(bf16(a), bf16(b)));
  else if constexpr (Op == instr_op::f16_add) return bits(__hadd(f16(a), f16(b)));
  else if constexpr (Op == instr_op::f16_add_rn) return bits(__hadd_rn(f16(a), f16(b)));
  else if constexpr (Op == instr_op::f16_mul) return bits(__hmul(f16(a), f16(b)));
  else if constexpr (Op == instr_op::f16_mul_rn) return bits(__hmul_rn(f16(a), f16(b)));
  else if constexpr (Op == instr_op::bf16_fma) return bits(__hfma(bf16(in >> 32), bf16(in >> 16), bf16(in)));
  else {
    static_assert(Op == instr_op::f16_fma, "every instr_op needs its instruction here");
    return bits(__hfma(f16(in >> 32), f16(in >> 16), f16(in)));
  }
}

#undef TIEBREAK_HW_CVT16_
#undef TIEBREAK_HW_CVT32_
#undef TIEBREAK_HW_F8X2_F32_
#undef TIEBREAK_HW_F8X2_F16X2_

}  // namespace tiebreak::gpu::hw
