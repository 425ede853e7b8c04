// SPDX-License-Identifier: Apache-2.0
// The backward kernels: attn::flash_delta_block, flash_dkdv_block and flash_dq_block with the
// hardware backend, behind tiebreak::gpu::attention_backward. Deterministic: every output element
// is written by one thread, in an order fixed by the algorithm (no atomics).
#include <cstdint>
#include <stdexcept>
#include <vector>

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

template <int D, attn::score_scaling Sc>
__global__ void __launch_bounds__(attn::bwd_threads) flash_dkdv_kernel(attn::flash_args a, attn::flash_consts c) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  be_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};
  const int kvh = static_cast<int>(a.prob.shape.kv_heads);
  const int bk = static_cast<int>(blockIdx.y);
  attn::flash_dkdv_block<be_t, D, Sc>(be, a, c, bk / kvh, bk % kvh, static_cast<int>(blockIdx.x));
}

template <int D, attn::score_scaling Sc>
__global__ void __launch_bounds__(attn::bwd_threads) flash_dq_kernel(attn::flash_args a, attn::flash_consts c) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  be_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};
  const int heads = static_cast<int>(a.prob.shape.heads);
  const int bh = static_cast<int>(blockIdx.y);
  attn::flash_dq_block<be_t, D, Sc>(be, a, c, bh / heads, bh % heads, static_cast<int>(blockIdx.x));
}

template <attn::out_mode M, class Probe>
void delta(const attn::flash_args& a, cudaStream_t st) {
  const auto& s = a.prob.shape;
  const int per_head = static_cast<int>((s.seq_q + attn::bwd_threads - 1) / attn::bwd_threads);
  const std::size_t bh = s.batch * s.heads, n = bh * static_cast<std::size_t>(per_head);
  detail::device_buffer<probe::head_counters> partial(Probe::enabled ? n : 1, check);
  const std::size_t smem = Probe::enabled ? attn::delta_smem_bytes : 0;
  flash_delta_kernel<M, Probe><<<dim3(static_cast<unsigned>(per_head), static_cast<unsigned>(bh)), attn::bwd_threads, smem, st>>>(
      a, partial.data(), per_head);
  check(cudaGetLastError(), "launch delta");
  check(cudaStreamSynchronize(st), "delta kernel");
  if constexpr (Probe::enabled) {
    std::vector<probe::head_counters> host(n);
    check(cudaMemcpy(host.data(), partial.data(), n * sizeof(probe::head_counters), cudaMemcpyDeviceToHost), "copy counters");
    for (std::size_t i = 0; i < bh; ++i) {
      probe::head_counters sum{};
      for (int j = 0; j < per_head; ++j) sum.merge(host[i * per_head + j]);
      a.counters[i].merge(sum);
    }
  }
}

template <attn::out_mode M>
void delta_probe(const attn::flash_args& a, cudaStream_t st) {
  if (a.counters) delta<M, attn::thread_counting_probe>(a, st);
  else delta<M, probe::no_probe>(a, st);
}

template <int D, attn::score_scaling Sc>
void gradients(const attn::flash_args& a, cudaStream_t st) {
  const auto& s = a.prob.shape;
  const attn::flash_consts c = attn::make_consts(a);
  constexpr std::size_t smem = attn::bwd_smem_bytes<D>;
  check(cudaFuncSetAttribute(flash_dkdv_kernel<D, Sc>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute");
  check(cudaFuncSetAttribute(flash_dq_kernel<D, Sc>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute");
  const unsigned n_kb = static_cast<unsigned>((s.seq_k + attn::bwd_rows - 1) / attn::bwd_rows);
  const unsigned n_qt = static_cast<unsigned>((s.seq_q + attn::bwd_rows - 1) / attn::bwd_rows);
  flash_dkdv_kernel<D, Sc><<<dim3(n_kb, static_cast<unsigned>(s.batch * s.kv_heads)), attn::bwd_threads, smem, st>>>(a, c);
  check(cudaGetLastError(), "launch dK/dV");
  flash_dq_kernel<D, Sc><<<dim3(n_qt, static_cast<unsigned>(s.batch * s.heads)), attn::bwd_threads, smem, st>>>(a, c);
  check(cudaGetLastError(), "launch dQ");
  check(cudaStreamSynchronize(st), "gradient kernels");
}

}  // namespace

void attention_backward(const attn::flash_args& a, void* stream) {
  const attn::flash_error e = attn::flash_check(a, true);
  if (e != attn::flash_error::ok) throw std::invalid_argument(attn::error_text(e));
  if (a.prob.shape.batch * a.prob.shape.heads > 65535)
    throw std::invalid_argument("tiebreak::gpu::attention_backward: batch * heads must be at most 65535");
  const auto st = static_cast<cudaStream_t>(stream);
  if (a.opt.mode == attn::out_mode::fp32) delta_probe<attn::out_mode::fp32>(a, st);
  else delta_probe<attn::out_mode::bf16>(a, st);
  const bool unfused = a.opt.scaling == attn::score_scaling::unfused;
  if (a.prob.shape.dim == 64) {
    if (unfused) gradients<64, attn::score_scaling::unfused>(a, st);
    else gradients<64, attn::score_scaling::fused>(a, st);
  } else {
    if (unfused) gradients<128, attn::score_scaling::unfused>(a, st);
    else gradients<128, attn::score_scaling::fused>(a, st);
  }
}

}  // namespace tiebreak::gpu
