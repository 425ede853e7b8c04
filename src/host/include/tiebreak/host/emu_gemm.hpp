// SPDX-License-Identifier: Apache-2.0
/// @file Emulated dot product and GEMM built on the MMA instruction model (host library).
///
/// The tile order is the one of the CUDA GEMM kernel in cuda/mma (tiebreak::gpu::mma_gemm): every
/// output element starts from C and takes one instruction per chunk of m.k along K, the chunks in
/// increasing order, each instruction's result being the next one's C. The instruction's output
/// element is emu::mma_dot, so the emulation is bit-identical to that kernel by construction
/// wherever the model is (tests/mma/gpu/mma_gpu_test.cpp checks it on the device).
///
/// Speed (docs/tensor-cores.md, "Emulated GEMM speed"): models of the sm_90 shape (one fused step,
/// nominal alignment with rz truncation, positive zeros, no FTZ) take a fast path, written once for
/// L lanes (L output columns side by side, GCC vector extensions) and instantiated with L = 8 for
/// emu::gemm (one ymm register under AVX2) and L = 1 for emu::dot and gemm_kernel::fast_scalar.
/// It has three parts, each pinned to the core lane by lane in tests/mma/mma_gemm_test.cpp:
///
///   gemm_decode    an encoding -> (signed significand, lsb exponent)      = mma_decode (unpack)
///   gemm_products  the reference exponent, and the exact products truncated onto the grid and
///                  summed in 32-bit lanes                                  (whole GEMMs vs mma_dot)
///   gemm_finish    C truncated onto the grid (= round_pack rz onto the grid), added, and
///                  gemm_round: the normalisation into acc_fmt and the map into c_fmt
///                                                       = round_pack under step_round, then convert
///
/// Any chunk with a NaN or Inf among its operands, or in C, is computed by mma_dot itself (the
/// general model); a model the fast path does not cover runs mma_dot everywhere. The same tests
/// prove every kernel bit-identical to mma_dot element by element. Host only (std::vector, GCC
/// vectors); part of tiebreak::host, which compiles gemm on 32-bit encodings (src/host/lib/emu_gemm.cpp).
#pragma once

#if !defined(__GNUC__)
#error "tiebreak/host/emu_gemm.hpp needs GCC or Clang (vector extensions)"
#endif

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tiebreak/emu/mma.hpp"

