// SPDX-License-Identifier: Apache-2.0
/// @file High-precision attention reference: forward and backward in f64 (Eigen, threaded over
/// (batch, head)) and a multiprecision mode that certifies the f64 results on small problems.
///
/// Conventions (those of FlashAttention and PyTorch SDPA):
///   S = scale · Q Kᵀ, P = softmax(S) row-wise, O = P V, LSE = log Σ_j exp(S_j) (natural log),
///   delta = rowsum(dO ∘ O), dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − delta), dQ = scale · dS K,
///   dK = scale · dSᵀ Q.
/// The problem itself (shape, bhsd layout, the causal mask rule with bottom-right alignment, the
/// grouped-query head mapping, validation) is tiebreak::attn::problem, include/tiebreak/attn/
/// problem.hpp. A query row that sees no key gets O = 0, LSE = −inf and zero gradients; dK and dV
/// of a key/value head sum over its group of query heads.
/// Every tensor is stored dense in `bhsd` order as double (exact copies of the kernel's inputs).
/// NaN/Inf inputs propagate to the rows they reach (no exception): callers exclude such rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <tiebreak/attn/problem.hpp>

namespace tiebreak::reference {

/// Shape of one attention problem (attn::shape): Q is [batch, heads, seq_q, dim], K [batch,
/// kv_heads, seq_k, dim], V [batch, kv_heads, seq_k, dim_v], O and dO [batch, heads, seq_q, dim_v],
/// LSE [batch, heads, seq_q]; `attention_shape{batch, heads, kv_heads, seq_q, seq_k, dim, dim_v}`.
using attention_shape = attn::shape;

/// Attention options. `scale` defaults to 1/sqrt(dim) (computed in double).
struct attention_options {
  bool causal = false;
  std::optional<double> scale;
  unsigned threads = 0;  ///< 0: std::thread::hardware_concurrency()
  /// Called after each (batch, head) completes, from worker threads (serialised by a mutex):
  /// (done, total). May be empty.
  std::function<void(std::size_t, std::size_t)> progress;

