// SPDX-License-Identifier: Apache-2.0
/// @file The f64 attention reference on the GPU: tiled two-pass forward, dQ and dK/dV kernels.
///
/// Layout of the work (docs/audit.md, "GPU reference"):
///   forward   one block per (query tile, batch·head): pass 1 finds the row maximum m of the
///             visible scaled scores (and the tie statistics' maximum of σ·q·k), pass 2 recomputes
///             the scores, p = exp(s − m), l = Σ p, Ō = Σ p V; then O = Ō / l, LSE = m + log l,
///             delta = Σ dO ∘ O. m and l go to scratch memory for the backward kernels.
///   dQ        one block per (query tile, batch·head): P = exp(s − m) / l (the host's operations,
///             in the host's order), dP = dO Vᵀ, dS = P (dP − delta), dQ = scale · Σ dS K.
///   dK, dV    one block per (key tile, batch·kv head), looping over the query heads of its group
///             and every query tile: dV = Σ Pᵀ dO, dK = scale · Σ dSᵀ Q. No atomics: the sums
///             are in a fixed order, so the result is the same bits on every run.
/// Each block has 16×16 threads; thread (tx, ty) owns tile rows ty + 16a and columns tx + 16b, so
/// the 16 threads of a row are one half warp and row reductions are four shuffles. Tiles live in
/// shared memory with a row stride of dim + 1 doubles (odd), so the strided column reads of the
/// inner products fall into distinct banks.
///
/// Every product q·k, dO·V is summed over the feature index in increasing order, identically in
/// all three kernels, so the backward kernels recompute the forward's scores bit for bit.
/// fmad off (project-wide --fmad=false): each multiply-add is a DMUL and a DADD instead of one
/// DFMA, twice the f64 instructions of the inner loops, so at most half the f64 peak (by count;
/// an fmad build was not timed). It keeps every product rounded on its own, as the host's
/// -ffp-contract=off code does. On the H200 the whole forward + backward at B=4, H=16, S=4096,
/// D=128 takes 0.44 s of kernel time (about 6 TFLOP/s f64; docs/audit.md).
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "tiebreak/attn/problem.hpp"
#include "tiebreak/gpu/attention_reference.hpp"
#include "tiebreak/gpu/cuda_check.cuh"

