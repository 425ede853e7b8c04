// SPDX-License-Identifier: Apache-2.0
/// @file Drift detection over steps: cumulative sums and a two-sided CUSUM.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace tiebreak::analysis {

/// State of a two-sided CUSUM on standardised values z: s_pos = max(0, s_pos + z − k),
/// s_neg = max(0, s_neg − z − k). An alarm is raised when either exceeds h.
struct cusum_state {
  double s_pos = 0;
  double s_neg = 0;
  /// Adds one standardised value; returns +1 / −1 if s_pos / s_neg now exceeds h, else 0.
  /// NaN z leaves the state unchanged and returns 0.
  int update(double z, double k, double h);
};

struct drift_options {
  double target_mean = 0;  ///< in-control mean of the per-step value (0: unbiased)
  double sigma = 0;        ///< in-control sd; 0 = estimate from the first warmup_steps values
  std::size_t warmup_steps = 20;
  double k = 0.5;  ///< allowance in sd units (detects shifts of about 2k sd fastest)
  double h = 5.0;  ///< threshold in sd units; k = 0.5, h = 5 gives an in-control ARL of ~930 steps
                   ///  per side for Gaussian noise
};

struct drift_step {
  std::size_t step = 0;        ///< 0-based index of the value
  double value = 0;
  double cumulative_sum = 0;   ///< running sum of the values (what the paper plots)
  double s_pos = 0;            ///< CUSUM statistics after this step (0 while calibrating)
  double s_neg = 0;
  bool calibrating = false;    ///< sigma is still being estimated; CUSUM runs when warmup ends
  int alarm = 0;               ///< +1 / −1 when this step raised an upward / downward alarm
};

/// Streaming drift detector for per-step sums (e.g. the summed delta error of one head).
/// While sigma is estimated the values are kept and replayed through the CUSUM when warmup ends,
/// so bias present from the first step is still caught. NaN values are counted and skipped.
class drift_detector {
 public:
  explicit drift_detector(drift_options options = {});
  /// Precondition: none; returns the state after `value`.
  drift_step push(double value);
  [[nodiscard]] const std::vector<double>& cumulative_sums() const noexcept { return cumsum_; }
  [[nodiscard]] std::optional<std::size_t> first_alarm() const noexcept { return first_alarm_; }
  [[nodiscard]] int first_alarm_direction() const noexcept { return first_direction_; }
  [[nodiscard]] double sigma() const noexcept { return sigma_; }
  [[nodiscard]] const cusum_state& state() const noexcept { return state_; }
  [[nodiscard]] std::size_t nan_count() const noexcept { return nan_count_; }

 private:
  void feed(std::size_t step, double value, drift_step* out);
  drift_options options_;
  double sigma_;
  std::vector<std::pair<std::size_t, double>> warmup_;  // (step, value) while calibrating
  std::vector<double> cumsum_;
  cusum_state state_;
  std::optional<std::size_t> first_alarm_;
  int first_direction_ = 0;
  std::size_t nan_count_ = 0;
  double running_ = 0;
};

}  // namespace tiebreak::analysis
