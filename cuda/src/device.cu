// SPDX-License-Identifier: Apache-2.0
/// @file device_available(): a runtime probe that never throws.
#include <string>

#include <cuda_runtime.h>

#include "tiebreak/gpu/device.hpp"

namespace tiebreak::gpu {
namespace {
__global__ void availability_kernel() {}

/// cudaSuccess when device 0 exists and holds a kernel image of this library.
cudaError_t probe_device() noexcept {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return e;
  if (n == 0) return cudaErrorNoDevice;
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, availability_kernel);  // fails without an sm_90 image
}
}  // namespace

bool device_available() noexcept {
  static const bool ok = [] {
    const bool r = probe_device() == cudaSuccess;
    cudaGetLastError();  // clear the error a failed probe leaves, so later calls start clean
    return r;
  }();
  return ok;
}

std::string device_description() {
  const cudaError_t e = probe_device();
  cudaGetLastError();
  if (e != cudaSuccess) return std::string("no usable GPU: ") + cudaGetErrorString(e);
  int dev = 0, drv = 0, rt = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "no usable GPU";
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs, driver " + std::to_string(drv / 1000) + "." +
         std::to_string(drv % 1000 / 10) + ", runtime " + std::to_string(rt / 1000) + "." +
         std::to_string(rt % 1000 / 10) + ")";
}

}  // namespace tiebreak::gpu