  [[nodiscard]] double scale_for(const attention_shape& s) const;
  /// The problem these options pose on shape s: its mask and scale_for(s).
  [[nodiscard]] attn::problem problem_for(const attention_shape& s) const;
};

/// The inputs of one problem, dense bhsd doubles. `d_o` is empty when no backward pass is wanted.
struct attention_inputs {
  attention_shape shape;
  std::vector<double> q, k, v;
  std::vector<double> d_o;
};

/// The reference outputs. Backward fields are empty when inputs.d_o is empty.
struct attention_outputs {
  std::vector<double> o;      ///< [b, h, s_q, d_v]
  std::vector<double> lse;    ///< [b, h, s_q]; −inf for a row that sees no key
  std::vector<double> delta;  ///< [b, h, s_q]: rowsum(dO ∘ O_ref)
  std::vector<double> dq;     ///< [b, h, s_q, d]
  std::vector<double> dk;     ///< [b, h_kv, s_k, d]
  std::vector<double> dv;     ///< [b, h_kv, s_k, d_v]
};

/// Thrown for inconsistent problem descriptions (invalid shape, vector sizes that disagree).
class reference_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Forward (and backward when d_o is given) in f64. Each (batch, head) is computed by one thread
/// with Eigen matrix products (blocked, so sums are not left to right: the result differs from
/// the exact one by a few f64 ulps of the row's magnitude; certify() bounds the difference).
/// Preconditions: shape.valid(), vector sizes match the shape (else reference_error).
[[nodiscard]] attention_outputs attention_f64(const attention_inputs& in, const attention_options& opt = {});

/// Thrown by attention_f64_device when it cannot run: built without CUDA, no driver, no GPU, or
/// no GPU of the architecture the kernels are built for (sm_90). what() is one line.
class device_unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Empty when attention_f64_device can run; else the one-line reason it cannot. Never throws
/// for a missing GPU (the first call initialises the CUDA runtime).
[[nodiscard]] std::string device_unavailable_reason();

/// Per-row tie statistics the device pass computes from its own f64 dot products (the audit's
/// trigger statistics): for query row r of (b, h), the number of visible keys whose σ·(q·k),
/// σ = sign(scale), equals the row maximum, and the number with |scale|·(max − σ·(q·k)) <=
/// tie_tolerance; −1 for a row with no visible key or a non-finite dot product.
struct device_row_ties {
  double tie_tolerance = 1e-3;          ///< input
  std::vector<std::int32_t> exact;      ///< [b, h, s_q]
  std::vector<std::int32_t> near;       ///< [b, h, s_q]
};

/// Where the device pass spent its time (seconds).
struct device_timing {
  double upload = 0, kernels = 0, download = 0;
};

/// attention_f64 on the GPU (cuda/reference/attention_reference.cu): the same conventions and the
/// same operations per element, in f64 with --fmad=false, sums over keys and features in another
/// order than the host's Eigen products. Agreement with attention_f64, per row of every output
/// tensor: max |device − host| <= device_rel_bound · M, M the row's magnitude: max |host| for O;
/// max(|LSE|, 1) for LSE; Σ_c |dO·O| for delta; for dQ, dK, dV the sum of the absolute values of
/// the terms they sum (dQ row i: |scale| Σ_j P_ij (|dP_ij| + |delta_i|) max_c |K_jc|; dK and dV
/// likewise over the query rows of the group), since Σ_j dS_ij = 0 makes them cancel.
/// NaN/Inf in exactly the same places. Preconditions: those of attention_f64, dim and dim_v <= 256
/// (else reference_error). Throws device_unavailable when no usable GPU is present, and
/// std::runtime_error on a CUDA error. `opt.threads` and `opt.progress` are not used.
[[nodiscard]] attention_outputs attention_f64_device(const attention_inputs& in, const attention_options& opt = {},
                                                     device_row_ties* ties = nullptr, device_timing* timing = nullptr);

/// The bound stated above (tests/audit/attention_reference_gpu_test.cpp checks it on random
/// problems up to seq 1024; the observed maximum is in docs/audit.md).
inline constexpr double device_rel_bound = 1e-13;

/// Whether key j is visible to query i (attn::visible with the causal mask or none).
[[nodiscard]] inline bool visible(const attention_shape& s, bool causal, std::size_t i, std::size_t j) noexcept {
  return attn::visible(s, causal ? attn::mask_kind::causal : attn::mask_kind::none, i, j);
}

/// The difference between an f64 reference and a recomputation in binary floating point with
/// `digits10` ≥ 50 decimal digits (Boost.Multiprecision cpp_bin_float, exp/log correctly rounded to
/// that precision), per output tensor. The multiprecision result is within ~1e-45 relative of the
/// exact real value, so `max_abs` bounds the f64 reference's true error up to that amount (added
/// to `bound`).
struct certificate_entry {
  std::string tensor;          ///< "o", "lse", "delta", "dq", "dk", "dv"
  std::size_t count = 0;       ///< finite elements compared
  double max_abs = 0;          ///< max |f64 − multiprecision|
  double max_rel_row = 0;      ///< max over rows of max |f64 − mp| / max |mp| in the row (0 for zero rows)
  double bound = 0;            ///< certified bound on |f64 − exact|: max_abs + the multiprecision error
};

struct certificate {
  int digits10 = 0;
  std::vector<certificate_entry> entries;
  /// Largest per-row relative bound over all tensors.
  [[nodiscard]] double max_rel_row() const noexcept;
};

/// Largest problem certify() accepts: batch·heads·seq_q·seq_k·max(dim, dim_v) ≤ this (seconds of work).
inline constexpr std::size_t max_certified_work = std::size_t{1} << 22;

/// Recomputes `in` with ~60 decimal digits and compares with `ref` (as returned by attention_f64 for
/// the same inputs and options, or any other claimed reference of that shape). Throws
/// reference_error when the problem is larger than max_certified_work or sizes disagree.
[[nodiscard]] certificate certify(const attention_inputs& in, const attention_outputs& ref,
                                  const attention_options& opt = {});

}  // namespace tiebreak::reference
