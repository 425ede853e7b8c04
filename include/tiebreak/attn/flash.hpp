// SPDX-License-Identifier: Apache-2.0
/// @file The instrumented flash-attention tile algorithm, written once for the kernel and its host twin.
///
/// STYLE.md principle 6: this header holds the whole algorithm — tiling, the order of every tensor-
/// core instruction and of every f32 operation, the online softmax with its rescaling, the four
/// output modes, the two ways of scaling the score, the probe hooks — as functions templated on a
/// backend `Be`. The CUDA kernels (cuda/attention) instantiate it with the hardware backend
/// (mma.sync, shuffles, cp.async); the host twin (tiebreak::host::attention_forward, src/host)
/// with the emulated backend (the core's tensor-core model for every mma, the same shuffles as
/// loops over the lanes of a quad). Both run the code of every thread of a block; they differ only
/// inside the backend's primitives, whose semantics are fixed here:
///
///   be.for_threads(f)     f(tid) for this thread (device) / for every tid of the block (host)
///   Be::slots, be.slot(t) per-thread registers: `R[Be::slots]`, the thread's own is R[be.slot(tid)]
///   be.sync()             __syncthreads (device) / nothing (host: phases run to completion)
///   be.mma(f)             warp-collective mma.m16n8k16.row.col.f32.bf16.bf16.f32: f(tid) gives the
///                         thread's fragments {a[4], b[2], c[4]}; c = A B + C per the PTX layout
///   be.quad_max/quad_sum/quad_count(f)   butterfly over the 4 lanes of a quad (xor 1, then xor 2):
///                         v = op(v, v^1); v = op(v, v^2); f(tid) gives the thread's value
///   be.load_tile<R, C>(dst, src, valid_rows)   R x C bf16 rows from global into the swizzled shared
///                         tile (rows >= valid_rows are zero); async on the device, then
///   be.load_floats<N>(dst, src, valid)         N floats from global into shared memory (elements
///                         >= valid are zero); async on the device, in the same group
///   be.commit(), be.wait<N>()                   cp.async.commit_group / wait_group N: a thread's own
///                         copies are visible to it after the wait, everyone's after the next sync()
///   be.smem()             the block's shared memory
///   be.store2(p, lo, hi)  p[0] = lo, p[1] = hi for bf16 encodings or floats (p even-indexed: one
///                         aligned 4- or 8-byte store on the device)
///   be.load_pair(p)       pack2(p[0], p[1]) of two bf16 encodings (p even-indexed: one aligned 4-byte
///                         load on the device)
///   be.load16(out, p)     out[i] = p[i] for the 16 bytes at p (8 bf16 encodings or 4 floats; p
///                         16-byte aligned: one load on the device)
///   Be::warpgroup_mma     (optional, default false) the backend multiplies whole tiles per warpgroup
///                         (Hopper's wgmma): the forward then calls, instead of its fragment loops,
///                         be.load_q_tile<ROWS, D, MT>(qs, src, valid_rows) for the staged Q tile,
///                         be.qk_tile<D, MT, QS>(s, qa, qs, k_tile): S[mt] += Q[mt] Kᵀ, chained over the
///                         16-wide chunks of the head dim in order (Q from `qs` when QS, else the
///                         registers qa[kc]), and be.pv_tile<D, MT>(o, p, v_tile): O[mt] += P[mt] V,
///                         chained over the 16-key chunks in order. The dQ kernel uses the same three
///                         for its staged Q and dO, S and dP (QS), and dQ += dS K; the dK/dV kernel
///                         qk_tile for Sᵀ and dPᵀ (K and V in the place of `qs`) and pv_tile for
///                         dV += Pᵀ dO and dK += dSᵀ Q. Per output element these are the same chains of m16n8k16 steps as the fragment loops, and sm_90's wgmma k16
///                         step has the model of mma.sync's (emu/mma.hpp): the same bits. The tiles'
///                         shared-memory layout is then the backend's own (it alone reads them).
///   be.load_a<C>(frag, tile, ...)   an A fragment from a swizzled tile, with the semantics of the
///                         portable load_a below (the host calls it; the device uses ldmatrix, pinned
///                         to it by the GPU test); be.load_b2_nmajor/load_b2_kmajor<C>(b0, b1, tile,
///                         n0 or k0, ...): the B fragments of blocks n0 and n0 + 8 as two calls of the
///                         portable load_b_nmajor / load_b_kmajor (ldmatrix.x4 on the device)
/// Every arithmetic decision — the f32 operations (tiebreak::f32, round-to-nearest-even, named), the
/// software exp2/log2, the bf16 narrowings (fast.hpp, proven equal to round_pack) — is made in this
/// header, so kernel and twin agree bit for bit wherever the backend's mma agrees with the model
/// (docs/tensor-cores.md: 10^8 elements, 0 mismatches on the H200).
///
/// Conventions: bf16 Q, K, V, dO in the dense bhsd layout of problem.hpp, dim == dim_v ∈ {64, 128};
/// S = Q Kᵀ in f32 (tensor cores), then scaled by `scale` in the log2 domain:
///   unfused  x = (s ⊗ c) ⊖ o         (c = scale·log2 e rounded to f32, o the row offset ⊗ c):
///            at the row maximum x = 0 exactly, P-bar = 1 (PyTorch's build of FlashAttention)
///   fused    x = fma(s, c, −o)        (upstream flash-attention): P-bar at the maximum is 2^(rounding
///            error of max ⊗ c), not always 1
/// P-bar = exp2(x) by the exponential policy (exp2_policy: exp2_sw, or the SFU's ex2.approx.ftz as a
/// modelled instruction); the offset o is the running row maximum, or under `debias` β·max (max > 0) or 0
/// (max < 0) once the maximum repeats (MECHANISM.md, "dynamic maximum"). docs/attention.md has the
/// full description, the tile sizes, and what each probe counter means.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "tiebreak/attn/problem.hpp"
#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/f32_math.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/value.hpp"
#include "tiebreak/probe/probe.hpp"

#if defined(__CUDA_ARCH__)
/// Fully unrolls a loop over register fragments (indices must be constants to stay in registers).
#define TIEBREAK_UNROLL _Pragma("unroll")
/// Keeps a rarely taken loop rolled (the probe's row dumps): a few instructions instead of an
/// unrolled body in the middle of the tile loop, whose size the instruction cache pays for.
#define TIEBREAK_ROLLED _Pragma("unroll 1")
#else
#define TIEBREAK_UNROLL
#define TIEBREAK_ROLLED
#endif

namespace tiebreak::attn {

// --- options -----------------------------------------------------------------------------------------

/// What happens to O at the end of the forward pass (and what the backward pass reads for delta).
enum class out_mode : std::uint8_t {
  bf16,        ///< O rounded to bf16 (round-to-nearest-even), delta from the bf16 O (FlashAttention-2)
  fp32,        ///< O kept in f32, delta from it (the production remedy)
  debias,      ///< as bf16, with the paper's dynamic maximum: no P-bar is 1 in rows whose maximum repeats
  stochastic,  ///< O rounded to bf16 stochastically, random bits keyed by (seed, batch, head, row, column)
};
inline constexpr out_mode all_out_modes[] = {out_mode::bf16, out_mode::fp32, out_mode::debias, out_mode::stochastic};
constexpr std::string_view to_string(out_mode m) noexcept {
  switch (m) {
    case out_mode::bf16: return "bf16";
    case out_mode::fp32: return "fp32";
    case out_mode::debias: return "debias";
    case out_mode::stochastic: return "stochastic";
  }
  return "?";
}
constexpr bool parse_out_mode(std::string_view s, out_mode& out) noexcept {
  for (out_mode m : all_out_modes) {
    if (to_string(m) == s) { out = m; return true; }
  }
  return false;
}

/// How the score enters the exponential (the file comment).
enum class score_scaling : std::uint8_t { unfused, fused };
constexpr std::string_view to_string(score_scaling s) noexcept { return s == score_scaling::unfused ? "unfused" : "fused"; }

/// Which exponential computes P-bar, the rescale factors and the backward's P:
///   software  f32::exp2_sw (a fixed sequence of IEEE binary32 operations; the same bits on every GPU
///             and on the host; about 13 instructions)
///   sfu       ex2.approx.ftz.f32, the SFU (MUFU.EX2: one instruction); the twin evaluates its model
///             (fp/sfu.hpp: the rule with sm_90's interpolator), proven equal to the unit on all 2^32
///             inputs on the H200 (sm_90) only. Its P-bar is 1 for -2^-23 < x <= 0, not just at x = 0.
enum class exp2_policy : std::uint8_t { software, sfu };
inline constexpr exp2_policy all_exp2_policies[] = {exp2_policy::software, exp2_policy::sfu};
constexpr std::string_view to_string(exp2_policy e) noexcept { return e == exp2_policy::software ? "software" : "sfu"; }
constexpr bool parse_exp2_policy(std::string_view s, exp2_policy& out) noexcept {
  for (exp2_policy e : all_exp2_policies) {
    if (to_string(e) == s) { out = e; return true; }
  }
  return false;
}

struct flash_options {
  out_mode mode = out_mode::bf16;
  score_scaling scaling = score_scaling::unfused;
  float beta = 2.0f;             ///< debias: the offset β·max of a row whose maximum (> 0) repeats; finite, > 1
  std::uint64_t seed = 0;        ///< stochastic: the Philox key
  float near_tolerance = 1e-3f;  ///< probe: a score within this distance of the maximum (in units of the
                                 ///< scaled score scale·QKᵀ) counts as a near repeat
  float debias_max_shift = 64.0f;  ///< debias: the offset lies at most this far above the row maximum (scaled
                                   ///< log2 domain), so P-bar at the maximum is >= 2^-shift; in [1, 100]
  exp2_policy exp = exp2_policy::software;  ///< the exponential (exp2_policy)
};

/// debias_max_shift's range: at least 1 (P-bar at the maximum 1/2 or less), at most 100 (2^-100 stays
/// a normal f32, with 26 binades below it before exp2_sw flushes to 0).
inline constexpr float debias_max_shift_min = 1.0f, debias_max_shift_max = 100.0f;

/// The tensors of one call, dense bhsd (problem.hpp); bf16 tensors as their encodings. Device
/// pointers for the kernels, host pointers for the twin. A pointer a call does not use may be null.
struct flash_tensors {
  const std::uint16_t* q = nullptr;
  const std::uint16_t* k = nullptr;
  const std::uint16_t* v = nullptr;
  const std::uint16_t* dout = nullptr;  ///< dO (backward)
  std::uint16_t* o_bf16 = nullptr;      ///< O in bf16: written by modes bf16, debias, stochastic
  float* o_f32 = nullptr;               ///< O in f32: written by mode fp32; in the other modes, when not
                                        ///< null, the f32 O before its rounding (the probe's delta error needs it)
  float* lse = nullptr;                 ///< [batch, heads, seq_q] natural log-sum-exp of the scaled scores;
                                        ///< −Inf for a row that sees no key
  float* delta = nullptr;               ///< backward: rowsum(dO ∘ O) [batch, heads, seq_q]
  std::uint16_t* dq = nullptr;          ///< backward: bf16 gradients (round-to-nearest-even from f32)
  std::uint16_t* dk = nullptr;
  std::uint16_t* dv = nullptr;
};

/// Rows whose every score a probed forward pass writes out, for plots (MECHANISM.md: the prefix sum
/// along the keys, marking P-bar == 1). `rows` holds `count` row numbers q_row(b, h, i) (problem.hpp);
/// row r's key j goes to element r_index · seq_k + j of `score` (the raw f32 score S = Q Kᵀ, −Inf where
/// masked), `pbar` (P-bar as the kernel computed it) and `offset` (the offset o in force for that
/// key's tile, scaled log2 domain). Device pointers for the kernels. Written only by the probed
/// instantiation (flash_args::counters not null); keys past the last key tile of the row's block
/// (fwd_rows<true> rows: under a causal mask, the tiles its last row sees) are left as they were.
struct row_dump {
  const std::uint64_t* rows = nullptr;
  std::uint32_t count = 0;
  float* score = nullptr;
  float* pbar = nullptr;
  float* offset = nullptr;
};

/// One call. `counters`, when not null, is a HOST table of batch·heads head_counters (b·heads + h)
/// that the call adds its counts to (the probed instantiation runs only then).
struct flash_args {
  attn::problem prob;
  flash_options opt;
  flash_tensors t;
  probe::head_counters* counters = nullptr;
  row_dump dump;  ///< optional (count 0: none)
};

/// Why a call is not supported (flash_check); ok is zero.
enum class flash_error : std::uint8_t {
  ok = 0,
  bad_problem,      ///< problem::validate() failed
  dim_unsupported,  ///< dim != dim_v, or dim not 64 or 128
  too_large,        ///< a sequence or a tensor too long for the kernels' 32-bit row indices
  bad_beta,         ///< debias with beta not finite or not > 1
  bad_debias_shift, ///< debias with debias_max_shift outside [1, 100]
  bad_scale,        ///< scale not finite or not > 0
  bad_near_tolerance,  ///< near_tolerance negative, not finite, or not finite once divided by the scale
  missing_tensor,   ///< a pointer the call needs is null
  bad_exp,          ///< opt.exp is not an exp2_policy
};
TIEBREAK_HDC const char* error_text(flash_error e) noexcept {
  switch (e) {
    case flash_error::ok: return "";
    case flash_error::bad_problem: return "invalid attention shape";
    case flash_error::dim_unsupported: return "the attention kernels support head dims 64 and 128 with dim_v == dim";
    case flash_error::too_large: return "sequence too long for the attention kernels (at most 2^30 rows per head)";
    case flash_error::bad_beta: return "--beta must be finite and greater than 1";
    case flash_error::bad_debias_shift: return "--debias-max-shift must be between 1 and 100 (log2 units)";
    case flash_error::bad_scale: return "the scale must be finite and positive";
    case flash_error::bad_near_tolerance:
      return "--near-tolerance must be finite and not negative (and finite in raw-score units: tolerance / scale)";
    case flash_error::missing_tensor: return "a tensor the call needs is missing (null pointer)";
    case flash_error::bad_exp: return "unknown exponential policy (software or sfu)";
  }
  return "unknown attention error";
}

/// Checks what every call needs; `backward` adds dO, LSE, the O of the mode and the gradients.
TIEBREAK_HDC flash_error flash_check(const flash_args& a, bool backward) noexcept {
  if (!a.prob.shape.valid()) return flash_error::bad_problem;
  const shape& s = a.prob.shape;
  if (s.dim != s.dim_v || (s.dim != 64 && s.dim != 128)) return flash_error::dim_unsupported;
  if (s.seq_q > (std::size_t{1} << 30) || s.seq_k > (std::size_t{1} << 30) || s.batch * s.heads > (std::size_t{1} << 30))
    return flash_error::too_large;
  if (!(a.prob.scale > 0) || !(a.prob.scale < 1e30)) return flash_error::bad_scale;
  if (a.opt.mode == out_mode::debias && (!(a.opt.beta > 1.0f) || !(a.opt.beta < f32::inf))) return flash_error::bad_beta;
  if (a.opt.mode == out_mode::debias &&
      !(a.opt.debias_max_shift >= debias_max_shift_min && a.opt.debias_max_shift <= debias_max_shift_max))
    return flash_error::bad_debias_shift;
  if (a.opt.exp != exp2_policy::software && a.opt.exp != exp2_policy::sfu) return flash_error::bad_exp;
  if (!(a.opt.near_tolerance >= 0.0f) || !(static_cast<double>(a.opt.near_tolerance) / a.prob.scale < 0x1.fffffep127))
    return flash_error::bad_near_tolerance;
  const flash_tensors& t = a.t;
  if (!t.q || !t.k || !t.v || !t.lse) return flash_error::missing_tensor;
  if (a.opt.mode == out_mode::fp32 ? !t.o_f32 : !t.o_bf16) return flash_error::missing_tensor;
  if (backward && (!t.dout || !t.delta || !t.dq || !t.dk || !t.dv)) return flash_error::missing_tensor;
  return flash_error::ok;
}

/// The f32 constants of a call, derived once from the options (the same on both sides).
struct flash_consts {
  float scale_log2 = 0;  ///< c = scale · log2(e), rounded once from double to f32 (nearest-even)
  float near_raw = 0;    ///< near_tolerance / scale in raw-score units, rounded once from double
  float beta = 2;
  float max_shift = 64;  ///< debias_max_shift
  float scale = 1;       ///< the scale rounded once to f32 (dQ = scale · dS K, dK = scale · dSᵀ Q)
  philox_keyed philox{};  ///< stochastic: Philox4x32-10 under opt.seed, its ten round keys precomputed
};
TIEBREAK_HDC flash_consts make_consts(const flash_args& a) noexcept {
  flash_consts c;
  c.scale_log2 = static_cast<float>(a.prob.scale * 1.4426950408889634074);  // double -> f32: nearest-even
  c.near_raw = static_cast<float>(static_cast<double>(a.opt.near_tolerance) / a.prob.scale);
  c.beta = a.opt.beta;
  c.max_shift = a.opt.debias_max_shift;
  c.scale = static_cast<float>(a.prob.scale);
  c.philox = philox_keyed::of(a.opt.seed);
  return c;
}
inline constexpr float ln2_f32 = 0x1.62e430p-1f;    ///< ln 2 rounded to f32
inline constexpr float log2e_f32 = 0x1.715476p+0f;  ///< log2 e rounded to f32

// --- tiling and fragments ------------------------------------------------------------------------------

/// Forward tiles: 4 warps, fwd_mtiles m-tiles of 16 query rows per warp, 64 keys per tile. Without
/// the probe, two m-tiles per warp (32 rows, FlashAttention-2's 128 x 64 block of 4 warps): each K
/// and V fragment a warp reads from shared memory feeds two tensor-core instructions, half the
/// shared-memory reads per FLOP of one m-tile per warp, and Q is staged in shared memory
/// (docs/attention-bench.md, "Two m-tiles per warp"). With the probe, one m-tile per warp (64-row blocks;
/// at D = 128 Q's fragments in registers, no Q tile: 3 blocks per SM; fwd_q_staged): its counting and
/// its epilogue per row cost more registers and spills than a second m-tile saves (measured on the
/// H100 with mma.sync and with wgmma, docs/attention-bench.md, "Three forms timed and not kept").
inline constexpr int fwd_warps = 4;
template <bool Probed>
inline constexpr int fwd_mtiles = Probed ? 1 : 2;
inline constexpr int fwd_threads = 32 * fwd_warps;
template <bool Probed>
inline constexpr int fwd_rows = 16 * fwd_mtiles<Probed> * fwd_warps;
inline constexpr int fwd_keys = 64;

/// Blocks of the forward kernel resident per SM, its `__launch_bounds__` minimum (H100/H200: 64 K
/// registers per SM): without the probe 2 blocks of fwd_threads, 255 registers a thread (the O
/// accumulator of two m-tiles alone takes D registers); with it 3 blocks, 168 registers (one m-tile,
/// as the kernel was before two m-tiles; docs/attention-bench.md, "Three blocks per SM"). D = 64 with
/// the SFU's exponential: one block more, 3 (168 registers) and 4 (128), though ptxas then spills a
/// few words (16-32 bytes of stack): timed 1.01-1.15x faster on the H100 (docs/attention-bench.md,
/// "A block more per SM at D = 64"). The software exponential keeps the bounds above.
template <bool Probed, int D, exp2_policy E>
inline constexpr int fwd_min_blocks = (Probed ? 3 : 2) + (D == 64 && E == exp2_policy::sfu ? 1 : 0);
/// Whether the forward block stages Q in shared memory (two m-tiles per warp; and the probed block at
/// D = 64, whose 8 KB tile leaves its 4 blocks per SM and frees the 16 registers of Q's fragments,
/// which spilled at its 128-register bound) or keeps all of its warp's Q fragments in registers (the
/// probed block at D = 128: a 16 KB tile would cost it a block per SM).
template <bool Probed, int D>
inline constexpr bool fwd_q_staged = fwd_mtiles<Probed> > 1 || D == 64;

/// Shared memory of the forward kernel: K and V tiles, double-buffered, and the block's Q tile when
/// staged. The probe's per-thread head_counters (merged after the tile loop) reuse the tiles' space:
/// a probed block needs the larger of the two (D = 128: 96 KB unprobed, 2 blocks per SM; 64 KB
/// probed, 3 blocks, of the H200's 228 KB).
template <int D, bool Probed>
inline constexpr std::size_t fwd_tiles_bytes =
    (std::size_t{4} * fwd_keys + (fwd_q_staged<Probed, D> ? fwd_rows<Probed> : 0)) * D * 2;
template <int D, bool Probed>
inline constexpr std::size_t fwd_smem_bytes =
    Probed && sizeof(probe::head_counters) * fwd_threads > fwd_tiles_bytes<D, Probed>
        ? sizeof(probe::head_counters) * fwd_threads  // the counters' tree, when larger than the tiles
        : fwd_tiles_bytes<D, Probed>;

/// Offset of element (r, c) in a swizzled R x C bf16 tile (C = 64 or 128): the 16-byte chunk
/// c / 8 of row r is stored at chunk (c / 8) xor (r mod 8), so that the 8 rows an 8-lane group of a
/// fragment load touches fall in 8 different banks.
template <int C>
TIEBREAK_HDC int swz(int r, int c) noexcept {
  static_assert(C >= 64 && C % 64 == 0);
  return r * C + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}

/// Two bf16 encodings in one 32-bit register, `lo` at the lower k index (the mma operand order).
TIEBREAK_HDC std::uint32_t pack2(std::uint16_t lo, std::uint16_t hi) noexcept {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

/// Fragment layout of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4 g + t:
///   A (16 x 16, row-major) a[r], halves h = 0, 1: row g + 8 (r & 1), column 2 t + h + 8 (r >> 1)
///   B (16 x 8, k x n)      b[r], halves h:        k 2 t + h + 8 r, column n = g
///   C, D (16 x 8, f32)     c[i]:                  row g + 8 (i >> 1), column 2 t + (i & 1)
/// A from a swizzled row-major tile: rows row0.., k = columns col0..
template <int C>
TIEBREAK_HDC void load_a(std::uint32_t (&a)[4], const std::uint16_t* tile, int row0, int col0, int lane) noexcept {
  const int g = lane >> 2, t = lane & 3;
  TIEBREAK_UNROLL
  for (int r = 0; r < 4; ++r) {
    const int row = row0 + g + 8 * (r & 1), col = col0 + 2 * t + 8 * (r >> 1);
    const int o = swz<C>(row, col);
    a[r] = pack2(tile[o], tile[o + 1]);
  }
}
/// B with b(k, n) = tile[n0 + n][k0 + k] (the tile's rows are the n index: K for Q Kᵀ).
template <int C>
TIEBREAK_HDC void load_b_nmajor(std::uint32_t (&b)[2], const std::uint16_t* tile, int n0, int k0, int lane) noexcept {
  const int g = lane >> 2, t = lane & 3;
  TIEBREAK_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int o = swz<C>(n0 + g, k0 + 2 * t + 8 * r);
    b[r] = pack2(tile[o], tile[o + 1]);
  }
}
/// B with b(k, n) = tile[k0 + k][n0 + n] (the tile's rows are the k index: V for P V).
template <int C>
TIEBREAK_HDC void load_b_kmajor(std::uint32_t (&b)[2], const std::uint16_t* tile, int k0, int n0, int lane) noexcept {
  const int g = lane >> 2, t = lane & 3;
  TIEBREAK_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int k = k0 + 2 * t + 8 * r;
    b[r] = pack2(tile[swz<C>(k, n0 + g)], tile[swz<C>(k + 1, n0 + g)]);
  }
}

