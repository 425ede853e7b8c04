// SPDX-License-Identifier: Apache-2.0
/// @file device_available(): a runtime availability check that never throws.
#include <string>

#include <cuda_runtime.h>

#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/device.hpp"

namespace tiebreak::gpu {
namespace {
/// A kernel of this library: its image exists only for sm_90 / sm_90a.
__global__ void availability_kernel() {}
}  // namespace

bool device_available() noexcept {
  static const bool ok = detail::kernel_image_status(availability_kernel) == cudaSuccess;
  return ok;
}

std::string device_description() {
  const cudaError_t e = detail::kernel_image_status(availability_kernel);
  if (e != cudaSuccess) return std::string("no usable GPU: ") + cudaGetErrorString(e);
  std::string d = detail::current_device_description();
  return d.empty() ? "no usable GPU" : d;
}

}  // namespace tiebreak::gpu