namespace tiebreak::gpu {
namespace {

constexpr detail::cuda_check check{"tiebreak::gpu::attention_f64"};

/// Tile shapes. TM: rows per thread (row tile 16·TM), TN: columns per thread in a score tile
/// (column tile 16·TN), NC: output columns per thread (16·NC >= dim, dim_v).
template <int TM_, int TN_, int NC_>
struct tile_traits {
  static constexpr int TM = TM_, TN = TN_, NC = NC_;
  static constexpr int rows = 16 * TM, cols = 16 * TN, max_dim = 16 * NC;
  static_assert(max_dim <= static_cast<int>(attention_f64_max_dim));
};
// dim, dim_v <= 128: 64-row, 32-column tiles (forward 149 KB of shared memory, backward 215 KB).
using traits_128 = tile_traits<4, 2, 8>;
// dim, dim_v <= 256: 32-row, 16-column tiles (<= 206 KB).
using traits_256 = tile_traits<2, 1, 16>;

/// The problem as the kernels see it: the problem itself (sizes <= 2^30, so the kernels' int
/// indices are exact) and device pointers.
struct params {
  attn::problem pr;
  double tie_tolerance;
  const double *q, *k, *v, *d_o;
  double *o, *lse, *delta, *dq, *dk, *dv;
  double *m, *l;                  // scratch: per query row
  int *tie_exact, *tie_near;      // may be null
  const int* nonfinite_input;     // != 0: some input is NaN/Inf, so masked tiles cannot be skipped
};

/// Keys visible to query row i: the prefix [0, n).
__device__ __forceinline__ int visible_count(const params& p, int i) {
  return static_cast<int>(p.pr.visible_keys(static_cast<std::size_t>(i)));
}
/// A size of the problem as an int (the launcher checks every size <= 2^30).
__device__ __forceinline__ int isize(std::size_t n) { return static_cast<int>(n); }

/// Maximum with the host's NaN rule (std::max(m, x): x is taken only when m < x, so NaN is skipped).
__device__ __forceinline__ double max_skip_nan(double m, double x) { return m < x ? x : m; }

/// Reductions over the 16 threads of one tile row (one half warp).
__device__ __forceinline__ double row_max(double x) {
  for (int o = 8; o > 0; o >>= 1) x = max_skip_nan(x, __shfl_xor_sync(0xffffffffu, x, o, 16));
  return x;
}
__device__ __forceinline__ double row_sum(double x) {
  for (int o = 8; o > 0; o >>= 1) x = x + __shfl_xor_sync(0xffffffffu, x, o, 16);
  return x;
}
__device__ __forceinline__ int row_sum_int(int x) {
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o, 16);
  return x;
}

/// Copies rows [r0, r0 + rows) of a [n, width] matrix into shared memory (stride width + 1),
/// zero beyond row n.
__device__ __forceinline__ void load_tile(double* dst, const double* src, int r0, int rows, int n, int width) {
  const int ld = width + 1;
  for (int x = threadIdx.y * 16 + threadIdx.x; x < rows * width; x += 256) {
    const int r = x / width, c = x % width;
    dst[r * ld + c] = r0 + r < n ? src[static_cast<long>(r0 + r) * width + c] : 0.0;
  }
}

/// acc[a][b] = Σ_k A[ty + 16a][k] · B[tx + 16b][k], k in increasing order.
template <int TM, int TN>
__device__ __forceinline__ void tile_dots(double (&acc)[TM][TN], const double* A, const double* B, int width) {
  const int ld = width + 1;
  for (int a = 0; a < TM; ++a)
    for (int b = 0; b < TN; ++b) acc[a][b] = 0;
  for (int k = 0; k < width; ++k) {
    double x[TM], y[TN];
    for (int a = 0; a < TM; ++a) x[a] = A[(threadIdx.y + 16 * a) * ld + k];
    for (int b = 0; b < TN; ++b) y[b] = B[(threadIdx.x + 16 * b) * ld + k];
    for (int a = 0; a < TM; ++a)
      for (int b = 0; b < TN; ++b) acc[a][b] = acc[a][b] + x[a] * y[b];
  }
}

/// out[a][c] += Σ_j W[ty + 16a][j] · M[j][tx + 16c] for j < inner (W stride inner + 1, M stride width + 1).
template <int TM, int NC>
__device__ __forceinline__ void tile_accumulate(double (&out)[TM][NC], const double* W, int inner, const double* M,
                                                int width) {
  const int lw = inner + 1, lm = width + 1;
  for (int j = 0; j < inner; ++j) {
    double w[TM];
    for (int a = 0; a < TM; ++a) w[a] = W[(threadIdx.y + 16 * a) * lw + j];
    for (int c = 0; c < NC; ++c) {
      const int col = threadIdx.x + 16 * c;
      if (col < width) {
        const double mv = M[j * lm + col];
        for (int a = 0; a < TM; ++a) out[a][c] = out[a][c] + w[a] * mv;
      }
    }
  }
}

/// Row numbers in the bhsd layout (attn::shape::q_row, kv_row) as the kernels' signed indices.
__device__ __forceinline__ long q_row(const params& p, int b, int h, int i) {
  using z = std::size_t;
  return static_cast<long>(p.pr.shape.q_row(static_cast<z>(b), static_cast<z>(h), static_cast<z>(i)));
}
__device__ __forceinline__ long kv_row(const params& p, int b, int kvh, int j) {
  using z = std::size_t;
  return static_cast<long>(p.pr.shape.kv_row(static_cast<z>(b), static_cast<z>(kvh), static_cast<z>(j)));
}

template <class T>
__global__ void __launch_bounds__(256) forward_kernel(params p) {
  constexpr int TM = T::TM, TN = T::TN, NC = T::NC, BQ = T::rows, BK = T::cols;
  extern __shared__ double smem[];
  const attn::shape& s = p.pr.shape;
  const int D = isize(s.dim), Dv = isize(s.dim_v), Sq = isize(s.seq_q), Sk = isize(s.seq_k);
  double* Qs = smem;
  double* Ks = Qs + BQ * (D + 1);
  double* Vs = Ks + BK * (D + 1);
  double* Ps = Vs + BK * (Dv + 1);  // [BQ][BK + 1]

  const int b = blockIdx.y / isize(s.heads), h = blockIdx.y % isize(s.heads), kvh = isize(s.kv_head(h));
  const int q0 = blockIdx.x * BQ;
  const double* Qg = p.q + q_row(p, b, h, 0) * D;
  const double* Kg = p.k + kv_row(p, b, kvh, 0) * D;
  const double* Vg = p.v + kv_row(p, b, kvh, 0) * Dv;
  load_tile(Qs, Qg, q0, BQ, Sq, D);

  int n[TM];
  for (int a = 0; a < TM; ++a) {
    const int i = q0 + threadIdx.y + 16 * a;
    n[a] = i < Sq ? visible_count(p, i) : 0;
  }
  // Fully masked key tiles contribute 0·x: skipped only when every input is finite (then 0·x = ±0).
  const int last = (q0 + BQ < Sq ? q0 + BQ : Sq) - 1;
  const int key_end = *p.nonfinite_input ? Sk : visible_count(p, last);
  const int tiles = (key_end + BK - 1) / BK;
  const double scale = p.pr.scale;
  const double sigma = scale < 0 ? -1.0 : 1.0;

  // Pass 1: the row maximum of the scaled scores, and of σ·(q·k) for the tie statistics.
  double m[TM], dmax[TM];
  bool finite[TM];
  for (int a = 0; a < TM; ++a) m[a] = dmax[a] = -INFINITY, finite[a] = true;
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile(Ks, Kg, t * BK, BK, Sk, D);
    __syncthreads();
    double dot[TM][TN];
    tile_dots<TM, TN>(dot, Qs, Ks, D);
    for (int a = 0; a < TM; ++a)
      for (int c = 0; c < TN; ++c) {
        const int j = t * BK + threadIdx.x + 16 * c;
        if (j < n[a]) {
          m[a] = max_skip_nan(m[a], dot[a][c] * scale);
          finite[a] = finite[a] && isfinite(dot[a][c]);
          dmax[a] = max_skip_nan(dmax[a], sigma * dot[a][c]);
        }
      }
  }
  for (int a = 0; a < TM; ++a) {
    m[a] = row_max(m[a]);
    dmax[a] = row_max(dmax[a]);
    finite[a] = row_sum_int(finite[a] ? 0 : 1) == 0;
  }