namespace tiebreak::emu {

/// Which implementation emu::gemm and emu::dot use; `automatic` picks the fastest one that covers
/// the model on this CPU. The others exist so that the tests pin each one against mma_dot.
enum class gemm_kernel : std::uint8_t {
  automatic,
  general,      ///< mma_dot_with on operands decoded once (every model)
  fast_scalar,  ///< the fast path, 1 lane (sm_90-shaped models; others: general)
  fast_vector,  ///< the fast path, 8 lanes in the baseline instruction set
  fast_avx2,    ///< the fast path, 8 lanes compiled for AVX2 (x86 CPUs with AVX2; elsewhere: fast_vector)
};

namespace detail {

// ---------------------------------------------------------------------------------------------
// The fast path. Arithmetic of one instruction of a covered model (gemm_fast_plan_of), on
// finite operands (none Inf or NaN, C included):
//
//   r_t = ea_t + eb_t                      lsb exponent of product t (0 when a_t b_t = 0: skipped)
//   R   = max(max_t r_t + man_sum, ec + man_c)   the nominal reference exponent (non-zero addends)
//   g   = R - align_bits                   the grid; with rz every addend is truncated onto it in
//                                          sign-magnitude: floor(|p_t| 2^(r_t - g)), sign of p_t
//   sum = sum of the truncated addends     exact (integer), then one rounding into acc_fmt
//
// which is mma_step_fast / mma_step for group == k. With S = align_bits - man_sum >= 0 and
// Rm = R - man_sum: floor(|p_t| 2^(r_t - g)) = (|a_t 2^S| |b_t|) >> (Rm - r_t), and Rm - r_t >= 0
// for every product, so one right shift of the exact integer product (pre-shifted by S through A's
// table) does the truncation. |a_t 2^S b_t| < 2^31 / k (checked per model): the k products add in
// 32-bit lanes without overflow, and with C on the grid (< 2^(align + 1) <= 2^31) the total's
// magnitude stays below 2^32.
// ---------------------------------------------------------------------------------------------

/// Exponent given to zero (and special) operands: far below every real one, so it never wins the
/// maximum and its shift flushes the (zero) product.
inline constexpr std::int32_t gemm_zero_exp = -(1 << 24);

/// L lanes of 32-bit integers (L = 1: a plain register; L = 8: one ymm register under AVX2, pairs
/// of xmm otherwise). Comparisons give -1 (true) or 0 per lane; `?:` selects per lane. The
/// functions below take and return them by reference: no 32-byte vector crosses a function
/// boundary, so the code needs no AVX calling convention (-Wpsabi) wherever it is compiled.
template <int L>
struct gemm_vec;
template <>
struct gemm_vec<1> {
  using i32 = std::int32_t __attribute__((vector_size(4)));
  using u32 = std::uint32_t __attribute__((vector_size(4)));
  using f32 = float __attribute__((vector_size(4)));
};
template <>
struct gemm_vec<8> {
  using i32 = std::int32_t __attribute__((vector_size(32)));
  using u32 = std::uint32_t __attribute__((vector_size(32)));
  using f32 = float __attribute__((vector_size(32)));
};

/// Decoding constants of one operand format (ieee, fn_nan or finite; any pad).
struct gemm_fmt {
  int man = 0, pad = 0;
  int sign_up = 0;                ///< left shift that brings the sign bit to bit 31
  std::uint32_t mag_mask = 0;     ///< exponent and fraction fields (after the pad is shifted out)
  std::uint32_t fmask = 0;
  std::int32_t special_above = 0; ///< magnitudes above it are Inf or NaN (finite formats: none is)
  std::int32_t normal_off = 0;    ///< lsb exponent = exp field + normal_off (normal numbers)
  std::int32_t sub_exp = 0;       ///< lsb exponent of subnormals
  bool daz = false;
};

constexpr gemm_fmt gemm_fmt_of(const format_desc& f, bool daz) noexcept {
  gemm_fmt r;
  r.man = f.man_bits;
  r.pad = f.pad;
  r.sign_up = 31 - (f.exp_bits + f.man_bits + f.pad);
  r.mag_mask = static_cast<std::uint32_t>((f.exp_field_max() << f.man_bits) | f.frac_mask());
  r.fmask = static_cast<std::uint32_t>(f.frac_mask());
  // ieee: Inf and the NaNs are every magnitude from Inf's encoding up; fn_nan: the NaN is the
  // all-ones magnitude alone; finite: no magnitude exceeds mag_mask (< 2^31).
  r.special_above = static_cast<std::int32_t>(f.special == special_style::ieee     ? (f.exp_field_max() << f.man_bits) - 1
                                              : f.special == special_style::fn_nan ? r.mag_mask - 1
                                                                                   : r.mag_mask);
  r.normal_off = -f.bias - f.man_bits;
  r.sub_exp = f.emin() - f.man_bits;
  r.daz = daz;
  return r;
}

/// Decoded operands of L lanes: the value is sig * 2^exp; zeros have sig 0 and exp gemm_zero_exp;
/// `special` is -1 for Inf and NaN (sig 0, exp gemm_zero_exp: the general path recomputes them).
template <int L>
struct gemm_dec {
  typename gemm_vec<L>::i32 sig, exp, special;
};

/// The one decoder of the fast path (A's and B's tables, C, emu::dot): the same value as
/// mma_decode (tests: MmaGemmFast.DecodeEqualsMmaDecode, every encoding of the 8- and 16-bit
/// formats). Precondition: the format's storage fits 32 bits.
template <int L>
TIEBREAK_FORCEINLINE void gemm_decode(const gemm_fmt& f, const typename gemm_vec<L>::u32& bits, gemm_dec<L>& d) noexcept {
  using V = typename gemm_vec<L>::i32;
  const V mag = (V)((bits >> f.pad) & f.mag_mask);  // < 2^31
  d.special = mag > f.special_above;
  const V ef = mag >> f.man;
  const V frac = mag & static_cast<std::int32_t>(f.fmask);
  const V sub = ef == 0;
  V sig = sub ? (f.daz ? V{} : frac) : frac | (std::int32_t{1} << f.man);
  sig = d.special ? V{} : sig;
  const V zero = sig == 0;
  d.exp = zero ? V{} + gemm_zero_exp : (sub ? V{} + f.sub_exp : ef + f.normal_off);
  const V neg = (V)(bits << f.sign_up) < 0;
  d.sig = neg ? -sig : sig;
}

/// One decoded operand (gemm_decode on one lane).
struct gemm_val {
  std::int32_t sig;
  std::int32_t exp;
  bool special;
};

TIEBREAK_FORCEINLINE gemm_val gemm_decode_one(const gemm_fmt& f, std::uint64_t bits) noexcept {
  const typename gemm_vec<1>::u32 b = {static_cast<std::uint32_t>(bits)};
  gemm_dec<1> d;
  gemm_decode<1>(f, b, d);
  return {d.sig[0], d.exp[0], d.special[0] != 0};
}

/// What the fast path needs of a covered model.
struct gemm_fast_plan {
  gemm_fmt a, b, c;
  int k = 0;
  int shift = 0;       ///< S = align_bits - man_sum, folded into A's table
  int man_sum = 0;
  int man_c = 0;
  int align = 0;
  // acc_fmt: exponent field width, bias and fraction bits; its encodings map to c_fmt's by
  // (sign << c_sign_shift) | (magnitude << out_shift) (exact: acc_fmt == c_fmt, or acc_fmt is
  // mma_acc_format(P) and c_fmt f32, whose every value f32 holds).
  int acc_man = 0, acc_emin = 0;
  std::uint32_t acc_inf = 0;  ///< magnitude encoding of Inf in acc_fmt
  int out_shift = 0, c_sign_shift = 0;
  bool rne = false;           ///< step_round rne (else rz)
  bool overflow_to_inf = false;
};

/// True when the fast path computes exactly what mma_dot computes for `m` (and fills `p`): one
/// fused step (group == k), nominal alignment, rz alignment of at least man_sum bits, step
/// rounding rz or rne, no FTZ, positive zeros, and products small enough for 32-bit lanes. Every
/// row of mma_models qualifies (static_assert below).
constexpr bool gemm_fast_plan_of(const mma_model& m, gemm_fast_plan& p) noexcept {
  if (!mma_model_valid(m) || m.group != m.k || m.exp_ref != mma_exp_ref::nominal || m.align_round != round_mode::rz ||
      m.align_bits >= mma_align_exact || (m.step_round != round_mode::rz && m.step_round != round_mode::rne) ||
      m.ftz || !m.positive_zero)
    return false;
  const int man_sum = m.a_fmt.man_bits + m.b_fmt.man_bits;
  const int shift = m.align_bits - man_sum;
  if (shift < 0 || m.align_bits > 30) return false;  // C on the grid: < 2^(align + 1) <= 2^31
  // Largest truncated product, |a| |b| 2^S, and k of them in a 32-bit lane.
  const std::uint64_t amax = (std::uint64_t{2} << m.a_fmt.man_bits) - 1, bmax = (std::uint64_t{2} << m.b_fmt.man_bits) - 1;
  if (shift > 31 || ((amax * bmax) << shift) * static_cast<std::uint64_t>(m.k) >= (std::uint64_t{1} << 31)) return false;
  if ((amax << shift) >= (std::uint64_t{1} << 31)) return false;
  const bool same = same_format(m.acc_fmt, m.c_fmt);
  const bool f32c = same_format(m.c_fmt, formats::f32) && m.acc_fmt.exp_bits == 8 && m.acc_fmt.bias == 127 &&
                    m.acc_fmt.pad == 0 && m.acc_fmt.special == special_style::ieee;
  if (!same && !f32c) return false;
  if (m.a_fmt.storage_bits() > 32 || m.b_fmt.storage_bits() > 32) return false;  // gemm_decode's lanes
  p.a = gemm_fmt_of(m.a_fmt, m.daz);
  p.b = gemm_fmt_of(m.b_fmt, m.daz);
  p.c = gemm_fmt_of(m.c_fmt, m.daz);
  p.k = m.k;
  p.shift = shift;
  p.man_sum = man_sum;
  p.man_c = m.c_fmt.man_bits;
  p.align = m.align_bits;
  p.acc_man = m.acc_fmt.man_bits;
  p.acc_emin = m.acc_fmt.emin();
  p.acc_inf = static_cast<std::uint32_t>(m.acc_fmt.exp_field_max() << m.acc_fmt.man_bits);
  p.out_shift = m.c_fmt.man_bits - m.acc_fmt.man_bits;
  p.c_sign_shift = m.c_fmt.exp_bits + m.c_fmt.man_bits;
  p.rne = m.step_round == round_mode::rne;
  p.overflow_to_inf = m.overflow_to_inf;
  return true;
}

constexpr bool gemm_fast_covers(const mma_model& m) noexcept {
  gemm_fast_plan p;
  return gemm_fast_plan_of(m, p);
}
static_assert(gemm_fast_covers(mma_models[0].model) && gemm_fast_covers(mma_models[1].model) &&
              gemm_fast_covers(mma_models[2].model) && gemm_fast_covers(mma_models[3].model) &&
              gemm_fast_covers(mma_models[4].model) && gemm_fast_covers(mma_models[5].model) &&
              gemm_fast_covers(mma_models[6].model) && gemm_fast_covers(mma_models[7].model),
              "every sm_90 instruction takes the fast path");

/// A's table entry: the decoded operand with its significand pre-shifted by S (exact: checked by
/// gemm_fast_plan_of).
TIEBREAK_FORCEINLINE gemm_val gemm_decode_a(const gemm_fast_plan& p, std::uint64_t bits) noexcept {
  gemm_val v = gemm_decode_one(p.a, bits);
  v.sig *= std::int32_t{1} << p.shift;
  return v;
}

/// The msb of each lane (any 32-bit value; 0 gives a negative number): two exact int -> float
/// conversions of the halves, whose exponent fields are the msb.
template <int L>
TIEBREAK_FORCEINLINE void gemm_msb(const typename gemm_vec<L>::u32& x, typename gemm_vec<L>::i32& msb) noexcept {
  using V = typename gemm_vec<L>::i32;
  using F = typename gemm_vec<L>::f32;
  const F fh = __builtin_convertvector((V)(x >> 16), F);
  const F fl = __builtin_convertvector((V)(x & 0xffffu), F);
  const V eh = (((V)fh >> 23) & 0xff) - 127 + 16;
  const V el = (((V)fl >> 23) & 0xff) - 127;
  msb = (x >> 16) != 0u ? eh : el;
}

/// The normalisation of one instruction, lane by lane: (-1)^neg * mag * 2^g rounded into acc_fmt
/// by round_pack under step_round (rz or rne, no FTZ), then the model's overflow_to_inf and
/// positive_zero, then the exact map into c_fmt. `neg` is -1 or 0 per lane; mag == 0 gives +0.
/// Preconditions: |g| < 2^30. The cases, with e = msb(mag) + g and P = acc_man:
///
///   | case      | condition    | bits dropped (d)  | encoding                                      |
///   | normal    | e >= emin    | msb - P           | ((e - emin) << P) + kept; a round-up to       |
///   |           |              |                   | 2^(P+1) carries into the exponent field       |
///   | subnormal | e < emin     | (emin - P) - g    | kept; a round-up to 2^P is the min normal     |
///   | overflow  | encoding >= Inf's                | rne -> Inf; rz -> max finite, or Inf under    |
///   |           |                                  | overflow_to_inf                               |
///
/// kept = mag >> d (d <= 0: mag << -d, exact); rne adds 1 when the guard bit (bit d - 1) is set
/// and the bits below it or kept's lsb are (ties to even); d > 32 leaves nothing (mag < 2^32 is
/// below half an ulp), so both modes give zero. Tests: MmaGemmFast.RoundTable (hand-checked edge
/// cases) and MmaGemmFast.RoundEqualsRoundPack (sweeps and 2^24 random lanes, each lane's bits
/// against round_pack, for L = 1 and L = 8).
template <int L>
TIEBREAK_FORCEINLINE void gemm_round(const gemm_fast_plan& p, const typename gemm_vec<L>::i32& neg,
                                     const typename gemm_vec<L>::u32& mag, const typename gemm_vec<L>::i32& g,
                                     typename gemm_vec<L>::u32& out) noexcept {
  using V = typename gemm_vec<L>::i32;
  using U = typename gemm_vec<L>::u32;
  V msb;
  gemm_msb<L>(mag, msb);
  const V e = msb + g;
  const V normal = e >= p.acc_emin;
  const V d = normal ? msb - p.acc_man : (p.acc_emin - p.acc_man) - g;
  // Shift counts clamped into [0, 31]: the lanes outside are selected away below.
  const V dg = d - 1;                                                // the guard bit's position
  const U dgc = (U)(dg < 0 ? V{} : (dg > 31 ? V{} + 31 : dg));
  const V nd = -d;
  const U up = mag << (U)(nd < 0 ? V{} : (nd > 31 ? V{} + 31 : nd));  // d <= 0: -d <= P, exact
  const U t = mag >> dgc;  // kept bits and the guard bit (d > 32: mag >> 31, and t >> 1 is 0)
  U kept = d <= 0 ? up : t >> 1u;
  if (p.rne) {
    const V in = (d > 0) & (d <= 32);  // the guard bit exists and is bit d - 1 of mag
    const V guard = (t & 1u) != 0u;
    const V sticky = (mag & ((((U){} + 1u) << dgc) - 1u)) != 0u;
    const V odd = (kept & 1u) != 0u;
    kept += (U)(in & guard & (sticky | odd)) & 1u;
  }
  const auto efmax = static_cast<std::int32_t>(p.acc_inf >> p.acc_man);
  const V ef0 = e - p.acc_emin;
  const U ef = (U)(ef0 > efmax ? V{} + efmax : ef0);  // beyond: overflow either way
  U bits = normal ? (ef << p.acc_man) + kept : kept;
  const std::uint32_t ovf_bits = (p.rne || p.overflow_to_inf) ? p.acc_inf : p.acc_inf - 1;
  bits = bits >= p.acc_inf ? U{} + ovf_bits : bits;
  const U res = (bits << p.out_shift) | ((U)neg & (std::uint32_t{1} << p.c_sign_shift));
  out = ((bits == 0u) | (mag == 0u)) ? U{} : res;  // positive_zero
}

/// C's reference exponent minus man_sum, as gemm_products compares it with the products'.
template <int L>
TIEBREAK_FORCEINLINE void gemm_c_ref(const gemm_fast_plan& p, const gemm_dec<L>& c, typename gemm_vec<L>::i32& ref) noexcept {
  using V = typename gemm_vec<L>::i32;
  ref = c.sig == 0 ? V{} + gemm_zero_exp : c.exp + (p.man_c - p.man_sum);
}

/// The two passes of one instruction for L lanes: rm = max(C's reference, max_t r_t) and acc =
/// sum_t truncated products. `as`, `ae`: the chunk of A's row (one value for every lane); `bs`,
/// `be`: the chunk of B's block, [t][lane].
template <int L, int KC>
TIEBREAK_FORCEINLINE void gemm_products(int kc, const std::int32_t* as, const std::int32_t* ae, const std::int32_t* bs,
                                        const std::int32_t* be, const typename gemm_vec<L>::i32& cref,
                                        typename gemm_vec<L>::i32& acc, typename gemm_vec<L>::i32& rm) noexcept {
  using V = typename gemm_vec<L>::i32;
  using U = typename gemm_vec<L>::u32;
  const int k = KC > 0 ? KC : kc;
  V mx = cref;
  for (int t = 0; t < k; ++t) {
    V eb;
    __builtin_memcpy(&eb, be + L * t, sizeof eb);
    const V e = eb + ae[t];
    mx = e > mx ? e : mx;
  }
  V sum = {};
  for (int t = 0; t < k; ++t) {
    V eb, sb;
    __builtin_memcpy(&eb, be + L * t, sizeof eb);
    __builtin_memcpy(&sb, bs + L * t, sizeof sb);
    const V d0 = mx - (eb + ae[t]);  // >= 0: mx is the maximum
    const V d = d0 < 31 ? d0 : 31;   // the pre-shifted product is < 2^31: >> 31 flushes it
    const V prod = sb * as[t];       // exact: |prod| < 2^31 / k
    const V mag = prod < 0 ? -prod : prod;
    const V tr = (V)((U)mag >> (U)d);
    sum += prod < 0 ? -tr : tr;
  }
  acc = sum;
  rm = mx;
}

/// One instruction's result from gemm_products' `acc` (units of 2^g) and `rm` = R - man_sum, and
/// the decoded C: C truncated onto the grid (rz, as mma_align_add), added, then gemm_round.
/// Precondition: C's reference is at most R (gemm_products took it into rm).
template <int L>
TIEBREAK_FORCEINLINE void gemm_finish(const gemm_fast_plan& p, const typename gemm_vec<L>::i32& acc,
                                      const typename gemm_vec<L>::i32& rm, const gemm_dec<L>& c,
                                      typename gemm_vec<L>::u32& out) noexcept {
  using V = typename gemm_vec<L>::i32;
  using U = typename gemm_vec<L>::u32;
  const V g = rm + (p.man_sum - p.align);
  // C truncated onto the grid: |C| 2^(ec - g) < 2^(align + 1) <= 2^31 (C's reference is at most R).
  const V sh = c.exp - g;
  const U cm = (U)(c.sig < 0 ? -c.sig : c.sig);
  const U cup = cm << (U)(sh > 0 ? sh : 0);
  const V nsh = -sh;
  const U cdn = cm >> (U)(nsh > 31 ? 31 : nsh);  // |C| < 2^24: >> 31 flushes it
  const U ccu = sh >= 0 ? cup : cdn;
  const U cc = c.sig < 0 ? -ccu : ccu;
  // total = acc + cc: |total| < 2^31 + 2^31, so its magnitude fits 32 bits; its sign is the
  // wrapped sum's unless the signed addition overflowed, then acc's.
  const U su = (U)acc + cc;
  const V ovf = (((V)su ^ acc) & ((V)su ^ (V)cc)) < 0;
  const V neg = ovf ? acc < 0 : (V)su < 0;
  const U mag = neg ? -su : su;
  gemm_round<L>(p, neg, mag, g, out);
}

/// Operand tables of the fast GEMM: A row-major with significands pre-shifted by S, B in blocks of
/// L columns ([block][k][lane]), and where the specials are.
struct gemm_tables {
  int M = 0, N = 0, K = 0, nch = 0, nb = 0;
  std::vector<std::int32_t> as, ae, bs, be;
  std::vector<std::uint8_t> a_special;  ///< [i][chunk]: some A operand of the chunk is Inf or NaN
  std::vector<std::uint8_t> b_special;  ///< [block][chunk]: lane mask of columns with an Inf or NaN
};

template <int L, class TA, class TB>
void gemm_make_tables(const gemm_fast_plan& p, int M, int N, int K, const TA* A, const TB* B, gemm_tables& t) {
  t.M = M;
  t.N = N;
  t.K = K;
  t.nch = K / p.k;
  t.nb = (N + L - 1) / L;
  const std::size_t mk = static_cast<std::size_t>(M) * K, bk = static_cast<std::size_t>(t.nb) * K * L;
  t.as.assign(mk, 0);
  t.ae.assign(mk, gemm_zero_exp);
  t.bs.assign(bk, 0);
  t.be.assign(bk, gemm_zero_exp);
  t.a_special.assign(static_cast<std::size_t>(M) * t.nch, 0);
  t.b_special.assign(static_cast<std::size_t>(t.nb) * t.nch, 0);
  for (std::size_t i = 0; i < mk; ++i) {
    const gemm_val v = gemm_decode_a(p, static_cast<std::uint64_t>(A[i]));
    t.as[i] = v.sig;
    t.ae[i] = v.exp;
    if (v.special) t.a_special[(i / K) * t.nch + (i % K) / p.k] = 1;
  }
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) {
      const gemm_val v = gemm_decode_one(p.b, static_cast<std::uint64_t>(B[static_cast<std::size_t>(k) * N + j]));
      const std::size_t at = (static_cast<std::size_t>(j / L) * K + k) * L + j % L;
      t.bs[at] = v.sig;
      t.be[at] = v.exp;
      if (v.special) t.b_special[static_cast<std::size_t>(j / L) * t.nch + k / p.k] |= std::uint8_t(1u << (j % L));
    }
}

template <int L>
TIEBREAK_FORCEINLINE unsigned gemm_mask(const typename gemm_vec<L>::i32& x) noexcept {
  std::int32_t v[L];
  __builtin_memcpy(v, &x, sizeof v);
  unsigned r = 0;
  for (int l = 0; l < L; ++l) r |= v[l] != 0 ? 1u << l : 0u;
  return r;
}

/// The fast GEMM over every row and block of L columns. Lanes with an Inf or NaN among the chunk's
/// operands or in C take mma_dot on the raw encodings.
template <int L, int KC, class TA, class TB, class TC>
TIEBREAK_FORCEINLINE void gemm_fast_run(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t,
                                        const TA* A, const TB* B, const TC* C, TC* D) noexcept {
  using V = typename gemm_vec<L>::i32;
  using U = typename gemm_vec<L>::u32;
  const int M = t.M, N = t.N, K = t.K, k = p.k;
  for (int jb = 0; jb < t.nb; ++jb) {
    const int j0 = jb * L;
    const int nl = N - j0 < L ? N - j0 : L;
    const unsigned live = (1u << nl) - 1;
    const std::int32_t* bs = t.bs.data() + static_cast<std::size_t>(jb) * K * L;
    const std::int32_t* be = t.be.data() + static_cast<std::size_t>(jb) * K * L;
    const std::uint8_t* bsp = t.b_special.data() + static_cast<std::size_t>(jb) * t.nch;
    for (int i = 0; i < M; ++i) {
      const std::int32_t* as = t.as.data() + static_cast<std::size_t>(i) * K;
      const std::int32_t* ae = t.ae.data() + static_cast<std::size_t>(i) * K;
      const std::uint8_t* asp = t.a_special.data() + static_cast<std::size_t>(i) * t.nch;
      std::uint32_t cb[L];
      for (int l = 0; l < L; ++l) cb[l] = l < nl ? static_cast<std::uint32_t>(C[static_cast<std::size_t>(i) * N + j0 + l]) : 0u;
      U cbits;
      __builtin_memcpy(&cbits, cb, sizeof cbits);
      for (int ch = 0; ch < t.nch; ++ch) {
        const int k0 = ch * k;
        gemm_dec<L> c;
        gemm_decode<L>(p.c, cbits, c);
        V cref, acc, rm;
        gemm_c_ref<L>(p, c, cref);
        gemm_products<L, KC>(k, as + k0, ae + k0, bs + static_cast<std::size_t>(k0) * L,
                             be + static_cast<std::size_t>(k0) * L, cref, acc, rm);
        U out;
        gemm_finish<L>(p, acc, rm, c, out);
        const unsigned general = (asp[ch] != 0 ? 0xffu : (bsp[ch] | gemm_mask<L>(c.special))) & live;
        if (general != 0) {
          std::uint32_t o[L];
          __builtin_memcpy(cb, &cbits, sizeof cb);
          __builtin_memcpy(o, &out, sizeof o);
          for (int l = 0; l < nl; ++l)
            if ((general >> l) & 1u)
              o[l] = static_cast<std::uint32_t>(mma_dot(m, cb[l], A + static_cast<std::size_t>(i) * K + k0, 1,
                                                        B + static_cast<std::size_t>(k0) * N + j0 + l, N).bits);
          __builtin_memcpy(&out, o, sizeof out);
        }
        cbits = out;
      }
      __builtin_memcpy(cb, &cbits, sizeof cb);
      for (int l = 0; l < nl; ++l) D[static_cast<std::size_t>(i) * N + j0 + l] = static_cast<TC>(cb[l]);
    }
  }
}

/// gemm_fast_run with k a compile-time constant for the table shapes.
template <int L, class TA, class TB, class TC>
TIEBREAK_FORCEINLINE void gemm_fast_k(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t, const TA* A,
                                      const TB* B, const TC* C, TC* D) noexcept {
  switch (p.k) {
    case 8: return gemm_fast_run<L, 8>(m, p, t, A, B, C, D);
    case 16: return gemm_fast_run<L, 16>(m, p, t, A, B, C, D);
    case 32: return gemm_fast_run<L, 32>(m, p, t, A, B, C, D);
    default: return gemm_fast_run<L, 0>(m, p, t, A, B, C, D);
  }
}

/// The fast GEMM in the baseline instruction set.
template <int L, class TA, class TB, class TC>
void gemm_fast(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t, const TA* A, const TB* B,
               const TC* C, TC* D) noexcept {
  gemm_fast_k<L>(m, p, t, A, B, C, D);
}

#if defined(__x86_64__) || defined(__i386__)
/// The same source, 8 lanes, compiled for AVX2 (one ymm register).
template <class TA, class TB, class TC>
__attribute__((target("avx2"))) void gemm_fast_avx2(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t,
                                                    const TA* A, const TB* B, const TC* C, TC* D) noexcept {
  gemm_fast_k<8>(m, p, t, A, B, C, D);
}
inline bool gemm_have_avx2() noexcept { return __builtin_cpu_supports("avx2"); }
#else
inline bool gemm_have_avx2() noexcept { return false; }
#endif

/// One instruction on raw encodings through the fast path, 1 lane (emu::dot); false when an
/// operand is Inf or NaN (the caller then runs mma_dot).
template <class TA, class TB>
inline bool gemm_fast_one(const gemm_fast_plan& p, std::uint32_t& c_bits, const TA* a, std::ptrdiff_t sa,
                          const TB* b, std::ptrdiff_t sb) noexcept {
  gemm_dec<1> c;
  gemm_decode<1>(p.c, typename gemm_vec<1>::u32{c_bits}, c);
  if (c.special[0] != 0) return false;
  std::int32_t as[mma_max_k], ae[mma_max_k], bs[mma_max_k], be[mma_max_k];
  for (int t = 0; t < p.k; ++t) {
    const gemm_val x = gemm_decode_a(p, static_cast<std::uint64_t>(a[t * sa]));
    const gemm_val y = gemm_decode_one(p.b, static_cast<std::uint64_t>(b[t * sb]));
    if (x.special || y.special) return false;
    as[t] = x.sig;
    ae[t] = x.exp;
    bs[t] = y.sig;
    be[t] = y.exp;
  }
  typename gemm_vec<1>::i32 cref, acc, rm;
  gemm_c_ref<1>(p, c, cref);
  gemm_products<1, 0>(p.k, as, ae, bs, be, cref, acc, rm);
  typename gemm_vec<1>::u32 out;
  gemm_finish<1>(p, acc, rm, c, out);
  c_bits = out[0];
  return true;
}

/// The GEMM loop on A and B^T decoded once (mma_decode). Always inlined: for the rows of
/// mma_models `mdl` is a static constexpr object, whose fields fold into mma_dot_with.
template <bool FiniteOnly, class TC>
TIEBREAK_FORCEINLINE void gemm_decoded(const mma_model& mdl, int M, int N, int K, const mma_operand* A,
                                       const mma_operand* BT, const TC* C, TC* D) noexcept {
  for (int i = 0; i < M; ++i) {
    const mma_operand* arow = A + static_cast<std::size_t>(i) * K;
    for (int j = 0; j < N; ++j) {
      const mma_operand* bcol = BT + static_cast<std::size_t>(j) * K;
      std::uint64_t d = static_cast<std::uint64_t>(C[static_cast<std::size_t>(i) * N + j]);
      for (int k0 = 0; k0 < K; k0 += mdl.k) d = mma_dot_with(mdl, d, mma_decoded_ops<FiniteOnly>{arow + k0, bcol + k0}).bits;
      D[static_cast<std::size_t>(i) * N + j] = static_cast<TC>(d);
    }
  }
}

template <int Id>
struct fixed_model {
  static constexpr mma_model value = mma_models[Id].model;
};

template <int Id, class TC>
void gemm_fixed(bool finite, int M, int N, int K, const mma_operand* A, const mma_operand* BT, const TC* C,
                TC* D) noexcept {
  if (finite) gemm_decoded<true>(fixed_model<Id>::value, M, N, K, A, BT, C, D);
  else gemm_decoded<false>(fixed_model<Id>::value, M, N, K, A, BT, C, D);
}

/// emu::gemm through mma_dot_with on operands decoded once (every model).
template <class TA, class TB, class TC>
void gemm_general(const mma_model& m, int M, int N, int K, const TA* A, const TB* B, const TC* C, TC* D) {
  // Decode every element once (the core's unpack); B transposed so each column is contiguous.
  std::vector<detail::mma_operand> a(static_cast<std::size_t>(M) * K), bt(static_cast<std::size_t>(N) * K);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = mma_decode(m.a_fmt, static_cast<std::uint64_t>(A[i]), m.daz);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j)
      bt[static_cast<std::size_t>(j) * K + k] =
          mma_decode(m.b_fmt, static_cast<std::uint64_t>(B[static_cast<std::size_t>(k) * N + j]), m.daz);
  bool finite = true;  // no Inf or NaN among A and B: the hot loop skips their checks
  for (const auto& x : a) finite = finite && !x.special();
  for (const auto& x : bt) finite = finite && !x.special();
  const detail::mma_operand* pa = a.data();
  const detail::mma_operand* pb = bt.data();
  if (m == mma_models[0].model) return detail::gemm_fixed<0>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[1].model) return detail::gemm_fixed<1>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[2].model) return detail::gemm_fixed<2>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[3].model) return detail::gemm_fixed<3>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[4].model) return detail::gemm_fixed<4>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[5].model) return detail::gemm_fixed<5>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[6].model) return detail::gemm_fixed<6>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[7].model) return detail::gemm_fixed<7>(finite, M, N, K, pa, pb, C, D);
  if (finite) detail::gemm_decoded<true>(m, M, N, K, pa, pb, C, D);
  else detail::gemm_decoded<false>(m, M, N, K, pa, pb, C, D);
}

}  // namespace detail

