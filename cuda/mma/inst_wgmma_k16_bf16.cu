// SPDX-License-Identifier: Apache-2.0
/// @file Kernels and launchers of wgmma_k16_bf16 (one instruction per file: they compile in parallel).
#include "mma_device.cuh"

namespace tiebreak::gpu::mma_detail {
TIEBREAK_MMA_INSTANTIATE(mma_instr::wgmma_k16_bf16)
}  // namespace tiebreak::gpu::mma_detail
