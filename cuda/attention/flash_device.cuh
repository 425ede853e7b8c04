// SPDX-License-Identifier: Apache-2.0
// The hardware backend of attn/flash.hpp: one CUDA thread runs its own part of every phase;
// collectives are the instructions themselves (mma.sync, shfl.sync, cp.async). And the launchers'
// common step, the probe's per-block counters summed per head on the device and added to the caller's table.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "tiebreak/attn/flash.hpp"
#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/wgmma.cuh"

namespace tiebreak::gpu::detail {

template <int T>
struct device_backend {
  static constexpr int slots = 1;
  std::uint16_t* smem_;
  __device__ std::uint16_t* smem() const { return smem_; }
  __device__ static int slot(int) { return 0; }
  template <class F>
  __device__ __forceinline__ void for_threads(F&& f) {
    f(static_cast<int>(threadIdx.x));
  }
  __device__ __forceinline__ void sync() { __syncthreads(); }
  /// The SFU's exponential (exp2_policy::sfu): MUFU.EX2, modelled by fp/sfu.hpp.
  __device__ __forceinline__ static float ex2_approx_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
  __device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
  template <int N>
  __device__ __forceinline__ void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
  }
  /// R x C bf16 rows into the swizzled tile, 16-byte cp.async per chunk; rows >= valid zero-filled
  /// (src-size 0: nothing is read). Thread tid copies chunk tid % (C/8) of rows tid / (C/8) + i·rpi:
  /// rpi (rows per pass) is a multiple of 8, so the swizzle (row mod 8) is the thread's own for every
  /// pass and each pass is the first one's addresses plus constants (no per-chunk index arithmetic).
  template <int R, int C>
  __device__ __forceinline__ void load_tile(std::uint16_t* dst, const std::uint16_t* src, int valid) {
    constexpr int cpr = C / 8, rpi = T / cpr;
    static_assert(T % cpr == 0 && rpi % 8 == 0 && R % rpi == 0, "load_tile: tile and block do not divide");
    const int tid = static_cast<int>(threadIdx.x), row0 = tid / cpr, ch = tid % cpr;
    const auto d0 = static_cast<unsigned>(__cvta_generic_to_shared(dst + attn::swz<C>(row0, 8 * ch)));
    const std::uint16_t* s0 = src + static_cast<std::size_t>(row0) * C + 8 * ch;
    if (valid >= R) {  // a whole tile (every tile but the last): no row checks
#pragma unroll
      for (int i = 0; i < R / rpi; ++i) copy<16>(d0 + unsigned(i * rpi * C * 2), s0 + i * rpi * C, 16);
      return;
    }
#pragma unroll
    for (int i = 0; i < R / rpi; ++i) {
      const bool ok = row0 + i * rpi < valid;
      copy<16>(d0 + unsigned(i * rpi * C * 2), ok ? s0 + i * rpi * C : src, ok ? 16 : 0);
    }
  }
  /// N floats into shared memory: thread tid < N copies element tid (so that, after its wait, the
  /// thread may read that element back); elements >= valid are zero-filled (nothing is read).
  template <int N>
  __device__ __forceinline__ void load_floats(float* dst, const float* src, int valid) {
    static_assert(N <= T, "load_floats: one element per thread");
    const int tid = static_cast<int>(threadIdx.x);
    if (tid < N) {
      const bool ok = tid < valid;
      copy<4>(static_cast<unsigned>(__cvta_generic_to_shared(dst + tid)), ok ? src + tid : src, ok ? 4 : 0);
    }
  }
  /// One cp.async of Bytes (16: .cg, cached in L2 only; 4: .ca, the only kind that copies 4) from
  /// global `src` to the shared address `dst`: the first `bytes` (0 or Bytes) are read, the rest is
  /// zero-filled.
  template <int Bytes>
  __device__ __forceinline__ static void copy(unsigned dst, const void* src, int bytes) {
    static_assert(Bytes == 16 || Bytes == 4, "copy: 16 or 4 bytes");
    if constexpr (Bytes == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
  }
  // Fragment loads with ldmatrix: lane l supplies the address of row l % 8 of matrix l / 8; each
  // matrix is 8 rows of one 16-byte chunk of the swizzled tile. Without .trans lane 4g + t receives
  // (row g, columns 2t, 2t+1) of each matrix, with .trans (rows 2t, 2t+1, column g): exactly the
  // fragments of attn::load_a / load_b_nmajor / load_b_kmajor (tests/gpu/attn/flash_gpu_test.cu).
  __device__ __forceinline__ static unsigned smem_addr(const std::uint16_t* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
  }
  template <int C>
  __device__ __forceinline__ static unsigned tile_addr(const std::uint16_t* tile, int row, int col) {
    return smem_addr(tile + attn::swz<C>(row, col));
  }
  template <int C>
  __device__ __forceinline__ static void load_a(std::uint32_t (&a)[4], const std::uint16_t* tile, int row0, int col0,
                                                int lane) {
    const int m = lane >> 3, r = lane & 7;  // matrices: (rows +0, cols +0), (+8, +0), (+0, +8), (+8, +8)
    const unsigned addr = tile_addr<C>(tile, row0 + r + 8 * (m & 1), col0 + 8 * (m >> 1));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(addr));
  }
  /// Two B fragments (blocks n0 and n0 + 8) in one ldmatrix.x4: matrices (n0, k0), (n0, k0 + 8),
  /// (n0 + 8, k0), (n0 + 8, k0 + 8).
  ///
  /// The address as a part that depends only on the lane and on (k0 / 16) mod 4 (four values a
  /// thread can keep) plus one that depends only on the call (2 C n0 + 2 (k0 & ~63) bytes), so that the
  /// compiler need not redo the swizzle for every load: n0 is a multiple of 8 (row n0 + i has the
  /// swizzle of row i) and k0 of 16 (chunk k0 / 8 is even, so chunk k0 / 8 + 1 does not carry out of
  /// the three bits the swizzle flips). Every caller's n0 and k0 are.
  template <int C>
  __device__ __forceinline__ static void load_b2_nmajor(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2],
                                                        const std::uint16_t* tile, int n0, int k0, int lane) {
    const int m = lane >> 3, r = lane & 7;
    const unsigned addr = smem_addr(tile) + unsigned(2 * C * n0 + 2 * (k0 & ~63)) +
                          unsigned(2 * C * (r + 8 * (m >> 1)) + 16 * ((2 * ((k0 >> 4) & 3) + (m & 1)) ^ r));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b0[0]), "=r"(b0[1]), "=r"(b1[0]), "=r"(b1[1])
                 : "r"(addr));
  }
  /// Two B fragments (columns n0 and n0 + 8) in one ldmatrix.x4.trans: matrices (k0, n0),
  /// (k0 + 8, n0), (k0, n0 + 8), (k0 + 8, n0 + 8).
  /// The address split as in load_b2_nmajor: k0 is a multiple of 8, n0 of 16 (every caller's are).
  template <int C>
  __device__ __forceinline__ static void load_b2_kmajor(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2],
                                                        const std::uint16_t* tile, int k0, int n0, int lane) {
    const int m = lane >> 3, r = lane & 7;
    const unsigned addr = smem_addr(tile) + unsigned(2 * C * k0 + 2 * (n0 & ~63)) +
                          unsigned(2 * C * (r + 8 * (m & 1)) + 16 * ((2 * ((n0 >> 4) & 3) + (m >> 1)) ^ r));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(b0[0]), "=r"(b0[1]), "=r"(b1[0]), "=r"(b1[1])
                 : "r"(addr));
  }
  /// Two adjacent bf16 encodings in one 4-byte load (the caller's index is even), p[0] in the low half.
  __device__ __forceinline__ static std::uint32_t load_pair(const std::uint16_t* p) {
    return __ldg(reinterpret_cast<const unsigned int*>(p));
  }
  /// Eight bf16 encodings or four floats, p[0] first, in one 16-byte load through the read-only path
  /// (p 16-byte aligned: the tensors start on 16-byte boundaries and the callers' offsets are
  /// multiples of 16 bytes).
  template <class E>
  __device__ __forceinline__ static void load16(E (&out)[16 / sizeof(E)], const E* p) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    static_assert(sizeof(out) == sizeof(v));
    memcpy(&out, &v, sizeof(v));
  }
  /// Two adjacent elements in one store (the caller's index is even: the address is 4- or 8-byte aligned).
  __device__ __forceinline__ static void store2(std::uint16_t* p, std::uint16_t lo, std::uint16_t hi) {
    *reinterpret_cast<std::uint32_t*>(p) = static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
  }
  __device__ __forceinline__ static void store2(float* p, float lo, float hi) { *reinterpret_cast<float2*>(p) = make_float2(lo, hi); }
  __device__ __forceinline__ static std::uint32_t pack_bf16x2_rne(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // cvt.rn.bf16x2.f32: .x (low half) = lo
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
  template <class F>
  __device__ __forceinline__ void mma(F&& f) {
    const attn::mma_frags x = f(static_cast<int>(threadIdx.x));
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(x.c[0]), "+f"(x.c[1]), "+f"(x.c[2]), "+f"(x.c[3])
        : "r"(x.a[0]), "r"(x.a[1]), "r"(x.a[2]), "r"(x.a[3]), "r"(x.b[0]), "r"(x.b[1]));
  }
  template <class F>
  __device__ __forceinline__ void quad_max(F&& f) {
    float& v = f(static_cast<int>(threadIdx.x));
    v = f32::max(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = f32::max(v, __shfl_xor_sync(0xffffffffu, v, 2));
  }
  template <class F>
  __device__ __forceinline__ void quad_sum(F&& f) {
    float& v = f(static_cast<int>(threadIdx.x));
    v = f32::add_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = f32::add_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
  }
  template <class F>
  __device__ __forceinline__ void quad_count(F&& f) {
    std::uint32_t& v = f(static_cast<int>(threadIdx.x));
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
  }
};

