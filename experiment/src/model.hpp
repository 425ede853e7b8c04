// SPDX-License-Identifier: Apache-2.0
/// @file The experiment's model (internal): an attention-only language model whose attention calls
/// go through tiebreak's kernels, its forward and backward pass, AdamW and the synthetic data.
///
///   x_0 = E[token]                                    (no position embedding: equal tokens give
///   for each layer l:                                  equal keys, so a row's maximum repeats
///     X = rmsnorm(x_l);  Q = X W_Q, K = X W_K, V = X W_V   whenever its best key token recurs)
///     O_h = attention(Q_h, K_h, V_h) per head h (bf16 Q, K, V; the head's output mode)
///     x_{l+1} = x_l + [O_1 ... O_H] W_O
///   logits = rmsnorm(x_L) W_out;  loss = mean cross-entropy of the next token
///
/// f32 host arithmetic everywhere except inside the attention kernels (Eigen products, no FMA
/// contraction); the reference forward (ref_loss) runs the same weights with the attention in f32
/// on unrounded Q, K, V (scores and softmax sums in double, O stored in f32).
#pragma once

#include <Eigen/Core>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tiebreak/experiment/causal.hpp"
#include "tiebreak/probe/probe.hpp"

namespace tiebreak::experiment::detail {

using mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Every trained matrix, in a fixed order (checkpoints and AdamW walk them in this order).
struct weights {
  mat embed;                              ///< vocab x d_model
  std::vector<mat> wq, wk, wv, wo;        ///< per layer: d_model x (H D), d_model x (H D), d_model x (H D), (H D) x d_model
  mat wout;                               ///< d_model x vocab
  [[nodiscard]] std::vector<mat*> all();
  [[nodiscard]] std::vector<const mat*> all() const;
  void zeros_like(const weights& w);
};

/// N(0, 1) embedding, N(0, init_std) matrices, from `seed` (the same for every mode of a seed).
[[nodiscard]] weights init_weights(const config& c, std::uint64_t seed);

/// The batch of step `step`: batch x seq tokens, a function of (kind, seed, step) only.
[[nodiscard]] std::vector<std::uint32_t> make_batch(const config& c, data_kind kind, std::uint64_t seed, std::size_t step);

/// What one training step measured, per head (l * H + h) of the kernels' probe.
struct step_stats {
  double loss = 0;
  std::vector<double> delta_error;        ///< sum over rows of delta(mode O) - delta(f32 O)
  std::vector<double> repeated_max_rows;  ///< rows (tiles) with an exactly repeated maximum
  std::vector<double> p_one;
  std::vector<double> output_error_mean;  ///< mean signed ulps of O's rounding (0 in mode fp32)
  std::vector<double> o_nonfinite;        ///< elements of the f32 O that are NaN or infinite
  std::vector<double> max_score;          ///< largest scaled score scale·q·k over the visible keys (bf16 Q, K; double)
};

/// Loss and gradients of one batch through the kernels. `modes` has layers * heads entries;
/// `call_seed` keys stochastic rounding (mixed with layer and head).
[[nodiscard]] step_stats train_step(const config& c, const weights& w, const std::vector<std::uint32_t>& tokens,
                                    const head_modes& modes, std::uint64_t call_seed, attention_backend& be,
                                    weights& grad);

/// The reference loss: the same weights and batch, the attention in f32 (no bf16 rounding anywhere).
[[nodiscard]] double reference_loss(const config& c, const weights& w, const std::vector<std::uint32_t>& tokens);

/// AdamW state and update (decoupled weight decay on every matrix but the embedding).
struct adam_state {
  weights m, v;
  std::size_t t = 0;
};
void adamw_update(const config& c, weights& w, const weights& grad, adam_state& s);

}  // namespace tiebreak::experiment::detail