/// The operands of one thread in a warp-collective mma (be.mma).
struct mma_frags {
  const std::uint32_t* a;  ///< 4 registers
  const std::uint32_t* b;  ///< 2 registers
  float* c;                ///< 4 accumulators, updated in place
};

/// The f32 accumulators of NB C fragments (blocks of 8 columns) as the bf16 A fragments of the
/// next mma (NB / 2 chunks of 16 along k), each element rounded to nearest-even by the backend's
/// pack_bf16x2_rne (cvt.rn.bf16x2.f32 on the device, fast.hpp on the host). C's c[i] of block n is
/// (row g + 8 (i >> 1), column 8 n + 2 t + (i & 1)); A's a[r] of chunk n / 2 holds rows g + 8 (r & 1)
/// and columns 2 t, 2 t + 1 (+ 8 (r >> 1)): so a[r] = c[2 pk + (r >> 1)][2 (r & 1)], [.. + 1].
template <class Be, int NB>
TIEBREAK_FORCEINLINE TIEBREAK_HD void c_to_a_bf16(std::uint32_t (&a)[NB / 2][4], const float (&c)[NB][4]) noexcept {
  TIEBREAK_UNROLL
  for (int pk = 0; pk < NB / 2; ++pk)
    TIEBREAK_UNROLL
    for (int r = 0; r < 4; ++r) {
      const float(&blk)[4] = c[2 * pk + (r >> 1)];
      a[pk][r] = Be::pack_bf16x2_rne(blk[2 * (r & 1)], blk[2 * (r & 1) + 1]);
    }
}

/// The error r − x of a bf16 result `r` rounded (to nearest or stochastically) from the f32 value `x`,
/// as the integer k = (r − x) / ulp · 2^17, ulp the bf16 ulp at r (2^(e_r − 7), e_r the exponent of r;
/// 2^−133 for zeros and subnormals). Exact, in integer operations on the two encodings: r lies in x's
/// binade or is the first value of the next one, so r − x is the difference of the encodings in
/// units of x's f32 ulp, which is 2^−16 of r's bf16 ulp in the same binade (k = 2 Δ) and 2^−17 across
/// the boundary (k = Δ); subnormals count as exponent 1. |k| <= 2^17 (2^16 to nearest). Both finite:
/// the caller checks (bf16_error_finite). r has x's sign (every rounding of x does), so the difference
/// of the two encodings is that of the magnitudes: the sign bits cancel.
TIEBREAK_FORCEINLINE TIEBREAK_HD std::int32_t bf16_error_units(std::uint16_t r, float x) noexcept {
  const std::uint32_t rb = static_cast<std::uint32_t>(r) << 16, xb = f32_to_bits(x);
  const auto d = static_cast<std::int32_t>(rb - xb);  // |r| − |x| in x's ulps
  const std::uint32_t er = rb & 0x7f800000u, ex = xb & 0x7f800000u;
  const bool across = er > (ex > 0x00800000u ? ex : 0x00800000u);  // x subnormal: exponent 1, as r's ulp
  const std::int32_t k = across ? d : d + d;
  return (xb >> 31) != 0 ? -k : k;
}

/// Whether a bf16 result and the f32 it came from are both finite (the pairs whose error counts).
TIEBREAK_FORCEINLINE TIEBREAK_HD bool bf16_error_finite(std::uint16_t r, float x) noexcept {
  return (r & 0x7f80u) != 0x7f80u && (f32_to_bits(x) & 0x7f800000u) != 0x7f800000u;
}

/// Whether either bf16 half of a packed pair is Inf or NaN (exponent all ones), as a word: nonzero
/// then. Per half, ~h & 0x7f80 is 0 exactly then; subtracting 1 from each half borrows into its bit 15
/// only from 0 (a borrow out of the low half takes 1 more from the high one, whose field is then 0,
/// still borrowing, or at least 0x80, not). For a pair rounded from two floats, a finite half means
/// that its float was finite too (bf16_error_finite of both).
TIEBREAK_FORCEINLINE TIEBREAK_HDC std::uint32_t bf16x2_not_finite(std::uint32_t pk) noexcept {
  return ((~pk & 0x7f807f80u) - 0x00010001u) & 0x80008000u;
}

/// An error of k units (bf16_error_units) in bf16 ulps: k · 2^−17, exact in a float (|k| <= 2^17).
TIEBREAK_FORCEINLINE TIEBREAK_HD float error_units_to_ulps(std::int32_t k) noexcept {
  return f32::mul_rn(static_cast<float>(k), 0x1p-17f);
}

/// The same error in bf16 ulps at r.
TIEBREAK_FORCEINLINE TIEBREAK_HD float bf16_error_ulps(std::uint16_t r, float x) noexcept {
  return error_units_to_ulps(bf16_error_units(r, x));
}

/// Output rounding errors of one thread, summed exactly in integers: each error is k · 2^−17 ulp
/// (output_error_event::error_units, |k| <= 2^17), the sums are Σ k (32 bits: at most 2^14 errors,
/// a forward thread has D / 2 <= 64) and Σ k² (64 bits). moments() turns them into the probe's signed
/// moments; the double sums of those errors added one by one are exact too (at most 2^19 of them), so
/// the result is the same bits as that.
struct error_units_tally {
  std::int32_t sum = 0;
  std::uint64_t sum_sq = 0;
  std::uint32_t count = 0, positive = 0, negative = 0;
  TIEBREAK_FORCEINLINE TIEBREAK_HD void add(std::int32_t k) noexcept {
    accumulate(k);
    ++count;
  }
  /// add(k) but for the count, which the caller adds (one addition for a row of errors).
  TIEBREAK_FORCEINLINE TIEBREAK_HD void accumulate(std::int32_t k) noexcept {
    const auto u = static_cast<std::uint32_t>(k);
    sum += k;
    sum_sq += static_cast<std::uint64_t>(static_cast<std::int64_t>(k) * k);  // k² < 2^35: exact
    negative += u >> 31;          // the sign bit of k
    positive += (0u - u) >> 31;   // the sign bit of −k (|k| <= 2^17: no overflow)
  }
  [[nodiscard]] TIEBREAK_FORCEINLINE TIEBREAK_HD probe::signed_moments moments() const noexcept {
    probe::signed_moments m;
    m.count = count;
    m.positive = positive;
    m.negative = negative;
    m.sum = static_cast<double>(sum) * 0x1p-17;        // exact, then a power of two
    m.sum_sq = static_cast<double>(sum_sq) * 0x1p-34;  // exact below 2^53 (fewer than 2^19 errors)
    return m;
  }
};