/// The attention kernels' backend on sm_90a (the forward, dQ and dK/dV): device_backend with Hopper's
/// warpgroup products (attn/flash.hpp, Be::warpgroup_mma). The block's 128 threads are one warpgroup;
/// the forward's S = Q Kᵀ and O += P V (the gradient kernels' products likewise) are issued as
/// `wgmma.mma_async` m64nNk16 steps, one per m-tile and 16-wide chunk, in the fragment loops' order,
/// and waited for before the softmax reads them: per output element the same chain of k16 steps,
/// and the k16 step of sm_90's wgmma has the model of mma.sync's (emu/mma.hpp, both validated on the
/// hardware), so the kernel keeps the twin's bits (FlashGpu.ForwardBitIdenticalToTwin).
///
/// Its tiles are laid out for wgmma's 128-byte swizzle: a tile of R rows and C columns is C / 64 blocks
/// of [R][64], and the 16-byte chunk c of a row's 128 bytes sits at chunk c xor (row mod 8) (the
/// hardware swizzles address bits 4-6 by bits 7-9 of the shared address, so every tile starts on a
/// 1024-byte boundary: smem() must be 1024-aligned and every tile size is a multiple of 1 KB). At
/// C = 64 that is device_backend's layout. The staged Q tile's rows are reordered so that each
/// wgmma's 64 rows are the warps' m-tile mt (warp w's rows 16 MT w + 16 mt + i, i < 16, at 64 mt +
/// 16 w + i). Shared-memory descriptors: K-major operands (Q, K) have SBO = 1024 (eight rows) and
/// start 32 bytes further per 16-wide chunk (the next 64-wide block every four chunks); V is an
/// MN-major operand (the transpose flag) with SBO = 1024 and LBO the stride between its 64-wide blocks.
/// Only compiled where wgmma exists (sm_90a); the launchers take device_backend elsewhere. They place it
/// on the block's shared memory rounded up to attn::warpgroup_tile_align (launched that much larger).
template <int T>
struct wgmma_backend : device_backend<T> {
  static_assert(T == 128, "one warpgroup per block");
  static constexpr bool warpgroup_mma = true;
  using base = device_backend<T>;