  // Pass 2: p = exp(s − m), l = Σ p, Ō = Σ p V, tie counts.
  double l[TM], acc[TM][NC];
  int exact[TM], near[TM];
  for (int a = 0; a < TM; ++a) {
    l[a] = 0, exact[a] = near[a] = 0;
    for (int c = 0; c < NC; ++c) acc[a][c] = 0;
  }
  const double abs_scale = fabs(scale);
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile(Ks, Kg, t * BK, BK, Sk, D);
    load_tile(Vs, Vg, t * BK, BK, Sk, Dv);
    __syncthreads();
    double dot[TM][TN];
    tile_dots<TM, TN>(dot, Qs, Ks, D);
    for (int a = 0; a < TM; ++a)
      for (int c = 0; c < TN; ++c) {
        const int j = t * BK + threadIdx.x + 16 * c;
        double pr = 0;
        if (j < n[a]) {
          pr = exp(dot[a][c] * scale - m[a]);
          l[a] = l[a] + pr;
          const double key = sigma * dot[a][c];
          exact[a] += key == dmax[a];
          near[a] += abs_scale * (dmax[a] - key) <= p.tie_tolerance;
        }
        Ps[(threadIdx.y + 16 * a) * (BK + 1) + threadIdx.x + 16 * c] = pr;
      }
    __syncthreads();
    tile_accumulate<TM, NC>(acc, Ps, BK, Vs, Dv);
  }

  // Every thread runs the shuffles (no early exit): rows past seq_q only skip the stores.
  for (int a = 0; a < TM; ++a) {
    l[a] = row_sum(l[a]);
    exact[a] = row_sum_int(exact[a]);
    near[a] = row_sum_int(near[a]);
    const int i = q0 + threadIdx.y + 16 * a;
    const bool in = i < Sq;
    const long r = q_row(p, b, h, in ? i : 0);
    double dsum = 0;
    for (int c = 0; c < NC; ++c) {
      const int col = threadIdx.x + 16 * c;
      if (!in || col >= Dv) continue;
      // A row that sees no key keeps Ō = Σ 0·v (0, or NaN from a non-finite v, as on the host).
      const double o = n[a] == 0 ? acc[a][c] : acc[a][c] / l[a];
      p.o[r * Dv + col] = o;
      if (p.d_o) dsum = dsum + p.d_o[r * Dv + col] * o;
    }
    if (p.d_o) dsum = row_sum(dsum);
    if (in && threadIdx.x == 0) {
      p.lse[r] = n[a] == 0 ? -INFINITY : m[a] + log(l[a]);
      p.m[r] = m[a];
      p.l[r] = l[a];
      if (p.d_o) p.delta[r] = dsum;
      if (p.tie_exact) {
        const bool scored = n[a] > 0 && finite[a];
        p.tie_exact[r] = scored ? exact[a] : -1;
        p.tie_near[r] = scored ? near[a] : -1;
      }
    }
  }
}

