// SPDX-License-Identifier: Apache-2.0
/// @file Emulated dot product and GEMM built on the MMA instruction model (host).
///
/// The tile order is the one of the CUDA GEMM kernel in cuda/mma (tiebreak::gpu::mma_gemm): every
/// output element starts from C and takes one instruction per chunk of m.k along K, the chunks in
/// increasing order, each instruction's result being the next one's C. The instruction's output
/// element is emu::mma_dot, so the emulation is bit-identical to that kernel by construction
/// wherever the model is (tests/mma/gpu/mma_gpu_test.cpp checks it on the device).
///
/// Speed (docs/tensor-cores.md, "Emulated GEMM speed"): models of the sm_90 shape (one fused step,
/// nominal alignment with rz truncation, positive zeros, no FTZ) take a fast path. It decodes A and
/// B once into (signed significand, lsb exponent) tables and computes one instruction for 8 output
/// columns at a time: one pass for the reference exponent, one pass that truncates each exact
/// product onto the grid and adds it in 32-bit lanes, and one normalisation per element. Any chunk
/// with a NaN or Inf among its operands, or in C, is computed by mma_dot itself (the general model);
/// a model the fast path does not cover runs mma_dot everywhere. tests/mma/mma_gemm_test.cpp proves
/// every path bit-identical to mma_dot element by element. Host only (std::vector, GCC vectors);
/// part of tiebreak::host, which compiles gemm on 32-bit encodings (src/host/lib/emu_gemm.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tiebreak/emu/mma.hpp"

