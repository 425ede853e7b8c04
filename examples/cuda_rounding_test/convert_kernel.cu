// SPDX-License-Identifier: Apache-2.0
/// @file The kernel under test: f32 -> bf16 with the CUDA intrinsic __float2bfloat16_rn.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "convert_kernel.hpp"

namespace {

__global__ void f32_to_bf16_rn_kernel(const float* in, unsigned short* out, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
}

bool check(cudaError_t e, const char** error) {
  if (e != cudaSuccess && error != nullptr) *error = cudaGetErrorString(e);
  return e == cudaSuccess;
}

}  // namespace

bool gpu_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

bool f32_to_bf16_rn_on_gpu(const float* in, std::uint16_t* out, std::size_t n, const char** error) {
  if (n == 0) return true;
  float* d_in = nullptr;
  unsigned short* d_out = nullptr;
  bool ok = check(cudaMalloc(&d_in, n * sizeof(float)), error) &&
            check(cudaMalloc(&d_out, n * sizeof(unsigned short)), error) &&
            check(cudaMemcpy(d_in, in, n * sizeof(float), cudaMemcpyHostToDevice), error);
  if (ok) {
    const unsigned threads = 256;
    const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
    f32_to_bf16_rn_kernel<<<blocks, threads>>>(d_in, d_out, n);
    ok = check(cudaGetLastError(), error) &&
         check(cudaMemcpy(out, d_out, n * sizeof(unsigned short), cudaMemcpyDeviceToHost), error);
  }
  cudaFree(d_in);
  cudaFree(d_out);
  return ok;
}
