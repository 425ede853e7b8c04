// SPDX-License-Identifier: Apache-2.0
/// @file The f64 attention reference on the GPU: forward, backward and tie statistics (plain C++).
///
/// Semantics are those of tiebreak::reference::attention_f64 (src/audit/include/tiebreak/reference/
/// attention.hpp), which wraps this launcher as attention_f64_device(): S = scale · Q Kᵀ with the
/// dot products in f64, P = exp(S − m) / l, O = P V, LSE = m + log l, delta = rowsum(dO ∘ O),
/// dS = P ∘ (dP − delta), dQ = scale · dS K, dK = scale · dSᵀ Q, dV = Pᵀ dO; bottom-right causal
/// alignment; a row that sees no key gets O = 0, LSE = −inf, zero gradients; grouped-query heads.
/// Masked pairs take part in every product with P = 0 (as in the host's dense products), so a
/// NaN/Inf input reaches exactly the results it reaches on the host.
/// Rounding: every operation is one IEEE f64 operation (round to nearest even; --fmad=false, no
/// contraction); sums are taken in another order than the host's blocked Eigen products, so the
/// two agree to a few f64 ulps of each row's magnitude, not bit for bit (bound and test:
/// tests/audit/attention_reference_gpu_test.cpp).
/// Every function throws std::runtime_error on a CUDA error and std::invalid_argument on a bad
/// problem; precondition: attention_f64_available().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tiebreak/attn/problem.hpp"

namespace tiebreak::gpu {

/// Largest dim and dim_v the kernels take (the Q, K, V tiles of one block live in shared memory).
inline constexpr std::size_t attention_f64_max_dim = 256;

/// One problem (shape, mask, scale: attn::problem) and its dense bhsd host arrays of doubles.
/// Inputs q, k, v are required; d_o may be null (then no backward pass, and delta, dq, dk, dv are
/// not written). Outputs o and lse are required; delta, dq, dk, dv when d_o is given. tie_exact /
/// tie_near, when not null, receive per query row the number of visible keys whose unscaled dot
/// product σ·(q·k), σ = sign(scale), equals the row maximum, and the number whose scaled distance
/// |scale|·(max − σ·(q·k)) is <= tie_tolerance; both are −1 for a row with no visible key or a
/// non-finite dot product (the host audit's tie statistics, from the same dot products as S).
struct attention_f64_problem {
  attn::problem problem;
  const double* q = nullptr;
  const double* k = nullptr;
  const double* v = nullptr;
  const double* d_o = nullptr;
  double* o = nullptr;
  double* lse = nullptr;
  double* delta = nullptr;
  double* dq = nullptr;
  double* dk = nullptr;
  double* dv = nullptr;
  double tie_tolerance = 1e-3;
  std::int32_t* tie_exact = nullptr;
  std::int32_t* tie_near = nullptr;
};

/// Where the time went (seconds, wall clock around synchronised steps).
struct attention_f64_timing {
  double upload = 0;    ///< cudaMalloc + host → device copies
  double kernels = 0;   ///< forward, backward and tie kernels (CUDA events)
  double download = 0;  ///< device → host copies + frees
};

/// True when device 0 exists and holds an image of these kernels (sm_90); false, without throwing,
/// when there is no driver, no GPU or a GPU of another architecture. The first call initialises
/// the CUDA runtime; the answer is cached.
bool attention_f64_available() noexcept;

/// Empty when attention_f64_available(), else the reason (one line, CUDA's error string).
std::string attention_f64_unavailable_reason();

/// Runs the problem on device 0. Preconditions: p.problem.validate() == ok, dim, dim_v <=
/// attention_f64_max_dim, seq_q, seq_k <= 2^30, batch·heads <= 65535, the required pointers
/// non-null (else std::invalid_argument).
attention_f64_timing attention_f64(const attention_f64_problem& p);

}  // namespace tiebreak::gpu