/// The host's P: exp(s − m) / l for a visible pair, else 0.
__device__ __forceinline__ double prob(double dot, double scale, double m, double l, bool visible) {
  return visible ? exp(dot * scale - m) / l : 0.0;
}

template <class T>
__global__ void __launch_bounds__(256) backward_dq_kernel(params p) {
  constexpr int TM = T::TM, TN = T::TN, NC = T::NC, BQ = T::rows, BK = T::cols;
  extern __shared__ double smem[];
  const attn::shape& s = p.pr.shape;
  const int D = isize(s.dim), Dv = isize(s.dim_v), Sq = isize(s.seq_q), Sk = isize(s.seq_k);
  double* Qs = smem;
  double* dOs = Qs + BQ * (D + 1);
  double* Ks = dOs + BQ * (Dv + 1);
  double* Vs = Ks + BK * (D + 1);
  double* dSs = Vs + BK * (Dv + 1);  // [BQ][BK + 1]

  const int b = blockIdx.y / isize(s.heads), h = blockIdx.y % isize(s.heads), kvh = isize(s.kv_head(h));
  const int q0 = blockIdx.x * BQ;
  const double scale = p.pr.scale;
  const double* Kg = p.k + kv_row(p, b, kvh, 0) * D;
  const double* Vg = p.v + kv_row(p, b, kvh, 0) * Dv;
  load_tile(Qs, p.q + q_row(p, b, h, 0) * D, q0, BQ, Sq, D);
  load_tile(dOs, p.d_o + q_row(p, b, h, 0) * Dv, q0, BQ, Sq, Dv);

  int n[TM];
  double m[TM], l[TM], delta[TM];
  for (int a = 0; a < TM; ++a) {
    const int i = q0 + threadIdx.y + 16 * a;
    const bool in = i < Sq;
    n[a] = in ? visible_count(p, i) : 0;
    m[a] = in ? p.m[q_row(p, b, h, i)] : 0.0;
    l[a] = in ? p.l[q_row(p, b, h, i)] : 1.0;
    delta[a] = in ? p.delta[q_row(p, b, h, i)] : 0.0;
  }
  const int last = (q0 + BQ < Sq ? q0 + BQ : Sq) - 1;
  const int key_end = *p.nonfinite_input ? Sk : visible_count(p, last);
  const int tiles = (key_end + BK - 1) / BK;

  double acc[TM][NC];
  for (int a = 0; a < TM; ++a)
    for (int c = 0; c < NC; ++c) acc[a][c] = 0;
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile(Ks, Kg, t * BK, BK, Sk, D);
    load_tile(Vs, Vg, t * BK, BK, Sk, Dv);
    __syncthreads();
    double dot[TM][TN], dp[TM][TN];
    tile_dots<TM, TN>(dot, Qs, Ks, D);
    tile_dots<TM, TN>(dp, dOs, Vs, Dv);
    for (int a = 0; a < TM; ++a)
      for (int c = 0; c < TN; ++c) {
        const int j = t * BK + threadIdx.x + 16 * c;
        const int i = q0 + threadIdx.y + 16 * a;
        // Masked pairs: 0 · (dP − delta), as in the host's dense product; padding (i, j) outside
        // the problem: exactly 0.
        const double pr = prob(dot[a][c], scale, m[a], l[a], j < n[a]);
        const double ds = j < Sk && i < Sq ? pr * (dp[a][c] - delta[a]) : 0.0;
        dSs[(threadIdx.y + 16 * a) * (BK + 1) + threadIdx.x + 16 * c] = ds;
      }
    __syncthreads();
    tile_accumulate<TM, NC>(acc, dSs, BK, Ks, D);
  }
  for (int a = 0; a < TM; ++a) {
    const int i = q0 + threadIdx.y + 16 * a;
    if (i >= Sq) continue;
    for (int c = 0; c < NC; ++c) {
      const int col = threadIdx.x + 16 * c;
      if (col < D) p.dq[q_row(p, b, h, i) * D + col] = acc[a][c] * scale;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256) backward_dkdv_kernel(params p) {
  constexpr int TM = T::TM, TN = T::TN, NC = T::NC, BK = T::rows, BQ = T::cols;
  extern __shared__ double smem[];
  const attn::shape& s = p.pr.shape;
  const int D = isize(s.dim), Dv = isize(s.dim_v), Sq = isize(s.seq_q), Sk = isize(s.seq_k);
  double* Ks = smem;
  double* Vs = Ks + BK * (D + 1);
  double* Qs = Vs + BK * (Dv + 1);
  double* dOs = Qs + BQ * (D + 1);
  double* Ws = dOs + BQ * (Dv + 1);  // [BK][BQ + 1]: P, then dS, transposed (key rows)
  double* ms = Ws + BK * (BQ + 1);
  double* ls = ms + BQ;
  double* deltas = ls + BQ;

  const int b = blockIdx.y / isize(s.kv_heads), kvh = blockIdx.y % isize(s.kv_heads);
  const int group = isize(s.group());
  const int k0 = blockIdx.x * BK;
  const double scale = p.pr.scale;
  load_tile(Ks, p.k + kv_row(p, b, kvh, 0) * D, k0, BK, Sk, D);
  load_tile(Vs, p.v + kv_row(p, b, kvh, 0) * Dv, k0, BK, Sk, Dv);
  // The first query row that sees key k0; earlier query tiles see none of this tile's keys (with a
  // non-finite input every tile takes part: 0·x is then not always 0).
  const int first = *p.nonfinite_input ? 0 : isize(p.pr.first_visible_row(static_cast<std::size_t>(k0)));
  const int t0 = first / BQ;
  const int tiles = (Sq + BQ - 1) / BQ;

  double dk[TM][NC], dv[TM][NC];
  for (int a = 0; a < TM; ++a)
    for (int c = 0; c < NC; ++c) dk[a][c] = dv[a][c] = 0;
  for (int g = 0; g < group; ++g) {
    const int h = isize(s.q_head(static_cast<std::size_t>(kvh), static_cast<std::size_t>(g)));
    for (int t = t0; t < tiles; ++t) {
      const int i0 = t * BQ;
      __syncthreads();
      load_tile(Qs, p.q + q_row(p, b, h, 0) * D, i0, BQ, Sq, D);
      load_tile(dOs, p.d_o + q_row(p, b, h, 0) * Dv, i0, BQ, Sq, Dv);
      for (int x = threadIdx.y * 16 + threadIdx.x; x < BQ; x += 256) {
        const bool in = i0 + x < Sq;
        ms[x] = in ? p.m[q_row(p, b, h, i0 + x)] : 0.0;
        ls[x] = in ? p.l[q_row(p, b, h, i0 + x)] : 1.0;
        deltas[x] = in ? p.delta[q_row(p, b, h, i0 + x)] : 0.0;
      }
      __syncthreads();
      double dot[TM][TN], dp[TM][TN];
      tile_dots<TM, TN>(dot, Ks, Qs, D);   // Σ_k K[j][k] Q[i][k]: the forward's q·k, same order
      tile_dots<TM, TN>(dp, Vs, dOs, Dv);  // Σ_c V[j][c] dO[i][c]: the dQ kernel's dO·v
      double pr[TM][TN];
      for (int a = 0; a < TM; ++a)
        for (int c = 0; c < TN; ++c) {
          const int j = k0 + threadIdx.y + 16 * a, qi = threadIdx.x + 16 * c, i = i0 + qi;
          const bool in = i < Sq && j < Sk;
          const auto seen = [&] { return p.pr.visible(static_cast<std::size_t>(i), static_cast<std::size_t>(j)); };
          pr[a][c] = in ? prob(dot[a][c], scale, ms[qi], ls[qi], seen()) : 0.0;
          Ws[(threadIdx.y + 16 * a) * (BQ + 1) + qi] = pr[a][c];
        }
      __syncthreads();
      tile_accumulate<TM, NC>(dv, Ws, BQ, dOs, Dv);
      __syncthreads();
      for (int a = 0; a < TM; ++a)
        for (int c = 0; c < TN; ++c) {
          const int j = k0 + threadIdx.y + 16 * a, qi = threadIdx.x + 16 * c, i = i0 + qi;
          const bool in = i < Sq && j < Sk;
          Ws[(threadIdx.y + 16 * a) * (BQ + 1) + qi] = in ? pr[a][c] * (dp[a][c] - deltas[qi]) : 0.0;
        }
      __syncthreads();
      tile_accumulate<TM, NC>(dk, Ws, BQ, Qs, D);
    }
  }
  for (int a = 0; a < TM; ++a) {
    const int j = k0 + threadIdx.y + 16 * a;
    if (j >= Sk) continue;
    for (int c = 0; c < NC; ++c) {
      const int col = threadIdx.x + 16 * c;
      if (col < D) p.dk[kv_row(p, b, kvh, j) * D + col] = dk[a][c] * scale;
      if (col < Dv) p.dv[kv_row(p, b, kvh, j) * Dv + col] = dv[a][c];
    }
  }
}

/// Sets *flag when some element of x[0, n) is NaN or ±Inf.
__global__ void nonfinite_kernel(const double* x, long n, int* flag) {
  bool bad = false;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x)
    bad = bad || !isfinite(x[i]);
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0) atomicOr(flag, 1);
}

