// SPDX-License-Identifier: Apache-2.0
/// @file The launchers' CUDA plumbing, once for cuda/: error check, device buffer, availability check.
///
/// For the .cu files behind the public launchers (cuda/src, cuda/mma, cuda/reference) and the GPU
/// tests; not a user API (namespace detail). Header-only on purpose: the f64 reference's objects
/// are compiled into tiebreak::audit, which links neither tiebreak::gpu nor its sweeps.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace tiebreak::gpu::detail {

/// Throws std::runtime_error("<api>: <what>: <CUDA's error string>") when a runtime call fails.
/// Each launcher file names its API once, so its messages keep their prefix:
///   constexpr detail::cuda_check check{"tiebreak::gpu::mma"};
///   check(cudaMemcpy(...), "copy A");
struct cuda_check {
  const char* api;
  void operator()(cudaError_t e, const char* what) const {
    if (e != cudaSuccess) throw std::runtime_error(std::string(api) + ": " + what + ": " + cudaGetErrorString(e));
  }
};

/// n elements of T in device memory (at least one, so that an empty tensor still has a distinct
/// pointer), freed on every path. A failed cudaMalloc throws through `check` ("<api>: cudaMalloc:
/// out of memory"). Contents are uninitialised.
template <class T>
class device_buffer {
 public:
  device_buffer(std::size_t n, const cuda_check& check) { check(cudaMalloc(&ptr_, (n ? n : 1) * sizeof(T)), "cudaMalloc"); }
  ~device_buffer() { cudaFree(ptr_); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  [[nodiscard]] T* data() const noexcept { return ptr_; }

 private:
  T* ptr_ = nullptr;
};

/// cudaSuccess when device 0 exists and `kernel` (a __global__ function of the calling library)
/// has an image it runs: the libraries are built for sm_90 / sm_90a only, so another GPU answers
/// cudaErrorNoKernelImageForDevice here instead of failing at the first launch. Never throws; the
/// sticky error a failed probe leaves is cleared, so later calls start clean. The first call
/// initialises the CUDA runtime.
template <class Kernel>
cudaError_t kernel_image_status(Kernel* kernel) noexcept {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n == 0) e = cudaErrorNoDevice;
  if (e == cudaSuccess) {
    cudaFuncAttributes attr{};
    e = cudaFuncGetAttributes(&attr, kernel);
  }
  cudaGetLastError();
  return e;
}

/// "NVIDIA H200 (sm_90, 132 SMs, driver 13.0, runtime 13.0)" for the current device; empty when
/// the device cannot be queried (the caller says why there is none).
inline std::string current_device_description() {
  int dev = 0, drv = 0, rt = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs, driver " + std::to_string(drv / 1000) + "." +
         std::to_string(drv % 1000 / 10) + ", runtime " + std::to_string(rt / 1000) + "." +
         std::to_string(rt % 1000 / 10) + ")";
}

}  // namespace tiebreak::gpu::detail
