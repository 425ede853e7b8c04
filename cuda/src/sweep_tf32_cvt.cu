// SPDX-License-Identifier: Apache-2.0
/// @file Instantiates the sweep kernels of the tf32_cvt instructions (see op_group in sweep_kernels.cuh).
#include "sweep_kernels.cuh"

#define TIEBREAK_GPU_FILL_ONE_tf32_cvt_(n) fill_entry<instr_op::n, op_group::tf32_cvt>(table);
TIEBREAK_GPU_FILL_GROUP_(tf32_cvt)