/// A probe that counts into the counters it holds (one per thread of a kernel; merged per block
/// in thread order, then per head in block order: the same sums on host and device). P-bar == 1
/// events and output errors are counted in 32-bit / integer registers and folded into the
/// head_counters by counters().
struct thread_counting_probe {
  static constexpr bool enabled = true;
  probe::head_counters c;  ///< repeated maxima and delta errors
  std::uint32_t p_one = 0;
  error_units_tally output;
  TIEBREAK_FORCEINLINE TIEBREAK_HD void on_repeated_max(const probe::repeated_max_event& e) noexcept {
    c.repeated_max_exact += e.exact > 1 ? 1 : 0;
    c.repeated_max_near += e.near > 1 ? 1 : 0;
  }
  TIEBREAK_FORCEINLINE TIEBREAK_HD void on_p_one(const probe::p_one_event&) noexcept { ++p_one; }
  TIEBREAK_FORCEINLINE TIEBREAK_HD void on_output_error(const probe::output_error_event& e) noexcept { output.add(e.error_units); }
  /// The tally behind on_output_error, for a kernel that adds a row's errors to it directly (the
  /// forward's epilogue: the same counters in fewer instructions and registers).
  TIEBREAK_FORCEINLINE TIEBREAK_HD error_units_tally& output_units() noexcept { return output; }
  TIEBREAK_FORCEINLINE TIEBREAK_HD void on_delta_error(const probe::delta_error_event& e) noexcept { c.delta_error.add(e.error()); }
  [[nodiscard]] TIEBREAK_FORCEINLINE TIEBREAK_HD probe::head_counters counters() const noexcept {
    probe::head_counters r = c;
    r.p_one += p_one;
    r.output_error.merge(output.moments());
    return r;
  }
};

/// Probe: the counters of the block's T threads (counters(tid)) merged through `sc` (T entries of
/// shared memory no other phase uses) into *block_counters, by a fixed pairwise tree: at stride
/// s = T/2, T/4, .., 1 thread i < s merges entry i + s into entry i, a barrier between levels (log2 T
/// of them; thread 0 alone merging all T in a row cost the probed forward a serial tail per block).
/// Counts are exact in any order; the double sums follow the tree, on device and twin alike.
template <int T, class Be, class F>
TIEBREAK_FORCEINLINE TIEBREAK_HD void write_block_counters(Be& be, probe::head_counters* sc, F&& counters,
                                                           probe::head_counters* block_counters) {
  static_assert(T > 0 && (T & (T - 1)) == 0, "the tree needs a power-of-two thread count");
  be.for_threads([&](int tid) { sc[tid] = counters(tid); });
  be.sync();
  TIEBREAK_UNROLL
  for (int s = T / 2; s > 0; s /= 2) {
    be.for_threads([&](int tid) {
      if (tid < s) sc[tid].merge(sc[tid + s]);
    });
    be.sync();
  }
  be.for_threads([&](int tid) {
    if (tid == 0) *block_counters = sc[0];
  });
}

/// Adds n block counters to `sum` one after another, blocks[0] first: the one order in which a
/// head's block counters are summed, from zero, by the twin (merge_block_counters) and by the
/// launchers' per-head sum kernel (cuda/attention/flash_device.cuh, which feeds it 128 blocks at a
/// time), so that the double sums agree bit for bit.
TIEBREAK_FORCEINLINE TIEBREAK_HD void add_block_counters_in_order(probe::head_counters& sum, const probe::head_counters* blocks,
                                                                  std::size_t n) noexcept {
  for (std::size_t j = 0; j < n; ++j) sum.merge(blocks[j]);
}

/// Adds the probe's per-block counters to the caller's per-head table a.counters: blocks[i · per_head
/// + j] is block j of head i (b · heads + h); each head's blocks are summed from zero in block order
/// before the sum is added (the twin; the launchers add the sums the device computed). Host only.
inline void merge_block_counters(const flash_args& a, const probe::head_counters* blocks, std::size_t per_head) noexcept {
  const std::size_t bh = a.prob.shape.batch * a.prob.shape.heads;
  for (std::size_t i = 0; i < bh; ++i) {
    probe::head_counters sum{};
    add_block_counters_in_order(sum, blocks + i * per_head, per_head);
    a.counters[i].merge(sum);
  }
}

// --- the forward pass ----------------------------------------------------------------------------------

/// m | bit where a >= b (or_if_eq: a == b), else m; NaN compares false. On the device a compare and
/// a predicated or (FSETP, @P LOP3): a mask of compares then costs two instructions per bit, where
/// the plain expression (m | (a >= b ? bit : 0)) compiles to three (a select in between).
TIEBREAK_FORCEINLINE TIEBREAK_HD std::uint32_t or_if_ge(std::uint32_t m, float a, float b, std::uint32_t bit) noexcept {
#if defined(__CUDA_ARCH__)
  asm("{\n .reg .pred p;\n setp.ge.f32 p, %1, %2;\n @p or.b32 %0, %0, %3;\n}" : "+r"(m) : "f"(a), "f"(b), "r"(bit));
  return m;
#else
  return a >= b ? m | bit : m;
#endif
}
TIEBREAK_FORCEINLINE TIEBREAK_HD std::uint32_t or_if_eq(std::uint32_t m, float a, float b, std::uint32_t bit) noexcept {
#if defined(__CUDA_ARCH__)
  asm("{\n .reg .pred p;\n setp.eq.f32 p, %1, %2;\n @p or.b32 %0, %0, %3;\n}" : "+r"(m) : "f"(a), "f"(b), "r"(bit));
  return m;
#else
  return a == b ? m | bit : m;
#endif
}

/// The offset (in the scaled log2 domain) of a row whose running maximum is m, seen `count` times:
/// o = m ⊗ c; under `debias`, once the maximum repeats, the paper's o = (β ⊗ m) ⊗ c (m > 0) or 0
/// (m < 0), but never more than (m ⊗ c) ⊕ max_shift. The bound keeps P-bar at the maximum, 2^(m⊗c − o),
/// at or above 2^−max_shift: the unbounded offset pushes it below f32's range once (β − 1)·m·c passes
/// 126 (β = 2: a scaled maximum above 87.3), every P-bar of the row flushes to 0 and O = 0/0 (the
/// causal experiment's debias runs diverged exactly so; docs/attention.md, "debias"). Rows where the
/// paper's shift is at most max_shift (β = 2, max_shift = 64: |scaled maximum| <= 44.4) are unchanged.
template <out_mode Mode>
TIEBREAK_FORCEINLINE TIEBREAK_HD float row_offset(float m, std::uint32_t count, const flash_consts& c) noexcept {
  // m = -Inf: no visible key yet, every P-bar is exp2(-Inf) = 0 and the offset is 0.
  if constexpr (Mode == out_mode::debias) {
    // Every candidate computed, then one chosen by selects: no branch per row (branches here kept
    // the device's scheduler from interleaving the rows' offsets with the exponentials). For
    // m = -Inf the unused candidates are -Inf or 0, never a trap.
    const float mc = f32::mul_rn(m, c.scale_log2);
    const float ob = m > 0.0f ? f32::mul_rn(f32::mul_rn(c.beta, m), c.scale_log2) : 0.0f;
    const float cap = f32::add_rn(mc, c.max_shift);
    const float od = ob > cap ? cap : ob;  // m = +Inf: ob = cap = +Inf
    const bool repeats = count > 1 && (m > 0.0f || m < 0.0f);  // m = 0 or NaN: o = m ⊗ c, as the paper (0) and NaN propagate
    return m == -f32::inf ? 0.0f : repeats ? od : mc;
  } else {
    if (m == -f32::inf) return 0.0f;
    return f32::mul_rn(m, c.scale_log2);
  }
}

/// x of P-bar = exp2(x) for a raw score s and an offset o (the file comment).
template <score_scaling Sc>
TIEBREAK_FORCEINLINE TIEBREAK_HD float score_x(float s, float o, const flash_consts& c) noexcept {
  if constexpr (Sc == score_scaling::unfused) return f32::sub_rn(f32::mul_rn(s, c.scale_log2), o);
  else return f32::fma_rn(s, c.scale_log2, -o);
}

/// Whether every x = score_x(s, o) with s in [lo, hi] and o in [olo, ohi] lies in [-126, 128): x is
/// non-decreasing in s and non-increasing in o (both scalings), so its range is
/// [score_x(lo, ohi), score_x(hi, olo)]. False when lo is NaN (a NaN score, by min_nan) or an end is
/// not finite. Where it holds, exp2_sw(score_x(s, o)) is exp2_sw_in_range(score_x(s, o)): the same
/// bits without the clamp and the NaN repair (the forward's P-bar; recompute_p of a visible score:
/// o = lse2 = +Inf gives x = −Inf, not in range).
/// exp2(x) under policy E: exp2_sw, or Be::ex2_approx_ftz (the SFU instruction on the device, its
/// model on the host). exp2_p_in_range: the same for x known to lie in [-126, 128) and not NaN
/// (exp2_sw_in_range; the SFU needs no such knowledge).
template <exp2_policy E, class Be>
TIEBREAK_FORCEINLINE TIEBREAK_HD float exp2_p(float x) noexcept {
  if constexpr (E == exp2_policy::sfu) return Be::ex2_approx_ftz(x);
  else return f32::exp2_sw(x);
}
template <exp2_policy E, class Be>
TIEBREAK_FORCEINLINE TIEBREAK_HD float exp2_p_in_range(float x) noexcept {
  if constexpr (E == exp2_policy::sfu) return Be::ex2_approx_ftz(x);
  else return f32::exp2_sw_in_range(x);
}

template <score_scaling Sc>
TIEBREAK_FORCEINLINE TIEBREAK_HD bool x_in_range(float lo, float hi, float olo, float ohi, const flash_consts& c) noexcept {
  return score_x<Sc>(lo, ohi, c) >= -126.0f && score_x<Sc>(hi, olo, c) < 128.0f;
}

/// Registers of one forward thread: its 2 MT rows (g and g + 8 of each of its warp's 16-row
/// m-tiles) of the S / P tile and of the O accumulator, the row state, and its probe. Local row x
/// (0 .. 2 MT − 1) is row g + 8 (x & 1) of m-tile x >> 1: fwd_row<MT>(x). MT = fwd_mtiles<probed>.
template <int D, class Probe>
struct fwd_regs {
  static constexpr int MT = fwd_mtiles<Probe::enabled>, XR = 2 * MT;
  static constexpr bool QS = fwd_q_staged<Probe::enabled, D>;
  static constexpr int KC = D / 16, NB = fwd_keys / 8, DN = D / 8, PK = fwd_keys / 16;
  std::uint32_t qa[QS ? MT : D / 16][4];  ///< A fragments of Q: one head-dim chunk per m-tile (QS, from the
                                         ///< shared Q tile), or every chunk of the one m-tile
  float s[MT][NB][4];
  float o[MT][DN][4];
  std::uint32_t p[MT][PK][4];
  std::uint32_t kb[NB][2];  ///< B fragments of one head-dim chunk of K, all key blocks
  std::uint32_t vb[DN][2];  ///< B fragments of one key chunk of V, all head-dim blocks
  float m[XR];             ///< running maximum of the raw scores
  float off[XR];           ///< current offset (scaled log2 domain)
  float l[XR];             ///< this thread's part of the row sum of P-bar
  float tmax[XR];          ///< tile: quad maximum
  float tmt[XR];           ///< tile: the thread's own maximum (probe)
  float tmin[XR];          ///< tile: the thread's minimum score (NaN if any score is NaN)
  std::uint32_t cnt[XR];   ///< debias: scores equal to the running maximum (quad total)
  std::uint32_t pcnt[XR];  ///< probe, modes but debias: the thread's scores equal to the running maximum
  std::uint32_t pnear[XR];  ///< probe: the thread's scores within the tolerance of it
  std::uint32_t tcount[MT];  ///< debias: this tile's repeats of m-tile mt, a byte each (row 0, row 1)
  int dslot[XR];           ///< probe: the row's place in flash_args::dump.rows, or -1
  Probe pr;
  /// Score e (0, 1) of key block nb in local row x; the O accumulator likewise.
  TIEBREAK_FORCEINLINE TIEBREAK_HD float& sc(int x, int nb, int e) noexcept { return s[x >> 1][nb][2 * (x & 1) + e]; }
  TIEBREAK_FORCEINLINE TIEBREAK_HD float& oc(int x, int dn, int e) noexcept { return o[x >> 1][dn][2 * (x & 1) + e]; }
};

/// Whether backend Be multiplies whole tiles per warpgroup (Be::warpgroup_mma, see the contract above).
template <class Be>
inline constexpr bool warpgroup_mma_v = requires { requires Be::warpgroup_mma; };

/// The alignment of a warpgroup backend's tiles (the 128-byte swizzle reads address bits 7-9): a
/// launch gives a kernel that runs one this many bytes of shared memory beyond its tiles' sum, and
/// the kernel rounds its tiles' base up to it.
inline constexpr std::size_t warpgroup_tile_align = 1024;

/// Layouts of a warpgroup backend's tiles (cuda/attention/flash_device.cuh, wgmma_backend), here so that
/// the host tests pin them (tests/host/attn/wgmma_layout_test.cpp).
///
/// The byte offset of 16-byte chunk c of the row in slot sr of a tile of R rows, 128-byte swizzle
/// (wgmma's): the tile is C / 64 blocks of [R][64] bf16, and the chunk sits at c mod 8 xor (sr mod 8)
/// of its row's 128 bytes, which is what the hardware's swizzle of address bits 4-6 by bits 7-9 reads
/// from a 1024-byte-aligned tile. At C = 64 this is swz<64>.
template <int R>
TIEBREAK_HDC int sw128_offset(int sr, int c) noexcept {
  return ((c >> 3) * R + sr) * 128 + (((c & 7) ^ (sr & 7)) << 4);
}
/// The slot of row r of the staged Q tile (64 MT rows): each wgmma's 64 rows [64 mt, 64 mt + 64) are the
/// m-tile mt of warps 0..3 in order, as the instruction gives warp w rows 16 w .. 16 w + 15 of its 64
/// (warp w holds rows 16 MT w + 16 mt + i, fwd_row).
template <int MT>
TIEBREAK_HDC int wgmma_q_slot(int r) noexcept {
  return 64 * ((r >> 4) % MT) + 16 * (r / (16 * MT)) + (r & 15);
}

/// The query row of a forward thread's local row x (fwd_regs): warp w's rows are
/// [16 MT w, 16 MT (w + 1)) of the block's, lane 4 g + t holds rows g and g + 8 of each m-tile.
template <int MT>
TIEBREAK_FORCEINLINE TIEBREAK_HDC int fwd_row(int q0, int w, int g, int x) noexcept {
  return q0 + 16 * MT * w + 16 * (x >> 1) + g + 8 * (x & 1);
}

