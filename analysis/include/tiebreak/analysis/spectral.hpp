// SPDX-License-Identifier: Apache-2.0
/// @file Spectral norms: warm-started power iteration and Lanczos, batched slices, exact checks.
#pragma once

#include <tiebreak/analysis/drift.hpp>
#include <tiebreak/analysis/matrix_view.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tiebreak::analysis {

enum class spectral_method : std::uint8_t {
  /// Power iteration on the Gram operator: one pass over the matrix per iteration, cheapest
  /// when warm-started from the previous step's vector. One pass at unit x gives two lower
  /// bounds of sigma_1, ||Mx|| <= ||MᵀMx|| / ||Mx||; their spread, scaled by r / (1 − r) with
  /// r = (sigma_2 / sigma_1)² estimated from the spreads' decay (or carried by the warm start),
  /// is the error estimate. It is an estimate, not a bound: a start vector orthogonal to the top
  /// singular vector, or a wrong r, can fool it.
  power,
  /// Lanczos on the Gram operator with full reorthogonalisation: one pass per iteration, many
  /// fewer passes from a cold start or when the top two singular values are close. Stops on the
  /// gap-refined Ritz residual bound.
  lanczos,
};

struct spectral_options {
  spectral_method method = spectral_method::lanczos;
  double rel_tol = 1e-6;        ///< target relative accuracy of sigma
  int max_iterations = 500;     ///< passes over the matrix (Lanczos: also the Krylov dimension)
  bool compute_vectors = true;  ///< Lanczos: one more pass to return both singular vectors
  std::uint64_t seed = 0x7469656272656bull;  ///< cold-start vector (fixed: results repeat)
  int threads = 1;  ///< worker threads for one matrix; results do not depend on it
};

/// The largest singular triplet of a matrix, as estimated.
struct spectral_norm_result {
  double sigma = 0;           ///< estimate of the spectral norm; never exceeds it in exact arithmetic
  double error_estimate = 0;  ///< estimated sigma_1 - sigma, absolute (a bound if the gap estimate holds)
  double residual = 0;        ///< ||M right - sigma left|| or ||Mᵀ left - sigma right||, absolute
  Eigen::VectorXd left;       ///< unit left singular vector (size rows); empty if not computed
  Eigen::VectorXd right;      ///< unit right singular vector (size cols); empty if not computed
  /// Estimated (sigma_2 / sigma_1)²: the factor by which power iteration shrinks the angle to the
  /// top singular vector per pass (0 when unknown). Carried by warm starts.
  double convergence_ratio = 0;
  int iterations = 0;         ///< passes over the matrix, including the vector pass
  bool converged = false;     ///< error_estimate <= rel_tol * sigma within max_iterations
};

/// Estimates the spectral norm (largest singular value) of `m`.
/// Preconditions: T is float or double; all entries finite (a non-finite entry gives sigma = NaN,
/// converged = false); m may be empty (sigma = 0). Arithmetic is in double whatever T; the result
/// is a deterministic function of (m, options, warm start): thread count and CPU dispatch do not
/// change a bit. `warm` (optional) is a previous result for a matrix of the same shape: its vector
/// starts the iteration (a wrong-shaped or empty warm start is ignored).
/// Power: returns (left, sigma, right) with Mᵀ left = sigma · right exactly up to rounding.
template <class T>
[[nodiscard]] spectral_norm_result spectral_norm(matrix_view<T> m, const spectral_options& options = {},
                                                 const spectral_norm_result* warm = nullptr);

/// Spectral norms of many slices per step (per-head blocks of W_Q and W_K), each warm-started from
/// its own previous vector. Push one step at a time; slice i must keep its shape across steps.
struct spectral_batch_result {
  std::vector<double> sigma;
  std::vector<double> error_estimate;
  std::vector<int> iterations;
  std::vector<std::uint8_t> converged;
  int total_passes = 0;
  [[nodiscard]] bool all_converged() const;
};

class spectral_tracker {
 public:
  /// `options.method` is usually power (warm starts make it one pass per slice per step);
  /// `threads` > 1 spreads slices over threads; results do not depend on it.
  explicit spectral_tracker(spectral_options options = {.method = spectral_method::power,
                                                        .rel_tol = 1e-6,
                                                        .max_iterations = 500,
                                                        .compute_vectors = false},
                            int threads = 1);
  /// One step. Preconditions: as spectral_norm for each slice; the slice count and shapes equal
  /// those of the first push (else std::invalid_argument).
  spectral_batch_result push(std::span<const matrix_view<float>> slices);
  spectral_batch_result push(std::span<const matrix_view<double>> slices);
  [[nodiscard]] std::size_t steps() const noexcept { return steps_; }
  void reset();

