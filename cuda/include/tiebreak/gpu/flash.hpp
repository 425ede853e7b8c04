// SPDX-License-Identifier: Apache-2.0
/// @file Launchers of tiebreak's instrumented attention kernels (cuda/attention): plain C++, no CUDA
/// headers needed by the caller. The kernels are attn/flash.hpp's tile algorithm with the hardware
/// backend; tiebreak::host::attention_forward / _backward (tiebreak/host/flash_twin.hpp) are the
/// same algorithm with the emulated one, bit-identical (tests/gpu/flash_gpu_test.cu).
#pragma once

#include "tiebreak/attn/flash.hpp"

namespace tiebreak::gpu {

/// Whether a CUDA device of compute capability 9.0 (the kernels' only target) can run the kernels.
bool attention_available() noexcept;

/// The forward pass on device memory (a.t: device pointers; a.counters: a HOST table, or null).
/// Synchronous: returns when the outputs and counters are written. Throws std::invalid_argument
/// (attn::error_text) for an unsupported call, std::runtime_error for a CUDA error.
/// `stream` is a cudaStream_t (null: the default stream).
void attention_forward(const attn::flash_args& a, void* stream = nullptr);

/// The backward pass on device memory: delta, dQ, dK, dV (deterministic: no floating-point atomics).
void attention_backward(const attn::flash_args& a, void* stream = nullptr);

/// Blocks per SM that the gradient kernels of head dim `dim` (64 or 128) keep resident on the current
/// device, by cudaOccupancyMaxActiveBlocksPerMultiprocessor with their shared memory (the unfused,
/// SFU instantiation; the others use the same memory). Both kernels are laid out for two on the
/// H100 and H200 (attn::bwd_smem_bytes, attn::dq_smem_bytes). Throws std::invalid_argument for
/// another dim, std::runtime_error for a CUDA error.
struct gradient_occupancy {
  int dkdv = 0, dq = 0;
};
gradient_occupancy attention_gradient_occupancy(int dim);

}  // namespace tiebreak::gpu
