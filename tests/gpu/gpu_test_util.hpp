// SPDX-License-Identifier: Apache-2.0
/// @file The GPU tests' CUDA plumbing, once: the skip without a usable GPU, the CUDA-call assertion
/// and a zeroed device buffer (the launchers' own is cuda/include/tiebreak/gpu/cuda_check.cuh).
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "tiebreak/gpu/device.hpp"

/// Skips the test (GTEST_SKIP) when no GPU can run tiebreak::gpu's kernels, saying why.
#define TIEBREAK_REQUIRE_GPU()                                                           \
  do {                                                                                   \
    if (!::tiebreak::gpu::device_available())                                            \
      GTEST_SKIP() << "no usable GPU: " << ::tiebreak::gpu::device_description();        \
  } while (0)

/// Fails the test (ASSERT) when a CUDA runtime call does not return cudaSuccess.
#define TIEBREAK_CUDA_OK(expr)                                                           \
  do {                                                                                   \
    const cudaError_t e_ = (expr);                                                       \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);               \
  } while (0)

namespace tiebreak::gpu::testing {

/// n elements of T on the device, zeroed, so that structure padding the kernels never write is
/// initialised when copied back (compute-sanitizer initcheck reports it otherwise). `p` is null when
/// the allocation failed (tests assert on it).
template <class T>
struct dev_buf {
  T* p = nullptr;
  std::size_t n = 0;
  explicit dev_buf(std::size_t count) : n(count) {
    if (cudaMalloc(&p, count * sizeof(T)) != cudaSuccess || cudaMemset(p, 0, count * sizeof(T)) != cudaSuccess) p = nullptr;
  }
  ~dev_buf() { cudaFree(p); }
  dev_buf(const dev_buf&) = delete;
  dev_buf& operator=(const dev_buf&) = delete;
  cudaError_t put(const std::vector<T>& h) { return cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice); }
  cudaError_t get(std::vector<T>& h) const {
    h.resize(n);
    return cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  }
};

}  // namespace tiebreak::gpu::testing