template <class T>
std::size_t forward_smem(const params& p) {
  const std::size_t d = p.pr.shape.dim + 1, dv = p.pr.shape.dim_v + 1;
  return sizeof(double) * (T::rows * d + T::cols * d + T::cols * dv + T::rows * (T::cols + 1));
}
template <class T>
std::size_t dq_smem(const params& p) {
  const std::size_t d = p.pr.shape.dim + 1, dv = p.pr.shape.dim_v + 1;
  return sizeof(double) * (T::rows * d + T::rows * dv + T::cols * d + T::cols * dv + T::rows * (T::cols + 1));
}
template <class T>
std::size_t dkdv_smem(const params& p) {
  const std::size_t d = p.pr.shape.dim + 1, dv = p.pr.shape.dim_v + 1;
  return sizeof(double) * (T::rows * d + T::rows * dv + T::cols * d + T::cols * dv + T::rows * (T::cols + 1) + 3 * T::cols);
}

template <class T>
void launch_all(const params& p, cudaStream_t st) {
  const dim3 block(16, 16);
  const attn::shape& s = p.pr.shape;
  const unsigned bh = static_cast<unsigned>(s.batch * s.heads), bkv = static_cast<unsigned>(s.batch * s.kv_heads);
  const unsigned q_tiles = static_cast<unsigned>((s.seq_q + T::rows - 1) / T::rows);
  const std::size_t fs = forward_smem<T>(p);
  check(cudaFuncSetAttribute(forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(fs)), "forward smem");
  forward_kernel<T><<<dim3(q_tiles, bh), block, fs, st>>>(p);
  check(cudaGetLastError(), "forward launch");
  if (!p.d_o) return;
  const std::size_t qs = dq_smem<T>(p), ks = dkdv_smem<T>(p);
  check(cudaFuncSetAttribute(backward_dq_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(qs)), "dq smem");
  check(cudaFuncSetAttribute(backward_dkdv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(ks)), "dkdv smem");
  backward_dq_kernel<T><<<dim3(q_tiles, bh), block, qs, st>>>(p);
  check(cudaGetLastError(), "dq launch");
  const unsigned k_tiles = static_cast<unsigned>((s.seq_k + T::rows - 1) / T::rows);
  backward_dkdv_kernel<T><<<dim3(k_tiles, bkv), block, ks, st>>>(p);
  check(cudaGetLastError(), "dkdv launch");
}

}  // namespace

