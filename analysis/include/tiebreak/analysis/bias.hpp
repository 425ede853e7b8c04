// SPDX-License-Identifier: Apache-2.0
/// @file Bias statistics of signed errors: streaming moments per group, t / sign / block-bootstrap
/// tests with effect sizes.
#pragma once

#include <tiebreak/analysis/drift.hpp>

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <span>
#include <vector>

namespace tiebreak::analysis {

/// Streaming moments of signed errors (Welford / Chan et al. merge: no catastrophic cancellation
/// when the mean is large next to the spread). NaN and ±inf are counted in `nonfinite` and
/// otherwise ignored; zeros count towards `zero` (they carry no sign).
struct running_moments {
  std::uint64_t n = 0;         ///< finite values seen
  double mean = 0;
  double m2 = 0;               ///< sum of squared deviations from the mean
  double sum_abs = 0;
  double min = 0;
  double max = 0;
  std::uint64_t positive = 0;
  std::uint64_t negative = 0;
  std::uint64_t zero = 0;
  std::uint64_t nonfinite = 0;

  void push(double x);
  void push(std::span<const double> xs);
  void push(std::span<const float> xs);
  /// Combines with moments of another, disjoint sample (order-independent up to rounding).
  void merge(const running_moments& other);
  [[nodiscard]] double sum() const noexcept { return mean * static_cast<double>(n); }
  /// Sample variance (n − 1 denominator); 0 when n < 2.
  [[nodiscard]] double variance() const noexcept;
  [[nodiscard]] double sd() const noexcept;
};

/// One-sample t test of mean == mu0, with effect sizes.
struct t_test_result {
  std::uint64_t n = 0;
  double mean = 0;
  double sd = 0;
  double se = 0;            ///< sd / sqrt(n)
  double t = 0;             ///< (mean − mu0) / se; ±inf when sd == 0 and mean != mu0; 0 when n < 2
  double df = 0;
  double p_value = 1;       ///< two-sided
  double cohen_d = 0;       ///< (mean − mu0) / sd: the effect size, independent of n
  double hedges_g = 0;      ///< cohen_d with the small-sample correction 1 − 3 / (4 df − 1)
  double ci_low = 0;        ///< confidence interval for the mean
  double ci_high = 0;
  double confidence = 0.95;
};

/// Preconditions: 0 < confidence < 1. With n < 2 returns t = 0, p = 1 and a degenerate interval.
[[nodiscard]] t_test_result t_test(const running_moments& m, double mu0 = 0, double confidence = 0.95);

/// Exact two-sided sign test of P(x > 0) == 1/2, zeros dropped.
struct sign_test_result {
  std::uint64_t positive = 0;
  std::uint64_t negative = 0;
  std::uint64_t zero = 0;
  double share_positive = 0.5;  ///< positive / (positive + negative); 0.5 if both are 0
  double sign_skew = 0;         ///< (positive − negative) / (positive + negative), in [−1, 1]
  double p_value = 1;           ///< two-sided, exact binomial
};

[[nodiscard]] sign_test_result sign_test(std::uint64_t positive, std::uint64_t negative,
                                         std::uint64_t zero = 0);
[[nodiscard]] sign_test_result sign_test(const running_moments& m);

struct bootstrap_options {
  std::size_t block_length = 0;   ///< 0: round(1.5 · n^(1/3)), at least 1
  std::size_t resamples = 2000;
  double confidence = 0.95;
  std::uint64_t seed = 20251001;  ///< fixed: same data, same options, same result on any platform
};

/// Circular moving-block bootstrap of the mean (Politis & Romano 1992) for serially dependent
/// samples (errors along a sequence, per-step sums). The interval is the percentile interval; the
/// p-value tests mean == 0 by resampling the centred series: (1 + #{|m*| >= |mean|}) / (B + 1).
struct bootstrap_result {
  std::size_t n = 0;
  double mean = 0;
  double se = 0;       ///< standard deviation of the resampled means
  double ci_low = 0;
  double ci_high = 0;
  double p_value = 1;
  std::size_t block_length = 0;
  std::size_t resamples = 0;
  std::uint64_t seed = 0;
};

/// Preconditions: finite values (non-finite ones are dropped first); resamples >= 1;
/// 0 < confidence < 1. With fewer than 2 values returns n, mean and p = 1.
[[nodiscard]] bootstrap_result block_bootstrap_mean(std::span<const double> xs,
                                                    const bootstrap_options& options = {});

/// Everything about one sample of signed errors.
struct bias_summary {
  running_moments moments;
  t_test_result t;
  sign_test_result sign;
};

[[nodiscard]] bias_summary summarize(const running_moments& m);

/// Key of an accumulator group; −1 marks "all" (e.g. {layer, −1} for a whole layer).
struct group_key {
  int layer = -1;
  int head = -1;
  auto operator<=>(const group_key&) const = default;
};

/// Per-group accumulators of signed errors over a training run. Within a step, push errors for
/// any group any number of times; end_step() closes the step: each group's per-step sum goes to
/// its drift detector (CUSUM and the cumulative sum that the paper plots).
class bias_accumulator {
 public:
  explicit bias_accumulator(drift_options drift = {});
  void push(group_key g, std::span<const double> errors);
  void push(group_key g, std::span<const float> errors);
  void push(group_key g, double error);
  /// Closes the step. Groups that received nothing this step get a per-step sum of 0; a group
  /// first pushed at step s counts its drift steps from s (its earlier sums are unknown).
  /// Returns one drift_step per group, in key order.
  std::vector<std::pair<group_key, drift_step>> end_step();

  struct group_report {
    group_key key;
    bias_summary summary;                   ///< over all errors ever pushed to the group
    running_moments step_sums;              ///< moments of the closed per-step sums
    std::optional<std::size_t> first_alarm; ///< first step whose CUSUM alarmed
    int alarm_direction = 0;
    double cumulative_sum = 0;              ///< sum of all closed per-step sums
  };
  [[nodiscard]] std::vector<group_report> report() const;
  [[nodiscard]] std::size_t steps() const noexcept { return steps_; }
  [[nodiscard]] const drift_detector* drift(group_key g) const;

 private:
  struct group_state {
    running_moments all;
    running_moments step_sums;
    double current = 0;
    drift_detector drift;
    explicit group_state(drift_options o) : drift(o) {}
  };
  group_state& state(group_key g);
  drift_options drift_options_;
  std::map<group_key, group_state> groups_;
  std::size_t steps_ = 0;
};

}  // namespace tiebreak::analysis