/// One block of the forward pass: query rows [qt·ROWS, qt·ROWS + ROWS) of (batch b, head h), ROWS =
/// fwd_rows<Probe::enabled>.
/// `block_counters` (probed only): this block's merged counters are written there.
template <class Be, int D, out_mode Mode, score_scaling Sc, class Probe, exp2_policy E = exp2_policy::software>
TIEBREAK_FORCEINLINE TIEBREAK_HD void flash_forward_block(Be& be, const flash_args& a, const flash_consts& c,
                                                          int b, int h, int qt, probe::head_counters* block_counters) {
  using R = fwd_regs<D, Probe>;
  constexpr int KC = R::KC, NB = R::NB, DN = R::DN, PK = R::PK, MT = R::MT, XR = R::XR, BC = fwd_keys;
  const shape& sh = a.prob.shape;
  const int seq_q = static_cast<int>(sh.seq_q), seq_k = static_cast<int>(sh.seq_k);
  const int kvh = static_cast<int>(sh.kv_head(static_cast<std::size_t>(h)));
  constexpr int ROWS = fwd_rows<Probe::enabled>;
  const int q0 = qt * ROWS;
  const int last_row = (q0 + ROWS < seq_q ? q0 + ROWS : seq_q) - 1;
  const int keys = static_cast<int>(a.prob.visible_keys(static_cast<std::size_t>(last_row)));
  const int tiles = (keys + BC - 1) / BC;
  const bool causal = a.prob.causal();

  std::uint16_t* ks = be.smem();                  // [2][BC][D]
  std::uint16_t* vs = ks + 2 * BC * D;            // [2][BC][D]
  std::uint16_t* qs = vs + 2 * BC * D;            // [ROWS][D] when R::QS
  const std::uint16_t* kg = a.t.k + sh.k_offset(b, kvh, 0);
  const std::uint16_t* vg = a.t.v + sh.v_offset(b, kvh, 0);

  R regs[Be::slots];

  // Row state, and Q's fragments when they stay in registers (otherwise the Q tile comes through
  // shared memory with the first K/V tile, below).
  be.for_threads([&](int tid) {
    R& r = regs[be.slot(tid)];
    const int lane = tid & 31, w = tid >> 5, g = lane >> 2;
    if constexpr (!R::QS) {
      const int t = lane & 3;
      TIEBREAK_UNROLL
      for (int kc = 0; kc < KC; ++kc) {
        TIEBREAK_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int row = q0 + 16 * w + g + 8 * (i & 1), col = 16 * kc + 2 * t + 8 * (i >> 1);
          r.qa[kc][i] = row < seq_q ? be.load_pair(a.t.q + sh.q_offset(b, h, row) + col) : 0u;  // col even: one 4-byte load
        }
      }
    }
    TIEBREAK_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      TIEBREAK_UNROLL
      for (int i = 0; i < DN; ++i)
        TIEBREAK_UNROLL
        for (int j = 0; j < 4; ++j) r.o[mt][i][j] = 0.0f;
    TIEBREAK_UNROLL
    for (int x = 0; x < XR; ++x) {
      r.m[x] = -f32::inf;
      r.off[x] = 0.0f;
      r.l[x] = 0.0f;
      r.cnt[x] = 0;
      r.pcnt[x] = 0;
      r.pnear[x] = 0;
      r.dslot[x] = -1;
      if constexpr (Probe::enabled) {
        const int row = fwd_row<MT>(q0, w, g, x);
        if (row < seq_q) {
          const std::uint64_t qr = sh.q_row(b, h, row);
          for (std::uint32_t i = 0; i < a.dump.count; ++i)
            if (a.dump.rows[i] == qr) r.dslot[x] = static_cast<int>(i);
        }
      }
    }
  });

  // Tiles [0, nomask_tiles) need no mask: their keys all lie below seq_k and, causal, below the
  // first row's visible prefix (which grows with the row).
  const int first_keys = causal ? static_cast<int>(a.prob.visible_keys(static_cast<std::size_t>(q0))) : seq_k;
  const int full_keys = first_keys < seq_k ? first_keys : seq_k;
  const int nomask_tiles = full_keys / BC;

  if (tiles > 0) {
    // Q's rows past seq_q read as zero (their rows are never stored).
    if constexpr (R::QS && warpgroup_mma_v<Be>) be.template load_q_tile<ROWS, D, MT>(qs, a.t.q + sh.q_offset(b, h, q0), seq_q - q0);
    else if constexpr (R::QS) be.template load_tile<ROWS, D>(qs, a.t.q + sh.q_offset(b, h, q0), seq_q - q0);
    be.template load_tile<BC, D>(ks, kg, seq_k < BC ? seq_k : BC);
    be.template load_tile<BC, D>(vs, vg, seq_k < BC ? seq_k : BC);
    be.commit();
  }
  for (int kt = 0; kt < tiles; ++kt) {
    const int k0 = kt * BC, buf = kt & 1;
    if (kt + 1 < tiles) {
      const int k1 = k0 + BC, rows = seq_k - k1 < BC ? seq_k - k1 : BC, nb = buf ^ 1;
      be.template load_tile<BC, D>(ks + nb * BC * D, kg + static_cast<std::size_t>(k1) * D, rows);
      be.template load_tile<BC, D>(vs + nb * BC * D, vg + static_cast<std::size_t>(k1) * D, rows);
      be.commit();
      be.template wait<1>();
    } else {
      be.template wait<0>();
    }
    be.sync();
    const std::uint16_t* kt_s = ks + buf * BC * D;
    const std::uint16_t* vt_s = vs + buf * BC * D;

    // S = Q Kᵀ: per element, the chain of mma over the 16-wide chunks of the head dim, in order. Each
    // K fragment read from shared memory serves the warp's MT m-tiles.
    be.for_threads([&](int tid) {
      R& r = regs[be.slot(tid)];
      TIEBREAK_UNROLL
      for (int mt = 0; mt < MT; ++mt)
        TIEBREAK_UNROLL
        for (int nb = 0; nb < NB; ++nb)
          TIEBREAK_UNROLL
          for (int j = 0; j < 4; ++j) r.s[mt][nb][j] = 0.0f;
    });
    if constexpr (warpgroup_mma_v<Be>) {
      static_assert(Be::slots == 1, "a warpgroup backend runs on the device, a thread per slot");
      be.template qk_tile<D, MT, R::QS>(regs[0].s, regs[0].qa, qs, kt_s);
    } else {
      TIEBREAK_UNROLL
      for (int kc = 0; kc < KC; ++kc) {
        if constexpr (R::QS)
          be.for_threads([&](int tid) {
            R& r = regs[be.slot(tid)];
            TIEBREAK_UNROLL
            for (int mt = 0; mt < MT; ++mt)
              be.template load_a<D>(r.qa[mt], qs, 16 * MT * (tid >> 5) + 16 * mt, 16 * kc, tid & 31);
          });
        TIEBREAK_UNROLL
        for (int nb = 0; nb < NB; nb += 2)  // all fragments of the chunk first: the loads overlap
          be.for_threads([&](int tid) {
            R& r = regs[be.slot(tid)];
            be.template load_b2_nmajor<D>(r.kb[nb], r.kb[nb + 1], kt_s, 8 * nb, 16 * kc, tid & 31);
          });
        TIEBREAK_UNROLL
        for (int nb = 0; nb < NB; ++nb) {
          TIEBREAK_UNROLL
          for (int mt = 0; mt < MT; ++mt)
            be.mma([&](int tid) {
              R& r = regs[be.slot(tid)];
              return mma_frags{r.qa[R::QS ? mt : kc], r.kb[nb], r.s[mt][nb]};
            });
        }
      }
    }

    // Mask (keys past seq_k, causal), the thread's maximum (and minimum) per row, then the quad's maximum.
    const bool need_mask = kt >= nomask_tiles;
    be.for_threads([&](int tid) {
      R& r = regs[be.slot(tid)];
      const int lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
      TIEBREAK_UNROLL
      for (int x = 0; x < XR; ++x) {
        if (need_mask) {  // the tiles at the end of the keys or across the causal diagonal only
          const int row = fwd_row<MT>(q0, w, g, x);
          const int vis = (row < seq_q ? static_cast<int>(a.prob.visible_keys(row)) : seq_k) - k0 - 2 * t;
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int e = 0; e < 2; ++e)
              if (8 * nb + e >= vis) r.sc(x, nb, e) = -f32::inf;
        }
        float mx = -f32::inf, mi = f32::inf;
        TIEBREAK_UNROLL
        for (int nb = 0; nb < NB; ++nb)
          TIEBREAK_UNROLL
          for (int e = 0; e < 2; ++e) {
            mx = f32::max(mx, r.sc(x, nb, e));
            if constexpr (E == exp2_policy::software) mi = f32::min_nan(mi, r.sc(x, nb, e));
          }
        r.tmax[x] = mx;
        if constexpr (Probe::enabled && Mode != out_mode::debias) r.tmt[x] = mx;
        r.tmin[x] = mi;
      }
    });
    TIEBREAK_UNROLL
    for (int x = 0; x < XR; ++x) be.quad_max([&](int tid) -> float& { return regs[be.slot(tid)].tmax[x]; });

    // debias: repeats of the new running maximum in this tile (exact, and near for the probe), then
    // the quad's totals: the offset depends on whether the row's maximum repeats. In the other modes
    // the probe counts per thread instead, in the softmax below.
    // The predicated or (or_if_eq, or_if_ge) and the counts' selects in the probed kernel at D = 64
    // only: unprobed they cut the loop's SASS but timed 0.96-0.99x on the H100 (2026-12-06, 16:32
    // UTC), and the probed D = 128 kernel spilled with them (12 bytes) and timed 0.94-0.99x at
    // S = 16k; those keep the plain expressions.
    constexpr bool debias_masks = Probe::enabled && D == 64;
    if constexpr (Mode == out_mode::debias) {
    be.for_threads([&](int tid) {
      R& r = regs[be.slot(tid)];
      TIEBREAK_UNROLL
      for (int x = 0; x < XR; ++x) {
        const float mn = f32::max(r.m[x], r.tmax[x]);
        const float lo = f32::sub_rn(mn, c.near_raw);
        std::uint32_t ce = 0, cn = 0;
        // Every score of the thread is <= the quad's tile maximum: when that lies below the
        // threshold (the maximum, or with the probe lo <= it), no score can count, and the loop is
        // skipped (most tiles, once the row's maximum has settled). Exact: the counts are 0 either way.
        // The comparisons as bit masks (one bit per score), then a population count each.
        if (r.tmax[x] >= (Probe::enabled ? lo : mn) && mn != -f32::inf) {
          static_assert(2 * NB <= 32, "a score per bit");
          std::uint32_t me = 0, mnear = 0;
          TIEBREAK_UNROLL
          for (int i = 0; i < 2 * NB; ++i) {
            if constexpr (debias_masks) {
              me = or_if_eq(me, r.sc(x, i >> 1, i & 1), mn, 1u << i);
              mnear = or_if_ge(mnear, r.sc(x, i >> 1, i & 1), lo, 1u << i);
            } else {
              me |= (r.sc(x, i >> 1, i & 1) == mn ? 1u : 0u) << i;
              if constexpr (Probe::enabled) mnear |= (r.sc(x, i >> 1, i & 1) >= lo ? 1u : 0u) << i;
            }
          }
          ce = static_cast<std::uint32_t>(popcount32(me));
          if constexpr (Probe::enabled) cn = static_cast<std::uint32_t>(popcount32(mnear));
        }
        if ((x & 1) == 0) r.tcount[x >> 1] = 0;
        r.tcount[x >> 1] |= ce << (8 * (x & 1)) | cn << (16 + 8 * (x & 1));
      }
    });
    // The quad's totals, the four counts of an m-tile in one word (a quad's count is at most
    // 4 · 2 NB = 64 < 2^8: no byte carries into the next), so one butterfly instead of four.
    static_assert(4 * 2 * NB < 256, "a quad's count per byte");
    TIEBREAK_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      be.quad_count([&](int tid) -> std::uint32_t& { return regs[be.slot(tid)].tcount[mt]; });
    }

    // Online softmax: new maximum and offset, rescale factor, P-bar, row sums, P in bf16.
    be.for_threads([&](int tid) {
      R& r = regs[be.slot(tid)];
      const int lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
      TIEBREAK_UNROLL
      for (int x = 0; x < XR; ++x) {
        const float mo = r.m[x];
        // Probed kernels only: a row whose quad tile maximum lies below its running one keeps its
        // maximum, adds 0 to its exact count (below) and so keeps its offset, and alpha =
        // exp2(o ⊖ o) = 1 exactly (exp2_sw and the SFU's ex2 alike): row_offset, the exponential and
        // l ⊗ 1 are skipped, the same bits. An offset of +Inf (m ⊗ c overflowed) makes alpha NaN,
        // which matters when fused (fma(m, c, −Inf) = −Inf can leave l = 0): such rows take the full
        // path (FlashTwin.OverflowingScaledMaximumIsNaNProbedOrNot). Unprobed kernels gained nothing
        // from the branch on the H100 (debias 0.96-1.00x, 2026-12-06), and bf16's code spilled with it.
        const bool settled = Probe::enabled && r.tmax[x] < mo && r.off[x] < f32::inf;
        const float mn = f32::max(mo, r.tmax[x]);
        const bool restart = mn > mo || mo == -f32::inf;  // a new maximum restarts the repeat counts
        if constexpr (Mode == out_mode::debias) {
          const std::uint32_t tw = r.tcount[x >> 1];
          const std::uint32_t tc = (tw >> (8 * (x & 1))) & 0xffu, tn = (tw >> (16 + 8 * (x & 1))) & 0xffu;
          if constexpr (debias_masks) {
            r.cnt[x] = restart ? tc : r.cnt[x] + tc;
            r.pnear[x] = restart ? tn : r.pnear[x] + tn;
          } else if (restart) {  // the other kernels: the plain form
            r.cnt[x] = tc;
            if constexpr (Probe::enabled) r.pnear[x] = tn;
          } else {
            r.cnt[x] += tc;
            if constexpr (Probe::enabled) r.pnear[x] += tn;
          }
        }
        float on = r.off[x], alpha = 1.0f, l = r.l[x];
        if (!settled) {
          on = row_offset<Mode>(mn, r.cnt[x], c);
          alpha = mo == -f32::inf ? 0.0f : exp2_p<E, Be>(f32::sub_rn(r.off[x], on));
          r.m[x] = mn;
          r.off[x] = on;
          l = f32::mul_rn(l, alpha);
        }
        const int row = fwd_row<MT>(q0, w, g, x);
        // Probe: the row's repeats (exact: equal to the running maximum; near: within the tolerance,
        // s >= lo) and its P-bar == 1 events, each thread counting its own scores (the quad's totals
        // are summed once, after the tiles). A thread's scores are <= its own tile maximum tm, and x
        // is non-decreasing in the score under both scalings, so the thread can count something only
        // when tm >= lo (a repeat) or x(tm) >= -2^-20 (P-bar == 1 needs that: exp2_sw(x) < 1 - 6e-7
        // below, the SFU's is 1 only for x > -2^-23, fp/sfu.hpp); otherwise (most rows, most tiles)
        // its counts only restart when the quad's maximum rose. Where the thread holds at most one
        // score >= lo (tn <= 1), that score is tm: it is exact iff tm == mn, and when moreover
        // x(lo) < -2^-20 no other score can give P-bar == 1, so tm's P-bar, recomputed (the same
        // exp2 of the same x as the loop below), decides the event; otherwise (repeats near the
        // maximum) every score is compared. Exact either way: the counts are those of a compare per score.
        [[maybe_unused]] bool p_scan = false;
        if constexpr (Probe::enabled && Mode == out_mode::debias) {
          // debias counted its repeats per quad (above); P-bar == 1 (rare here: a repeated maximum
          // moves the offset above it) is looked for where the quad's maximum could give it.
          p_scan = row < seq_q && score_x<Sc>(r.tmax[x], on, c) >= -0x1p-20f;
        } else if constexpr (Probe::enabled) {
          const float lo = f32::sub_rn(mn, c.near_raw), tm = r.tmt[x];
          const bool cand = tm >= lo && mn != -f32::inf;
          const bool pcand = row < seq_q && score_x<Sc>(tm, on, c) >= -0x1p-20f;
          if (restart || cand || pcand) {
            std::uint32_t tn = 0, te = 0, mnear = 0;
            if (cand) {
              static_assert(2 * NB <= 32, "a score per bit");
              TIEBREAK_UNROLL
              for (int i = 0; i < 2 * NB; ++i) mnear = or_if_ge(mnear, r.sc(x, i >> 1, i & 1), lo, 1u << i);
              tn = static_cast<std::uint32_t>(popcount32(mnear));
              if (tn > 1) {
                std::uint32_t me = 0;
                TIEBREAK_UNROLL
                for (int i = 0; i < 2 * NB; ++i) me = or_if_eq(me, r.sc(x, i >> 1, i & 1), mn, 1u << i);
                te = static_cast<std::uint32_t>(popcount32(me));
              } else {
                te = tm == mn ? 1u : 0u;  // tn == 1 here (cand: tm >= lo)
              }
            }
            if (pcand) {
              if (tn <= 1 && score_x<Sc>(lo, on, c) < -0x1p-20f) {
                // tn == 1: pcand and x(lo) < -2^-20 put tm >= lo; mnear's one bit is tm's score.
                if (exp2_p<E, Be>(score_x<Sc>(tm, on, c)) == 1.0f) {
                  const int i = 63 - clz64(mnear);
                  r.pr.on_p_one(probe::p_one_event{{static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(h),
                                                    static_cast<std::uint32_t>(row)},
                                                   static_cast<std::uint32_t>(k0 + 8 * (i >> 1) + 2 * t + (i & 1))});
                }
              } else {
                p_scan = true;  // after the exponentials, below
              }
            }
            r.pnear[x] = restart ? tn : r.pnear[x] + tn;
            r.pcnt[x] = restart ? te : r.pcnt[x] + te;
          }
        }
        // Probe, on dumped rows only (a branch per row, found once before the tiles): the raw
        // scores kept before P-bar overwrites them, then written with the offset in force and P-bar
        // by one rolled loop (below), through per-thread memory indexed at run time.
        [[maybe_unused]] float raw[2 * NB];
        if constexpr (Probe::enabled) {
          if (r.dslot[x] >= 0) {
            TIEBREAK_UNROLL
            for (int i = 0; i < 2 * NB; ++i) raw[i] = r.sc(x, i >> 1, i & 1);
          }
        }
        // P-bar = exp2_sw(x). Where every x of the thread's scores of this row lies in [-126, 128) and
        // none is NaN (most tiles), exp2_sw_in_range: the same operations without the clamp and the
        // NaN repair, which are the identity there (5 of exp2_sw's 15 instructions), so the same bits.
        // x is non-decreasing in the score under both scalings, so the thread's x lie in
        // [x(tmin), x(tmax)]; tmin is NaN when any score is (then, and for masked tiles, scores far
        // below the maximum, Inf inputs or huge offsets, the clamped path runs).
        auto row_exps = [&](auto in_range) {
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb) {
            TIEBREAK_UNROLL
            for (int e = 0; e < 2; ++e) {
              float& sv = r.sc(x, nb, e);
              const float xv = score_x<Sc>(sv, on, c);
              sv = decltype(in_range)::value ? exp2_p_in_range<E, Be>(xv) : exp2_p<E, Be>(xv);
              l = f32::add_rn(l, sv);
            }
          }
        };
        if constexpr (E == exp2_policy::sfu) row_exps(std::true_type{});  // one instruction for every x
        else if (x_in_range<Sc>(r.tmin[x], r.tmax[x], on, on, c)) row_exps(std::true_type{});
        else row_exps(std::false_type{});
        r.l[x] = l;
        if constexpr (Probe::enabled) {
          if (r.dslot[x] >= 0) {
            float pbar[2 * NB];
            TIEBREAK_UNROLL
            for (int i = 0; i < 2 * NB; ++i) pbar[i] = r.sc(x, i >> 1, i & 1);
            const std::size_t at = static_cast<std::size_t>(r.dslot[x]) * sh.seq_k;
            TIEBREAK_ROLLED
            for (int i = 0; i < 2 * NB; ++i) {
              const int key = k0 + 8 * (i >> 1) + 2 * t + (i & 1);
              if (key >= seq_k) continue;
              const std::size_t j = at + static_cast<std::size_t>(key);
              if (a.dump.score) a.dump.score[j] = raw[i];
              if (a.dump.offset) a.dump.offset[j] = on;
              if (a.dump.pbar) a.dump.pbar[j] = pbar[i];
            }
          }
          // P-bar == 1 by a compare per score, where it was not settled above (debias: wherever the
          // quad's maximum could give it).
          if (p_scan) {
            TIEBREAK_UNROLL
            for (int nb = 0; nb < NB; ++nb)
              TIEBREAK_UNROLL
              for (int e = 0; e < 2; ++e)
                if (r.sc(x, nb, e) == 1.0f)
                  r.pr.on_p_one(probe::p_one_event{{static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(h),
                                                    static_cast<std::uint32_t>(row)},
                                                   static_cast<std::uint32_t>(k0 + 8 * nb + 2 * t + e)});
          }
        }
        if (alpha != 1.0f) {  // o ⊗ 1 == o: skipped (a branch, not 32 multiplications, once the maximum settles)
          TIEBREAK_UNROLL
          for (int dn = 0; dn < DN; ++dn) {
            r.oc(x, dn, 0) = f32::mul_rn(r.oc(x, dn, 0), alpha);
            r.oc(x, dn, 1) = f32::mul_rn(r.oc(x, dn, 1), alpha);
          }
        }
      }
      TIEBREAK_UNROLL
      for (int mt = 0; mt < MT; ++mt) c_to_a_bf16<Be, NB>(r.p[mt], r.s[mt]);
    });

    // O += P V: per element, the chain over the 16-key chunks of the tile, in order. Each V fragment
    // read from shared memory serves the warp's MT m-tiles.
    if constexpr (warpgroup_mma_v<Be>) {
      be.template pv_tile<D, MT>(regs[0].o, regs[0].p, vt_s);
    } else {
      TIEBREAK_UNROLL
      for (int pk = 0; pk < PK; ++pk) {
        TIEBREAK_UNROLL
        for (int dn = 0; dn < DN; dn += 2)
          be.for_threads([&](int tid) {
            R& r = regs[be.slot(tid)];
            be.template load_b2_kmajor<D>(r.vb[dn], r.vb[dn + 1], vt_s, 16 * pk, 8 * dn, tid & 31);
          });
        TIEBREAK_UNROLL
        for (int dn = 0; dn < DN; ++dn) {
          TIEBREAK_UNROLL
          for (int mt = 0; mt < MT; ++mt)
            be.mma([&](int tid) {
              R& r = regs[be.slot(tid)];
              return mma_frags{r.p[mt][pk], r.vb[dn], r.o[mt][dn]};
            });
        }
      }
    }
    be.sync();  // every warp is done with this buffer before the next iteration refills it
  }

  // The row sums of the quad (thread partials, then xor 1, xor 2), normalisation, output.
  TIEBREAK_UNROLL
  for (int x = 0; x < XR; ++x) be.quad_sum([&](int tid) -> float& { return regs[be.slot(tid)].l[x]; });
  // Probe: the row's repeat counts, the quad's totals of its threads' (debias counted per quad).
  if constexpr (Probe::enabled && Mode != out_mode::debias) {
    TIEBREAK_UNROLL
    for (int x = 0; x < XR; ++x) {
      be.quad_count([&](int tid) -> std::uint32_t& { return regs[be.slot(tid)].pnear[x]; });
      be.quad_count([&](int tid) -> std::uint32_t& { return regs[be.slot(tid)].pcnt[x]; });
    }
  }
  TIEBREAK_UNROLL
  for (int x = 0; x < XR; ++x) {
    be.for_threads([&](int tid) {
      R& r = regs[be.slot(tid)];
      const int lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
      const int row = fwd_row<MT>(q0, w, g, x);
      if (row >= seq_q) return;
      const float l = r.l[x];
      const bool empty = l == 0.0f || f32::is_nan(l);
      const float inv = empty ? 1.0f : f32::div_rn(1.0f, l);
      // The thread's first column of the row, once: each pair below is then an immediate offset
      // (8 dn elements), not a 64-bit address computed per pair.
      const std::size_t orow = sh.o_offset(b, h, row) + static_cast<std::size_t>(2 * t);
      // O = o / l, in place. stochastic: whether the thread's part of the row is free of NaN (one
      // unordered compare per pair), so that its roundings skip the NaN repair (the same bits).
      [[maybe_unused]] bool nan_free = true;
      TIEBREAK_UNROLL
      for (int dn = 0; dn < DN; ++dn) {
        TIEBREAK_UNROLL
        for (int e = 0; e < 2; ++e) r.oc(x, dn, e) = f32::mul_rn(r.oc(x, dn, e), inv);
        if constexpr (Mode == out_mode::stochastic)
          nan_free = nan_free & !(f32::is_nan(r.oc(x, dn, 0)) | f32::is_nan(r.oc(x, dn, 1)));  // no short circuit
      }
      // D = 128 keeps the per-element events: with mma.sync the row tally's live values spilled there
      // (56 bytes at the 168-register bound); with wgmma they do not, but the probed D = 128 forward
      // timed slower with the tally (the probe's cost up to 10 points higher at S = 1k, H100,
      // 2026-12-07, branch probe-qs; docs/attention-bench.md, "The probed D = 64 forward with Q staged").
      constexpr bool row_hook = Probe::enabled && D == 64 && requires(Probe& p) {
        { p.output_units() } -> std::same_as<error_units_tally&>;
      };
      auto store_row = [&](auto no_nan) {
        // stochastic: 16 random bits per element (all that f32 -> bf16 stochastic rounding uses: the
        // 16 bits it drops are added to them), half col & 1 (0: the high half) of word (col >> 3) & 3
        // of the Philox block of counter (4 (col >> 5) + ((col >> 1) & 3), row, h, b). A thread's
        // columns 8 dn + 2 t + e are block 4 (dn >> 2) + t, word dn & 3, half e: the thread's own
        // four blocks per row, computed as its loop over dn reaches them (dn & 3 == 0).
        [[maybe_unused]] philox_block rb{};
        // Probe with a tally (output_units): the row's errors added to it here without a branch per
        // element. A pair's two halves are finite unless bf16x2_not_finite says otherwise; an element
        // that is not adds an error of 0 (nothing to any sum) and is not counted.
        [[maybe_unused]] std::uint32_t not_finite = 0;
        TIEBREAK_UNROLL
        for (int dn = 0; dn < DN; ++dn) {
          const int col0 = 8 * dn + 2 * t;  // even: the pair (col0, col0 + 1) is stored as one word
          const float of[2] = {r.oc(x, dn, 0), r.oc(x, dn, 1)};
          std::uint16_t ob[2] = {0, 0};
          if constexpr (Mode == out_mode::stochastic) {
            if ((dn & 3) == 0)
              rb = c.philox(static_cast<std::uint32_t>(dn + t), static_cast<std::uint32_t>(row),
                            static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(b));
          }
          if constexpr (Mode != out_mode::fp32) {
            // bf16, debias: round to nearest-even, both at once (cvt.rn.bf16x2.f32 on the device: one
            // instruction). stochastic: both by one random word, column col0 its high half, col0 + 1
            // its low half (the scalar f32_bits_to_bf16_sr of each, in fewer instructions).
            std::uint32_t pk;
            if constexpr (Mode != out_mode::stochastic) pk = Be::pack_bf16x2_rne(of[0], of[1]);
            else if constexpr (decltype(no_nan)::value)
              pk = f32x2_bits_to_bf16x2_sr_not_nan(f32_to_bits(of[0]), f32_to_bits(of[1]), rb.w[dn & 3]);
            else pk = f32x2_bits_to_bf16x2_sr(f32_to_bits(of[0]), f32_to_bits(of[1]), rb.w[dn & 3]);
            ob[0] = static_cast<std::uint16_t>(pk);
            ob[1] = static_cast<std::uint16_t>(pk >> 16);
            if constexpr (row_hook) {
              const std::uint32_t nf = bf16x2_not_finite(pk);
              not_finite += static_cast<std::uint32_t>(popcount32(nf));
              r.pr.output_units().accumulate((nf & 0x8000u) != 0 ? 0 : bf16_error_units(ob[0], of[0]));
              r.pr.output_units().accumulate((nf & 0x80000000u) != 0 ? 0 : bf16_error_units(ob[1], of[1]));
            }
          }
          if constexpr (!row_hook) {
          TIEBREAK_UNROLL
          for (int e = 0; e < 2; ++e) {
            const int col = col0 + e;
            if constexpr (Mode == out_mode::fp32) {
              if constexpr (Probe::enabled) {
                r.pr.on_output_error(probe::output_error_event{{static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(h),
                                                                static_cast<std::uint32_t>(row)},
                                                               static_cast<std::uint32_t>(col), 0.0f});
              }
            } else {
              if constexpr (Probe::enabled) {
                const std::int32_t k = bf16_error_units(ob[e], of[e]);  // computed either way: a select, not a branch
                if (bf16_error_finite(ob[e], of[e])) {
                  r.pr.on_output_error(probe::output_error_event{{static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(h),
                                                                  static_cast<std::uint32_t>(row)},
                                                                 static_cast<std::uint32_t>(col), error_units_to_ulps(k), k});
                }
              }
            }
          }
          }
          if constexpr (Mode != out_mode::fp32) be.store2(a.t.o_bf16 + orow + 8 * dn, ob[0], ob[1]);
          if (Mode == out_mode::fp32 || a.t.o_f32) be.store2(a.t.o_f32 + orow + 8 * dn, of[0], of[1]);
        }
        if constexpr (row_hook) r.pr.output_units().count += 2 * DN - not_finite;  // fp32: every element, error 0
      };
      if constexpr (Mode == out_mode::stochastic) {
        if (nan_free) store_row(std::true_type{});
        else store_row(std::false_type{});
      } else {
        store_row(std::false_type{});
      }
      if (t == 0) {
        // LSE = (offset + log2 l) · ln 2; −Inf for a row that sees no key (log of an empty sum).
        a.t.lse[sh.q_row(b, h, row)] =
            empty && !f32::is_nan(l) ? -f32::inf : f32::mul_rn(f32::add_rn(r.off[x], f32::log2_sw(l)), ln2_f32);
        if constexpr (Probe::enabled) {
          if (r.m[x] != -f32::inf) {
            probe::repeated_max_event ev;
            ev.at = {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(row)};
            ev.max = r.m[x];
            ev.tolerance = a.opt.near_tolerance;
            ev.exact = Mode == out_mode::debias ? r.cnt[x] : r.pcnt[x];
            ev.near = r.pnear[x];
            r.pr.on_repeated_max(ev);
          }
        }
      }
    });
  }

  // Probe: the threads' counters merged by a pairwise tree, in the K/V tiles' shared memory: the
  // last tile's copies were waited for (wait<0>) and its closing barrier passed, so no warp reads
  // the tiles any more (and with no tile, nothing was copied).
  if constexpr (Probe::enabled)
    write_block_counters<fwd_threads>(be, reinterpret_cast<probe::head_counters*>(be.smem()),
                                      [&](int tid) { return regs[be.slot(tid)].pr.counters(); },
                                      block_counters);
}