namespace tiebreak::emu {

/// Which implementation emu::gemm and emu::dot use; `automatic` picks the fastest one that covers
/// the model on this CPU. The others exist so the tests can pin each path against mma_dot.
enum class gemm_kernel : std::uint8_t {
  automatic,
  general,      ///< mma_dot_with on operands decoded once (every model)
  fast_scalar,  ///< the fast path in portable code (sm_90-shaped models; others: general)
  fast_avx2,    ///< the fast path with AVX2 (x86-64 with GCC or Clang; elsewhere: fast_scalar)
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
// 32-bit lanes without overflow; C is added in 64 bits in the normalisation.
// ---------------------------------------------------------------------------------------------

/// Exponent given to zero (and special) operands: far below every real one, so it never wins the
/// maximum and its shift flushes the (zero) product.
inline constexpr std::int32_t gemm_zero_exp = -(1 << 24);

/// Decoding constants of one operand format (ieee, fn_nan or finite; any pad).
struct gemm_fmt {
  int man = 0, pad = 0, sign_shift = 0;
  std::uint32_t efmax = 0, fmask = 0;
  std::int32_t normal_off = 0;  ///< lsb exponent = exp field + normal_off (normal numbers)
  std::int32_t sub_exp = 0;     ///< lsb exponent of subnormals
  special_style special = special_style::ieee;
  bool daz = false;
};

constexpr gemm_fmt gemm_fmt_of(const format_desc& f, bool daz) noexcept {
  gemm_fmt r;
  r.man = f.man_bits;
  r.pad = f.pad;
  r.sign_shift = f.exp_bits + f.man_bits + f.pad;
  r.efmax = static_cast<std::uint32_t>(f.exp_field_max());
  r.fmask = static_cast<std::uint32_t>(f.frac_mask());
  r.normal_off = -f.bias - f.man_bits;
  r.sub_exp = f.emin() - f.man_bits;
  r.special = f.special;
  r.daz = daz;
  return r;
}

/// A decoded operand of the fast path: the value is sig * 2^exp; zeros have sig 0 and exp
/// gemm_zero_exp; `special` marks Inf and NaN (sig 0, exp gemm_zero_exp). The same value as
/// mma_decode (tests: MmaGemmFast.DecodeEqualsMmaDecode).
struct gemm_val {
  std::int32_t sig;
  std::int32_t exp;
  bool special;
};

TIEBREAK_FORCEINLINE gemm_val gemm_decode(const gemm_fmt& f, std::uint64_t bits) noexcept {
  const bool neg = ((bits >> f.sign_shift) & 1u) != 0;
  const auto ef = static_cast<std::uint32_t>(bits >> (f.man + f.pad)) & f.efmax;
  const auto frac = static_cast<std::uint32_t>(bits >> f.pad) & f.fmask;
  std::int32_t sig;
  std::int32_t exp;
  if (ef == 0) {
    if (frac == 0 || f.daz) return {0, gemm_zero_exp, false};
    sig = static_cast<std::int32_t>(frac);
    exp = f.sub_exp;
  } else if (ef == f.efmax && (f.special == special_style::ieee ||
                               (f.special == special_style::fn_nan && frac == f.fmask))) {
    return {0, gemm_zero_exp, true};  // Inf or NaN
  } else {
    sig = static_cast<std::int32_t>(frac | (std::uint32_t{1} << f.man));
    exp = static_cast<std::int32_t>(ef) + f.normal_off;
  }
  return {neg ? -sig : sig, exp, false};
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
  std::uint64_t acc_inf = 0;  ///< magnitude encoding of Inf in acc_fmt
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
  p.acc_inf = m.acc_fmt.exp_field_max() << m.acc_fmt.man_bits;
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

/// round_pack of (-1)^neg * mag * 2^g into acc_fmt under rz or rne (no FTZ), then the model's
/// overflow_to_inf and positive_zero, then the exact map into c_fmt. Precondition: 0 < mag < 2^62.
///   normal   (e = msb + g >= emin): drop msb - P bits; the encoding is ((e - emin) << P) + sig, the
///            implicit bit carrying into the exponent field (a round-up to 2^(P+1) carries too)
///   subnormal: drop (emin - P) - g bits; the encoding is sig (a round-up to 2^P is the min normal)
///   overflow: encoding >= Inf's: rne -> Inf; rz -> max finite, or Inf under overflow_to_inf
/// (tests: MmaGemmFast.RoundEqualsRoundPack).
TIEBREAK_FORCEINLINE std::uint32_t gemm_round(const gemm_fast_plan& p, bool neg, std::uint64_t mag, int g) noexcept {
  const int msb = msb_of(mag);
  const int e = msb + g;
  const bool normal = e >= p.acc_emin;
  const int drop = normal ? msb - p.acc_man : p.acc_emin - p.acc_man - g;
  std::uint64_t sig;
  if (drop <= 0) {
    sig = mag << -drop;
  } else if (drop > 63) {
    sig = 0;  // mag < 2^62 <= half an ulp: rz and rne both give 0
  } else {
    sig = mag >> drop;
    if (p.rne) {
      const std::uint64_t rem = mag & ((std::uint64_t{1} << drop) - 1), half = std::uint64_t{1} << (drop - 1);
      sig += (rem > half || (rem == half && (sig & 1u) != 0)) ? 1u : 0u;
    }
  }
  std::uint64_t bits = normal ? (static_cast<std::uint64_t>(e - p.acc_emin) << p.acc_man) + sig : sig;
  if (bits >= p.acc_inf) bits = (p.rne || p.overflow_to_inf) ? p.acc_inf : p.acc_inf - 1;
  if (bits == 0) return 0;  // positive_zero
  return (neg ? std::uint32_t{1} << p.c_sign_shift : 0u) | static_cast<std::uint32_t>(bits << p.out_shift);
}

/// One instruction's result from the lanes' exact product sum `acc` (units of 2^g), Rm = R -
/// man_sum and the decoded C: adds C truncated onto the grid, then gemm_round.
TIEBREAK_FORCEINLINE std::uint32_t gemm_finish(const gemm_fast_plan& p, std::int32_t acc, std::int32_t rm,
                                               const gemm_val& c) noexcept {
  const int g = rm + p.man_sum - p.align;
  std::int64_t total = acc;
  if (c.sig != 0) {
    const int sh = c.exp - g;  // <= align - man_c <= 30 (C's reference is at most R)
    const std::uint64_t mag = static_cast<std::uint64_t>(c.sig < 0 ? -static_cast<std::int64_t>(c.sig) : c.sig);
    const std::uint64_t v = sh >= 0 ? mag << sh : (-sh > 63 ? 0 : mag >> -sh);
    total += c.sig < 0 ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  }
  if (total == 0) return 0;  // exact cancellation or all zero: +0 (positive_zero)
  const bool neg = total < 0;
  return gemm_round(p, neg, static_cast<std::uint64_t>(neg ? -total : total), g);
}

/// C's reference exponent minus man_sum, as the first pass compares it with the products'.
TIEBREAK_FORCEINLINE std::int32_t gemm_c_ref(const gemm_fast_plan& p, const gemm_val& c) noexcept {
  return c.sig != 0 ? c.exp + p.man_c - p.man_sum : gemm_zero_exp;
}

/// Operand tables of the fast GEMM: A row-major with significands pre-shifted by S, B in blocks of
/// 8 columns ([block][k][lane]), and where the specials are.
struct gemm_tables {
  int M = 0, N = 0, K = 0, nch = 0, nb = 0;
  std::vector<std::int32_t> as, ae, bs, be;
  std::vector<std::uint8_t> a_special;  ///< [i][chunk]: some A operand of the chunk is Inf or NaN
  std::vector<std::uint8_t> b_special;  ///< [block][chunk]: lane mask of columns with an Inf or NaN
};

template <class TA, class TB>
void gemm_make_tables(const gemm_fast_plan& p, int M, int N, int K, const TA* A, const TB* B, gemm_tables& t) {
  t.M = M;
  t.N = N;
  t.K = K;
  t.nch = K / p.k;
  t.nb = (N + 7) / 8;
  const std::size_t mk = static_cast<std::size_t>(M) * K, bk = static_cast<std::size_t>(t.nb) * K * 8;
  t.as.assign(mk, 0);
  t.ae.assign(mk, gemm_zero_exp);
  t.bs.assign(bk, 0);
  t.be.assign(bk, gemm_zero_exp);
  t.a_special.assign(static_cast<std::size_t>(M) * t.nch, 0);
  t.b_special.assign(static_cast<std::size_t>(t.nb) * t.nch, 0);
  for (std::size_t i = 0; i < mk; ++i) {
    const gemm_val v = gemm_decode(p.a, static_cast<std::uint64_t>(A[i]));
    t.as[i] = v.sig * (std::int32_t{1} << p.shift);
    t.ae[i] = v.exp;
    if (v.special) t.a_special[(i / K) * t.nch + (i % K) / p.k] = 1;
  }
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) {
      const gemm_val v = gemm_decode(p.b, static_cast<std::uint64_t>(B[static_cast<std::size_t>(k) * N + j]));
      const std::size_t at = (static_cast<std::size_t>(j / 8) * K + k) * 8 + j % 8;
      t.bs[at] = v.sig;
      t.be[at] = v.exp;
      if (v.special) t.b_special[static_cast<std::size_t>(j / 8) * t.nch + k / p.k] |= std::uint8_t(1u << (j % 8));
    }
}

#if defined(__GNUC__)
// GCC/Clang vector extensions: one 8-lane vector per block of columns (one ymm register where the
// code is compiled for AVX2, pairs of xmm otherwise). Every step of gemm_finish and gemm_decode is
// repeated lane-wise in 32 bits; the bounds that make 32 bits enough are noted at each step. The
// helpers take and return vectors by reference: no 32-byte vector crosses a function boundary, so
// the code needs no AVX calling convention (-Wpsabi) wherever it is compiled.
using gemm_v8 = std::int32_t __attribute__((vector_size(32)));
using gemm_u8 = std::uint32_t __attribute__((vector_size(32)));
using gemm_f8 = float __attribute__((vector_size(32)));

/// The decoded C of 8 lanes (gemm_decode of c_fmt, an ieee format without pad): `special` is -1 for
/// Inf and NaN, whose lanes get sig 0 and gemm_zero_exp (the general path recomputes them).
struct gemm_c8 {
  gemm_v8 sig, exp, ref, special;
};

TIEBREAK_FORCEINLINE void gemm_decode8(const gemm_fast_plan& p, const gemm_u8& bits, gemm_c8& c) noexcept {
  const gemm_fmt& f = p.c;
  const gemm_v8 ef = (gemm_v8)((bits >> f.man) & f.efmax);
  const gemm_v8 frac = (gemm_v8)(bits & f.fmask);
  const gemm_v8 sub = ef == 0;
  c.special = ef == static_cast<std::int32_t>(f.efmax);
  gemm_v8 sig = sub ? (f.daz ? gemm_v8{} : frac) : (frac | (std::int32_t{1} << f.man));
  sig = c.special ? gemm_v8{} : sig;
  const gemm_v8 zero = sig == 0;
  c.exp = zero ? gemm_v8{} + gemm_zero_exp : (sub ? gemm_v8{} + f.sub_exp : ef + f.normal_off);
  const gemm_v8 neg = (gemm_v8)((bits >> f.sign_shift) & 1u) != 0;
  c.sig = neg ? -sig : sig;
  c.ref = zero ? gemm_v8{} + gemm_zero_exp : c.exp + (p.man_c - p.man_sum);
}

/// msb of each lane (lanes < 2^32; 0 gives a negative value): two exact int -> float conversions.
TIEBREAK_FORCEINLINE void gemm_msb8(const gemm_u8& x, gemm_v8& msb) noexcept {
  const gemm_f8 fh = __builtin_convertvector((gemm_v8)(x >> 16), gemm_f8);
  const gemm_f8 fl = __builtin_convertvector((gemm_v8)(x & 0xffffu), gemm_f8);
  const gemm_v8 eh = (((gemm_v8)fh >> 23) & 0xff) - 127 + 16;
  const gemm_v8 el = (((gemm_v8)fl >> 23) & 0xff) - 127;
  msb = (x >> 16) != 0 ? eh : el;
}

/// gemm_finish on 8 lanes: acc (the products, |acc| < 2^31), rm and the decoded C.
TIEBREAK_FORCEINLINE void gemm_finish8(const gemm_fast_plan& p, const gemm_v8& acc, const gemm_v8& rm, const gemm_c8& c,
                                       gemm_u8& result) noexcept {
  const gemm_v8 g = rm + (p.man_sum - p.align);
  // C truncated onto the grid: |C| 2^(ec - g) < 2^(align + 1) <= 2^31 (C's reference is at most R).
  const gemm_v8 sh = c.exp - g;
  const gemm_u8 cm = (gemm_u8)(c.sig < 0 ? -c.sig : c.sig);
  const gemm_u8 up = cm << (gemm_u8)(sh > 0 ? sh : 0);
  const gemm_v8 nsh = -sh;
  const gemm_u8 dn = cm >> (gemm_u8)(nsh > 31 ? 31 : nsh);  // |C| < 2^24: >> 31 flushes it
  const gemm_u8 ccu = sh >= 0 ? up : dn;
  const gemm_u8 cc = c.sig < 0 ? -ccu : ccu;
  // total = acc + cc: |total| < 2^31 + 2^26 < 2^32, so its magnitude fits 32 bits; its sign is
  // the wrapped sum's unless the signed addition overflowed, then acc's.
  const gemm_u8 su = (gemm_u8)acc + cc;
  const gemm_v8 ovf = (((gemm_v8)su ^ acc) & ((gemm_v8)su ^ (gemm_v8)cc)) < 0;
  const gemm_v8 neg = ovf ? acc < 0 : (gemm_v8)su < 0;
  const gemm_u8 mag = neg ? -su : su;
  // round_pack into acc_fmt (gemm_round): e <= 2^24-ish, every shift count clamped below 32.
  gemm_v8 msb;
  gemm_msb8(mag, msb);
  const gemm_v8 e = msb + g;
  const gemm_v8 normal = e >= p.acc_emin;
  const gemm_v8 drop = normal ? msb - p.acc_man : (p.acc_emin - p.acc_man) - g;
  const gemm_v8 ndrop = -drop;
  const gemm_u8 sig_up = mag << (gemm_u8)(ndrop > 0 ? (ndrop > 31 ? 31 : ndrop) : 0);  // drop <= 0: ndrop <= P
  const gemm_u8 sig_dn = drop > 31 ? gemm_u8{} : mag >> (gemm_u8)(drop > 0 ? (drop > 31 ? 31 : drop) : 0);
  gemm_u8 sig = drop <= 0 ? sig_up : sig_dn;
  if (p.rne) {
    const gemm_v8 dc = drop > 0 ? (drop > 31 ? 31 : drop) : 1;
    const gemm_u8 half = (gemm_u8{} + 1u) << (gemm_u8)(dc - 1);
    const gemm_u8 rem = mag & ((half << 1) - 1);
    const gemm_v8 in = (drop > 0) & (drop <= 31);
    const gemm_v8 tie_up = (rem > half) | ((rem == half) & ((gemm_v8)(sig & 1u) != 0));
    const gemm_v8 up32 = (drop == 32) & (mag > 0x80000000u);  // half = 2^31 lies above the lanes' bits
    sig += (gemm_u8)((in & tie_up) | up32) & 1u;
  }
  const gemm_v8 ef0 = e - p.acc_emin;
  const auto efmax = static_cast<std::int32_t>(p.acc_inf >> p.acc_man);
  const gemm_u8 ef = (gemm_u8)(ef0 > efmax ? gemm_v8{} + efmax : ef0);  // beyond: overflow either way
  gemm_u8 bits = normal ? (ef << p.acc_man) + sig : sig;
  const auto inf = static_cast<std::uint32_t>(p.acc_inf);
  const std::uint32_t ovf_bits = (p.rne || p.overflow_to_inf) ? inf : inf - 1;
  bits = bits >= inf ? gemm_u8{} + ovf_bits : bits;
  const gemm_u8 out = (bits << p.out_shift) | ((gemm_u8)neg & (std::uint32_t{1} << p.c_sign_shift));
  result = ((bits == 0) | (mag == 0)) ? gemm_u8{} : out;  // positive_zero
}

/// The two passes of one instruction for 8 lanes: rm = max(C's reference, max_t r_t) and acc =
/// sum_t truncated products. `as`, `ae`: the chunk of A's row; `bs`, `be`: the chunk of B's block.
template <int KC>
TIEBREAK_FORCEINLINE void gemm_lanes8(int kc, const std::int32_t* as, const std::int32_t* ae, const std::int32_t* bs,
                                      const std::int32_t* be, const gemm_v8& cref, gemm_v8& acc, gemm_v8& rm) noexcept {
  const int k = KC > 0 ? KC : kc;
  gemm_v8 mx = cref;
  for (int t = 0; t < k; ++t) {
    gemm_v8 eb;
    __builtin_memcpy(&eb, be + 8 * t, sizeof eb);
    const gemm_v8 e = eb + ae[t];
    mx = e > mx ? e : mx;
  }
  gemm_v8 sum = {};
  for (int t = 0; t < k; ++t) {
    gemm_v8 eb, sb;
    __builtin_memcpy(&eb, be + 8 * t, sizeof eb);
    __builtin_memcpy(&sb, bs + 8 * t, sizeof sb);
    const gemm_v8 d0 = mx - (eb + ae[t]);   // >= 0: mx is the maximum
    const gemm_v8 d = d0 < 31 ? d0 : 31;    // the pre-shifted product is < 2^31: >> 31 flushes it
    const gemm_v8 prod = sb * as[t];        // exact: |prod| < 2^31 / k
    const gemm_v8 mag = prod < 0 ? -prod : prod;
    const gemm_v8 tr = (gemm_v8)((gemm_u8)mag >> (gemm_u8)d);
    sum += prod < 0 ? -tr : tr;
  }
  acc = sum;
  rm = mx;
}

TIEBREAK_FORCEINLINE unsigned gemm_mask8(const gemm_v8& x) noexcept {
  std::int32_t v[8];
  __builtin_memcpy(v, &x, sizeof v);
  unsigned r = 0;
  for (int l = 0; l < 8; ++l) r |= v[l] != 0 ? 1u << l : 0u;
  return r;
}

/// The fast GEMM over every row and column block. Lanes with an Inf or NaN among the chunk's
/// operands or in C take mma_dot on the raw encodings.
template <int KC, class TA, class TB, class TC>
TIEBREAK_FORCEINLINE void gemm_fast_run(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t,
                                        const TA* A, const TB* B, const TC* C, TC* D) noexcept {
  const int M = t.M, N = t.N, K = t.K, k = p.k;
  for (int jb = 0; jb < t.nb; ++jb) {
    const int j0 = jb * 8;
    const int nl = N - j0 < 8 ? N - j0 : 8;
    const unsigned live = (1u << nl) - 1;
    const std::int32_t* bs = t.bs.data() + static_cast<std::size_t>(jb) * K * 8;
    const std::int32_t* be = t.be.data() + static_cast<std::size_t>(jb) * K * 8;
    const std::uint8_t* bsp = t.b_special.data() + static_cast<std::size_t>(jb) * t.nch;
    for (int i = 0; i < M; ++i) {
      const std::int32_t* as = t.as.data() + static_cast<std::size_t>(i) * K;
      const std::int32_t* ae = t.ae.data() + static_cast<std::size_t>(i) * K;
      const std::uint8_t* asp = t.a_special.data() + static_cast<std::size_t>(i) * t.nch;
      std::uint32_t cb[8];
      for (int l = 0; l < 8; ++l) cb[l] = l < nl ? static_cast<std::uint32_t>(C[static_cast<std::size_t>(i) * N + j0 + l]) : 0u;
      gemm_u8 cbits;
      __builtin_memcpy(&cbits, cb, sizeof cbits);
      gemm_c8 c;
      gemm_decode8(p, cbits, c);
      unsigned cspecial = gemm_mask8(c.special);
      for (int ch = 0; ch < t.nch; ++ch) {
        const int k0 = ch * k;
        gemm_v8 acc, rm;
        gemm_lanes8<KC>(k, as + k0, ae + k0, bs + static_cast<std::size_t>(k0) * 8, be + static_cast<std::size_t>(k0) * 8,
                        c.ref, acc, rm);
        gemm_u8 out;
        gemm_finish8(p, acc, rm, c, out);
        const unsigned general = (asp[ch] != 0 ? 0xffu : (bsp[ch] | cspecial)) & live;
        if (general != 0) {
          std::uint32_t o[8];
          __builtin_memcpy(cb, &cbits, sizeof cb);
          __builtin_memcpy(o, &out, sizeof o);
          for (int l = 0; l < nl; ++l)
            if ((general >> l) & 1u)
              o[l] = static_cast<std::uint32_t>(mma_dot(m, cb[l], A + static_cast<std::size_t>(i) * K + k0, 1,
                                                        B + static_cast<std::size_t>(k0) * N + j0 + l, N).bits);
          __builtin_memcpy(&out, o, sizeof out);
        }
        cbits = out;
        gemm_decode8(p, cbits, c);
        cspecial = gemm_mask8(c.special);
      }
      __builtin_memcpy(cb, &cbits, sizeof cb);
      for (int l = 0; l < nl; ++l) D[static_cast<std::size_t>(i) * N + j0 + l] = static_cast<TC>(cb[l]);
    }
  }
}
#else
/// The two passes of one instruction for 8 lanes (portable version of gemm_lanes8).
template <int KC>
inline void gemm_lanes(int kc, const std::int32_t* as, const std::int32_t* ae, const std::int32_t* bs,
                       const std::int32_t* be, const std::int32_t* cref, std::int32_t* acc, std::int32_t* rm) noexcept {
  const int k = KC > 0 ? KC : kc;
  for (int l = 0; l < 8; ++l) {
    std::int32_t mx = cref[l];
    for (int t = 0; t < k; ++t) mx = ae[t] + be[8 * t + l] > mx ? ae[t] + be[8 * t + l] : mx;
    std::int32_t sum = 0;
    for (int t = 0; t < k; ++t) {
      const std::int32_t d = mx - (ae[t] + be[8 * t + l]);
      const std::int32_t prod = as[t] * bs[8 * t + l];
      const auto mag = static_cast<std::uint32_t>(prod < 0 ? -prod : prod);
      const auto tr = static_cast<std::int32_t>(d > 31 ? 0u : mag >> d);
      sum += prod < 0 ? -tr : tr;
    }
    acc[l] = sum;
    rm[l] = mx;
  }
}


/// The fast GEMM over every row and column block (portable version). Chunks with specials go
/// through mma_dot on the raw encodings.
template <int KC, class TA, class TB, class TC>
TIEBREAK_FORCEINLINE void gemm_fast_run(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t,
                                        const TA* A, const TB* B, const TC* C, TC* D) noexcept {
  const int M = t.M, N = t.N, K = t.K, k = p.k;
  for (int jb = 0; jb < t.nb; ++jb) {
    const int j0 = jb * 8;
    const int nl = N - j0 < 8 ? N - j0 : 8;
    const std::int32_t* bs = t.bs.data() + static_cast<std::size_t>(jb) * K * 8;
    const std::int32_t* be = t.be.data() + static_cast<std::size_t>(jb) * K * 8;
    const std::uint8_t* bsp = t.b_special.data() + static_cast<std::size_t>(jb) * t.nch;
    for (int i = 0; i < M; ++i) {
      const std::int32_t* as = t.as.data() + static_cast<std::size_t>(i) * K;
      const std::int32_t* ae = t.ae.data() + static_cast<std::size_t>(i) * K;
      const std::uint8_t* asp = t.a_special.data() + static_cast<std::size_t>(i) * t.nch;
      alignas(32) std::int32_t cref[8], acc[8], rm[8];
      std::uint32_t cbits[8];
      gemm_val cv[8];
      unsigned cspecial = 0;
      for (int l = 0; l < 8; ++l) {
        cbits[l] = l < nl ? static_cast<std::uint32_t>(C[static_cast<std::size_t>(i) * N + j0 + l]) : 0u;
        cv[l] = gemm_decode(p.c, cbits[l]);
        cspecial |= cv[l].special ? 1u << l : 0u;
        cref[l] = gemm_c_ref(p, cv[l]);
      }
      for (int ch = 0; ch < t.nch; ++ch) {
        const int k0 = ch * k;
        gemm_lanes<KC>(k, as + k0, ae + k0, bs + static_cast<std::size_t>(k0) * 8, be + static_cast<std::size_t>(k0) * 8,
                       cref, acc, rm);
        const unsigned general = asp[ch] != 0 ? 0xffu : (bsp[ch] | cspecial);
        cspecial = 0;
        for (int l = 0; l < nl; ++l) {
          if ((general >> l) & 1u) {
            cbits[l] = static_cast<std::uint32_t>(
                mma_dot(m, cbits[l], A + static_cast<std::size_t>(i) * K + k0, 1,
                        B + static_cast<std::size_t>(k0) * N + j0 + l, N).bits);
          } else {
            cbits[l] = gemm_finish(p, acc[l], rm[l], cv[l]);
          }
          cv[l] = gemm_decode(p.c, cbits[l]);
          cspecial |= cv[l].special ? 1u << l : 0u;
          cref[l] = gemm_c_ref(p, cv[l]);
        }
      }
      for (int l = 0; l < nl; ++l) D[static_cast<std::size_t>(i) * N + j0 + l] = static_cast<TC>(cbits[l]);
    }
  }
}

#endif

template <class TA, class TB, class TC>
void gemm_fast_portable(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t, const TA* A, const TB* B,
                        const TC* C, TC* D) noexcept {
  switch (p.k) {
    case 8: return gemm_fast_run<8>(m, p, t, A, B, C, D);
    case 16: return gemm_fast_run<16>(m, p, t, A, B, C, D);
    case 32: return gemm_fast_run<32>(m, p, t, A, B, C, D);
    default: return gemm_fast_run<0>(m, p, t, A, B, C, D);
  }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TIEBREAK_GEMM_AVX2 1
/// The same source compiled for AVX2 (the 8 lanes are one ymm register).
template <class TA, class TB, class TC>
__attribute__((target("avx2"))) void gemm_fast_avx2(const mma_model& m, const gemm_fast_plan& p, const gemm_tables& t,
                                                    const TA* A, const TB* B, const TC* C, TC* D) noexcept {
  switch (p.k) {
    case 8: return gemm_fast_run<8>(m, p, t, A, B, C, D);
    case 16: return gemm_fast_run<16>(m, p, t, A, B, C, D);
    case 32: return gemm_fast_run<32>(m, p, t, A, B, C, D);
    default: return gemm_fast_run<0>(m, p, t, A, B, C, D);
  }
}
inline bool gemm_have_avx2() noexcept { return __builtin_cpu_supports("avx2"); }
#else
#define TIEBREAK_GEMM_AVX2 0
inline bool gemm_have_avx2() noexcept { return false; }
#endif

/// One instruction on raw encodings through the fast path (emu::dot); false when an operand is Inf
/// or NaN (the caller then runs mma_dot).
template <class TA, class TB>
inline bool gemm_fast_one(const gemm_fast_plan& p, std::uint32_t& c_bits, const TA* a, std::ptrdiff_t sa,
                          const TB* b, std::ptrdiff_t sb) noexcept {
  const gemm_val c = gemm_decode(p.c, c_bits);
  if (c.special) return false;
  std::int32_t as[mma_max_k], ae[mma_max_k];
  std::int32_t bs[mma_max_k], be[mma_max_k];
  std::int32_t mx = gemm_c_ref(p, c);
  for (int t = 0; t < p.k; ++t) {
    const gemm_val x = gemm_decode(p.a, static_cast<std::uint64_t>(a[t * sa]));
    const gemm_val y = gemm_decode(p.b, static_cast<std::uint64_t>(b[t * sb]));
    if (x.special || y.special) return false;
    as[t] = x.sig * (std::int32_t{1} << p.shift);
    ae[t] = x.exp;
    bs[t] = y.sig;
    be[t] = y.exp;
    mx = ae[t] + be[t] > mx ? ae[t] + be[t] : mx;
  }
  std::int32_t sum = 0;
  for (int t = 0; t < p.k; ++t) {
    const std::int32_t d = mx - (ae[t] + be[t]);
    const std::int32_t prod = as[t] * bs[t];
    const auto mag = static_cast<std::uint32_t>(prod < 0 ? -prod : prod);
    const auto tr = static_cast<std::int32_t>(d > 31 ? 0u : mag >> d);
    sum += prod < 0 ? -tr : tr;
  }
  c_bits = gemm_finish(p, sum, mx, c);
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
/// fast path covers take it for every chunk without Inf or NaN (`kernel` general: never).
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
  detail::gemm_make_tables(p, M, N, K, A, B, t);
#if TIEBREAK_GEMM_AVX2
  if (kernel != gemm_kernel::fast_scalar && detail::gemm_have_avx2()) return detail::gemm_fast_avx2(m, p, t, A, B, C, D);
#endif
  detail::gemm_fast_portable(m, p, t, A, B, C, D);
}

// The library compiles gemm on 32-bit encodings once (src/host/lib/emu_gemm.cpp): its eight table
// models, each inlined into its own loop, took 1.5-3 min of compile time in every file that used
// gemm. Other encoding types are instantiated where they are used.
extern template void gemm<std::uint32_t, std::uint32_t, std::uint32_t>(const mma_model&, int, int, int,
                                                                       const std::uint32_t*, const std::uint32_t*,
                                                                       const std::uint32_t*, std::uint32_t*,
                                                                       gemm_kernel);

}  // namespace tiebreak::emu
