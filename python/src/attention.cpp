// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak._core.attention_forward/backward`: the host twin of the attention kernels on host memory.
#include "attention.hpp"

#include "tiebreak/host/flash_twin.hpp"

namespace tiebreak::python {

void bind_attention_twin(nb::module_& m) {
  bind_attention(
      m, "threads",
      "The attention forward pass on host memory: the kernels' host twin (tiebreak::host::attention_forward,\n"
      "bit-identical to the H200 kernels). Addresses of dense bhsd tensors: q [B, H, Sq, D], k and v\n"
      "[B, Hkv, Sk, D] (bf16 encodings, uint16), o [B, H, Sq, D] (bf16; written by modes bf16, debias,\n"
      "stochastic), o_f32 [B, H, Sq, D] (float32; written by mode fp32, in the other modes the f32 O before\n"
      "its rounding; 0: none), lse [B, H, Sq] (float32, natural log). dims = (B, H, Hkv, Sq, Sk, D), D 64 or\n"
      "128. The caller guarantees the sizes: use tiebreak.attention or tiebreak.torch. mode: bf16 fp32\n"
      "debias stochastic; scaling: unfused or fused; exp: software or sfu (the exponential). probe=True returns\n"
      "the probe's counters per (batch,\n"
      "head), b * H + h, else None. The GIL is released; threads=0 uses every core (results do not depend\n"
      "on it).",
      "The attention backward pass on host memory (tiebreak::host::attention_backward): delta [B, H, Sq]\n"
      "(float32) = rowsum(dO * O) with the mode's O (o_f32 for fp32, o otherwise), then dq, dk, dv (bf16\n"
      "encodings, the shapes of q, k, v), deterministic. lse and O come from the forward pass with the same\n"
      "options; do is [B, H, Sq, D] (bf16). Other arguments as attention_forward.",
      [](const attn::flash_args& a, std::uintptr_t threads) { host::attention_forward(a, static_cast<unsigned>(threads)); },
      [](const attn::flash_args& a, std::uintptr_t threads) { host::attention_backward(a, static_cast<unsigned>(threads)); });
}

}  // namespace tiebreak::python