// --- the backward pass -----------------------------------------------------------------------------
// Three deterministic kernels (no floating-point atomics), each a function below:
//   1. flash_delta_block:  delta[i] = Σ_c dO[i][c] · O[i][c] (fma chain over c in order; O as the mode
//      stored it), and the probe's delta error against the same sum over the f32 O;
//   2. flash_dkdv_block:   64 keys of one key/value head: over the heads of its group and the query
//      tiles in order, Sᵀ = K Qᵀ, Pᵀ, dPᵀ = V dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − delta), dV += Pᵀ dO, dK += dSᵀ Q;
//   3. flash_dq_block:     128 query rows (dq_rows): over the key tiles of 32 (dq_keys) in order, S, P,
//      dP = dO Vᵀ, dS, dQ += dS K.
// P = exp2(x) with x from the raw score and lse2 = LSE ⊗ log2 e (score_x; a row with LSE = −Inf has
// P = 0). Sᵀ and S (and dPᵀ and dP) are bit-identical: each element is the same chain of fused
// tensor-core steps over the same exact products. dQ, dK, dV: f32 accumulators ⊗ scale, then bf16
// (round-to-nearest-even).

inline constexpr int bwd_warps = 4;
inline constexpr int bwd_threads = 32 * bwd_warps;
inline constexpr int bwd_rows = 16 * bwd_warps;  ///< keys per dK/dV block
inline constexpr int bwd_tile = 64;              ///< the dK/dV block's query tile

