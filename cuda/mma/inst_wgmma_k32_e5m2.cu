// SPDX-License-Identifier: Apache-2.0
/// @file Kernels and launchers of wgmma_k32_e5m2 (one instruction per file: they compile in parallel).
#include "mma_device.cuh"

namespace tiebreak::gpu::mma_detail {
TIEBREAK_MMA_INSTANTIATE(mma_instr::wgmma_k32_e5m2)
}  // namespace tiebreak::gpu::mma_detail
