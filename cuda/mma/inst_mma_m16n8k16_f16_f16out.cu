// SPDX-License-Identifier: Apache-2.0
/// @file Kernels and launchers of mma_m16n8k16_f16_f16out (one instruction per file: they compile in parallel).
#include "mma_device.cuh"

namespace tiebreak::gpu::mma_detail {
TIEBREAK_MMA_INSTANTIATE(mma_instr::mma_m16n8k16_f16_f16out)
}  // namespace tiebreak::gpu::mma_detail
