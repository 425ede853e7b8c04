// SPDX-License-Identifier: Apache-2.0
/// @file Instantiates the sweep kernels of the fp8_cvt instructions (see op_group in sweep_kernels.cuh).
#include "sweep_kernels.cuh"

#define TIEBREAK_GPU_FILL_ONE_fp8_cvt_(n) fill_entry<instr_op::n, op_group::fp8_cvt>(table);
TIEBREAK_GPU_FILL_GROUP_(fp8_cvt)
