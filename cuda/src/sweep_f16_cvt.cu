// SPDX-License-Identifier: Apache-2.0
/// @file Instantiates the sweep kernels of the f16_cvt instructions (see op_group in sweep_kernels.cuh).
#include "sweep_kernels.cuh"

#define TIEBREAK_GPU_FILL_ONE_f16_cvt_(n) fill_entry<instr_op::n, op_group::f16_cvt>(table);
TIEBREAK_GPU_FILL_GROUP_(f16_cvt)