bool attention_f64_available() noexcept {
  // nonfinite_kernel: an image of these kernels (not of tiebreak::gpu's, which the audit may lack).
  static const bool ok = detail::kernel_image_status(nonfinite_kernel) == cudaSuccess;
  return ok;
}

std::string attention_f64_unavailable_reason() {
  if (attention_f64_available()) return {};
  return cudaGetErrorString(detail::kernel_image_status(nonfinite_kernel));
}

attention_f64_timing attention_f64(const attention_f64_problem& in) {
  using clock = std::chrono::steady_clock;
  const attn::shape& s = in.problem.shape;
  if (const attn::problem_error e = in.problem.validate(); e != attn::problem_error::ok)
    throw std::invalid_argument(std::string("tiebreak::gpu::attention_f64: ") + attn::error_text(e));
  if (s.dim > attention_f64_max_dim || s.dim_v > attention_f64_max_dim)
    throw std::invalid_argument("tiebreak::gpu::attention_f64: dim and dim_v must be <= " + std::to_string(attention_f64_max_dim));
  if (s.seq_q > (1u << 30) || s.seq_k > (1u << 30))
    throw std::invalid_argument("tiebreak::gpu::attention_f64: seq_q and seq_k must be <= 2^30");
  if (!in.q || !in.k || !in.v || !in.o || !in.lse || (in.d_o && (!in.delta || !in.dq || !in.dk || !in.dv)) ||
      (!in.tie_exact != !in.tie_near))
    throw std::invalid_argument("tiebreak::gpu::attention_f64: a required pointer is null");
  if (s.batch * s.heads > 65535u || s.batch * s.kv_heads > 65535u)
    throw std::invalid_argument("tiebreak::gpu::attention_f64: batch·heads must be <= 65535");

  attention_f64_timing timing;
  const auto t0 = clock::now();
  const std::size_t nq = s.q_size(), nk = s.k_size(), nv = s.v_size(), no = s.o_size(), nr = s.lse_size();
  const bool bwd = in.d_o != nullptr;
  const std::size_t d = sizeof(double);
  using detail::device_buffer;
  device_buffer<double> q(nq, check), k(nk, check), v(nv, check), o(no, check), lse(nr, check), m(nr, check), l(nr, check);
  device_buffer<double> d_o(bwd ? no : 0, check), delta(bwd ? nr : 0, check), dq(bwd ? nq : 0, check),
      dk(bwd ? nk : 0, check), dv(bwd ? nv : 0, check);
  device_buffer<int> te(in.tie_exact ? nr : 0, check), tn(in.tie_near ? nr : 0, check), flag(1, check);
  check(cudaMemcpy(q.data(), in.q, nq * d, cudaMemcpyHostToDevice), "copy q");
  check(cudaMemcpy(k.data(), in.k, nk * d, cudaMemcpyHostToDevice), "copy k");
  check(cudaMemcpy(v.data(), in.v, nv * d, cudaMemcpyHostToDevice), "copy v");
  if (bwd) check(cudaMemcpy(d_o.data(), in.d_o, no * d, cudaMemcpyHostToDevice), "copy dO");
  check(cudaMemset(flag.data(), 0, sizeof(int)), "cudaMemset");
  const auto t1 = clock::now();

  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  check(cudaEventRecord(e0), "cudaEventRecord");
  int* fl = flag.data();
  const std::pair<const double*, std::size_t> inputs[] = {{q.data(), nq}, {k.data(), nk}, {v.data(), nv}, {d_o.data(), bwd ? no : 0}};
  for (const auto& [x, n] : inputs)
    if (n) nonfinite_kernel<<<264, 256>>>(x, static_cast<long>(n), fl);
  check(cudaGetLastError(), "finiteness launch");
  params p{};
  p.pr = in.problem;
  p.tie_tolerance = in.tie_tolerance;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.d_o = bwd ? d_o.data() : nullptr;
  p.o = o.data(), p.lse = lse.data(), p.delta = delta.data(), p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data();
  p.m = m.data(), p.l = l.data();
  p.tie_exact = in.tie_exact ? te.data() : nullptr;
  p.tie_near = in.tie_near ? tn.data() : nullptr;
  p.nonfinite_input = fl;
  if (s.dim <= 128 && s.dim_v <= 128) launch_all<traits_128>(p, nullptr);
  else launch_all<traits_256>(p, nullptr);
  check(cudaEventRecord(e1), "cudaEventRecord");
  check(cudaEventSynchronize(e1), "attention kernels");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  timing.kernels = ms * 1e-3;

  const auto t2 = clock::now();
  check(cudaMemcpy(in.o, o.data(), no * d, cudaMemcpyDeviceToHost), "copy O");
  check(cudaMemcpy(in.lse, lse.data(), nr * d, cudaMemcpyDeviceToHost), "copy LSE");
  if (bwd) {
    check(cudaMemcpy(in.delta, delta.data(), nr * d, cudaMemcpyDeviceToHost), "copy delta");
    check(cudaMemcpy(in.dq, dq.data(), nq * d, cudaMemcpyDeviceToHost), "copy dQ");
    check(cudaMemcpy(in.dk, dk.data(), nk * d, cudaMemcpyDeviceToHost), "copy dK");
    check(cudaMemcpy(in.dv, dv.data(), nv * d, cudaMemcpyDeviceToHost), "copy dV");
  }
  if (in.tie_exact) {
    check(cudaMemcpy(in.tie_exact, te.data(), nr * sizeof(int), cudaMemcpyDeviceToHost), "copy ties");
    check(cudaMemcpy(in.tie_near, tn.data(), nr * sizeof(int), cudaMemcpyDeviceToHost), "copy near ties");
  }
  timing.upload = std::chrono::duration<double>(t1 - t0).count();
  timing.download = std::chrono::duration<double>(clock::now() - t2).count();
  return timing;
}

}  // namespace tiebreak::gpu
