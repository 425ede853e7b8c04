// SPDX-License-Identifier: Apache-2.0
/// @file The tensor-core instructions on tiles in shared memory, and the kernels built on them.
///
/// One "unit" executes one instruction: a warp for mma.sync, a warpgroup (4 warps) for wgmma. A
/// block has 128 threads: 4 mma.sync units or 1 wgmma unit. Operands live in shared memory as
/// std::uint32_t containers, row-major (A m x k, B k x n, C and D m x n); the unit packs them into
/// the instruction's register fragments (PTX ISA "Matrix Fragments for mma.m16n8k16 / m16n8k8") or
/// into the no-swizzle K-major core-matrix layout that wgmma reads through its descriptors.
///
/// Built with --fmad=false like all of tiebreak; the instructions themselves are what is measured.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/emu/mma_gen.hpp"
#include "tiebreak/gpu/wgmma.cuh"

namespace tiebreak::gpu::mma_detail {

using emu::mma_instr;

/// Shapes of an instruction (one output tile).
template <mma_instr I>
struct traits {
  static constexpr bool wgmma = emu::is_wgmma(I);
  static constexpr int M = wgmma ? 64 : 16;
  static constexpr int N = 8;
  static constexpr int K = I == mma_instr::mma_m16n8k8_tf32 ? 8
                         : (I == mma_instr::wgmma_k32_e4m3 || I == mma_instr::wgmma_k32_e5m2) ? 32
                                                                                                : 16;
  static constexpr int elem_bytes = I == mma_instr::mma_m16n8k8_tf32 ? 4
                                  : (I == mma_instr::wgmma_k32_e4m3 || I == mma_instr::wgmma_k32_e5m2) ? 1
                                                                                                       : 2;
  static constexpr bool f16_out = I == mma_instr::mma_m16n8k16_f16_f16out;
  static constexpr int unit_threads = wgmma ? 128 : 32;
  static constexpr int units = 128 / unit_threads;
  static constexpr int k_bytes = K * elem_bytes;  // 32 for every wgmma variant here
};

/// Shared memory of one unit.
template <mma_instr I>
struct unit_smem {
  using T = traits<I>;
  std::uint32_t a[T::M * T::K];
  std::uint32_t b[T::K * T::N];
  std::uint32_t c[T::M * T::N];
  std::uint32_t d[T::M * T::N];
};
/// wgmma operands in the core-matrix layout (A: 64 rows, B: 8 rows, 32 bytes of K each).
struct alignas(128) wgmma_ops_smem {
  unsigned char a[64 * 32];
  unsigned char b[8 * 32];
};

__device__ __forceinline__ void unit_sync(int unit_threads) {
  if (unit_threads == 32) __syncwarp();
  else __syncthreads();
}

__device__ __forceinline__ std::uint32_t pack2(std::uint32_t lo, std::uint32_t hi) {
  return (lo & 0xffffu) | (hi << 16);
}

/// Byte offset of K-byte `kb` of row `r` in the no-swizzle K-major layout: core matrices of 8 rows x
/// 16 bytes, stored 128 bytes each, the two K-direction cores of a row block adjacent:
/// core (rb, kc) at (rb * 2 + kc) * 128. K-direction core stride 128 bytes, M/N-direction 256.
__device__ __forceinline__ int core_offset(int r, int kb) {
  return ((r >> 3) * 2 + (kb >> 4)) * 128 + (r & 7) * 16 + (kb & 15);
}

__device__ __forceinline__ std::uint64_t make_desc(const void* p, std::uint32_t lbo, std::uint32_t sbo) {
  return smem_desc(p, lbo, sbo);  // base offset 0, no swizzle
}

/// One mma.sync on the unit's shared tile: d = a * b + c. `lane` in [0, 32).
template <mma_instr I>
__device__ __forceinline__ void exec_mma_sync(unit_smem<I>& s, int lane) {
  using T = traits<I>;
  const int g = lane >> 2, t = lane & 3;
  const std::uint32_t* A = s.a;
  const std::uint32_t* B = s.b;
  if constexpr (I == mma_instr::mma_m16n8k8_tf32) {
    const std::uint32_t a0 = A[g * 8 + t], a1 = A[(g + 8) * 8 + t], a2 = A[g * 8 + t + 4], a3 = A[(g + 8) * 8 + t + 4];
    const std::uint32_t b0 = B[t * 8 + g], b1 = B[(t + 4) * 8 + g];
    float d0 = __uint_as_float(s.c[g * 8 + 2 * t]), d1 = __uint_as_float(s.c[g * 8 + 2 * t + 1]);
    float d2 = __uint_as_float(s.c[(g + 8) * 8 + 2 * t]), d3 = __uint_as_float(s.c[(g + 8) * 8 + 2 * t + 1]);
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    s.d[g * 8 + 2 * t] = __float_as_uint(d0);
    s.d[g * 8 + 2 * t + 1] = __float_as_uint(d1);
    s.d[(g + 8) * 8 + 2 * t] = __float_as_uint(d2);
    s.d[(g + 8) * 8 + 2 * t + 1] = __float_as_uint(d3);
  } else {
    constexpr int K = T::K;  // 16
    const std::uint32_t a0 = pack2(A[g * K + 2 * t], A[g * K + 2 * t + 1]);
    const std::uint32_t a1 = pack2(A[(g + 8) * K + 2 * t], A[(g + 8) * K + 2 * t + 1]);
    const std::uint32_t a2 = pack2(A[g * K + 2 * t + 8], A[g * K + 2 * t + 9]);
    const std::uint32_t a3 = pack2(A[(g + 8) * K + 2 * t + 8], A[(g + 8) * K + 2 * t + 9]);
    const std::uint32_t b0 = pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    const std::uint32_t b1 = pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    if constexpr (T::f16_out) {
      std::uint32_t c0 = pack2(s.c[g * 8 + 2 * t], s.c[g * 8 + 2 * t + 1]);
      std::uint32_t c1 = pack2(s.c[(g + 8) * 8 + 2 * t], s.c[(g + 8) * 8 + 2 * t + 1]);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
          : "+r"(c0), "+r"(c1)
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      s.d[g * 8 + 2 * t] = c0 & 0xffffu;
      s.d[g * 8 + 2 * t + 1] = c0 >> 16;
      s.d[(g + 8) * 8 + 2 * t] = c1 & 0xffffu;
      s.d[(g + 8) * 8 + 2 * t + 1] = c1 >> 16;
    } else {
      float d0 = __uint_as_float(s.c[g * 8 + 2 * t]), d1 = __uint_as_float(s.c[g * 8 + 2 * t + 1]);
      float d2 = __uint_as_float(s.c[(g + 8) * 8 + 2 * t]), d3 = __uint_as_float(s.c[(g + 8) * 8 + 2 * t + 1]);
      if constexpr (I == mma_instr::mma_m16n8k16_bf16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
      }
      s.d[g * 8 + 2 * t] = __float_as_uint(d0);
      s.d[g * 8 + 2 * t + 1] = __float_as_uint(d1);
      s.d[(g + 8) * 8 + 2 * t] = __float_as_uint(d2);
      s.d[(g + 8) * 8 + 2 * t + 1] = __float_as_uint(d3);
    }
  }
}

/// One wgmma m64n8 on the unit's shared tile; all 128 threads of the block take part.
template <mma_instr I>
__device__ __forceinline__ void exec_wgmma(unit_smem<I>& s, wgmma_ops_smem& ops, int tid, int desc_variant) {
  using T = traits<I>;
  // Pack A (64 x K) and B^T (8 x K) into the core-matrix layout, byte by byte.
  for (int idx = tid; idx < T::M * T::K; idx += 128) {
    const int r = idx / T::K, k = idx % T::K;
    const std::uint32_t v = s.a[idx];
    for (int byte = 0; byte < T::elem_bytes; ++byte)
      ops.a[core_offset(r, k * T::elem_bytes + byte)] = static_cast<unsigned char>(v >> (8 * byte));
  }
  for (int idx = tid; idx < T::N * T::K; idx += 128) {
    const int n = idx / T::K, k = idx % T::K;
    const std::uint32_t v = s.b[k * T::N + n];
    for (int byte = 0; byte < T::elem_bytes; ++byte)
      ops.b[core_offset(n, k * T::elem_bytes + byte)] = static_cast<unsigned char>(v >> (8 * byte));
  }
  // Ordinary stores read next by the tensor cores (async proxy): fence in each writer, then barrier.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int r0 = 16 * w + g, r1 = r0 + 8;
  float d0 = __uint_as_float(s.c[r0 * 8 + 2 * t]), d1 = __uint_as_float(s.c[r0 * 8 + 2 * t + 1]);
  float d2 = __uint_as_float(s.c[r1 * 8 + 2 * t]), d3 = __uint_as_float(s.c[r1 * 8 + 2 * t + 1]);
  const std::uint32_t lbo = desc_variant == 0 ? 128u : 256u, sbo = desc_variant == 0 ? 256u : 128u;
  const std::uint64_t da = make_desc(ops.a, lbo, sbo), db = make_desc(ops.b, lbo, sbo);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if constexpr (I == mma_instr::wgmma_k16_bf16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(da), "l"(db), "r"(1));
  } else if constexpr (I == mma_instr::wgmma_k16_f16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(da), "l"(db), "r"(1));
  } else if constexpr (I == mma_instr::wgmma_k32_e4m3) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0,%1,%2,%3}, %4, %5, p, 1, 1;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(da), "l"(db), "r"(1));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 {%0,%1,%2,%3}, %4, %5, p, 1, 1;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(da), "l"(db), "r"(1));
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#else
  (void)da;
  (void)db;
  __trap();  // wgmma needs the sm_90a image; mma_available() reports false without it
