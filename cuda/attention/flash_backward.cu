// SPDX-License-Identifier: Apache-2.0
// The backward kernels: attn::flash_delta_block and flash_dkdv_block (dK, dV and dQ) with the
// hardware backend, behind tiebreak::gpu::attention_backward. Deterministic: every output element
// is written by one thread, in an order fixed by the algorithm (no floating-point atomics; dQ's
// chain across blocks is ordered by flags, attn::dq_chain).
#include <cstdlib>
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

/// dK, dV and dQ: a block per bwd_rows keys of a key/value head. The blocks take their work in
/// ticket order (an atomic counter, not blockIdx, whose start order CUDA does not promise). The
/// (batch, key/value head) pairs go in groups of `group`; within a group ticket r is key tile
/// n_kb − 1 − r / g of pair r % g (g the group's size), so every block a block waits for in the dQ
/// chain (attn::dq_chain: the same pair, the next key tile) took its ticket earlier and is resident
/// or done. The group's size sets how far apart in time the blocks of a pair start (about group /
/// resident blocks of a block's steps).
template <int D, attn::score_scaling Sc, attn::exp2_policy E>
__global__ void __launch_bounds__(attn::bwd_threads)
    flash_gradient_kernel(attn::flash_args a, attn::flash_consts c, attn::dq_chain ch, unsigned* ticket, unsigned n_bk,
                          unsigned n_kb, unsigned group) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  be_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};
  // The ticket passes through the last word of dSᵀ's tile, which the block first writes after the
  // barriers of its first step (a static __shared__ word would cost the second block per SM: the
  // dynamic memory is sized to the byte for two).
  unsigned* slot = reinterpret_cast<unsigned*>(smem_raw + attn::bwd_smem_bytes<D>) - 1;
  if (threadIdx.x == 0) *slot = atomicAdd(ticket, 1u);
  __syncthreads();
  const unsigned t = *slot, per_group = group * n_kb, g0 = t / per_group * group, r = t % per_group;
  const unsigned size = n_bk - g0 < group ? n_bk - g0 : group;
  const int kvh_all = static_cast<int>(a.prob.shape.kv_heads);
  const int bk = static_cast<int>(g0 + r % size), kb = static_cast<int>(n_kb - 1 - r / size);
  attn::flash_dkdv_block<be_t, D, Sc, E>(be, a, c, bk / kvh_all, bk % kvh_all, kb, ch);
}

template <attn::out_mode M, class Probe>
void delta(const attn::flash_args& a, cudaStream_t st) {
  const auto& s = a.prob.shape;
  const int per_head = static_cast<int>((s.seq_q + attn::bwd_threads - 1) / attn::bwd_threads);
  const std::size_t bh = s.batch * s.heads;
  const detail::block_counters counters(a, static_cast<std::size_t>(per_head), Probe::enabled, st, check);
  const std::size_t smem = Probe::enabled ? attn::delta_smem_bytes : 0;
  flash_delta_kernel<M, Probe><<<dim3(static_cast<unsigned>(per_head), static_cast<unsigned>(bh)), attn::bwd_threads, smem, st>>>(
      a, counters.partial(), per_head);
  check(cudaGetLastError(), "launch delta");
  // Unprobed, the gradient kernels follow on the same stream, whose order is all they need: the
  // call synchronises once, after them (a fault in delta surfaces there).
  if constexpr (Probe::enabled) counters.add_to(a, st, check, "delta kernel");
}

template <int D, attn::score_scaling Sc, attn::exp2_policy E>
void gradients(const attn::flash_args& a, cudaStream_t st) {
  const auto& s = a.prob.shape;
  const attn::flash_consts c = attn::make_consts(a);
  const std::size_t n_kb = (s.seq_k + attn::bwd_rows - 1) / attn::bwd_rows, n_bk = s.batch * s.kv_heads;
  const std::size_t tiles = s.batch * s.heads * attn::dq_chain_tiles(s);
  if (n_kb * n_bk > 0x7fffffffu) throw std::invalid_argument("tiebreak::gpu::attention_backward: too many key tiles");
  // The chain's f32 accumulators (no initial value: the first key tile of a query tile writes them
  // before any block reads them), its flags and the ticket counter (zeroed), from the stream's pool.
  const detail::stream_buffer<float> acc(tiles * 64 * D, st, check);
  const std::size_t n_flags = tiles * attn::bwd_warps;  // a flag per query tile and warp, then the ticket
  const detail::stream_buffer<std::uint32_t> flags(n_flags + 1, st, check);
  check(cudaMemsetAsync(flags.data(), 0, (n_flags + 1) * sizeof(std::uint32_t), st), "cudaMemsetAsync");
  const attn::dq_chain ch{acc.data(), flags.data()};
  auto* kernel = flash_gradient_kernel<D, Sc, E>;
  constexpr std::size_t smem = attn::bwd_smem_bytes<D>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute");
  // Resident blocks, and the group size that makes a block trail its predecessor by about two of its
  // steps (a block's steps: the query tiles of its group of heads, half of them on average when
  // causal). A host-side model of the schedule (blocks of equal steps, the wait in mid-step;
  // docs/attention-bench.md, "The dQ chain") put the makespan 2-4 % over a perfect fill at S = 1k to
  // 16k, causal or not, with the predecessor 0.8-1.9 steps ahead.
  int dev = 0, sms = 0, per_sm = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, attn::bwd_threads, smem), "occupancy");
  const double steps = static_cast<double>(attn::dq_chain_tiles(s) * s.group()) / (a.prob.causal() ? 2 : 1);
  // TIEBREAK_DQ_CHAIN_LEAD (steps, default 2) replaces the two steps: a tuning knob of the schedule
  // only (the group size never changes a bit).
  double lead = 2.0;
  if (const char* e = std::getenv("TIEBREAK_DQ_CHAIN_LEAD")) {
    const double v = std::strtod(e, nullptr);
    if (v > 0 && v < 1e6) lead = v;
  }
  const double want = lead * sms * (per_sm > 0 ? per_sm : 1) / steps;
  const std::size_t group = want < 1 ? 1 : want > static_cast<double>(n_bk) ? n_bk : static_cast<std::size_t>(want + 0.5);
  kernel<<<static_cast<unsigned>(n_kb * n_bk), attn::bwd_threads, smem, st>>>(
      a, c, ch, flags.data() + n_flags, static_cast<unsigned>(n_bk), static_cast<unsigned>(n_kb), static_cast<unsigned>(group));
  check(cudaGetLastError(), "launch dK/dV/dQ");
  check(cudaStreamSynchronize(st), "backward kernels (delta, dK/dV/dQ)");
}

template <int D>
gradient_occupancy occupancy() {
  gradient_occupancy r;
  auto* kernel = flash_gradient_kernel<D, attn::score_scaling::unfused, attn::exp2_policy::sfu>;
  constexpr std::size_t smem = attn::bwd_smem_bytes<D>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute");
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.dkdv, kernel, attn::bwd_threads, smem), "occupancy");
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
  attn::dispatch_delta(a, [&]<attn::out_mode M, class Probe>() { delta<M, Probe>(a, st); });
  attn::dispatch_gradients(a, [&]<int D, attn::score_scaling Sc, attn::exp2_policy E>() { gradients<D, Sc, E>(a, st); });
}

}  // namespace tiebreak::gpu