/// d = c + a . b over K elements, one instruction per chunk of m.k in order.
/// Preconditions: mma_model_valid(m), K % m.k == 0, a and b hold K encodings (strides in elements).
/// Rounding and NaN: those of mma_dot, once per chunk. Returns the encoding of c_fmt. Models the
/// fast path covers take it (1 lane) for every chunk without Inf or NaN (`kernel` general: never).
template <class TA, class TB>
inline std::uint64_t dot(const mma_model& m, std::uint64_t c_bits, const TA* a, std::ptrdiff_t a_stride,
                         const TB* b, std::ptrdiff_t b_stride, int K,
                         gemm_kernel kernel = gemm_kernel::automatic) noexcept {
  detail::gemm_fast_plan p;
  const bool fast = kernel != gemm_kernel::general && detail::gemm_fast_plan_of(m, p);
  std::uint64_t d = c_bits;
  for (int k0 = 0; k0 < K; k0 += m.k) {
    const TA* ak = a + static_cast<std::ptrdiff_t>(k0) * a_stride;
    const TB* bk = b + static_cast<std::ptrdiff_t>(k0) * b_stride;
    auto d32 = static_cast<std::uint32_t>(d);
    if (fast && detail::gemm_fast_one(p, d32, ak, a_stride, bk, b_stride)) {
      d = d32;
    } else {
      d = mma_dot(m, d, ak, a_stride, bk, b_stride).bits;
    }
  }
  return d;
}