  /// Row r of a tile of R rows and C columns into the swizzled layout (slot: the row's place).
  template <int R, int C, class Slot>
  __device__ __forceinline__ static void fill(std::uint16_t* dst, const std::uint16_t* src, int valid, Slot slot) {
    constexpr int cpr = C / 8;
    static_assert(R * cpr % T == 0, "whole passes of the block");
    const int tid = static_cast<int>(threadIdx.x);
    const unsigned d0 = base::smem_addr(dst);
#pragma unroll
    for (int it = 0; it < R * cpr / T; ++it) {
      const int i = tid + T * it, row = i / cpr, c = i % cpr, sr = slot(row);
      const unsigned d = d0 + unsigned(attn::sw128_offset<R>(sr, c));
      const bool ok = row < valid;
      base::template copy<16>(d, ok ? src + static_cast<std::size_t>(row) * C + 8 * c : src, ok ? 16 : 0);
    }
  }
  template <int R, int C>
  __device__ __forceinline__ void load_tile(std::uint16_t* dst, const std::uint16_t* src, int valid) {
    fill<R, C>(dst, src, valid, [](int r) { return r; });
  }
  template <int R, int C, int MT>
  __device__ __forceinline__ void load_q_tile(std::uint16_t* dst, const std::uint16_t* src, int valid) {
    static_assert(R == 64 * MT, "a warpgroup's rows");
    fill<R, C>(dst, src, valid, [](int r) { return attn::wgmma_q_slot<MT>(r); });
  }
  /// cp.async's writes (the generic proxy) made visible to wgmma's reads (the async proxy) after the
  /// wait; the block's barrier follows in the tile algorithm.
  template <int N>
  __device__ __forceinline__ void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }

  __device__ __forceinline__ static std::uint64_t desc(const std::uint16_t* p, unsigned lbo) {
    return smem_desc(p, lbo, 1024, smem_swizzle::bytes128);
  }
  /// A K-major operand's 16-wide chunk kc of a tile of R rows.
  template <int R>
  __device__ __forceinline__ static std::uint64_t kmajor(const std::uint16_t* tile, int kc) {
    return desc(tile + (kc >> 2) * R * 64 + (kc & 3) * 16, 16);
  }
  __device__ __forceinline__ static void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
  __device__ __forceinline__ static void commit_wait() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  __device__ __forceinline__ static void wgmma_ss_n64(float (&d)[32], std::uint64_t da, std::uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db));
  }
  /// A from registers; TransB: B MN-major (the transpose flag).
  template <int TransB>
  __device__ __forceinline__ static void wgmma_rs_n64(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, 1, 1, 1, %37;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TransB));
  }
  template <int TransB>
  __device__ __forceinline__ static void wgmma_rs_n128(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, 1, 1, 1, %69;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TransB));
  }
  __device__ __forceinline__ static void wgmma_ss_n32(float (&d)[16], std::uint64_t da, std::uint64_t db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db));
  }
  /// S[mt] += Q[mt] Kᵀ over the 8 NB keys of a key tile kt of 8 NB rows (the forward: fwd_keys; dQ:
  /// dq_keys), chained over the head dim's 16-wide chunks. QS: Q from the staged tile qs (load_q_tile,
  /// 64 MT rows); else from the registers qa[kc] (the probed forward).
  template <int D, int MT, bool QS, int NB>
  __device__ __forceinline__ void qk_tile(float (&s)[MT][NB][4], const std::uint32_t (*qa)[4], const std::uint16_t* qs,
                                          const std::uint16_t* kt) {
    static_assert(NB == 8 || (NB == 4 && QS), "S is m64n64 (both sources of Q) or m64n32 (Q staged) per m-tile");
    fence();
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float (&acc)[4 * NB] = reinterpret_cast<float (&)[4 * NB]>(s[mt]);
        if constexpr (NB == 4) wgmma_ss_n32(acc, kmajor<64 * MT>(qs + 64 * mt * 64, kc), kmajor<8 * NB>(kt, kc));
        else if constexpr (QS) wgmma_ss_n64(acc, kmajor<64 * MT>(qs + 64 * mt * 64, kc), kmajor<8 * NB>(kt, kc));
        else wgmma_rs_n64<0>(acc, qa[kc], kmajor<8 * NB>(kt, kc));
      }
    commit_wait();
  }
  /// O[mt] += P[mt] V over the 16-key chunks of a tile vt of 16 PK rows, V MN-major (the forward: P V;
  /// dQ: dS K).
  template <int D, int MT, int PK>
  __device__ __forceinline__ void pv_tile(float (&o)[MT][D / 8][4], const std::uint32_t (&p)[MT][PK][4], const std::uint16_t* vt) {
    fence();
#pragma unroll
    for (int pk = 0; pk < PK; ++pk) {
      const std::uint64_t dv = desc(vt + pk * 16 * 64, 16 * PK * 128);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float (&acc)[D / 2] = reinterpret_cast<float (&)[D / 2]>(o[mt]);
        if constexpr (D == 64) wgmma_rs_n64<1>(acc, p[mt][pk], dv);
        else wgmma_rs_n128<1>(acc, p[mt][pk], dv);
      }
    }
    commit_wait();
  }
};

