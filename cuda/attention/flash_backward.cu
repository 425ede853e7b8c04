// SPDX-License-Identifier: Apache-2.0
// The backward kernels: attn::flash_delta_block, flash_dkdv_block and flash_dq_block with the
// hardware backend, behind tiebreak::gpu::attention_backward. Deterministic: every output element
// is written by one thread, in an order fixed by the algorithm (no atomics).
#include <cstdint>
#include <stdexcept>

#include "flash_device.cuh"
#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/flash.hpp"

namespace tiebreak::gpu {
namespace {

constexpr detail::cuda_check check{"tiebreak::gpu::attention_backward"};
using be_t = detail::device_backend<attn::bwd_threads>;

template <attn::out_mode M, class Probe>
__global__ void __launch_bounds__(attn::bwd_threads)
    flash_delta_kernel(attn::flash_args a, probe::head_counters* partial, int per_head) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  be_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};
  const int blk = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y);
  const int heads = static_cast<int>(a.prob.shape.heads);
  attn::flash_delta_block<be_t, M, Probe>(be, a, bh / heads, bh % heads, blk,
                                          Probe::enabled ? partial + static_cast<std::size_t>(bh) * per_head + blk : nullptr);
}

/// dK and dV (KV: a block per bwd_rows keys of a key/value head) or dQ (a block per dq_rows query
/// rows of a head).
template <int D, attn::score_scaling Sc, attn::exp2_policy E, bool KV>
__global__ void __launch_bounds__(attn::bwd_threads, KV ? attn::bwd_kv_min_blocks<D, E> : 0) flash_gradient_kernel(attn::flash_args a, attn::flash_consts c) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int heads = static_cast<int>(KV ? a.prob.shape.kv_heads : a.prob.shape.heads);
  // Causal dQ: the query tiles of a head in reverse, heaviest first (as the forward). dK/dV's
  // heaviest blocks, the first keys (every later query tile sees them), come first as they are.
  const int bh = static_cast<int>(blockIdx.y), x = static_cast<int>(blockIdx.x);
  const int blk = !KV && a.prob.causal() ? static_cast<int>(gridDim.x) - 1 - x : x;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // sm_90a: the products by wgmma (as the forward's), on 1024-byte-aligned tiles (dQ's launch gives
  // attn::warpgroup_tile_align more; dK/dV's has room: bwd_wg_smem_bytes).
  using kb_t = detail::wgmma_backend<attn::bwd_threads>;
  constexpr unsigned align = attn::warpgroup_tile_align;
  const unsigned misalign = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw)) & (align - 1);
  kb_t be{{reinterpret_cast<std::uint16_t*>(smem_raw + ((align - misalign) & (align - 1)))}};
#else
  using kb_t = be_t;
  kb_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};
#endif
  if constexpr (KV) attn::flash_dkdv_block<kb_t, D, Sc, E>(be, a, c, bh / heads, bh % heads, blk);
  else attn::flash_dq_block<kb_t, D, Sc, E>(be, a, c, bh / heads, bh % heads, blk);
}

/// The delta kernel and, probed, its counters' sum, launched on `st`; the caller synchronises `st`
/// (once, after the gradient kernels: they need only the stream's order) and then adds the sums
/// (block_counters::add_to).
template <attn::out_mode M, class Probe>
void delta(const attn::flash_args& a, cudaStream_t st, const detail::block_counters& counters) {
  const auto& s = a.prob.shape;
  const std::size_t bh = s.batch * s.heads;
  const std::size_t smem = Probe::enabled ? attn::delta_smem_bytes : 0;
  flash_delta_kernel<M, Probe><<<dim3(static_cast<unsigned>(counters.per_head), static_cast<unsigned>(bh)), attn::bwd_threads, smem, st>>>(
      a, counters.partial(), static_cast<int>(counters.per_head));
  check(cudaGetLastError(), "launch delta");
  if constexpr (Probe::enabled) counters.launch_sum(st, check);
}

template <int D, attn::score_scaling Sc, attn::exp2_policy E>
void gradients(const attn::flash_args& a, cudaStream_t st) {
  const auto& s = a.prob.shape;
  const attn::flash_consts c = attn::make_consts(a);
  // dK/dV first (a block per bwd_rows keys of each key/value head), then dQ (per dq_rows query rows
  // of each head).
  auto run = [&](auto* kernel, std::size_t rows, std::size_t heads, int block_rows, std::size_t smem, const char* what) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cudaFuncSetAttribute");
    const auto n = static_cast<unsigned>((rows + block_rows - 1) / block_rows);
    kernel<<<dim3(n, static_cast<unsigned>(s.batch * heads)), attn::bwd_threads, smem, st>>>(a, c);
    check(cudaGetLastError(), what);
  };
  run(flash_gradient_kernel<D, Sc, E, true>, s.seq_k, s.kv_heads, attn::bwd_rows, attn::bwd_smem_bytes<D>, "launch dK/dV");
  run(flash_gradient_kernel<D, Sc, E, false>, s.seq_q, s.heads, attn::dq_rows, attn::dq_smem_bytes<D> + attn::warpgroup_tile_align, "launch dQ");
}

template <int D>
gradient_occupancy occupancy() {
  gradient_occupancy r;
  auto blocks = [&](auto* kernel, std::size_t smem) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cudaFuncSetAttribute");
    int n = 0;
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, attn::bwd_threads, smem), "occupancy");
    return n;
  };
  constexpr auto Sc = attn::score_scaling::unfused;
  constexpr auto E = attn::exp2_policy::sfu;
  r.dkdv = blocks(flash_gradient_kernel<D, Sc, E, true>, attn::bwd_smem_bytes<D>);
  r.dq = blocks(flash_gradient_kernel<D, Sc, E, false>, attn::dq_smem_bytes<D> + attn::warpgroup_tile_align);
  return r;
}

}  // namespace

gradient_occupancy attention_gradient_occupancy(int dim) {
  if (dim == 64) return occupancy<64>();
  if (dim == 128) return occupancy<128>();
  throw std::invalid_argument("tiebreak::gpu::attention_gradient_occupancy: dim must be 64 or 128");
}

void attention_backward(const attn::flash_args& a, void* stream) {
  const attn::flash_error e = attn::flash_check(a, true);
  if (e != attn::flash_error::ok) throw std::invalid_argument(attn::error_text(e));
  detail::check_alignment(a, true, "tiebreak::gpu::attention_backward");
  if (a.prob.shape.batch * a.prob.shape.heads > 65535)
    throw std::invalid_argument("tiebreak::gpu::attention_backward: batch * heads must be at most 65535");
  const auto st = static_cast<cudaStream_t>(stream);
  const auto& s = a.prob.shape;
  const detail::block_counters counters(a, (s.seq_q + attn::bwd_threads - 1) / attn::bwd_threads, a.counters != nullptr, check);
  attn::dispatch_delta(a, [&]<attn::out_mode M, class Probe>() { delta<M, Probe>(a, st, counters); });
  attn::dispatch_gradients(a, [&]<int D, attn::score_scaling Sc, attn::exp2_policy E>() { gradients<D, Sc, E>(a, st); });
  // One wait for the whole call (a fault in any kernel surfaces here), then the probe's sums.
  check(cudaStreamSynchronize(st), "backward kernels (delta, dK/dV, dQ)");
  if (counters.partial() != nullptr) counters.add_to(a);
}

}  // namespace tiebreak::gpu
