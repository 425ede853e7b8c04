// SPDX-License-Identifier: Apache-2.0
/// @file Host interface of the kernel under test (plain C++: no CUDA headers).
#pragma once

#include <cstddef>
#include <cstdint>

/// True when a CUDA device can run kernels.
bool gpu_available();

/// out[i] = bits of __float2bfloat16_rn(in[i]) for i < n, on the GPU. Host pointers; returns false
/// (and sets `error`, when given) on any CUDA error.
bool f32_to_bf16_rn_on_gpu(const float* in, std::uint16_t* out, std::size_t n, const char** error = nullptr);
