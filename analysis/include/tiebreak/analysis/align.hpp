// SPDX-License-Identifier: Apache-2.0
/// @file Low-rank alignment: cosines, principal angles of top singular subspaces, ranks, and the
/// coherence of a weighted sum of rank-1 terms.
#pragma once

#include <tiebreak/analysis/spectral.hpp>

#include <Eigen/Core>

#include <optional>
#include <span>

namespace tiebreak::analysis {

/// ⟨A, B⟩_F / (‖A‖_F ‖B‖_F), in [−1, 1]; 0 when either matrix is zero.
/// Precondition: equal shapes (else std::invalid_argument). NaN entries give NaN.
[[nodiscard]] double frobenius_cosine(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b);

/// Principal angles between two subspaces of R^m, ascending, in radians.
struct principal_angles_result {
  Eigen::VectorXd angles;  ///< min(dim A, dim B) angles in [0, π/2], ascending
  /// Subspace overlap ‖Q_Aᵀ Q_B‖_F² / min(dim) = mean of cos² θ_i: 1 for nested, 0 for orthogonal.
  double overlap = 0;
  [[nodiscard]] double largest() const { return angles.size() ? angles[angles.size() - 1] : 0.0; }
};

/// Principal angles between the column spaces of `a` and `b` (m × p and m × q, any scaling; each
/// is orthonormalised with column-pivoted QR, and its numerical rank is used). Small angles come
/// from sines and large ones from cosines (Knyazev & Argentati 2002), so an angle of 1e−10 is
/// recovered to ~1e−16 absolute, where acos of a cosine would give 0 or ~1e−8.
/// Preconditions: equal row counts (else std::invalid_argument); finite entries.
[[nodiscard]] principal_angles_result principal_angles(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b);

/// The top-k singular triplets of a matrix (exact, by BDCSVD).
struct top_subspaces {
  Eigen::MatrixXd left;              ///< m × k, orthonormal columns
  Eigen::MatrixXd right;             ///< n × k
  Eigen::VectorXd singular_values;   ///< all min(m, n) of them, descending
};

/// Preconditions: 1 <= k; k is clamped to min(m, n). Finite entries.
[[nodiscard]] top_subspaces top_singular_subspaces(const Eigen::MatrixXd& m, index k);

/// Overlap between the top-k singular subspaces of two matrices of the same shape.
struct subspace_overlap_result {
  index k = 0;
  principal_angles_result left;   ///< between the top-k left singular subspaces (column spaces)
  principal_angles_result right;  ///< between the top-k right singular subspaces (row spaces)
};

[[nodiscard]] subspace_overlap_result subspace_overlap(const top_subspaces& a, const top_subspaces& b);
[[nodiscard]] subspace_overlap_result subspace_overlap(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b,
                                                       index k);

/// Stable rank, effective rank and norms from the singular values (see spectrum_summary).
[[nodiscard]] spectrum_summary rank_summary(const Eigen::VectorXd& singular_values);

/// Coherence of a weighted sum of rank-1 terms S = Σ_T e_T u_T v_Tᵀ:
/// ‖S‖_F / Σ_T |e_T| ‖u_T‖ ‖v_T‖ ∈ [0, 1]. It is 1 exactly when every signed term e_T u_T v_Tᵀ
/// points the same way (the gradient error of W_Q, with e = δ errors, u = (PK)[T], v = X[T]);
/// 1/√T for T equal-weight mutually orthogonal terms; 0 when they cancel.
struct coherence_result {
  std::size_t terms = 0;
  double coherence = 0;       ///< 0 when the denominator is 0
  double norm_of_sum = 0;     ///< ‖S‖_F
  double sum_of_norms = 0;    ///< Σ |e_T| ‖u_T‖ ‖v_T‖
  double weight_sum = 0;      ///< Σ e_T (the summed δ error of the paper)
  double dominant_share = 0;  ///< σ_1(S)² / ‖S‖_F²: 1 when S itself is rank 1
};

/// Streaming form: push one token (or one step) at a time.
class rank1_coherence {
 public:
  /// Preconditions: u.size() == m, v.size() == n of the first push (else std::invalid_argument).
  void push(double e, std::span<const double> u, std::span<const double> v);
  [[nodiscard]] coherence_result result() const;
  [[nodiscard]] const Eigen::MatrixXd& sum() const noexcept { return sum_; }

 private:
  Eigen::MatrixXd sum_;
  std::size_t terms_ = 0;
  double sum_of_norms_ = 0;
  double weight_sum_ = 0;
};

/// Batch form: S = Uᵀ diag(e) V with U (T × m) and V (T × n) holding u_T, v_T as rows.
/// Preconditions: e.size() == U.rows() == V.rows().
[[nodiscard]] coherence_result rank1_coherence_of(const Eigen::VectorXd& e, const Eigen::MatrixXd& u,
                                                  const Eigen::MatrixXd& v);

/// How much of an error gradient G lies along the top singular directions of an update (or
/// weight) W. Preconditions: equal shapes; 1 <= k (clamped to min(m, n)).
struct gradient_alignment_result {
  index k = 0;
  double cosine = 0;           ///< ⟨G, W⟩_F / (‖G‖_F ‖W‖_F)
  double two_sided = 0;        ///< ‖U_kᵀ G V_k‖_F / ‖G‖_F
  double left = 0;             ///< ‖U_kᵀ G‖_F / ‖G‖_F (column-space share)
  double right = 0;            ///< ‖G V_k‖_F / ‖G‖_F (row-space share)
  /// u_iᵀ G v_i / ‖G‖_F for i < k: signed; u_iᵀ G v_i is the first-order change of σ_i(W) when
  /// G is added to W, so a positive entry means G pushes σ_i up.
  Eigen::VectorXd per_direction;
};

[[nodiscard]] gradient_alignment_result gradient_alignment(const Eigen::MatrixXd& g, const top_subspaces& w,
                                                           const Eigen::MatrixXd& w_matrix);
[[nodiscard]] gradient_alignment_result gradient_alignment(const Eigen::MatrixXd& g, const Eigen::MatrixXd& w,
                                                           index k);

/// Per-step summary of a sequence of matrices (weight updates, gradient-error matrices).
struct update_step {
  std::size_t step = 0;
  spectrum_summary ranks;                      ///< norms, stable and effective rank of this matrix
  std::optional<double> cosine_with_previous;  ///< absent at the first step
  std::optional<subspace_overlap_result> overlap_with_previous;
};

/// Streaming tracker over a sequence of matrices of one shape: push one step at a time.
class update_alignment_tracker {
 public:
  /// Precondition: k >= 1.
  explicit update_alignment_tracker(index k);
  /// Precondition: same shape as the first push (else std::invalid_argument).
  update_step push(const Eigen::MatrixXd& m);
  [[nodiscard]] std::size_t steps() const noexcept { return steps_; }

 private:
  index k_;
  std::size_t steps_ = 0;
  Eigen::MatrixXd previous_;
  top_subspaces previous_top_;
};

}  // namespace tiebreak::analysis
