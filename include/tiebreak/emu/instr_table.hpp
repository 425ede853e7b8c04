// SPDX-License-Identifier: Apache-2.0
/// @file The GPU instruction table: each scalar instruction the sweeps check, its core model, inputs.
///
/// Portable (no CUDA headers): the same `TIEBREAK_HD` model runs inside the sweep kernels and in the
/// host tests, so a device sweep compares the hardware with the core *in the kernel*, and the tests
/// can check that the core gives the same bits on the host. docs/hardware.md lists every instruction, the
/// SASS it compiles to and what the H200 did.
#pragma once

#include <cstdint>
#include <string_view>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/emu/ops.hpp"

// Namespace gpu: the table names the device's instructions; the code itself is portable (core).
namespace tiebreak::gpu {

/// Every instruction of the table. X(name): one enumerator each; the order is the enum's.
#define TIEBREAK_GPU_INSTR_OPS(X)                                                                     \
  X(f32_to_bf16_rn) X(f32_to_bf16_rz) X(f32_to_bf16_rd) X(f32_to_bf16_ru)                            \
  X(f32_to_bf16_rn_relu) X(f32_to_bf16_rn_satfinite) X(f32_to_bf16_rz_satfinite)                     \
  X(fast_f32_to_bf16_rn) X(fast_f32_to_bf16_rz) X(fast_f32_to_bf16_rd) X(fast_f32_to_bf16_ru)        \
  X(f32_to_f16_rn) X(f32_to_f16_rz) X(f32_to_f16_rd) X(f32_to_f16_ru)                                \
  X(f32_to_f16_rn_relu) X(f32_to_f16_rn_satfinite)                                                   \
  X(f32_to_tf32_rna) X(f32_to_tf32_rna_satfinite) X(f32_to_tf32_rn) X(f32_to_tf32_rz)                \
  X(f32_to_tf32_rn_relu) X(f32_to_tf32_rz_relu)                                                      \
  X(f32_to_e4m3_sat) X(f32_to_e5m2_sat) X(f32_to_e4m3_nosat) X(f32_to_e5m2_nosat)                   \
  X(f32x2_to_e4m3x2_sat) X(f32x2_to_e5m2x2_sat) X(f32x2_to_e4m3x2_sat_relu)                          \
  X(f32x2_to_e5m2x2_sat_relu)                                                                        \
  X(f16_to_e4m3_sat) X(f16_to_e5m2_sat) X(f16x2_to_e4m3x2_sat_relu) X(f16x2_to_e5m2x2_sat_relu)      \
  X(bf16_add) X(bf16_add_rn) X(bf16_mul) X(bf16_mul_rn)                                              \
  X(f16_add) X(f16_add_rn) X(f16_mul) X(f16_mul_rn)                                                  \
  X(bf16_fma) X(f16_fma)

enum class instr_op : std::uint8_t {
#define TIEBREAK_GPU_ENUM_(n) n,
  TIEBREAK_GPU_INSTR_OPS(TIEBREAK_GPU_ENUM_)
#undef TIEBREAK_GPU_ENUM_
};

inline constexpr instr_op all_instr_ops[] = {
#define TIEBREAK_GPU_LIST_(n) instr_op::n,
    TIEBREAK_GPU_INSTR_OPS(TIEBREAK_GPU_LIST_)
#undef TIEBREAK_GPU_LIST_
};
inline constexpr int instr_op_count = static_cast<int>(sizeof(all_instr_ops) / sizeof(all_instr_ops[0]));

/// How an input index maps to operands and which core function models the instruction.
enum class instr_kind : std::uint8_t {
  convert,     ///< one f32 x -> to (input: the f32 encoding, 2^32 inputs)
  convert_x2,  ///< two lanes packed into one result: lane lo in bits [0, w), lane hi in [w, 2w)
               ///< f32 lanes: lo = x, hi = rotl(x, 16) (a bijection: every f32 meets both lanes);
               ///< f16 lanes: lo = x & 0xffff, hi = x >> 16 (every pair of halves once)
  add,         ///< a + b, a = x >> 16, b = x & 0xffff (all 2^32 pairs)
  mul,         ///< a * b, same operands
  fma,         ///< a * b + c; input = a << 32 | b << 16 | c (sampled: see fma_input)
};

/// One table entry: the instruction and its model. `relu`: the instruction's .relu modifier, modelled as
/// a clamp applied to the core's rounded result (negative non-NaN results become +0; it is not a
/// rounding decision). `fast`: the model is the branch-free fp/fast.hpp function, not round_pack.
/// `step_down_nonfinite`: after rounding, an Inf or NaN encoding is decremented by one unit of the
/// result's lsb (sign kept). That is how ptxas's integer expansion of cvt.rna.satfinite.tf32.f32
/// saturates (docs/hardware.md); for finite and infinite inputs it coincides with the core's
/// saturation, and it only changes what NaN inputs give.
struct instr_desc {
  std::string_view name;
  std::string_view instruction;  ///< the intrinsic or PTX the kernel executes
  instr_kind kind;
  format_id from;                ///< operand format
  format_id to;                  ///< result format (== from for arithmetic)
  round_mode mode;
  convert_options options;
  bool relu = false;
  bool fast = false;
  bool step_down_nonfinite = false;
};

namespace detail {
TIEBREAK_HDC instr_desc mk(std::string_view n, std::string_view ins, instr_kind k, format_id from, format_id to,
                           round_mode m, bool sat = false, bool relu = false, bool fast = false,
                           nan_policy nan = nan_policy::canonical, bool step_down = false) noexcept {
  convert_options o{};
  o.saturate = sat;
  o.nan = nan;
  return instr_desc{n, ins, k, from, to, m, o, relu, fast, step_down};
}
}  // namespace detail

/// The instruction table. Hardware findings that differ from the core's defaults are expressed here, in
/// the model's options (docs/hardware.md says which, and why).
TIEBREAK_HDC instr_desc instr_desc_of(instr_op op) noexcept {
  using detail::mk;
  using k = instr_kind;
  using f = format_id;
  using m = round_mode;
  switch (op) {
    case instr_op::f32_to_bf16_rn: return mk("f32_to_bf16_rn", "__float2bfloat16_rn (cvt.rn.bf16.f32)", k::convert, f::f32, f::bf16, m::rne);
    case instr_op::f32_to_bf16_rz: return mk("f32_to_bf16_rz", "__float2bfloat16_rz (cvt.rz.bf16.f32)", k::convert, f::f32, f::bf16, m::rz);
    case instr_op::f32_to_bf16_rd: return mk("f32_to_bf16_rd", "__float2bfloat16_rd (cvt.rm.bf16.f32)", k::convert, f::f32, f::bf16, m::rd);
    case instr_op::f32_to_bf16_ru: return mk("f32_to_bf16_ru", "__float2bfloat16_ru (cvt.rp.bf16.f32)", k::convert, f::f32, f::bf16, m::ru);
    case instr_op::f32_to_bf16_rn_relu: return mk("f32_to_bf16_rn_relu", "cvt.rn.relu.bf16.f32", k::convert, f::f32, f::bf16, m::rne, false, true);
    case instr_op::f32_to_bf16_rn_satfinite: return mk("f32_to_bf16_rn_satfinite", "cvt.rn.satfinite.bf16.f32", k::convert, f::f32, f::bf16, m::rne, true);
    case instr_op::f32_to_bf16_rz_satfinite: return mk("f32_to_bf16_rz_satfinite", "cvt.rz.satfinite.bf16.f32", k::convert, f::f32, f::bf16, m::rz, true);
    case instr_op::fast_f32_to_bf16_rn: return mk("fast_f32_to_bf16_rn", "__float2bfloat16_rn vs fp/fast.hpp", k::convert, f::f32, f::bf16, m::rne, false, false, true);
    case instr_op::fast_f32_to_bf16_rz: return mk("fast_f32_to_bf16_rz", "__float2bfloat16_rz vs fp/fast.hpp", k::convert, f::f32, f::bf16, m::rz, false, false, true);
    case instr_op::fast_f32_to_bf16_rd: return mk("fast_f32_to_bf16_rd", "__float2bfloat16_rd vs fp/fast.hpp", k::convert, f::f32, f::bf16, m::rd, false, false, true);
    case instr_op::fast_f32_to_bf16_ru: return mk("fast_f32_to_bf16_ru", "__float2bfloat16_ru vs fp/fast.hpp", k::convert, f::f32, f::bf16, m::ru, false, false, true);
    case instr_op::f32_to_f16_rn: return mk("f32_to_f16_rn", "__float2half_rn (cvt.rn.f16.f32)", k::convert, f::f32, f::f16, m::rne);
    case instr_op::f32_to_f16_rz: return mk("f32_to_f16_rz", "__float2half_rz (cvt.rz.f16.f32)", k::convert, f::f32, f::f16, m::rz);
    case instr_op::f32_to_f16_rd: return mk("f32_to_f16_rd", "__float2half_rd (cvt.rm.f16.f32)", k::convert, f::f32, f::f16, m::rd);
    case instr_op::f32_to_f16_ru: return mk("f32_to_f16_ru", "__float2half_ru (cvt.rp.f16.f32)", k::convert, f::f32, f::f16, m::ru);
    case instr_op::f32_to_f16_rn_relu: return mk("f32_to_f16_rn_relu", "cvt.rn.relu.f16.f32", k::convert, f::f32, f::f16, m::rne, false, true);
    case instr_op::f32_to_f16_rn_satfinite: return mk("f32_to_f16_rn_satfinite", "cvt.rn.satfinite.f16.f32", k::convert, f::f32, f::f16, m::rne, true);
    // Finding: on sm_90, ptxas expands cvt.rna{.satfinite}.tf32.f32 into integer code (no F2FP):
    // NaN payloads are truncated, not canonicalised, and satfinite steps non-finite results down.
    case instr_op::f32_to_tf32_rna: return mk("f32_to_tf32_rna", "cvt.rna.tf32.f32", k::convert, f::f32, f::tf32, m::rna, false, false, false, nan_policy::truncate);
    case instr_op::f32_to_tf32_rna_satfinite: return mk("f32_to_tf32_rna_satfinite", "cvt.rna.satfinite.tf32.f32", k::convert, f::f32, f::tf32, m::rna, true, false, false, nan_policy::truncate, true);
    case instr_op::f32_to_tf32_rn: return mk("f32_to_tf32_rn", "cvt.rn.tf32.f32", k::convert, f::f32, f::tf32, m::rne);
    case instr_op::f32_to_tf32_rz: return mk("f32_to_tf32_rz", "cvt.rz.tf32.f32", k::convert, f::f32, f::tf32, m::rz);
    case instr_op::f32_to_tf32_rn_relu: return mk("f32_to_tf32_rn_relu", "cvt.rn.relu.tf32.f32", k::convert, f::f32, f::tf32, m::rne, false, true);
    case instr_op::f32_to_tf32_rz_relu: return mk("f32_to_tf32_rz_relu", "cvt.rz.relu.tf32.f32", k::convert, f::f32, f::tf32, m::rz, false, true);
    case instr_op::f32_to_e4m3_sat: return mk("f32_to_e4m3_sat", "__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) (cvt.rn.satfinite.e4m3x2.f32)", k::convert, f::f32, f::e4m3, m::rne, true);
    case instr_op::f32_to_e5m2_sat: return mk("f32_to_e5m2_sat", "__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2) (cvt.rn.satfinite.e5m2x2.f32)", k::convert, f::f32, f::e5m2, m::rne, true);
    // Finding: the NOSAT software path keeps the sign of an overflow's NaN (-500 -> 0xff).
    case instr_op::f32_to_e4m3_nosat: return mk("f32_to_e4m3_nosat", "__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3) (software in cuda_fp8.hpp)", k::convert, f::f32, f::e4m3, m::rne, false, false, false, nan_policy::canonical_signed_overflow);
    case instr_op::f32_to_e5m2_nosat: return mk("f32_to_e5m2_nosat", "__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2) (software in cuda_fp8.hpp)", k::convert, f::f32, f::e5m2, m::rne);
    case instr_op::f32x2_to_e4m3x2_sat: return mk("f32x2_to_e4m3x2_sat", "cvt.rn.satfinite.e4m3x2.f32 (both lanes)", k::convert_x2, f::f32, f::e4m3, m::rne, true);
    case instr_op::f32x2_to_e5m2x2_sat: return mk("f32x2_to_e5m2x2_sat", "cvt.rn.satfinite.e5m2x2.f32 (both lanes)", k::convert_x2, f::f32, f::e5m2, m::rne, true);
    case instr_op::f32x2_to_e4m3x2_sat_relu: return mk("f32x2_to_e4m3x2_sat_relu", "cvt.rn.satfinite.relu.e4m3x2.f32", k::convert_x2, f::f32, f::e4m3, m::rne, true, true);
    case instr_op::f32x2_to_e5m2x2_sat_relu: return mk("f32x2_to_e5m2x2_sat_relu", "cvt.rn.satfinite.relu.e5m2x2.f32", k::convert_x2, f::f32, f::e5m2, m::rne, true, true);
    case instr_op::f16_to_e4m3_sat: return mk("f16_to_e4m3_sat", "__nv_cvt_halfraw_to_fp8(h, __NV_SATFINITE, __NV_E4M3) (cvt.rn.satfinite.e4m3x2.f16x2)", k::convert_x2, f::f16, f::e4m3, m::rne, true);
    case instr_op::f16_to_e5m2_sat: return mk("f16_to_e5m2_sat", "__nv_cvt_halfraw_to_fp8(h, __NV_SATFINITE, __NV_E5M2) (cvt.rn.satfinite.e5m2x2.f16x2)", k::convert_x2, f::f16, f::e5m2, m::rne, true);
    case instr_op::f16x2_to_e4m3x2_sat_relu: return mk("f16x2_to_e4m3x2_sat_relu", "cvt.rn.satfinite.relu.e4m3x2.f16x2", k::convert_x2, f::f16, f::e4m3, m::rne, true, true);
    case instr_op::f16x2_to_e5m2x2_sat_relu: return mk("f16x2_to_e5m2x2_sat_relu", "cvt.rn.satfinite.relu.e5m2x2.f16x2", k::convert_x2, f::f16, f::e5m2, m::rne, true, true);
    case instr_op::bf16_add: return mk("bf16_add", "__hadd(__nv_bfloat16) (add.bf16)", k::add, f::bf16, f::bf16, m::rne);
    case instr_op::bf16_add_rn: return mk("bf16_add_rn", "__hadd_rn(__nv_bfloat16) (add.rn.bf16)", k::add, f::bf16, f::bf16, m::rne);
    case instr_op::bf16_mul: return mk("bf16_mul", "__hmul(__nv_bfloat16) (mul.bf16)", k::mul, f::bf16, f::bf16, m::rne);
    case instr_op::bf16_mul_rn: return mk("bf16_mul_rn", "__hmul_rn(__nv_bfloat16) (mul.rn.bf16)", k::mul, f::bf16, f::bf16, m::rne);
    case instr_op::f16_add: return mk("f16_add", "__hadd(__half) (add.f16)", k::add, f::f16, f::f16, m::rne);
    case instr_op::f16_add_rn: return mk("f16_add_rn", "__hadd_rn(__half) (add.rn.f16)", k::add, f::f16, f::f16, m::rne);
    case instr_op::f16_mul: return mk("f16_mul", "__hmul(__half) (mul.f16)", k::mul, f::f16, f::f16, m::rne);
    case instr_op::f16_mul_rn: return mk("f16_mul_rn", "__hmul_rn(__half) (mul.rn.f16)", k::mul, f::f16, f::f16, m::rne);
    case instr_op::bf16_fma: return mk("bf16_fma", "__hfma(__nv_bfloat16) (fma.rn.bf16)", k::fma, f::bf16, f::bf16, m::rne);
    case instr_op::f16_fma:
    default: return mk("f16_fma", "__hfma(__half) (fma.rn.f16)", k::fma, f::f16, f::f16, m::rne);
  }
}

/// The .relu clamp: a negative non-NaN result becomes +0 (PTX: "clamps the result to 0 if
/// negative"; NaN stays the canonical NaN).
TIEBREAK_HDC std::uint64_t relu_bits(const format_desc& f, std::uint64_t bits) noexcept {
  return (!f.is_nan(bits) && f.sign_of(bits)) ? std::uint64_t{0} : bits;
}

/// The core's answer for one narrowing lane.
TIEBREAK_HDC std::uint64_t model_convert_lane(const instr_desc& d, std::uint64_t x) noexcept {
  const format_desc to = desc_of(d.to);
  std::uint64_t bits;
  if (d.fast) {
    bits = f32_bits_to_bf16(static_cast<std::uint32_t>(x), rounding{d.mode, 0});
  } else {
    bits = convert(to, desc_of(d.from), x, rounding{d.mode, 0}, d.options).bits;
  }
  if (d.step_down_nonfinite && (to.is_nan(bits) || to.is_inf(bits))) bits -= std::uint64_t{1} << to.pad;
  return d.relu ? relu_bits(to, bits) : bits;
}

/// Rotation that feeds the high lane of an f32 pair (a bijection of the 2^32 inputs).
TIEBREAK_HDC std::uint32_t rotl16(std::uint32_t x) noexcept { return (x << 16) | (x >> 16); }

/// The core's answer for an instruction's input (see instr_kind for the input layout). The result is the
/// instruction's full output register (both lanes for convert_x2).
TIEBREAK_HDC std::uint32_t instr_model(const instr_desc& d, std::uint64_t in) noexcept {
  const format_desc f = desc_of(d.from);
  const rounding r{d.mode, 0};
  switch (d.kind) {
    case instr_kind::convert: return static_cast<std::uint32_t>(model_convert_lane(d, in));
    case instr_kind::convert_x2: {
      const auto x = static_cast<std::uint32_t>(in);
      const int w = desc_of(d.to).storage_bits();
      const std::uint64_t lo = f.storage_bits() == 32 ? x : (x & 0xffffu);
      const std::uint64_t hi = f.storage_bits() == 32 ? rotl16(x) : (x >> 16);
      return static_cast<std::uint32_t>(model_convert_lane(d, lo) | (model_convert_lane(d, hi) << w));
    }
    case instr_kind::add:
      return static_cast<std::uint32_t>(emu::add(f, (in >> 16) & 0xffff, in & 0xffff, r, d.options).bits());
    case instr_kind::mul:
      return static_cast<std::uint32_t>(emu::mul(f, (in >> 16) & 0xffff, in & 0xffff, r, d.options).bits());
    case instr_kind::fma:
    default:
      return static_cast<std::uint32_t>(
          emu::fma(f, (in >> 32) & 0xffff, (in >> 16) & 0xffff, in & 0xffff, r, d.options).bits());
  }
}

// --- FMA inputs: three 16-bit operands do not fit an exhaustive sweep (2^48) ----------------------

/// How the FMA sample draws its triples.
enum class fma_sample : std::uint8_t {
  uniform,      ///< a, b, c uniform over all 2^16 encodings each (specials included)
  adversarial,  ///< product exponent aimed at the normal range, the subnormal boundary or overflow;
                ///< c within a few binades of the product, either sign (cancellation); short
                ///< significands half of the time (exact ties and near-ties are then frequent);
                ///< 1/16 of the operands from a table of specials (zeros, Inf, NaN, min/max)
  fixed_b,      ///< b fixed (the sample's parameter), (a, c) over all 2^32 pairs: exhaustive
};

namespace detail {
/// A special encoding of a 16-bit IEEE format, chosen by r.
TIEBREAK_HDC std::uint64_t special_operand(const format_desc& f, std::uint64_t r) noexcept {
  const bool s = (r & 1) != 0;
  const std::uint64_t M = f.exp_field_max();
  switch ((r >> 1) % 10) {
    case 0: return f.pack(s, 0, 0);                                  // +-0
    case 1: return f.inf(s);                                          // +-Inf
    case 2: return f.pack(s, M, f.frac_mask());                       // canonical NaN
    case 3: return f.pack(s, M, 1 + ((r >> 8) % f.frac_mask()));      // NaN with payload (maybe signalling)
    case 4: return f.pack(s, 0, 1);                                   // min subnormal
    case 5: return f.pack(s, 0, f.frac_mask());                       // max subnormal
    case 6: return f.pack(s, 1, 0);                                   // min normal
    case 7: return f.max_finite(s);                                   // max finite
    case 8: return f.pack(s, static_cast<std::uint64_t>(f.bias), 0);  // +-1
    default: return f.pack(s, static_cast<std::uint64_t>(f.bias), 1);  // 1 + ulp
  }
}
/// A finite operand with biased exponent field `e` (clamped to [0, M-1]) and a random or short
/// significand.
TIEBREAK_HDC std::uint64_t finite_operand(const format_desc& f, long e, std::uint64_t r) noexcept {
  const long M = static_cast<long>(f.exp_field_max());
  if (e < 0) e = 0;
  if (e > M - 1) e = M - 1;
  std::uint64_t frac = (r >> 2) & f.frac_mask();
  if ((r >> 1) & 1) frac &= ~(f.frac_mask() >> 3);  // short: only the top 3 fraction bits
  return f.pack((r & 1) != 0, static_cast<std::uint64_t>(e), frac);
}
}  // namespace detail

/// The FMA operands of sample `index` (a << 32 | b << 16 | c), for a 16-bit IEEE format `f`.
/// `param`: the seed (uniform, adversarial) or the fixed b encoding (fixed_b, index < 2^32).
TIEBREAK_HDC std::uint64_t fma_input(const format_desc& f, fma_sample kind, std::uint64_t index,
                                     std::uint64_t param) noexcept {
  if (kind == fma_sample::fixed_b) {
    const std::uint64_t a = (index >> 16) & 0xffff, c = index & 0xffff;
    return (a << 32) | ((param & 0xffff) << 16) | c;
  }
  const std::uint64_t h = splitmix64(param ^ splitmix64(index));
  if (kind == fma_sample::uniform) return h & 0xffffffffffffull;
  // adversarial
  const std::uint64_t h2 = splitmix64(h), h3 = splitmix64(h2);
  const long M = static_cast<long>(f.exp_field_max()), B = f.bias, p = f.man_bits;
  long pe;  // biased exponent field the product aims at
  switch (h & 3) {
    case 0: pe = -(p + 2) + static_cast<long>((h >> 2) % static_cast<std::uint64_t>(p + 6)); break;  // subnormal edge
    case 1: pe = M - 3 + static_cast<long>((h >> 2) % 4); break;                                     // overflow edge
    default: pe = 1 + static_cast<long>((h >> 2) % static_cast<std::uint64_t>(M - 1)); break;       // normal range
  }
  const long ea = 1 + static_cast<long>((h >> 12) % static_cast<std::uint64_t>(M - 1));
  const long eb = pe + B - ea;
  const long ec = pe - (p + 3) + static_cast<long>((h >> 24) % static_cast<std::uint64_t>(p + 6));
  std::uint64_t a = detail::finite_operand(f, ea, h2);
  std::uint64_t b = detail::finite_operand(f, eb, h2 >> 20);
  std::uint64_t c = detail::finite_operand(f, ec, h2 >> 40);
  if (((h3 >> 0) & 15) == 0) a = detail::special_operand(f, h3 >> 8);
  if (((h3 >> 4) & 15) == 0) b = detail::special_operand(f, h3 >> 24);
  if (((h3 >> 40) & 15) == 0) c = detail::special_operand(f, h3 >> 44);
  return (a << 32) | (b << 16) | c;
}

// --- Classes of inputs, to say where mismatches are ------------------------------------------------

/// 0 zero, 1 subnormal, 2 normal, 3 Inf, 4 NaN.
TIEBREAK_HDC int value_class_of(const format_desc& f, std::uint64_t bits) noexcept {
  if (f.is_nan(bits)) return 4;
  if (f.is_inf(bits)) return 3;
  if (f.exp_field_of(bits) != 0) return 2;
  return f.frac_of(bits) != 0 ? 1 : 0;
}

inline constexpr int instr_bin_count = 125;

/// Bin of an input: unary: 5 * sign + class (of lane lo); binary: 5 * class(a) + class(b);
/// fma: 25 * class(a) + 5 * class(b) + class(c).
TIEBREAK_HDC int instr_bin(const instr_desc& d, std::uint64_t in) noexcept {
  const format_desc f = desc_of(d.from);
  switch (d.kind) {
    case instr_kind::convert:
    case instr_kind::convert_x2: {
      const std::uint64_t lo = f.storage_bits() == 32 ? (in & 0xffffffffu) : (in & 0xffffu);
      return 5 * (f.sign_of(lo) ? 1 : 0) + value_class_of(f, lo);
    }
    case instr_kind::add:
    case instr_kind::mul: return 5 * value_class_of(f, (in >> 16) & 0xffff) + value_class_of(f, in & 0xffff);
    case instr_kind::fma:
    default:
      return 25 * value_class_of(f, (in >> 32) & 0xffff) + 5 * value_class_of(f, (in >> 16) & 0xffff) +
             value_class_of(f, in & 0xffff);
  }
}

}  // namespace tiebreak::gpu
