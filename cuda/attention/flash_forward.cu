// SPDX-License-Identifier: Apache-2.0
// The forward kernels: attn::flash_forward_block with the hardware backend, one instantiation per
// (head dim, output mode, score scaling, probe, exponential), behind tiebreak::gpu::attention_forward.
// The sm_90a image multiplies by wgmma (detail::wgmma_backend), other images by mma.sync; the bits
// are the same.
#include <cstdint>
#include <stdexcept>

#include "flash_device.cuh"
#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/flash.hpp"

namespace tiebreak::gpu {
namespace {

constexpr detail::cuda_check check{"tiebreak::gpu::attention_forward"};

template <int D, attn::out_mode M, attn::score_scaling Sc, class Probe, attn::exp2_policy E>
__global__ void __launch_bounds__(attn::fwd_threads, attn::fwd_min_blocks<Probe::enabled, D, E>)
    flash_forward_kernel(attn::flash_args a, attn::flash_consts c, probe::head_counters* partial, int n_qt) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // sm_90a: the products by wgmma, on tiles rounded up to attn::warpgroup_tile_align (the launch gives
  // that much more than the tiles need; written out here: through a helper function the tile
  // addresses compiled to other machine code, cuobjdump -sass).
  using be_t = detail::wgmma_backend<attn::fwd_threads>;
  constexpr unsigned align = attn::warpgroup_tile_align;
  const unsigned misalign = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw)) & (align - 1);
  be_t be{{reinterpret_cast<std::uint16_t*>(smem_raw + ((align - misalign) & (align - 1)))}};
#else
  using be_t = detail::device_backend<attn::fwd_threads>;
  be_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};
#endif
  // Causal: the query tiles of a head in reverse, so that its heaviest blocks (the last rows see the
  // most keys) start first and the light ones fill the tail of the grid.
  const int x = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y);
  const int qt = a.prob.causal() ? n_qt - 1 - x : x;
  const int heads = static_cast<int>(a.prob.shape.heads);
  attn::flash_forward_block<be_t, D, M, Sc, Probe, E>(
      be, a, c, bh / heads, bh % heads, qt, Probe::enabled ? partial + static_cast<std::size_t>(bh) * n_qt + qt : nullptr);
}

template <int D, attn::out_mode M, attn::score_scaling Sc, class Probe, attn::exp2_policy E>
void launch(const attn::flash_args& a, cudaStream_t stream) {
  const auto& s = a.prob.shape;
  constexpr int rows = attn::fwd_rows<Probe::enabled>;
  const int n_qt = static_cast<int>((s.seq_q + rows - 1) / rows);
  const std::size_t bh = s.batch * s.heads;
  constexpr std::size_t smem = attn::fwd_smem_bytes<D, Probe::enabled> + attn::warpgroup_tile_align;  // the sm_90a kernel's
  auto* kernel = flash_forward_kernel<D, M, Sc, Probe, E>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute");
  if (bh > 65535) throw std::invalid_argument("tiebreak::gpu::attention_forward: batch * heads must be at most 65535");
  const detail::block_counters counters(a, static_cast<std::size_t>(n_qt), Probe::enabled, check);
  kernel<<<dim3(static_cast<unsigned>(n_qt), static_cast<unsigned>(bh)), attn::fwd_threads, smem, stream>>>(
      a, attn::make_consts(a), counters.partial(), n_qt);
  check(cudaGetLastError(), "launch");
  if constexpr (Probe::enabled) counters.launch_sum(stream, check);
  check(cudaStreamSynchronize(stream), "kernel");
  if constexpr (Probe::enabled) counters.add_to(a);
}

}  // namespace

bool attention_available() noexcept {
  return detail::kernel_image_status(
             flash_forward_kernel<64, attn::out_mode::bf16, attn::score_scaling::unfused, probe::no_probe,
                                  attn::exp2_policy::software>) == cudaSuccess;
}

void attention_forward(const attn::flash_args& a, void* stream) {
  const attn::flash_error e = attn::flash_check(a, false);
  if (e != attn::flash_error::ok) throw std::invalid_argument(attn::error_text(e));
  detail::check_alignment(a, false, "tiebreak::gpu::attention_forward");
  const auto st = static_cast<cudaStream_t>(stream);
  attn::dispatch_forward(a, [&]<int D, attn::out_mode M, attn::score_scaling Sc, class Probe, attn::exp2_policy E>() {
    launch<D, M, Sc, Probe, E>(a, st);
  });
}

}  // namespace tiebreak::gpu