/// Shared memory of the dK/dV kernel: six bf16 tiles of 64 x D (the block's K and V, and the Q and dO
/// tiles it streams, double-buffered), four rows of 64 floats (lse2 and delta, double-buffered) and
/// the 64 x 64 bf16 tiles of Pᵀ and dSᵀ. D = 128: 115 712 bytes, exactly two blocks per SM on the
/// H100 and H200 (2 x (115 712 + 1 024 reserved) = 233 472 = 228 KiB).
template <int D>
inline constexpr std::size_t bwd_smem_bytes = std::size_t{6} * 64 * D * 2 + 4 * 64 * 4 + 2 * 64 * 64 * 2;
/// The same with a warpgroup backend (dkdv_wg_regs: no Pᵀ or dSᵀ tile). The launch gives
/// bwd_smem_bytes, which leaves room for the 1024-byte alignment of its swizzled tiles.
template <int D>
inline constexpr std::size_t bwd_wg_smem_bytes = std::size_t{6} * 64 * D * 2 + 4 * 64 * 4;
static_assert(bwd_wg_smem_bytes<64> + warpgroup_tile_align <= bwd_smem_bytes<64> &&
              bwd_wg_smem_bytes<128> + warpgroup_tile_align <= bwd_smem_bytes<128>);

/// Blocks of the dK/dV kernel resident per SM, its `__launch_bounds__` minimum (H100/H200: 64 K
/// registers and 228 KiB of shared memory per SM). D = 64 with the SFU's exponential: 3, so 168
/// registers (ptxas alone took 232, two blocks; at 168 it spills nothing, and three blocks' shared
/// memory fits; docs/attention-bench.md, "A block more per SM at D = 64"). Otherwise 0, no minimum
/// (ptxas's choice: 255 registers at D = 128, two blocks by both limits; the software exponential
/// would spill at 168). The dQ kernel has no minimum: ptxas gives it 168 registers at D = 64 already.
template <int D, exp2_policy E>
inline constexpr int bwd_kv_min_blocks = D == 64 && E == exp2_policy::sfu ? 3 : 0;

/// The dQ kernel's block: dq_rows query rows, two 16-row m-tiles per warp (every B fragment of K and
/// V it loads feeds both), keys streamed dq_keys at a time (the registers: a thread holds 2 x D / 2
/// dQ accumulators and 2 x 2 x dq_keys / 2 of S and dP).
inline constexpr int dq_mtiles = 2;
inline constexpr int dq_rows = 16 * dq_mtiles * bwd_warps;
inline constexpr int dq_keys = 32;
/// Shared memory of the dQ kernel: the block's Q and dO (dq_rows x D each), the K and V tiles it
/// streams (dq_keys x D, double-buffered) and its rows' lse2 and delta (dq_rows floats each).
/// D = 128: 99 328 bytes, two blocks per SM.
template <int D>
inline constexpr std::size_t dq_smem_bytes = (std::size_t{2} * dq_rows + 4 * dq_keys) * D * 2 + 2 * dq_rows * 4;
/// Shared memory of the delta kernel (probed): one head_counters per thread.
inline constexpr std::size_t delta_smem_bytes = sizeof(probe::head_counters) * bwd_threads;

/// Whether every (row, key) of the tile rows [q0, q0 + rows) x keys [k0, k0 + keys) is visible
/// (inside both sequences and, causal, on or below the diagonal: visible_keys grows with the row), so
/// that the per-element visibility test can be skipped.
TIEBREAK_FORCEINLINE TIEBREAK_HD bool tile_all_visible(const problem& p, int q0, int rows, int k0, int keys) noexcept {
  const shape& sh = p.shape;
  if (static_cast<std::size_t>(q0) + rows > sh.seq_q || static_cast<std::size_t>(k0) + keys > sh.seq_k) return false;
  return !p.causal() || p.visible_keys(static_cast<std::size_t>(q0)) >= static_cast<std::size_t>(k0) + keys;
}

/// lse2 of a row: LSE ⊗ log2 e; +Inf for a row that sees no key (LSE = −Inf), so that every P is 0.
TIEBREAK_FORCEINLINE TIEBREAK_HD float lse_log2(float lse) noexcept {
  return lse == -f32::inf ? f32::inf : f32::mul_rn(lse, log2e_f32);
}

/// P of a visible score s of a row with lse2 (0 when not visible).
template <score_scaling Sc, exp2_policy E, class Be>
TIEBREAK_FORCEINLINE TIEBREAK_HD float recompute_p(float s, float lse2, bool visible, const flash_consts& c) noexcept {
  if (!visible || lse2 == f32::inf) return 0.0f;
  return exp2_p<E, Be>(score_x<Sc>(s, lse2, c));
}

/// delta of 128 rows [blk·128, ...) of (b, h).
template <class Be, out_mode Mode, class Probe>
TIEBREAK_FORCEINLINE TIEBREAK_HD void flash_delta_block(Be& be, const flash_args& a, int b, int h, int blk,
                                                        probe::head_counters* block_counters) {
  const shape& sh = a.prob.shape;
  const int dim = static_cast<int>(sh.dim_v);
  Probe pr[Be::slots];
  be.for_threads([&](int tid) {
    const int row = blk * bwd_threads + tid;
    if (row >= static_cast<int>(sh.seq_q)) return;
    const std::size_t base = sh.o_offset(b, h, row);
    float acc = 0.0f, acc32 = 0.0f;
    // The row eight columns at a time (16-byte loads: the row starts at a multiple of D, dim % 8 == 0);
    // the chain itself is one fma per column, in column order.
    for (int c8 = 0; c8 < dim; c8 += 8) {
      std::uint16_t d16[8], o16[8] = {};
      float of[2][4] = {};  // the f32 O: the mode's O (fp32), or the probe's reference
      be.load16(d16, a.t.dout + base + c8);
      if constexpr (Mode != out_mode::fp32) be.load16(o16, a.t.o_bf16 + base + c8);
      if (Mode == out_mode::fp32 || (Probe::enabled && a.t.o_f32)) {
        be.load16(of[0], a.t.o_f32 + base + c8);
        be.load16(of[1], a.t.o_f32 + base + c8 + 4);
      }
      TIEBREAK_UNROLL
      for (int e = 0; e < 8; ++e) {
        const float d = bits_to_f32(static_cast<std::uint32_t>(d16[e]) << 16);
        const float o32 = of[e >> 2][e & 3];
        const float o = Mode == out_mode::fp32 ? o32 : bits_to_f32(static_cast<std::uint32_t>(o16[e]) << 16);
        acc = f32::fma_rn(d, o, acc);
        if constexpr (Probe::enabled) {
          if (a.t.o_f32) acc32 = f32::fma_rn(d, o32, acc32);
        }
      }
    }
    a.t.delta[sh.q_row(b, h, row)] = acc;
    if constexpr (Probe::enabled) {
      if (a.t.o_f32) {
        probe::delta_error_event ev;
        ev.at = {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(row)};
        ev.delta = acc;
        ev.delta_f32_o = acc32;
        pr[be.slot(tid)].on_delta_error(ev);
      }
    }
  });
  if constexpr (Probe::enabled)
    write_block_counters<bwd_threads>(be, reinterpret_cast<probe::head_counters*>(be.smem()),
                                      [&](int tid) { return pr[be.slot(tid)].counters(); },
                                      block_counters);
}

/// Loads rows [row0, row0 + N) of a bhsd tensor's (b, head) slice into a swizzled tile (rows past
/// `rows` read as zero).
template <class Be, int D, int N = 64>
TIEBREAK_FORCEINLINE TIEBREAK_HD void load_rows(Be& be, std::uint16_t* tile, const std::uint16_t* src, int row0, int rows) {
  const int valid = rows - row0 < N ? rows - row0 : N;
  be.template load_tile<N, D>(tile, src + static_cast<std::size_t>(row0) * D, valid);
}

/// acc(r) = A Bᵀ over the head dim for the warp's MT m-tiles by NB key (or query) blocks of 8, both
/// gradient kernels' first products (S and dP; Sᵀ and dPᵀ): A's rows a_row(w, mt).. of tile `at`, B's
/// rows b_row(w) + 8 nb of tile `bt` (both D wide, swizzled). Per element the chain of mma over the
/// 16-wide head-dim chunks, in order; per chunk the B fragments of every block once (ldmatrix.x4, two
/// blocks each), then per m-tile its A fragment (r.fa) and NB mma, so that every B fragment feeds MT
/// mma and every A fragment NB.
template <int MT, int NB, class Be, int D, class R, class ARow, class BRow, class Acc>
TIEBREAK_FORCEINLINE TIEBREAK_HD void warp_products(Be& be, R* regs, const std::uint16_t* at, ARow&& a_row, const std::uint16_t* bt,
                                                    BRow&& b_row, Acc&& acc) {
  be.for_threads([&](int tid) {
    R& r = regs[be.slot(tid)];
    TIEBREAK_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      TIEBREAK_UNROLL
      for (int nb = 0; nb < NB; ++nb)
        TIEBREAK_UNROLL
        for (int j = 0; j < 4; ++j) acc(r)[mt][nb][j] = 0.0f;
  });
  TIEBREAK_UNROLL
  for (int kc = 0; kc < D / 16; ++kc) {
    TIEBREAK_UNROLL
    for (int nb = 0; nb < NB; nb += 2)
      be.for_threads([&](int tid) {
        R& r = regs[be.slot(tid)];
        be.template load_b2_nmajor<D>(r.fb[nb], r.fb[nb + 1], bt, b_row(tid >> 5) + 8 * nb, 16 * kc, tid & 31);
      });
    TIEBREAK_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
      be.for_threads([&](int tid) {
        R& r = regs[be.slot(tid)];
        be.template load_a<D>(r.fa, at, a_row(tid >> 5, mt), 16 * kc, tid & 31);
      });
      TIEBREAK_UNROLL
      for (int nb = 0; nb < NB; ++nb)
        be.mma([&](int tid) {
          R& r = regs[be.slot(tid)];
          return mma_frags{r.fa, r.fb[nb], acc(r)[mt][nb]};
        });
    }
  }
}

/// The dK/dV block (bwd_rows keys, 4 warps) computes each 64 x 64 tile of Sᵀ and dPᵀ (keys x
/// queries) in four 32 x 32 quarters, warp w the keys 32 (w >> 1).. and queries 32 (w & 1)..: two
/// m-tiles by four query blocks, so that every A fragment of K or V feeds four mma and every B fragment
/// of Q or dO two. Pᵀ and dSᵀ go through shared memory in bf16 (the same nearest-even rounding as a
/// register A fragment), and warp w accumulates dV and dK of keys 32 (w >> 1).. and head dims
/// (D / 2)(w & 1)..: two m-tiles by D / 16 blocks, every B fragment of dO or Q feeding two mma.
/// Shared memory read per warp and tile: 56 KB (and 4 KB written), against 72 KB with a warp per 16
/// keys and all 64 queries or all D dims.
inline constexpr int dkdv_mtiles = 2;

/// Registers of one thread of the dK/dV kernel: its quarter of Sᵀ / Pᵀ and dPᵀ / dSᵀ (local row x of
/// m-tile x >> 1: key 32 (w >> 1) + 16 (x >> 1) + g + 8 (x & 1)), the fragments, and its part of the
/// dV and dK accumulators (the same keys, D / 2 head dims).
template <int D>
struct dkdv_regs {
  static constexpr int MT = dkdv_mtiles, NB = 4, PK = bwd_tile / 16, DNW = D / 16;
  std::uint32_t fa[4];       ///< A fragment of K or V: one head-dim chunk of one m-tile
  std::uint32_t fb[NB][2];   ///< B fragments of Q or dO: one head-dim chunk, the quarter's four query blocks
  std::uint32_t pa[MT][4];   ///< A fragments of Pᵀ or dSᵀ: one query chunk of both m-tiles
  std::uint32_t bb[2][2];    ///< B fragments of dO or Q for dV and dK: one query chunk, two head-dim blocks
  float s[MT][NB][4];        ///< Sᵀ, then Pᵀ
  float dp[MT][NB][4];       ///< dPᵀ, then dSᵀ
  float dv[MT][DNW][4];
  float dk[MT][DNW][4];
};

/// Registers of one thread of the dK/dV kernel with a warpgroup backend (Be::warpgroup_mma): the
/// block's 64 keys are the M rows of its wgmma products, warp w's keys 16 w + g (+ 8), so a thread
/// holds all 64 queries of its two keys (Sᵀ and dPᵀ: m64n64 accumulators) and all D head dims of
/// them (dV and dK: m64nD). Pᵀ and dSᵀ stay in registers as the A operands of dV += Pᵀ dO and
/// dK += dSᵀ Q (c_to_a_bf16: the nearest-even rounding of the shared-memory path's tiles), with dO
/// and Q as the transposed B operands; no Pᵀ or dSᵀ tile, no block barrier between the halves.
template <int D>
struct dkdv_wg_regs {
  static constexpr int MT = 1, NB = bwd_tile / 8, PK = bwd_tile / 16, DNW = D / 8;
  std::uint32_t pta[MT][PK][4];   ///< Pᵀ as A fragments, the tile's four 16-query chunks
  std::uint32_t dsta[MT][PK][4];  ///< dSᵀ as A fragments
  float s[MT][NB][4];             ///< Sᵀ, then Pᵀ
  float dp[MT][NB][4];            ///< dPᵀ, then dSᵀ
  float dv[MT][DNW][4];
  float dk[MT][DNW][4];
};