#endif
  s.d[r0 * 8 + 2 * t] = __float_as_uint(d0);
  s.d[r0 * 8 + 2 * t + 1] = __float_as_uint(d1);
  s.d[r1 * 8 + 2 * t] = __float_as_uint(d2);
  s.d[r1 * 8 + 2 * t + 1] = __float_as_uint(d3);
}

/// Executes the unit's instruction on its shared tile (a, b, c) into d; synchronised before/after.
template <mma_instr I>
__device__ __forceinline__ void exec_unit(unit_smem<I>& s, wgmma_ops_smem& ops, int utid, int desc_variant) {
  using T = traits<I>;
  unit_sync(T::unit_threads);
  if constexpr (T::wgmma) exec_wgmma<I>(s, ops, utid, desc_variant);
  else exec_mma_sync<I>(s, utid);
  unit_sync(T::unit_threads);
}

/// Identification kernel: tile t of the global arrays per unit, grid-stride.
template <mma_instr I>
__global__ void __launch_bounds__(128) run_tiles_kernel(std::size_t count, const std::uint32_t* A,
                                                        const std::uint32_t* B, const std::uint32_t* C,
                                                        std::uint32_t* D, int desc_variant) {
  using T = traits<I>;
  __shared__ unit_smem<I> sm[T::units];
  __shared__ wgmma_ops_smem ops;
  const int unit = threadIdx.x / T::unit_threads, utid = threadIdx.x % T::unit_threads;
  unit_smem<I>& s = sm[unit];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * T::units;
  // Every unit runs the same number of iterations (wgmma: the block is one unit; mma: warps are
  // independent), so the barriers inside exec_unit are reached uniformly.
  for (std::size_t t0 = static_cast<std::size_t>(blockIdx.x) * T::units; t0 < count; t0 += stride) {
    const std::size_t t = t0 + unit;
    const bool live = t < count;
    for (int i = utid; i < T::M * T::K; i += T::unit_threads) s.a[i] = live ? A[t * T::M * T::K + i] : 0u;
    for (int i = utid; i < T::K * T::N; i += T::unit_threads) s.b[i] = live ? B[t * T::K * T::N + i] : 0u;
    for (int i = utid; i < T::M * T::N; i += T::unit_threads) s.c[i] = live ? C[t * T::M * T::N + i] : 0u;
    exec_unit<I>(s, ops, utid, desc_variant);
    if (live)
      for (int i = utid; i < T::M * T::N; i += T::unit_threads) D[t * T::M * T::N + i] = s.d[i];
    unit_sync(T::unit_threads);  // every thread is done with this tile before the next overwrites it
  }
}

