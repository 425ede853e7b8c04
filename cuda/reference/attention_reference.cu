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

#include "tiebreak/gpu/attention_reference.hpp"

namespace tiebreak::gpu {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("tiebreak::gpu::attention_f64: ") + what + ": " + cudaGetErrorString(e));
}

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

/// The problem as the kernels see it: device pointers.
struct params {
  int batch, heads, kv_heads, seq_q, seq_k, dim, dim_v;
  bool causal;
  double scale, tie_tolerance;
  const double *q, *k, *v, *d_o;
  double *o, *lse, *delta, *dq, *dk, *dv;
  double *m, *l;                  // scratch: per query row
  int *tie_exact, *tie_near;      // may be null
  const int* nonfinite_input;     // != 0: some input is NaN/Inf, so masked tiles cannot be skipped
};

/// Keys visible to query row i: the prefix [0, n) (bottom-right causal alignment).
__device__ __forceinline__ int visible_count(const params& p, int i) {
  if (!p.causal) return p.seq_k;
  const long lim = static_cast<long>(i) + p.seq_k + 1 - p.seq_q;
  return lim <= 0 ? 0 : static_cast<int>(lim < p.seq_k ? lim : p.seq_k);
}

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

__device__ __forceinline__ long q_row(const params& p, int bh, int i) { return static_cast<long>(bh) * p.seq_q + i; }
__device__ __forceinline__ long kv_row(const params& p, int bkv, int j) { return static_cast<long>(bkv) * p.seq_k + j; }