 private:
  template <class T>
  spectral_batch_result push_impl(std::span<const matrix_view<T>> slices);
  spectral_options options_;
  int threads_;
  std::size_t steps_ = 0;
  std::vector<spectral_norm_result> state_;
  std::vector<std::pair<index, index>> shapes_;
};

/// Singular values (descending) and the norms derived from them, by Eigen's BDCSVD.
struct spectrum_summary {
  Eigen::VectorXd singular_values;
  double spectral_norm = 0;
  double frobenius_norm = 0;
  double stable_rank = 0;     ///< ||M||_F² / ||M||_2² (0 for the zero matrix)
  double effective_rank = 0;  ///< exp(entropy of sigma_i / sum sigma_j), Roy & Vetterli 2007
  /// "bdcsvd", or "gram_eigen" when BDCSVD returned invalid values (negative, NaN or unsorted:
  /// seen with Eigen 3.4.0 on a 4096² Gaussian matrix) and the singular values were taken as
  /// square roots of the eigenvalues of MᵀM instead (sigma_1 to double accuracy; singular values
  /// below ~1e-8 sigma_1 lose their relative accuracy).
  const char* method = "bdcsvd";
};

/// Exact (to double rounding) spectrum of `m` by Eigen's BDCSVD, checked and, if invalid, redone
/// through the Gram matrix (see spectrum_summary::method); O(min(m,n)² max(m,n)).
/// Preconditions: finite entries.
template <class T>
[[nodiscard]] spectrum_summary exact_spectrum(matrix_view<T> m);

/// An estimate checked against the exact SVD.
struct spectral_check {
  double estimate = 0;
  double exact = 0;
  double rel_error = 0;  ///< |estimate - exact| / exact (0 when both are 0)
};

template <class T>
[[nodiscard]] spectral_check check_spectral_norm(matrix_view<T> m, double estimate);

/// Frobenius norm (accumulated in double, scaled to avoid overflow).
template <class T>
[[nodiscard]] double frobenius_norm(matrix_view<T> m);

/// Least-squares fit log(sigma) = intercept + slope · step.
struct growth_fit {
  std::size_t n = 0;
  double slope = 0;        ///< growth rate per step (d log sigma / d step)
  double intercept = 0;
  double slope_se = 0;     ///< standard error of the slope (0 when n < 3)
  double residual_sd = 0;  ///< residual standard deviation in log units (0 when n < 3)
  double mean_step = 0;
  double sxx = 0;          ///< sum of squared step deviations
};

/// Fits `log_sigma` against `step`. Preconditions: equal sizes, n >= 2, steps not all equal.
[[nodiscard]] growth_fit fit_growth(std::span<const double> step, std::span<const double> log_sigma);

struct growth_options {
  std::size_t baseline_steps = 50;  ///< steps fitted to define normal growth
  double cusum_k = 0.5;             ///< CUSUM allowance, in prediction standard deviations
  double cusum_h = 8.0;             ///< CUSUM alarm threshold
  double min_residual_sd = 1e-6;    ///< floor on the baseline residual sd (log units)
};

struct growth_step {
  double step = 0;
  double sigma = 0;
  double log_sigma = 0;
  bool in_baseline = true;  ///< still collecting the baseline; the fields below are 0
  double predicted_log_sigma = 0;
  double z = 0;             ///< (log sigma - predicted) / prediction sd
  cusum_state cusum;        ///< two-sided CUSUM of z
  bool alarm = false;       ///< the CUSUM has crossed h at this or an earlier step
};

/// Spectral-norm growth monitor: fits the growth rate over the first baseline_steps, then flags
/// departures of log sigma from the extrapolated baseline with a two-sided CUSUM on the
/// standardised prediction residuals. Push one step at a time.
class growth_monitor {
 public:
  explicit growth_monitor(growth_options options = {});
  /// Preconditions: sigma > 0 and finite, steps increasing (else std::invalid_argument).
  growth_step push(double step, double sigma);
  [[nodiscard]] const std::optional<growth_fit>& baseline() const noexcept { return fit_; }
  [[nodiscard]] std::optional<double> first_alarm_step() const noexcept { return first_alarm_; }
  /// Fit over all steps pushed so far (the current growth rate).
  [[nodiscard]] growth_fit fit_all() const;

 private:
  growth_options options_;
  std::vector<double> steps_, logs_;
  std::optional<growth_fit> fit_;
  cusum_state cusum_;
  std::optional<double> first_alarm_;
};

}  // namespace tiebreak::analysis