/// A device-side mismatch record.
struct dev_mismatch {
  unsigned long long tile;
  int row, col, model;
  std::uint32_t hw, predicted;
};
inline constexpr int max_models = 4;
inline constexpr int max_records = 64;
struct model_set {
  emu::mma_model m[max_models];
  int n;
};

/// Validation kernel: tiles [first, first + count) drawn by mma_gen_element, each output compared
/// with every model (evaluated here, by the same TIEBREAK_HD code the host runs).
template <mma_instr I>
__global__ void __launch_bounds__(128) validate_kernel(model_set models, std::uint64_t seed, std::uint64_t first,
                                                       std::uint64_t count, unsigned long long* mismatches,
                                                       unsigned int* n_records, dev_mismatch* records,
                                                       int desc_variant) {
  using T = traits<I>;
  __shared__ unit_smem<I> sm[T::units];
  __shared__ wgmma_ops_smem ops;
  const int unit = threadIdx.x / T::unit_threads, utid = threadIdx.x % T::unit_threads;
  unit_smem<I>& s = sm[unit];
  const emu::mma_model& m0 = models.m[0];
  unsigned long long local[max_models] = {};
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * T::units;
  for (std::uint64_t t0 = static_cast<std::uint64_t>(blockIdx.x) * T::units; t0 < count; t0 += stride) {
    const std::uint64_t t = first + t0 + unit;
    const bool live = t0 + unit < count;
    for (int i = utid; i < T::M * T::K; i += T::unit_threads)
      s.a[i] = static_cast<std::uint32_t>(emu::mma_gen_element(m0, seed, t, emu::mma_operand_kind::a, i / T::K, i % T::K));
    for (int i = utid; i < T::K * T::N; i += T::unit_threads)
      s.b[i] = static_cast<std::uint32_t>(emu::mma_gen_element(m0, seed, t, emu::mma_operand_kind::b, i / T::N, i % T::N));
    for (int i = utid; i < T::M * T::N; i += T::unit_threads)
      s.c[i] = static_cast<std::uint32_t>(emu::mma_gen_element(m0, seed, t, emu::mma_operand_kind::c, i / T::N, i % T::N));
    exec_unit<I>(s, ops, utid, desc_variant);
    if (live) {
      for (int i = utid; i < T::M * T::N; i += T::unit_threads) {
        const int row = i / T::N, col = i % T::N;
        for (int j = 0; j < models.n; ++j) {
          const emu::mma_result r = emu::mma_dot(models.m[j], s.c[i], &s.a[row * T::K], 1, &s.b[col], T::N);
          if (static_cast<std::uint32_t>(r.bits) != s.d[i]) {
            ++local[j];
            const unsigned int slot = atomicAdd(n_records, 1u);
            if (slot < max_records) records[slot] = dev_mismatch{t, row, col, j, s.d[i], static_cast<std::uint32_t>(r.bits)};
          }
        }
      }
    }
    // The model reads s.a, s.b, s.c of this tile: no thread may write the next tile's operands
    // before every thread has finished. Without this barrier (the H200 run of 2026-11-29) threads
    // that left the model early overwrote the operands of the others, and ~30 % of the elements
    // were compared with a model evaluated on a mix of two tiles.
    unit_sync(T::unit_threads);
  }
  for (int j = 0; j < models.n; ++j)
    if (local[j] != 0) atomicAdd(&mismatches[j], local[j]);
}

