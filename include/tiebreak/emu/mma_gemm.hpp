// SPDX-License-Identifier: Apache-2.0
/// @file Emulated dot product and GEMM built on the MMA instruction model (host).
///
/// The tile order is the one of the CUDA GEMM kernel in cuda/mma (tiebreak::gpu::mma_gemm): every
/// output element starts from C and takes one instruction per chunk of m.k along K, the chunks in
/// increasing order, each instruction's result being the next one's C. The instruction's output
/// element is emu::mma_dot, so the emulation is bit-identical to that kernel by construction
/// wherever the model is (tests/mma/gpu/mma_gpu_test.cpp checks it on the device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tiebreak/emu/mma.hpp"

namespace tiebreak::emu {

/// d = c + a . b over K elements, one instruction per chunk of m.k in order.
/// Preconditions: mma_model_valid(m), K % m.k == 0, a and b hold K encodings (strides in elements).
/// Rounding and NaN: those of mma_dot, once per chunk. Returns the encoding of c_fmt.
template <class TA, class TB>
inline std::uint64_t dot(const mma_model& m, std::uint64_t c_bits, const TA* a, std::ptrdiff_t a_stride,
                         const TB* b, std::ptrdiff_t b_stride, int K) noexcept {
  std::uint64_t d = c_bits;
  for (int k0 = 0; k0 < K; k0 += m.k) {
    d = mma_dot(m, d, a + static_cast<std::ptrdiff_t>(k0) * a_stride, a_stride,
                b + static_cast<std::ptrdiff_t>(k0) * b_stride, b_stride).bits;
  }
  return d;
}

namespace detail {

/// The GEMM loop on A and B^T decoded once (mma_decode). Always inlined: for the rows of
/// mma_models `mdl` is a static constexpr object, whose fields fold into mma_dot_with.
template <bool FiniteOnly, class TC>
TIEBREAK_FORCEINLINE void gemm_decoded(const mma_model& mdl, int M, int N, int K, const mma_operand* A,
                                       const mma_operand* BT, const TC* C, TC* D) noexcept {
  for (int i = 0; i < M; ++i) {
    const mma_operand* arow = A + static_cast<std::size_t>(i) * K;
    for (int j = 0; j < N; ++j) {
      const mma_operand* bcol = BT + static_cast<std::size_t>(j) * K;
      std::uint64_t d = static_cast<std::uint64_t>(C[static_cast<std::size_t>(i) * N + j]);
      for (int k0 = 0; k0 < K; k0 += mdl.k) d = mma_dot_with(mdl, d, mma_decoded_ops<FiniteOnly>{arow + k0, bcol + k0}).bits;
      D[static_cast<std::size_t>(i) * N + j] = static_cast<TC>(d);
    }
  }
}

template <int Id>
struct fixed_model {
  static constexpr mma_model value = mma_models[Id].model;
};

template <int Id, class TC>
void gemm_fixed(bool finite, int M, int N, int K, const mma_operand* A, const mma_operand* BT, const TC* C,
                TC* D) noexcept {
  if (finite) gemm_decoded<true>(fixed_model<Id>::value, M, N, K, A, BT, C, D);
  else gemm_decoded<false>(fixed_model<Id>::value, M, N, K, A, BT, C, D);
}

}  // namespace detail

/// D = A * B + C as a sequence of instructions of model `m` (tile order: see the file comment).
///
/// Preconditions: mma_model_valid(m); K % m.k == 0; A is M x K row-major (encodings of a_fmt in TA),
/// B is K x N row-major (b_fmt in TB), C and D are M x N row-major encodings of c_fmt in TC (D may
/// alias C). Rounding and NaN: those of mma_dot. A model equal to a row of mma_models runs an
/// instantiation with the model as a constant (the fast path the benchmark measures).
template <class TA, class TB, class TC>
void gemm(const mma_model& m, int M, int N, int K, const TA* A, const TB* B, const TC* C, TC* D) {
  // Decode every element once (the core's unpack); B transposed so each column is contiguous.
  std::vector<detail::mma_operand> a(static_cast<std::size_t>(M) * K), bt(static_cast<std::size_t>(N) * K);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = mma_decode(m.a_fmt, static_cast<std::uint64_t>(A[i]), m.daz);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j)
      bt[static_cast<std::size_t>(j) * K + k] =
          mma_decode(m.b_fmt, static_cast<std::uint64_t>(B[static_cast<std::size_t>(k) * N + j]), m.daz);
  bool finite = true;  // no Inf or NaN among A and B: the hot loop skips their checks
  for (const auto& x : a) finite = finite && !x.special();
  for (const auto& x : bt) finite = finite && !x.special();
  const detail::mma_operand* pa = a.data();
  const detail::mma_operand* pb = bt.data();
  if (m == mma_models[0].model) return detail::gemm_fixed<0>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[1].model) return detail::gemm_fixed<1>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[2].model) return detail::gemm_fixed<2>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[3].model) return detail::gemm_fixed<3>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[4].model) return detail::gemm_fixed<4>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[5].model) return detail::gemm_fixed<5>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[6].model) return detail::gemm_fixed<6>(finite, M, N, K, pa, pb, C, D);
  if (m == mma_models[7].model) return detail::gemm_fixed<7>(finite, M, N, K, pa, pb, C, D);
  if (finite) detail::gemm_decoded<true>(m, M, N, K, pa, pb, C, D);
  else detail::gemm_decoded<false>(m, M, N, K, pa, pb, C, D);
}

}  // namespace tiebreak::emu
