// SPDX-License-Identifier: Apache-2.0
/// @file CUSUM and the streaming drift detector.
#include <tiebreak/analysis/drift.hpp>

#include <algorithm>
#include <cmath>

namespace tiebreak::analysis {

int cusum_state::update(double z, double k, double h) {
  if (std::isnan(z)) return 0;
  s_pos = std::max(0.0, s_pos + z - k);
  s_neg = std::max(0.0, s_neg - z - k);
  if (s_pos > h) return +1;
  if (s_neg > h) return -1;
  return 0;
}

drift_detector::drift_detector(drift_options options) : options_(options), sigma_(options.sigma) {
  if (!(sigma_ > 0)) {
    sigma_ = 0;
    options_.warmup_steps = std::max<std::size_t>(options_.warmup_steps, 2);
  }
}

void drift_detector::feed(std::size_t step, double value, drift_step* out) {
  const double z = (value - options_.target_mean) / sigma_;
  const int a = state_.update(z, options_.k, options_.h);
  if (a != 0 && !first_alarm_) {
    first_alarm_ = step;
    first_direction_ = a;
  }
  if (out != nullptr) {
    out->s_pos = state_.s_pos;
    out->s_neg = state_.s_neg;
    out->alarm = a;
  }
}

drift_step drift_detector::push(double value) {
  drift_step d;
  d.step = cumsum_.size() + nan_count_;
  d.value = value;
  if (std::isnan(value)) {
    ++nan_count_;
    d.cumulative_sum = running_;
    d.calibrating = sigma_ == 0;
    d.s_pos = state_.s_pos;
    d.s_neg = state_.s_neg;
    return d;
  }
  running_ += value;
  cumsum_.push_back(running_);
  d.cumulative_sum = running_;
  if (sigma_ > 0) {
    feed(d.step, value, &d);
    return d;
  }
  warmup_.emplace_back(d.step, value);
  d.calibrating = true;
  if (warmup_.size() < options_.warmup_steps) return d;
  // Sample sd around the sample mean (not the target): a bias present from the start must not
  // inflate sigma, or the CUSUM would never see it.
  double mean = 0;
  for (const auto& [i, v] : warmup_) mean += v;
  mean /= static_cast<double>(warmup_.size());
  double ss = 0;
  for (const auto& [i, v] : warmup_) ss += (v - mean) * (v - mean);
  sigma_ = std::sqrt(ss / static_cast<double>(warmup_.size() - 1));
  if (!(sigma_ > 0)) sigma_ = std::max(std::abs(mean), 1.0) * 1e-12;  // constant series
  d.calibrating = false;
  for (std::size_t i = 0; i < warmup_.size(); ++i)
    feed(warmup_[i].first, warmup_[i].second, i + 1 == warmup_.size() ? &d : nullptr);
  warmup_.clear();
  return d;
}

}  // namespace tiebreak::analysis