/// GEMM kernel: one unit per m x 8 output tile of D; the k chunks in increasing order.
template <mma_instr I>
__global__ void __launch_bounds__(128) gemm_kernel(int M, int N, int K, const std::uint32_t* A,
                                                   const std::uint32_t* B, const std::uint32_t* C,
                                                   std::uint32_t* D, int desc_variant) {
  using T = traits<I>;
  __shared__ unit_smem<I> sm[T::units];
  __shared__ wgmma_ops_smem ops;
  const int unit = threadIdx.x / T::unit_threads, utid = threadIdx.x % T::unit_threads;
  unit_smem<I>& s = sm[unit];
  const int tiles_n = N / T::N;
  const long long tiles = static_cast<long long>(M / T::M) * tiles_n;
  const long long stride = static_cast<long long>(gridDim.x) * T::units;
  for (long long t0 = static_cast<long long>(blockIdx.x) * T::units; t0 < tiles; t0 += stride) {
    const long long t = t0 + unit;
    const bool live = t < tiles;
    const int tm = live ? static_cast<int>(t / tiles_n) : 0, tn = live ? static_cast<int>(t % tiles_n) : 0;
    for (int i = utid; i < T::M * T::N; i += T::unit_threads)
      s.d[i] = live ? C[static_cast<std::size_t>(tm * T::M + i / T::N) * N + tn * T::N + i % T::N] : 0u;
    for (int k0 = 0; k0 < K; k0 += T::K) {
      for (int i = utid; i < T::M * T::N; i += T::unit_threads) s.c[i] = s.d[i];
      for (int i = utid; i < T::M * T::K; i += T::unit_threads)
        s.a[i] = live ? A[static_cast<std::size_t>(tm * T::M + i / T::K) * K + k0 + i % T::K] : 0u;
      for (int i = utid; i < T::K * T::N; i += T::unit_threads)
        s.b[i] = live ? B[static_cast<std::size_t>(k0 + i / T::N) * N + tn * T::N + i % T::N] : 0u;
      exec_unit<I>(s, ops, utid, desc_variant);
    }
    if (live)
      for (int i = utid; i < T::M * T::N; i += T::unit_threads)
        D[static_cast<std::size_t>(tm * T::M + i / T::N) * N + tn * T::N + i % T::N] = s.d[i];
    unit_sync(T::unit_threads);  // s.d is read above and rewritten (next tile's C) below
  }
}