/// D = A * B + C as a sequence of instructions of model `m` (tile order: see the file comment).
///
/// Preconditions: mma_model_valid(m); K % m.k == 0; A is M x K row-major (encodings of a_fmt in TA),
/// B is K x N row-major (b_fmt in TB), C and D are M x N row-major encodings of c_fmt in TC (D may
/// alias C). Rounding and NaN: those of mma_dot. `kernel` picks the implementation (gemm_kernel);
/// every one gives the same bits.
template <class TA, class TB, class TC>
void gemm(const mma_model& m, int M, int N, int K, const TA* A, const TB* B, const TC* C, TC* D,
          gemm_kernel kernel = gemm_kernel::automatic) {
  detail::gemm_fast_plan p;
  if (kernel == gemm_kernel::general || !detail::gemm_fast_plan_of(m, p) || M <= 0 || N <= 0 || K <= 0)
    return detail::gemm_general(m, M, N, K, A, B, C, D);
  detail::gemm_tables t;
  if (kernel == gemm_kernel::fast_scalar) {
    detail::gemm_make_tables<1>(p, M, N, K, A, B, t);
    return detail::gemm_fast<1>(m, p, t, A, B, C, D);
  }
  detail::gemm_make_tables<8>(p, M, N, K, A, B, t);
#if defined(__x86_64__) || defined(__i386__)
  if (kernel != gemm_kernel::fast_vector && detail::gemm_have_avx2()) return detail::gemm_fast_avx2(m, p, t, A, B, C, D);
#endif
  detail::gemm_fast<8>(m, p, t, A, B, C, D);
}

// The library compiles gemm on 32-bit encodings once (src/host/lib/emu_gemm.cpp): its eight table
// models, each inlined into its own loop, took 1.5-3 min of compile time in every file that used
// gemm. Other encoding types are instantiated where they are used.
extern template void gemm<std::uint32_t, std::uint32_t, std::uint32_t>(const mma_model&, int, int, int,
                                                                       const std::uint32_t*, const std::uint32_t*,
                                                                       const std::uint32_t*, std::uint32_t*,
                                                                       gemm_kernel);

}  // namespace tiebreak::emu
