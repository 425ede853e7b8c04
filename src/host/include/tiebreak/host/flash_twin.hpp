// SPDX-License-Identifier: Apache-2.0
/// @file The host twin of tiebreak's attention kernels: the same tile algorithm (attn/flash.hpp),
/// every mma through the core's tensor-core model. Bit-identical to the H200 kernels
/// (tests/gpu/flash_gpu_test.cu); the reference a user without a GPU runs.
#pragma once

#include "tiebreak/attn/flash.hpp"

namespace tiebreak::host {

/// The forward pass on host memory: O (in the mode's format, and o_f32 when given), LSE; adds the
/// probe counts to a.counters when it is not null. Throws std::invalid_argument with
/// attn::error_text when flash_check fails. Runs the blocks on `threads` host threads (0: all
/// hardware threads); the result does not depend on it.
void attention_forward(const attn::flash_args& a, unsigned threads = 0);

/// The backward pass: delta = rowsum(dO ∘ O) (O of the mode; the probe's delta error against the
/// f32 O when a.t.o_f32 holds it), dQ, dK, dV. Deterministic, no atomics.
void attention_backward(const attn::flash_args& a, unsigned threads = 0);

}  // namespace tiebreak::host