/// Per-head sums of the probe's block counters: a block per head, whose threads stage the head's
/// counters in shared memory, 128 at a time (coalesced), and whose thread 0 adds them to the head's
/// sum from zero in block order (attn::add_block_counters_in_order, as the twin sums them). (A thread
/// per head reading global memory in that order waited on one load per block: 226 us for 16 heads of
/// 256 blocks, S = 16k.) A template so that the two launcher files that include this header each have
/// their own instance.
template <class Counters>
__global__ void __launch_bounds__(128) head_block_sum_kernel(const Counters* partial, std::size_t per_head, Counters* sums) {
  constexpr std::size_t chunk = 128;
  __shared__ Counters staged[chunk];
  const Counters* head = partial + static_cast<std::size_t>(blockIdx.x) * per_head;
  Counters sum{};
  for (std::size_t j0 = 0; j0 < per_head; j0 += chunk) {
    const std::size_t n = per_head - j0 < chunk ? per_head - j0 : chunk;
    if (threadIdx.x < n) staged[threadIdx.x] = head[j0 + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) attn::add_block_counters_in_order(sum, staged, n);
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = sum;
}

/// This host thread's scratch for the probe's counters on its current device, kept and grown across
/// calls: the per-block counters the kernels write (device memory) and the per-head sums
/// (page-locked host memory mapped into the device's address space: the sum kernel writes them
/// straight there, no copy to issue). A call synchronises its stream before it returns, so the
/// thread's next call finds both free; a thread that switched devices gets new ones. (Per call,
/// cudaMallocAsync from the default pool, whose release threshold is 0, handed its memory back to
/// the driver at every synchronisation and took it again at the next call; a cudaMemcpyAsync into
/// pageable memory waits for the stream and stages through a driver buffer.)
struct probe_scratch {
  probe::head_counters* partial = nullptr;    ///< device memory, n_partial entries
  probe::head_counters* sums_host = nullptr;  ///< mapped host memory, n_sums entries, the host's address
  probe::head_counters* sums_dev = nullptr;   ///< the same memory, as the device addresses it
  std::size_t n_partial = 0, n_sums = 0;
  int device = -1;
};
inline const probe_scratch& probe_scratch_for(std::size_t n_partial, std::size_t n_sums, const cuda_check& check) {
  struct holder : probe_scratch {
    void release_partial() noexcept {
      if (partial) cudaFree(partial);
      partial = nullptr;
      n_partial = 0;
    }
    void release_sums() noexcept {
      if (sums_host) cudaFreeHost(sums_host);
      sums_host = sums_dev = nullptr;
      n_sums = 0;
    }
    ~holder() {  // at thread exit; errors (the runtime may be gone already) are ignored
      release_partial();
      release_sums();
    }
  };
  static thread_local holder h;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev != h.device) {
    h.release_partial();
    h.release_sums();
    h.device = dev;
  }
  if (h.n_partial < n_partial) {
    h.release_partial();
    void* p = nullptr;
    check(cudaMalloc(&p, n_partial * sizeof(probe::head_counters)), "cudaMalloc (the probe's block counters)");
    h.partial = static_cast<probe::head_counters*>(p);
    h.n_partial = n_partial;
  }
  if (h.n_sums < n_sums) {
    h.release_sums();
    void* p = nullptr;
    check(cudaHostAlloc(&p, n_sums * sizeof(probe::head_counters), cudaHostAllocMapped), "cudaHostAlloc");
    h.sums_host = static_cast<probe::head_counters*>(p);
    h.n_sums = n_sums;
    void* d = nullptr;
    check(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer");
    h.sums_dev = static_cast<probe::head_counters*>(d);
  }
  return h;
}

/// The probe's per-block counters of one launch: n_heads · per_head entries that the kernel writes
/// (head-major, in the thread's probe_scratch), summed per head on the device into mapped host
/// memory and added to the caller's table. Unprobed, nothing is allocated and partial() is null.
struct block_counters {
  std::size_t n_heads, per_head;
  const probe_scratch* scratch = nullptr;
  block_counters(const attn::flash_args& a, std::size_t per_head_, bool probed, const cuda_check& check)
      : n_heads(a.prob.shape.batch * a.prob.shape.heads), per_head(per_head_) {
    if (probed) scratch = &probe_scratch_for(n_heads * per_head, n_heads, check);
  }
  /// Where the kernel writes its block counters; null when unprobed.
  [[nodiscard]] probe::head_counters* partial() const noexcept { return scratch ? scratch->partial : nullptr; }

  /// After the probed kernel was launched on `st`: the per-head sum kernel, behind it on `st`
  /// (n_heads > 0: flash_check refuses empty shapes). Later kernels of the call may follow on `st`
  /// before the call synchronises.
  void launch_sum(cudaStream_t st, const cuda_check& check) const {
    head_block_sum_kernel<<<static_cast<unsigned>(n_heads), 128, 0, st>>>(scratch->partial, per_head, scratch->sums_dev);
    check(cudaGetLastError(), "launch the counters' sum");
  }
  /// After `st` was synchronised: the sums added to a.counters. Same bits as the twin's
  /// attn::merge_block_counters.
  void add_to(const attn::flash_args& a) const {
    for (std::size_t i = 0; i < n_heads; ++i) a.counters[i].merge(scratch->sums_host[i]);
  }
};

/// The kernels move rows of Q, K, V, dO and O with 16-byte copies and stores (cp.async, paired
/// stores): each tensor the call uses must start on a 16-byte boundary (rows are 128 or 256 bytes, so
/// then every row does). cudaMalloc and PyTorch allocations do; a view at an odd element offset does
/// not, and would fault inside the kernel (a sticky error that ends the CUDA context), so it is
/// refused here, before anything is launched, naming the tensor.
inline void check_alignment(const attn::flash_args& a, bool backward, const char* who) {
  auto need = [&](const void* p, const char* name) {
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
      throw std::invalid_argument(std::string(who) + ": tensor " + name +
                                  " does not start on a 16-byte boundary (the kernels copy rows 16 bytes at a time)");
  };
  need(a.t.q, "q");
  need(a.t.k, "k");
  need(a.t.v, "v");
  need(a.t.o_bf16, "o (bf16)");
  need(a.t.o_f32, "o (f32)");
  if (backward) {
    need(a.t.dout, "dout");
    need(a.t.dq, "dq");
    need(a.t.dk, "dk");
    need(a.t.dv, "dv");
  }
}

}  // namespace tiebreak::gpu::detail
