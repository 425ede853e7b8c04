// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak._cuda`: the attention kernels (tiebreak::gpu, cuda/attention) on device memory, for
/// tiebreak.torch's custom op. Built only with -DTIEBREAK_PYTHON_CUDA=ON (docs/python.md).
#include <nanobind/nanobind.h>

#include <string>

#include "attention.hpp"
#include "tiebreak/gpu/flash.hpp"

NB_MODULE(_cuda, m) {
  using namespace tiebreak;
  using namespace tiebreak::python;
  m.doc() = "tiebreak's attention kernels on CUDA device memory (the custom op of tiebreak.torch; docs/python.md).";
  m.def("attention_available", [] { return gpu::attention_available(); },
        "Whether a CUDA device of compute capability 9.0 (the kernels' only target) can run the kernels.");
  bind_attention(
      m, "stream",
      "The attention forward pass on device memory (tiebreak::gpu::attention_forward, cuda/attention):\n"
      "the arguments of tiebreak._core.attention_forward with device addresses, on the CUDA stream\n"
      "`stream` (a cudaStream_t as an integer, torch.cuda.current_stream().cuda_stream; 0: the default\n"
      "stream). Returns when the outputs are written. Bit-identical to the host twin.",
      "The attention backward pass on device memory (tiebreak::gpu::attention_backward): the arguments\n"
      "of tiebreak._core.attention_backward with device addresses, on the CUDA stream `stream`.",
      [](const attn::flash_args& a, std::uintptr_t stream) {
        gpu::attention_forward(a, reinterpret_cast<void*>(stream));  // NOLINT(performance-no-int-to-ptr)
      },
      [](const attn::flash_args& a, std::uintptr_t stream) {
        gpu::attention_backward(a, reinterpret_cast<void*>(stream));  // NOLINT(performance-no-int-to-ptr)
      });
}