template <class T>
__global__ void __launch_bounds__(256) forward_kernel(params p) {
  constexpr int TM = T::TM, TN = T::TN, NC = T::NC, BQ = T::rows, BK = T::cols;
  extern __shared__ double smem[];
  const int D = p.dim, Dv = p.dim_v;
  double* Qs = smem;
  double* Ks = Qs + BQ * (D + 1);
  double* Vs = Ks + BK * (D + 1);
  double* Ps = Vs + BK * (Dv + 1);  // [BQ][BK + 1]

  const int bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const int bkv = b * p.kv_heads + h / (p.heads / p.kv_heads);
  const int q0 = blockIdx.x * BQ;
  const double* Qg = p.q + q_row(p, bh, 0) * D;
  const double* Kg = p.k + kv_row(p, bkv, 0) * D;
  const double* Vg = p.v + kv_row(p, bkv, 0) * Dv;
  load_tile(Qs, Qg, q0, BQ, p.seq_q, D);

  int n[TM];
  for (int a = 0; a < TM; ++a) {
    const int i = q0 + threadIdx.y + 16 * a;
    n[a] = i < p.seq_q ? visible_count(p, i) : 0;
  }
  // Fully masked key tiles contribute 0·x: skipped only when every input is finite (then 0·x = ±0).
  const int last = (q0 + BQ < p.seq_q ? q0 + BQ : p.seq_q) - 1;
  const int key_end = *p.nonfinite_input ? p.seq_k : visible_count(p, last);
  const int tiles = (key_end + BK - 1) / BK;
  const double sigma = p.scale < 0 ? -1.0 : 1.0;

  // Pass 1: the row maximum of the scaled scores, and of σ·(q·k) for the tie statistics.
  double m[TM], dmax[TM];
  bool finite[TM];
  for (int a = 0; a < TM; ++a) m[a] = dmax[a] = -INFINITY, finite[a] = true;
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile(Ks, Kg, t * BK, BK, p.seq_k, D);
    __syncthreads();
    double dot[TM][TN];
    tile_dots<TM, TN>(dot, Qs, Ks, D);
    for (int a = 0; a < TM; ++a)
      for (int c = 0; c < TN; ++c) {
        const int j = t * BK + threadIdx.x + 16 * c;
        if (j < n[a]) {
          m[a] = max_skip_nan(m[a], dot[a][c] * p.scale);
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
  const double abs_scale = fabs(p.scale);
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile(Ks, Kg, t * BK, BK, p.seq_k, D);
    load_tile(Vs, Vg, t * BK, BK, p.seq_k, Dv);
    __syncthreads();
    double dot[TM][TN];
    tile_dots<TM, TN>(dot, Qs, Ks, D);
    for (int a = 0; a < TM; ++a)
      for (int c = 0; c < TN; ++c) {
        const int j = t * BK + threadIdx.x + 16 * c;
        double pr = 0;
        if (j < n[a]) {
          pr = exp(dot[a][c] * p.scale - m[a]);
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
    const bool in = i < p.seq_q;
    const long r = q_row(p, bh, in ? i : 0);
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
  const int D = p.dim, Dv = p.dim_v;
  double* Qs = smem;
  double* dOs = Qs + BQ * (D + 1);
  double* Ks = dOs + BQ * (Dv + 1);
  double* Vs = Ks + BK * (D + 1);
  double* dSs = Vs + BK * (Dv + 1);  // [BQ][BK + 1]

  const int bh = blockIdx.y, b = bh / p.heads, h = bh % p.heads;
  const int bkv = b * p.kv_heads + h / (p.heads / p.kv_heads);
  const int q0 = blockIdx.x * BQ;
  const double* Kg = p.k + kv_row(p, bkv, 0) * D;
  const double* Vg = p.v + kv_row(p, bkv, 0) * Dv;
  load_tile(Qs, p.q + q_row(p, bh, 0) * D, q0, BQ, p.seq_q, D);
  load_tile(dOs, p.d_o + q_row(p, bh, 0) * Dv, q0, BQ, p.seq_q, Dv);

  int n[TM];
  double m[TM], l[TM], delta[TM];
  for (int a = 0; a < TM; ++a) {
    const int i = q0 + threadIdx.y + 16 * a;
    const bool in = i < p.seq_q;
    n[a] = in ? visible_count(p, i) : 0;
    m[a] = in ? p.m[q_row(p, bh, i)] : 0.0;
    l[a] = in ? p.l[q_row(p, bh, i)] : 1.0;
    delta[a] = in ? p.delta[q_row(p, bh, i)] : 0.0;
  }
  const int last = (q0 + BQ < p.seq_q ? q0 + BQ : p.seq_q) - 1;
  const int key_end = *p.nonfinite_input ? p.seq_k : visible_count(p, last);
  const int tiles = (key_end + BK - 1) / BK;

  double acc[TM][NC];
  for (int a = 0; a < TM; ++a)
    for (int c = 0; c < NC; ++c) acc[a][c] = 0;
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    load_tile(Ks, Kg, t * BK, BK, p.seq_k, D);
    load_tile(Vs, Vg, t * BK, BK, p.seq_k, Dv);
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
        const double pr = prob(dot[a][c], p.scale, m[a], l[a], j < n[a]);
        const double ds = j < p.seq_k && i < p.seq_q ? pr * (dp[a][c] - delta[a]) : 0.0;
        dSs[(threadIdx.y + 16 * a) * (BK + 1) + threadIdx.x + 16 * c] = ds;
      }
    __syncthreads();
    tile_accumulate<TM, NC>(acc, dSs, BK, Ks, D);
  }
  for (int a = 0; a < TM; ++a) {
    const int i = q0 + threadIdx.y + 16 * a;
    if (i >= p.seq_q) continue;
    for (int c = 0; c < NC; ++c) {
      const int col = threadIdx.x + 16 * c;
      if (col < D) p.dq[q_row(p, bh, i) * D + col] = acc[a][c] * p.scale;
    }
  }
}

template <class T>
__global__ void __launch_bounds__(256) backward_dkdv_kernel(params p) {
  constexpr int TM = T::TM, TN = T::TN, NC = T::NC, BK = T::rows, BQ = T::cols;
  extern __shared__ double smem[];
  const int D = p.dim, Dv = p.dim_v;
  double* Ks = smem;
  double* Vs = Ks + BK * (D + 1);
  double* Qs = Vs + BK * (Dv + 1);
  double* dOs = Qs + BQ * (D + 1);
  double* Ws = dOs + BQ * (Dv + 1);  // [BK][BQ + 1]: P, then dS, transposed (key rows)
  double* ms = Ws + BK * (BQ + 1);
  double* ls = ms + BQ;
  double* deltas = ls + BQ;

  const int bkv = blockIdx.y, b = bkv / p.kv_heads, kvh = bkv % p.kv_heads;
  const int group = p.heads / p.kv_heads;
  const int k0 = blockIdx.x * BK;
  load_tile(Ks, p.k + kv_row(p, bkv, 0) * D, k0, BK, p.seq_k, D);
  load_tile(Vs, p.v + kv_row(p, bkv, 0) * Dv, k0, BK, p.seq_k, Dv);
  // The first query row that sees key k0 (causal); earlier query tiles see none of this tile's keys.
  long first = p.causal ? static_cast<long>(k0) + p.seq_q - p.seq_k : 0;
  if (first < 0 || *p.nonfinite_input) first = 0;
  const int t0 = first >= p.seq_q ? (p.seq_q + BQ - 1) / BQ : static_cast<int>(first / BQ);
  const int tiles = (p.seq_q + BQ - 1) / BQ;

  double dk[TM][NC], dv[TM][NC];
  for (int a = 0; a < TM; ++a)
    for (int c = 0; c < NC; ++c) dk[a][c] = dv[a][c] = 0;
  for (int g = 0; g < group; ++g) {
    const int bh = b * p.heads + kvh * group + g;
    for (int t = t0; t < tiles; ++t) {
      const int i0 = t * BQ;
      __syncthreads();
      load_tile(Qs, p.q + q_row(p, bh, 0) * D, i0, BQ, p.seq_q, D);
      load_tile(dOs, p.d_o + q_row(p, bh, 0) * Dv, i0, BQ, p.seq_q, Dv);
      for (int x = threadIdx.y * 16 + threadIdx.x; x < BQ; x += 256) {
        const bool in = i0 + x < p.seq_q;
        ms[x] = in ? p.m[q_row(p, bh, i0 + x)] : 0.0;
        ls[x] = in ? p.l[q_row(p, bh, i0 + x)] : 1.0;
        deltas[x] = in ? p.delta[q_row(p, bh, i0 + x)] : 0.0;
      }
      __syncthreads();
      double dot[TM][TN], dp[TM][TN];
      tile_dots<TM, TN>(dot, Ks, Qs, D);   // Σ_k K[j][k] Q[i][k]: the forward's q·k, same order
      tile_dots<TM, TN>(dp, Vs, dOs, Dv);  // Σ_c V[j][c] dO[i][c]: the dQ kernel's dO·v
      double pr[TM][TN];
      for (int a = 0; a < TM; ++a)
        for (int c = 0; c < TN; ++c) {
          const int j = k0 + threadIdx.y + 16 * a, qi = threadIdx.x + 16 * c, i = i0 + qi;
          const bool in = i < p.seq_q && j < p.seq_k;
          pr[a][c] = in ? prob(dot[a][c], p.scale, ms[qi], ls[qi], !p.causal || static_cast<long>(j) + p.seq_q <= static_cast<long>(i) + p.seq_k) : 0.0;
          Ws[(threadIdx.y + 16 * a) * (BQ + 1) + qi] = pr[a][c];
        }
      __syncthreads();
      tile_accumulate<TM, NC>(dv, Ws, BQ, dOs, Dv);
      __syncthreads();
      for (int a = 0; a < TM; ++a)
        for (int c = 0; c < TN; ++c) {
          const int j = k0 + threadIdx.y + 16 * a, qi = threadIdx.x + 16 * c, i = i0 + qi;
          const bool in = i < p.seq_q && j < p.seq_k;
          Ws[(threadIdx.y + 16 * a) * (BQ + 1) + qi] = in ? pr[a][c] * (dp[a][c] - deltas[qi]) : 0.0;
        }
      __syncthreads();
      tile_accumulate<TM, NC>(dk, Ws, BQ, Qs, D);
    }
  }
  for (int a = 0; a < TM; ++a) {
    const int j = k0 + threadIdx.y + 16 * a;
    if (j >= p.seq_k) continue;
    for (int c = 0; c < NC; ++c) {
      const int col = threadIdx.x + 16 * c;
      if (col < D) p.dk[kv_row(p, bkv, j) * D + col] = dk[a][c] * p.scale;
      if (col < Dv) p.dv[kv_row(p, bkv, j) * Dv + col] = dv[a][c];
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
  return sizeof(double) * (T::rows * (p.dim + 1) + T::cols * (p.dim + 1) + T::cols * (p.dim_v + 1) + T::rows * (T::cols + 1));
}
template <class T>
std::size_t dq_smem(const params& p) {
  return sizeof(double) *
         (T::rows * (p.dim + 1) + T::rows * (p.dim_v + 1) + T::cols * (p.dim + 1) + T::cols * (p.dim_v + 1) + T::rows * (T::cols + 1));
}
template <class T>
std::size_t dkdv_smem(const params& p) {
  return sizeof(double) * (T::rows * (p.dim + 1) + T::rows * (p.dim_v + 1) + T::cols * (p.dim + 1) + T::cols * (p.dim_v + 1) +
                           T::rows * (T::cols + 1) + 3 * T::cols);
}

template <class T>
void launch_all(const params& p, cudaStream_t st) {
  const dim3 block(16, 16);
  const unsigned bh = static_cast<unsigned>(p.batch * p.heads), bkv = static_cast<unsigned>(p.batch * p.kv_heads);
  const std::size_t fs = forward_smem<T>(p);
  check(cudaFuncSetAttribute(forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(fs)), "forward smem");
  forward_kernel<T><<<dim3((p.seq_q + T::rows - 1) / T::rows, bh), block, fs, st>>>(p);
  check(cudaGetLastError(), "forward launch");
  if (!p.d_o) return;
  const std::size_t qs = dq_smem<T>(p), ks = dkdv_smem<T>(p);
  check(cudaFuncSetAttribute(backward_dq_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(qs)), "dq smem");
  check(cudaFuncSetAttribute(backward_dkdv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(ks)), "dkdv smem");
  backward_dq_kernel<T><<<dim3((p.seq_q + T::rows - 1) / T::rows, bh), block, qs, st>>>(p);
  check(cudaGetLastError(), "dq launch");
  backward_dkdv_kernel<T><<<dim3((p.seq_k + T::rows - 1) / T::rows, bkv), block, ks, st>>>(p);
  check(cudaGetLastError(), "dkdv launch");
}

/// A device allocation freed on scope exit.
struct buffer {
  void* ptr = nullptr;
  explicit buffer(std::size_t bytes) { check(cudaMalloc(&ptr, bytes ? bytes : 1), "cudaMalloc"); }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() { cudaFree(ptr); }
  double* d() const { return static_cast<double*>(ptr); }
};

cudaError_t probe_device() noexcept {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return e;
  if (n == 0) return cudaErrorNoDevice;
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, nonfinite_kernel);  // fails without an image for this GPU
}

}  // namespace

bool attention_f64_available() noexcept {
  static const bool ok = [] {
    const bool r = probe_device() == cudaSuccess;
    cudaGetLastError();  // clear the error a failed probe leaves
    return r;
  }();
  return ok;
}

std::string attention_f64_unavailable_reason() {
  if (attention_f64_available()) return {};
  const cudaError_t e = probe_device();
  cudaGetLastError();
  return cudaGetErrorString(e);
}

attention_f64_timing attention_f64(const attention_f64_problem& in) {
  using clock = std::chrono::steady_clock;
  if (!in.batch || !in.heads || !in.kv_heads || !in.seq_q || !in.seq_k || !in.dim || !in.dim_v || in.heads % in.kv_heads)
    throw std::invalid_argument("tiebreak::gpu::attention_f64: every size must be positive and kv_heads must divide heads");
  if (in.dim > attention_f64_max_dim || in.dim_v > attention_f64_max_dim)
    throw std::invalid_argument("tiebreak::gpu::attention_f64: dim and dim_v must be <= " + std::to_string(attention_f64_max_dim));
  if (in.seq_q > (1u << 30) || in.seq_k > (1u << 30))
    throw std::invalid_argument("tiebreak::gpu::attention_f64: seq_q and seq_k must be <= 2^30");
  if (!in.q || !in.k || !in.v || !in.o || !in.lse || (in.d_o && (!in.delta || !in.dq || !in.dk || !in.dv)) ||
      (!in.tie_exact != !in.tie_near))
    throw std::invalid_argument("tiebreak::gpu::attention_f64: a required pointer is null");
  if (in.batch * in.heads > 65535u || in.batch * in.kv_heads > 65535u)
    throw std::invalid_argument("tiebreak::gpu::attention_f64: batch·heads must be <= 65535");

  attention_f64_timing timing;
  const auto t0 = clock::now();
  const std::size_t nq = in.batch * in.heads * in.seq_q * in.dim, nk = in.batch * in.kv_heads * in.seq_k * in.dim,
                    nv = in.batch * in.kv_heads * in.seq_k * in.dim_v, no = in.batch * in.heads * in.seq_q * in.dim_v,
                    nr = in.batch * in.heads * in.seq_q;
  const bool bwd = in.d_o != nullptr;
  const std::size_t d = sizeof(double);
  buffer q(nq * d), k(nk * d), v(nv * d), o(no * d), lse(nr * d), m(nr * d), l(nr * d);
  buffer d_o(bwd ? no * d : 0), delta(bwd ? nr * d : 0), dq(bwd ? nq * d : 0), dk(bwd ? nk * d : 0), dv(bwd ? nv * d : 0);
  buffer te(in.tie_exact ? nr * sizeof(int) : 0), tn(in.tie_near ? nr * sizeof(int) : 0), flag(sizeof(int));
  check(cudaMemcpy(q.ptr, in.q, nq * d, cudaMemcpyHostToDevice), "copy q");
  check(cudaMemcpy(k.ptr, in.k, nk * d, cudaMemcpyHostToDevice), "copy k");
  check(cudaMemcpy(v.ptr, in.v, nv * d, cudaMemcpyHostToDevice), "copy v");
  if (bwd) check(cudaMemcpy(d_o.ptr, in.d_o, no * d, cudaMemcpyHostToDevice), "copy dO");
  check(cudaMemset(flag.ptr, 0, sizeof(int)), "cudaMemset");
  const auto t1 = clock::now();

  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  check(cudaEventRecord(e0), "cudaEventRecord");
  int* fl = static_cast<int*>(flag.ptr);
  const std::pair<const double*, std::size_t> inputs[] = {{q.d(), nq}, {k.d(), nk}, {v.d(), nv}, {d_o.d(), bwd ? no : 0}};
  for (const auto& [x, n] : inputs)
    if (n) nonfinite_kernel<<<264, 256>>>(x, static_cast<long>(n), fl);
  check(cudaGetLastError(), "finiteness launch");
  params p{};
  p.batch = static_cast<int>(in.batch), p.heads = static_cast<int>(in.heads), p.kv_heads = static_cast<int>(in.kv_heads);
  p.seq_q = static_cast<int>(in.seq_q), p.seq_k = static_cast<int>(in.seq_k);
  p.dim = static_cast<int>(in.dim), p.dim_v = static_cast<int>(in.dim_v);
  p.causal = in.causal, p.scale = in.scale, p.tie_tolerance = in.tie_tolerance;
  p.q = q.d(), p.k = k.d(), p.v = v.d(), p.d_o = bwd ? d_o.d() : nullptr;
  p.o = o.d(), p.lse = lse.d(), p.delta = delta.d(), p.dq = dq.d(), p.dk = dk.d(), p.dv = dv.d();
  p.m = m.d(), p.l = l.d();
  p.tie_exact = in.tie_exact ? static_cast<int*>(te.ptr) : nullptr;
  p.tie_near = in.tie_near ? static_cast<int*>(tn.ptr) : nullptr;
  p.nonfinite_input = fl;
  if (in.dim <= 128 && in.dim_v <= 128) launch_all<traits_128>(p, nullptr);
  else launch_all<traits_256>(p, nullptr);
  check(cudaEventRecord(e1), "cudaEventRecord");
  check(cudaEventSynchronize(e1), "attention kernels");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  timing.kernels = ms * 1e-3;

  const auto t2 = clock::now();
  check(cudaMemcpy(in.o, o.ptr, no * d, cudaMemcpyDeviceToHost), "copy O");
  check(cudaMemcpy(in.lse, lse.ptr, nr * d, cudaMemcpyDeviceToHost), "copy LSE");
  if (bwd) {
    check(cudaMemcpy(in.delta, delta.ptr, nr * d, cudaMemcpyDeviceToHost), "copy delta");
    check(cudaMemcpy(in.dq, dq.ptr, nq * d, cudaMemcpyDeviceToHost), "copy dQ");
    check(cudaMemcpy(in.dk, dk.ptr, nk * d, cudaMemcpyDeviceToHost), "copy dK");
    check(cudaMemcpy(in.dv, dv.ptr, nv * d, cudaMemcpyDeviceToHost), "copy dV");
  }
  if (in.tie_exact) {
    check(cudaMemcpy(in.tie_exact, te.ptr, nr * sizeof(int), cudaMemcpyDeviceToHost), "copy ties");
    check(cudaMemcpy(in.tie_near, tn.ptr, nr * sizeof(int), cudaMemcpyDeviceToHost), "copy near ties");
  }
  timing.upload = std::chrono::duration<double>(t1 - t0).count();
  timing.download = std::chrono::duration<double>(clock::now() - t2).count();
  return timing;
}

}  // namespace tiebreak::gpu