/// Stores a gradient: the thread's accumulators acc(r, mt) (MT m-tiles of DNW blocks of 8 columns),
/// row row_of(w, g, x) for local row x = 2 mt + (i >> 1), column col_of(w) + 8 dn + 2 t + (i & 1),
/// times the scale when Scaled (f32, nearest-even), rounded to bf16 (nearest-even), to
/// dst[offset(row) + column] for rows < rows; the two columns of a pair in one store (be.store2:
/// offset(row) is a multiple of D and the column even).
template <bool Scaled, int MT, int DNW, class Be, class R, class Acc, class Off, class Row, class Col>
TIEBREAK_FORCEINLINE TIEBREAK_HD void bwd_store(Be& be, R* regs, Acc&& acc, std::uint16_t* dst, Off&& offset, Row&& row_of,
                                                Col&& col_of, int rows, const flash_consts& c) {
  be.for_threads([&](int tid) {
    R& r = regs[be.slot(tid)];
    const int lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
    TIEBREAK_UNROLL
    for (int xr = 0; xr < 2 * MT; ++xr) {
      const int row = row_of(w, g, xr), mt = xr >> 1, x = xr & 1;
      if (row >= rows) continue;
      std::uint16_t* out = dst + offset(row) + col_of(w) + 2 * t;
      TIEBREAK_UNROLL
      for (int dn = 0; dn < DNW; ++dn) {
        std::uint16_t v[2];
        TIEBREAK_UNROLL
        for (int e = 0; e < 2; ++e) {
          const float f = acc(r, mt)[dn][2 * x + e];
          v[e] = f32_bits_to_bf16_rne(f32_to_bits(Scaled ? f32::mul_rn(f, c.scale) : f));
        }
        be.store2(out + 8 * dn, v[0], v[1]);
      }
    }
  });
}

/// dK and dV of keys [kb·64, kb·64 + 64) of (b, key/value head kvh). K and V stay in shared memory;
/// the steps run over the heads of the group and, per head, the query tiles from the first that sees
/// these keys, in that order; step i's Q and dO tiles (and its rows' lse2 and delta) sit in buffer
/// i & 1, and step i + 1's are copied while step i computes. Per element the same chains as with any
/// other tiling: Sᵀ and dPᵀ over the head-dim chunks in order, dV and dK over the query tiles' 16-row
/// chunks in order.
template <class Be, int D, score_scaling Sc, exp2_policy E = exp2_policy::software>
TIEBREAK_FORCEINLINE TIEBREAK_HD void flash_dkdv_block(Be& be, const flash_args& a, const flash_consts& c, int b, int kvh,
                                                       int kb) {
  constexpr bool WG = warpgroup_mma_v<Be>;
  using R = std::conditional_t<WG, dkdv_wg_regs<D>, dkdv_regs<D>>;
  constexpr int MT = R::MT, NB = R::NB, PK = R::PK, DNW = R::DNW, T = 64 * D;
  static_assert(bwd_rows == 64 && bwd_tile == 64 && bwd_warps == 4, "the quarters assume 64 x 64 tiles and 4 warps");
  static_assert(!WG || Be::slots == 1, "a warpgroup backend runs on the device, a thread per slot");
  const shape& sh = a.prob.shape;
  const int seq_q = static_cast<int>(sh.seq_q), seq_k = static_cast<int>(sh.seq_k);
  const int k0 = kb * bwd_rows;
  constexpr int QS = 2 * T, DOS = 4 * T;  // the streamed tiles' offsets in be.smem(), [2][64][D] each
  constexpr int PTS = 6 * T + 4 * 64 * 2;  // Pᵀ [64][64] after the floats, then dSᵀ [64][64]
  constexpr int DSTS = PTS + 64 * 64;
  std::uint16_t* ks = be.smem();
  std::uint16_t* vs = ks + T;
  std::uint16_t* qs = be.smem() + QS;
  std::uint16_t* dos = be.smem() + DOS;
  float* lse2s = reinterpret_cast<float*>(be.smem() + 6 * T);  // [2][64]
  float* deltas = lse2s + 2 * 64;                              // [2][64]
  std::uint16_t* pts = be.smem() + PTS;
  std::uint16_t* dsts = be.smem() + DSTS;
  R regs[Be::slots];

  const int first_row = static_cast<int>(a.prob.first_visible_row(static_cast<std::size_t>(k0 < seq_k ? k0 : seq_k - 1)));
  const int qt0 = first_row / bwd_tile, n_qt = (seq_q + bwd_tile - 1) / bwd_tile;
  const int h0 = static_cast<int>(sh.q_head(static_cast<std::size_t>(kvh), 0)), h_end = h0 + static_cast<int>(sh.group());
  // Step (h, qt): the Q and dO tiles of query tile qt of head h, and its rows' LSE and delta (raw),
  // into buffer buf (cp.async; rows past seq_q read as zero).
  auto load_step = [&](int h, int qt, int buf) {
    const int q0 = qt * bwd_tile;
    load_rows<Be, D>(be, qs + buf * T, a.t.q + sh.q_offset(b, h, 0), q0, seq_q);
    load_rows<Be, D>(be, dos + buf * T, a.t.dout + sh.o_offset(b, h, 0), q0, seq_q);
    be.template load_floats<64>(lse2s + 64 * buf, a.t.lse + sh.q_row(b, h, q0), seq_q - q0);
    be.template load_floats<64>(deltas + 64 * buf, a.t.delta + sh.q_row(b, h, q0), seq_q - q0);
  };

  load_rows<Be, D>(be, ks, a.t.k + sh.k_offset(b, kvh, 0), k0, seq_k);
  load_rows<Be, D>(be, vs, a.t.v + sh.v_offset(b, kvh, 0), k0, seq_k);
  if (qt0 < n_qt) load_step(h0, qt0, 0);
  be.commit();  // K, V and the first step's tiles
  be.for_threads([&](int tid) {
    R& r = regs[be.slot(tid)];
    TIEBREAK_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      TIEBREAK_UNROLL
      for (int i = 0; i < DNW; ++i)
        TIEBREAK_UNROLL
        for (int j = 0; j < 4; ++j) r.dv[mt][i][j] = r.dk[mt][i][j] = 0.0f;
  });
  for (int h = h0, qt = qt0, buf = 0; qt < n_qt; buf ^= 1) {
    const int nh = qt + 1 < n_qt ? h : h + 1, nqt = qt + 1 < n_qt ? qt + 1 : qt0;
    const int q0 = qt * bwd_tile;
    // This step's copies are the only ones in flight; a thread's own are visible to it after the
    // wait: threads < 64 turn their row's LSE into lse2 in place (+Inf past seq_q: P = 0). After the
    // barrier all of buffer buf is visible, and every thread is done with the previous step (its Pᵀ
    // and dSᵀ too), so buffer buf ^ 1 can be refilled while this step computes.
    be.template wait<0>();
    be.for_threads([&](int tid) {
      if (tid < 64) lse2s[64 * buf + tid] = q0 + tid < seq_q ? lse_log2(lse2s[64 * buf + tid]) : f32::inf;
    });
    be.sync();
    if (nh < h_end) {
      load_step(nh, nqt, buf ^ 1);
      be.commit();
    }
    const bool all_vis = tile_all_visible(a.prob, q0, bwd_tile, k0, bwd_rows);
    const int sel = buf * T;  // the buffers as constant offsets from the base (fewer address registers)
    const std::uint16_t* qb = be.smem() + (QS + sel);
    const std::uint16_t* dob = be.smem() + (DOS + sel);
    const float* lse2b = lse2s + 64 * buf;
    const float* deltab = deltas + 64 * buf;
    // The warp's quarter of Sᵀ = K Qᵀ, then of dPᵀ = V dOᵀ (a warpgroup backend: all of both, K and V
    // as the A operands, Q and dO as the B operands, from shared memory).
    if constexpr (WG) {
      TIEBREAK_UNROLL
      for (int nb = 0; nb < NB; ++nb)
        TIEBREAK_UNROLL
        for (int j = 0; j < 4; ++j) regs[0].s[0][nb][j] = regs[0].dp[0][nb][j] = 0.0f;
      be.template qk_tile<D, MT, true>(regs[0].s, nullptr, ks, qb);
      be.template qk_tile<D, MT, true>(regs[0].dp, nullptr, vs, dob);
    } else {
      auto key_row = [](int w, int mt) { return 32 * (w >> 1) + 16 * mt; };
      auto query_row = [](int w) { return 32 * (w & 1); };
      warp_products<MT, NB, Be, D>(be, regs, ks, key_row, qb, query_row, [](R& r) -> float(&)[MT][NB][4] { return r.s; });
      warp_products<MT, NB, Be, D>(be, regs, vs, key_row, dob, query_row, [](R& r) -> float(&)[MT][NB][4] { return r.dp; });
    }
    // Pᵀ and dSᵀ (row = key, column = query), rounded to bf16 into their shared tiles (a warpgroup
    // backend: into registers, the A fragments of dV's and dK's products). On a tile that every row
    // sees, where the thread's x all lie in [-126, 128) (x_in_range over its scores and its columns'
    // lse2: most tiles), P is exp2_sw_in_range: the same bits.
    be.for_threads([&](int tid) {
      R& r = regs[be.slot(tid)];
      const int lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
      // local key row and query column
      const int kr0 = WG ? 16 * w + g : 32 * (w >> 1) + g, qc0 = WG ? 2 * t : 32 * (w & 1) + 2 * t;
      bool in_range = all_vis;
      if (E == exp2_policy::software && in_range) {  // the SFU takes every x: all_vis decides alone
        float lo = f32::inf, hi = -f32::inf, olo = f32::inf, ohi = -f32::inf;
        TIEBREAK_UNROLL
        for (int mt = 0; mt < MT; ++mt)
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int i = 0; i < 4; ++i) {
              lo = f32::min_nan(lo, r.s[mt][nb][i]);
              hi = f32::max(hi, r.s[mt][nb][i]);
              if (mt == 0 && i < 2) {  // the thread's 8 columns
                olo = f32::min_nan(olo, lse2b[qc0 + 8 * nb + i]);
                ohi = f32::max(ohi, lse2b[qc0 + 8 * nb + i]);
              }
            }
        in_range = x_in_range<Sc>(lo, hi, olo, ohi, c);
      }
      if (in_range) {
        TIEBREAK_UNROLL
        for (int mt = 0; mt < MT; ++mt)
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int i = 0; i < 4; ++i) {
              const int qc = qc0 + 8 * nb + (i & 1);
              const float p = exp2_p_in_range<E, Be>(score_x<Sc>(r.s[mt][nb][i], lse2b[qc], c));
              r.s[mt][nb][i] = p;
              r.dp[mt][nb][i] = f32::mul_rn(p, f32::sub_rn(r.dp[mt][nb][i], deltab[qc]));
            }
      } else {
        TIEBREAK_UNROLL
        for (int mt = 0; mt < MT; ++mt)
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int i = 0; i < 4; ++i) {
              const int key = k0 + kr0 + 16 * mt + 8 * (i >> 1), qc = qc0 + 8 * nb + (i & 1), row = q0 + qc;
              const bool vis = all_vis || (key < seq_k && row < seq_q &&
                                           a.prob.visible(static_cast<std::size_t>(row), static_cast<std::size_t>(key)));
              const float p = recompute_p<Sc, E, Be>(r.s[mt][nb][i], lse2b[qc], vis, c);
              r.s[mt][nb][i] = p;
              r.dp[mt][nb][i] = f32::mul_rn(p, f32::sub_rn(r.dp[mt][nb][i], deltab[qc]));
            }
      }
      if constexpr (WG) {  // A fragments in registers
        c_to_a_bf16<Be, NB>(r.pta[0], r.s[0]);
        c_to_a_bf16<Be, NB>(r.dsta[0], r.dp[0]);
      } else {
        // Each pair of columns as one word (pack_bf16x2_rne, as c_to_a_bf16 rounds a register operand).
        TIEBREAK_UNROLL
        for (int mt = 0; mt < MT; ++mt)
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int x = 0; x < 2; ++x) {
              const int o = swz<64>(kr0 + 16 * mt + 8 * x, qc0 + 8 * nb);
              const std::uint32_t pw = Be::pack_bf16x2_rne(r.s[mt][nb][2 * x], r.s[mt][nb][2 * x + 1]);
              const std::uint32_t dw = Be::pack_bf16x2_rne(r.dp[mt][nb][2 * x], r.dp[mt][nb][2 * x + 1]);
              be.store2(pts + o, static_cast<std::uint16_t>(pw), static_cast<std::uint16_t>(pw >> 16));
              be.store2(dsts + o, static_cast<std::uint16_t>(dw), static_cast<std::uint16_t>(dw >> 16));
            }
      }
    });
    if constexpr (WG) {
      // dV += Pᵀ dO and dK += dSᵀ Q over the tile's 16-query chunks in order.
      be.template pv_tile<D, MT>(regs[0].dv, regs[0].pta, dob);
      be.template pv_tile<D, MT>(regs[0].dk, regs[0].dsta, qb);
    } else {
      be.sync();  // every quarter of Pᵀ and dSᵀ is written
      // dV += Pᵀ dO and dK += dSᵀ Q: the warp's keys 32 (w >> 1).. and head dims (D / 2)(w & 1)..; per
      // 16-query chunk the A fragments of its two m-tiles once, the B fragments two head-dim blocks at
      // a time (ldmatrix.x4.trans).
      auto accumulate = [&](const std::uint16_t* at, const std::uint16_t* bt, auto acc) {
        TIEBREAK_UNROLL
        for (int pk = 0; pk < PK; ++pk) {
          be.for_threads([&](int tid) {
            R& r = regs[be.slot(tid)];
            const int w = tid >> 5, lane = tid & 31;
            TIEBREAK_UNROLL
            for (int mt = 0; mt < MT; ++mt) be.template load_a<64>(r.pa[mt], at, 32 * (w >> 1) + 16 * mt, 16 * pk, lane);
          });
          TIEBREAK_UNROLL
          for (int dn = 0; dn < DNW; dn += 2) {
            be.for_threads([&](int tid) {
              R& r = regs[be.slot(tid)];
              const int w = tid >> 5, lane = tid & 31;
              be.template load_b2_kmajor<D>(r.bb[0], r.bb[1], bt, 16 * pk, (D / 2) * (w & 1) + 8 * dn, lane);
            });
            TIEBREAK_UNROLL
            for (int mt = 0; mt < MT; ++mt)
              TIEBREAK_UNROLL
              for (int j = 0; j < 2; ++j)
                be.mma([&](int tid) {
                  R& r = regs[be.slot(tid)];
                  return mma_frags{r.pa[mt], r.bb[j], acc(r)[mt][dn + j]};
                });
          }
        }
      };
      accumulate(pts, dob, [](R& r) -> float(&)[MT][DNW][4] { return r.dv; });
      accumulate(dsts, qb, [](R& r) -> float(&)[MT][DNW][4] { return r.dk; });
    }
    h = nh;
    qt = nh < h_end ? nqt : n_qt;
  }
  be.template wait<0>();  // nothing left in flight when no query tile saw these keys
  auto key_of = [&](int w, int g, int x) {
    return k0 + (WG ? 16 * w : 32 * (w >> 1)) + 16 * (x >> 1) + g + 8 * (x & 1);
  };
  auto col_of = [](int w) { return WG ? 0 : (D / 2) * (w & 1); };
  bwd_store<false, MT, DNW, Be>(be, regs, [](R& r, int mt) -> float(&)[DNW][4] { return r.dv[mt]; }, a.t.dv,
                                [&](int key) { return sh.v_offset(b, kvh, key); }, key_of, col_of, seq_k, c);
  bwd_store<true, MT, DNW, Be>(be, regs, [](R& r, int mt) -> float(&)[DNW][4] { return r.dk[mt]; }, a.t.dk,
                               [&](int key) { return sh.k_offset(b, kvh, key); }, key_of, col_of, seq_k, c);
}