/// Host-side entry points of one instruction (defined in mma_inst_<name>.cu).
template <mma_instr I>
struct launch {
  static cudaError_t run_tiles(std::size_t count, const std::uint32_t* A, const std::uint32_t* B,
                               const std::uint32_t* C, std::uint32_t* D, int desc_variant);
  static cudaError_t validate(const model_set& models, std::uint64_t seed, std::uint64_t first, std::uint64_t count,
                              unsigned long long* mismatches, unsigned int* n_records, dev_mismatch* records,
                              int desc_variant);
  static cudaError_t gemm(int M, int N, int K, const std::uint32_t* A, const std::uint32_t* B,
                          const std::uint32_t* C, std::uint32_t* D, int desc_variant);
  static cudaError_t attributes(cudaFuncAttributes* attr);
};

/// Blocks for a grid-stride launch over `units_total` units.
inline int grid_for(unsigned long long units_total, int units_per_block) {
  const unsigned long long blocks = (units_total + units_per_block - 1) / units_per_block;
  return static_cast<int>(blocks < 132ull * 16 ? (blocks == 0 ? 1 : blocks) : 132ull * 16);
}

/// The definitions, included by each mma_inst_<name>.cu for its instruction.
#define TIEBREAK_MMA_INSTANTIATE(INSTR)                                                                      \
  template <>                                                                                                \
  cudaError_t launch<INSTR>::run_tiles(std::size_t count, const std::uint32_t* A, const std::uint32_t* B,    \
                                       const std::uint32_t* C, std::uint32_t* D, int dv) {                   \
    run_tiles_kernel<INSTR><<<grid_for(count, traits<INSTR>::units), 128>>>(count, A, B, C, D, dv);          \
    return cudaGetLastError();                                                                               \
  }                                                                                                          \
  template <>                                                                                                \
  cudaError_t launch<INSTR>::validate(const model_set& models, std::uint64_t seed, std::uint64_t first,      \
                                      std::uint64_t count, unsigned long long* mm, unsigned int* nr,         \
                                      dev_mismatch* rec, int dv) {                                           \
    validate_kernel<INSTR><<<grid_for(count, traits<INSTR>::units), 128>>>(models, seed, first, count, mm, nr, \
                                                                           rec, dv);                         \
    return cudaGetLastError();                                                                               \
  }                                                                                                          \
  template <>                                                                                                \
  cudaError_t launch<INSTR>::gemm(int M, int N, int K, const std::uint32_t* A, const std::uint32_t* B,       \
                                  const std::uint32_t* C, std::uint32_t* D, int dv) {                        \
    const unsigned long long tiles = static_cast<unsigned long long>(M / traits<INSTR>::M) * (N / 8);        \
    gemm_kernel<INSTR><<<grid_for(tiles, traits<INSTR>::units), 128>>>(M, N, K, A, B, C, D, dv);             \
    return cudaGetLastError();                                                                               \
  }                                                                                                          \
  template <>                                                                                                \
  cudaError_t launch<INSTR>::attributes(cudaFuncAttributes* attr) {                                          \
    return cudaFuncGetAttributes(attr, run_tiles_kernel<INSTR>);                                             \
  }

}  // namespace tiebreak::gpu::mma_detail
