// SPDX-License-Identifier: Apache-2.0
/// @file Instantiates the sweep kernels of the bf16_cvt instructions (see op_group in sweep_kernels.cuh).
#include "sweep_kernels.cuh"

#define TIEBREAK_GPU_FILL_ONE_bf16_cvt_(n) fill_entry<instr_op::n, op_group::bf16_cvt>(table);
TIEBREAK_GPU_FILL_GROUP_(bf16_cvt)