/// Registers of one dQ thread: its 2 MT rows (local row x: fwd_row<MT>, as in the forward) of S / P
/// and dP / dS for a tile of dq_keys keys, the B fragments of one head-dim chunk of that tile's K or
/// V (every key block), and the dQ accumulators.
template <int D>
struct dq_regs {
  static constexpr int MT = dq_mtiles, XR = 2 * MT, NB = dq_keys / 8, DN = D / 8, PK = dq_keys / 16;
  std::uint32_t fa[4];       ///< A fragment of Q or dO: one head-dim chunk of one m-tile
  std::uint32_t fb[NB][2];   ///< B fragments of K (S) or V (dP): one head-dim chunk, every key block
  std::uint32_t bb[2][2];    ///< B fragments of K for dQ += dS K: one key chunk, two head-dim blocks
  float s[MT][NB][4];        ///< S, then P
  float dp[MT][NB][4];       ///< dP, then dS
  std::uint32_t pa[MT][PK][4];  ///< dS as the bf16 A fragments of dS K
  float dq[MT][DN][4];
};

/// dQ of query rows [qt·dq_rows, qt·dq_rows + dq_rows) of (b, h). Q and dO stay in shared memory;
/// key tile kt (dq_keys keys) has its K and V in buffer kt & 1, and tile kt + 1's are copied while kt
/// computes. Per element the same chains as with any other tiling: S and dP over the head-dim chunks in
/// order, dQ over the keys' 16-wide chunks in order (the key tiles in order, their chunks in order).
template <class Be, int D, score_scaling Sc, exp2_policy E = exp2_policy::software>
TIEBREAK_FORCEINLINE TIEBREAK_HD void flash_dq_block(Be& be, const flash_args& a, const flash_consts& c, int b, int h, int qt) {
  using R = dq_regs<D>;
  constexpr int MT = R::MT, XR = R::XR, NB = R::NB, DN = R::DN, PK = R::PK;
  constexpr int QT = dq_rows * D, KT = dq_keys * D;  // elements of the block's tiles and of a streamed one
  const shape& sh = a.prob.shape;
  const int seq_q = static_cast<int>(sh.seq_q), seq_k = static_cast<int>(sh.seq_k);
  const int kvh = static_cast<int>(sh.kv_head(static_cast<std::size_t>(h)));
  const int q0 = qt * dq_rows;
  const int last_row = (q0 + dq_rows < seq_q ? q0 + dq_rows : seq_q) - 1;
  const int keys = static_cast<int>(a.prob.visible_keys(static_cast<std::size_t>(last_row)));
  const int tiles = (keys + dq_keys - 1) / dq_keys;
  constexpr int KS = 2 * QT, VS = 2 * QT + 2 * KT;  // the streamed tiles' offsets in be.smem(), [2][dq_keys][D] each
  std::uint16_t* qs = be.smem();
  std::uint16_t* dos = qs + QT;
  std::uint16_t* ks = be.smem() + KS;
  std::uint16_t* vs = be.smem() + VS;
  float* lse2s = reinterpret_cast<float*>(be.smem() + VS + 2 * KT);  // [dq_rows]: the block's rows
  float* deltas = lse2s + dq_rows;                                   // [dq_rows]
  R regs[Be::slots];
  // The K and V tiles of key tile kt into buffer buf (cp.async).
  auto load_step = [&](int kt, int buf) {
    load_rows<Be, D, dq_keys>(be, ks + buf * KT, a.t.k + sh.k_offset(b, kvh, 0), kt * dq_keys, seq_k);
    load_rows<Be, D, dq_keys>(be, vs + buf * KT, a.t.v + sh.v_offset(b, kvh, 0), kt * dq_keys, seq_k);
  };

  if constexpr (warpgroup_mma_v<Be>) {  // rows in the order of the warpgroup products (wgmma_q_slot)
    be.template load_q_tile<dq_rows, D, MT>(qs, a.t.q + sh.q_offset(b, h, q0), seq_q - q0);
    be.template load_q_tile<dq_rows, D, MT>(dos, a.t.dout + sh.o_offset(b, h, q0), seq_q - q0);
  } else {
    load_rows<Be, D, dq_rows>(be, qs, a.t.q + sh.q_offset(b, h, 0), q0, seq_q);
    load_rows<Be, D, dq_rows>(be, dos, a.t.dout + sh.o_offset(b, h, 0), q0, seq_q);
  }
  static_assert(dq_rows == bwd_threads, "load_floats: one row per thread");
  be.template load_floats<dq_rows>(lse2s, a.t.lse + sh.q_row(b, h, q0), seq_q - q0);
  be.template load_floats<dq_rows>(deltas, a.t.delta + sh.q_row(b, h, q0), seq_q - q0);
  if (tiles > 0) load_step(0, 0);
  be.commit();  // Q, dO, the rows' LSE and delta, and the first key tile
  // A thread's own copies are visible to it after the wait: thread tid turns row tid's LSE into lse2
  // in place (+Inf past seq_q: P = 0); the loop's first barrier makes them visible to all.
  be.template wait<0>();
  be.for_threads([&](int tid) {
    R& r = regs[be.slot(tid)];
    lse2s[tid] = q0 + tid < seq_q ? lse_log2(lse2s[tid]) : f32::inf;
    TIEBREAK_UNROLL
    for (int mt = 0; mt < MT; ++mt)
      TIEBREAK_UNROLL
      for (int i = 0; i < DN; ++i)
        TIEBREAK_UNROLL
        for (int j = 0; j < 4; ++j) r.dq[mt][i][j] = 0.0f;
  });
  for (int kt = 0; kt < tiles; ++kt) {
    const int k0 = kt * dq_keys, buf = kt & 1;
    const bool all_vis = tile_all_visible(a.prob, q0, dq_rows, k0, dq_keys);
    // As in flash_dkdv_block: this tile's copies are the only ones in flight; after the barrier they
    // are visible and every thread is done with tile kt − 1, whose buffer is refilled at once.
    be.template wait<0>();
    be.sync();
    if (kt + 1 < tiles) {
      load_step(kt + 1, buf ^ 1);
      be.commit();
    }
    const int sel = buf * KT;  // the buffers as constant offsets from the base (fewer address registers)
    const std::uint16_t* kb = be.smem() + (KS + sel);
    const std::uint16_t* vb = be.smem() + (VS + sel);
    // S = Q Kᵀ, then dP = dO Vᵀ.
    auto row = [](int w, int mt) { return 16 * (MT * w + mt); };
    auto key_row = [](int) { return 0; };
    if constexpr (warpgroup_mma_v<Be>) {
      static_assert(Be::slots == 1, "a warpgroup backend runs on the device, a thread per slot");
      TIEBREAK_UNROLL
      for (int mt = 0; mt < MT; ++mt)
        TIEBREAK_UNROLL
        for (int nb = 0; nb < NB; ++nb)
          TIEBREAK_UNROLL
          for (int j = 0; j < 4; ++j) regs[0].s[mt][nb][j] = regs[0].dp[mt][nb][j] = 0.0f;
      be.template qk_tile<D, MT, true>(regs[0].s, nullptr, qs, kb);
      be.template qk_tile<D, MT, true>(regs[0].dp, nullptr, dos, vb);
    } else {
      warp_products<MT, NB, Be, D>(be, regs, qs, row, kb, key_row, [](R& r) -> float(&)[MT][NB][4] { return r.s; });
      warp_products<MT, NB, Be, D>(be, regs, dos, row, vb, key_row, [](R& r) -> float(&)[MT][NB][4] { return r.dp; });
    }
    // P and dS. A row of a tile that every row sees, whose x all lie in [-126, 128) (x_in_range over
    // the thread's scores of the row: most rows), takes exp2_sw_in_range: the same bits.
    be.for_threads([&](int tid) {
      R& r = regs[be.slot(tid)];
      const int lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
      TIEBREAK_UNROLL
      for (int xr = 0; xr < XR; ++xr) {
        const int mt = xr >> 1, x = xr & 1, lr = fwd_row<MT>(0, w, g, xr);
        const float lse2 = lse2s[lr], delta = deltas[lr];
        bool in_range = all_vis;
        if constexpr (E == exp2_policy::software) {  // the SFU takes every x: all_vis decides alone
          float lo = f32::inf, hi = -f32::inf;
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int e = 0; e < 2; ++e) {
              lo = f32::min_nan(lo, r.s[mt][nb][2 * x + e]);
              hi = f32::max(hi, r.s[mt][nb][2 * x + e]);
            }
          in_range = in_range && x_in_range<Sc>(lo, hi, lse2, lse2, c);
        }
        if (in_range) {
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int e = 0; e < 2; ++e) {
              const int i = 2 * x + e;
              const float p = exp2_p_in_range<E, Be>(score_x<Sc>(r.s[mt][nb][i], lse2, c));
              r.dp[mt][nb][i] = f32::mul_rn(p, f32::sub_rn(r.dp[mt][nb][i], delta));
            }
        } else {
          const int row = q0 + lr;
          TIEBREAK_UNROLL
          for (int nb = 0; nb < NB; ++nb)
            TIEBREAK_UNROLL
            for (int e = 0; e < 2; ++e) {
              const int i = 2 * x + e, key = k0 + 8 * nb + 2 * t + e;
              const bool vis = all_vis || (key < seq_k && row < seq_q &&
                                           a.prob.visible(static_cast<std::size_t>(row), static_cast<std::size_t>(key)));
              const float p = recompute_p<Sc, E, Be>(r.s[mt][nb][i], lse2, vis, c);
              r.dp[mt][nb][i] = f32::mul_rn(p, f32::sub_rn(r.dp[mt][nb][i], delta));
            }
        }
      }
      TIEBREAK_UNROLL
      for (int mt = 0; mt < MT; ++mt) c_to_a_bf16<Be, NB>(r.pa[mt], r.dp[mt]);
    });
    // dQ += dS K: per 16-key chunk and pair of head-dim blocks one ldmatrix.x4.trans, for both m-tiles
    // (a warpgroup backend: dS from registers, K as the transposed operand).
    if constexpr (warpgroup_mma_v<Be>) {
      be.template pv_tile<D, MT>(regs[0].dq, regs[0].pa, kb);
    } else {
      TIEBREAK_UNROLL
      for (int pk = 0; pk < PK; ++pk) {
        TIEBREAK_UNROLL
        for (int dn = 0; dn < DN; dn += 2) {
          be.for_threads([&](int tid) {
            R& r = regs[be.slot(tid)];
            be.template load_b2_kmajor<D>(r.bb[0], r.bb[1], kb, 16 * pk, 8 * dn, tid & 31);
          });
          TIEBREAK_UNROLL
          for (int mt = 0; mt < MT; ++mt)
            TIEBREAK_UNROLL
            for (int j = 0; j < 2; ++j)
              be.mma([&](int tid) {
                R& r = regs[be.slot(tid)];
                return mma_frags{r.pa[mt][pk], r.bb[j], r.dq[mt][dn + j]};
              });
        }
      }
    }
  }
  be.template wait<0>();  // nothing left in flight when the rows see no key
  bwd_store<true, MT, DN, Be>(be, regs, [](R& r, int mt) -> float(&)[DN][4] { return r.dq[mt]; }, a.t.dq,
                              [&](int row) { return sh.q_offset(b, h, row); },
                              [&](int w, int g, int x) { return fwd_row<MT>(q0, w, g, x); }, [](int) { return 0; }, seq_q, c);
}

// --- which instantiation a call runs ---------------------------------------------------------------
// The launchers (cuda/attention) and the twin (src/host) map a call's runtime options to template
// arguments through these, so that both run the same instantiation for the same call. Host only;
// precondition: flash_check(a, ...) == ok. f is a lambda with template parameters, called as
// f.template operator()<...>().

namespace dispatch_detail {
template <int D, out_mode M, score_scaling Sc, class Probe, class F>
void forward_by_exp(const flash_args& a, F& f) {
  if (a.opt.exp == exp2_policy::software) f.template operator()<D, M, Sc, Probe, exp2_policy::software>();
  else f.template operator()<D, M, Sc, Probe, exp2_policy::sfu>();
}
template <int D, out_mode M, score_scaling Sc, class F>
void forward_by_probe(const flash_args& a, F& f) {
  if (a.counters) forward_by_exp<D, M, Sc, thread_counting_probe>(a, f);
  else forward_by_exp<D, M, Sc, probe::no_probe>(a, f);
}
template <int D, out_mode M, class F>
void forward_by_scaling(const flash_args& a, F& f) {
  if (a.opt.scaling == score_scaling::unfused) forward_by_probe<D, M, score_scaling::unfused>(a, f);
  else forward_by_probe<D, M, score_scaling::fused>(a, f);
}
template <int D, class F>
void forward_by_mode(const flash_args& a, F& f) {
  switch (a.opt.mode) {
    case out_mode::bf16: return forward_by_scaling<D, out_mode::bf16>(a, f);
    case out_mode::fp32: return forward_by_scaling<D, out_mode::fp32>(a, f);
    case out_mode::debias: return forward_by_scaling<D, out_mode::debias>(a, f);
    case out_mode::stochastic: return forward_by_scaling<D, out_mode::stochastic>(a, f);
  }
}
}  // namespace dispatch_detail

/// The forward pass: f<D, Mode, Sc, Probe, E>() with D = dim, the mode, scaling and exponential of
/// a.opt, and Probe = thread_counting_probe when a.counters is set, probe::no_probe otherwise.
template <class F>
void dispatch_forward(const flash_args& a, F&& f) {
  if (a.prob.shape.dim == 64) dispatch_detail::forward_by_mode<64>(a, f);
  else dispatch_detail::forward_by_mode<128>(a, f);
}

/// The delta kernel: f<Mode, Probe>() with Mode = fp32 in mode fp32 and bf16 otherwise (bf16,
/// debias and stochastic store a bf16 O), Probe as for the forward pass.
template <class F>
void dispatch_delta(const flash_args& a, F&& f) {
  const bool probed = a.counters != nullptr;
  if (a.opt.mode == out_mode::fp32) {
    if (probed) f.template operator()<out_mode::fp32, thread_counting_probe>();
    else f.template operator()<out_mode::fp32, probe::no_probe>();
  } else {
    if (probed) f.template operator()<out_mode::bf16, thread_counting_probe>();
    else f.template operator()<out_mode::bf16, probe::no_probe>();
  }
}

namespace dispatch_detail {
template <int D, score_scaling Sc, class F>
void gradients_by_exp(const flash_args& a, F& f) {
  if (a.opt.exp == exp2_policy::software) f.template operator()<D, Sc, exp2_policy::software>();
  else f.template operator()<D, Sc, exp2_policy::sfu>();
}
}  // namespace dispatch_detail

/// The gradient kernels: f<D, Sc, E>().
template <class F>
void dispatch_gradients(const flash_args& a, F&& f) {
  const bool unfused = a.opt.scaling == score_scaling::unfused;
  if (a.prob.shape.dim == 64) {
    if (unfused) dispatch_detail::gradients_by_exp<64, score_scaling::unfused>(a, f);
    else dispatch_detail::gradients_by_exp<64, score_scaling::fused>(a, f);
  } else {
    if (unfused) dispatch_detail::gradients_by_exp<128, score_scaling::unfused>(a, f);
    else dispatch_detail::gradients_by_exp<128, score_scaling::fused>(a, f);
  }
}

}  // namespace tiebreak::attn
