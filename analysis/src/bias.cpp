// SPDX-License-Identifier: Apache-2.0
/// @file Streaming moments, t / sign / block-bootstrap tests, per-group accumulators.
#include <tiebreak/analysis/bias.hpp>
#include <tiebreak/analysis/distributions.hpp>
#include <tiebreak/fp/random.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tiebreak::analysis {

void running_moments::push(double x) {
  if (!std::isfinite(x)) {
    ++nonfinite;
    return;
  }
  if (n == 0) {
    min = max = x;
  } else {
    min = std::min(min, x);
    max = std::max(max, x);
  }
  ++n;
  const double delta = x - mean;
  mean += delta / static_cast<double>(n);
  m2 += delta * (x - mean);
  sum_abs += std::abs(x);
  if (x > 0) ++positive;
  else if (x < 0) ++negative;
  else ++zero;
}

void running_moments::push(std::span<const double> xs) {
  for (double x : xs) push(x);
}
void running_moments::push(std::span<const float> xs) {
  for (float x : xs) push(static_cast<double>(x));
}

void running_moments::merge(const running_moments& o) {
  if (o.n == 0) {
    nonfinite += o.nonfinite;
    return;
  }
  if (n == 0) {
    const std::uint64_t nf = nonfinite;
    *this = o;
    nonfinite += nf;
    return;
  }
  const double na = static_cast<double>(n), nb = static_cast<double>(o.n);
  const double nt = na + nb;
  const double delta = o.mean - mean;
  mean += delta * (nb / nt);
  m2 += o.m2 + delta * delta * (na * nb / nt);
  n += o.n;
  sum_abs += o.sum_abs;
  min = std::min(min, o.min);
  max = std::max(max, o.max);
  positive += o.positive;
  negative += o.negative;
  zero += o.zero;
  nonfinite += o.nonfinite;
}

double running_moments::variance() const noexcept {
  return n < 2 ? 0.0 : m2 / static_cast<double>(n - 1);
}
double running_moments::sd() const noexcept { return std::sqrt(variance()); }

t_test_result t_test(const running_moments& m, double mu0, double confidence) {
  t_test_result r;
  r.n = m.n;
  r.mean = m.mean;
  r.confidence = confidence;
  r.ci_low = r.ci_high = m.mean;
  if (m.n < 2) return r;
  r.sd = m.sd();
  r.df = static_cast<double>(m.n - 1);
  r.se = r.sd / std::sqrt(static_cast<double>(m.n));
  const double diff = m.mean - mu0;
  if (r.sd > 0) {
    r.t = diff / r.se;
    r.p_value = student_t_two_sided_p(r.t, r.df);
    r.cohen_d = diff / r.sd;
    r.hedges_g = r.cohen_d * (1 - 3 / (4 * r.df - 1));
    const double q = student_t_quantile(0.5 + confidence / 2, r.df);
    r.ci_low = m.mean - q * r.se;
    r.ci_high = m.mean + q * r.se;
  } else if (diff != 0) {  // every value identical and off mu0: infinitely significant
    const double inf = std::numeric_limits<double>::infinity();
    r.t = r.cohen_d = r.hedges_g = std::copysign(inf, diff);
    r.p_value = 0;
  }
  return r;
}

sign_test_result sign_test(std::uint64_t positive, std::uint64_t negative, std::uint64_t zero) {
  sign_test_result r;
  r.positive = positive;
  r.negative = negative;
  r.zero = zero;
  const std::uint64_t n = positive + negative;
  if (n == 0) return r;
  r.share_positive = static_cast<double>(positive) / static_cast<double>(n);
  r.sign_skew = (static_cast<double>(positive) - static_cast<double>(negative)) / static_cast<double>(n);
  const std::uint64_t k = std::min(positive, negative);
  r.p_value = std::min(1.0, 2 * binomial_cdf(k, n, 0.5));
  return r;
}

sign_test_result sign_test(const running_moments& m) {
  return sign_test(m.positive, m.negative, m.zero);
}

namespace {

// The core's splitmix64: tiny, fast, identical on every platform (std:: distributions are not).
struct splitmix64 {
  tiebreak::splitmix64_generator g;
  explicit splitmix64(std::uint64_t seed) : g(seed) {}
  std::uint64_t next() { return g.next(); }
  // Uniform in [0, n), exactly (Lemire's multiply-shift with rejection).
  std::uint64_t below(std::uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
    auto lo = static_cast<std::uint64_t>(m);
    if (lo < n) {
      const std::uint64_t threshold = (0 - n) % n;
      while (lo < threshold) {
        m = static_cast<unsigned __int128>(next()) * n;
        lo = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }
};

double quantile_sorted(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  const double f = pos - static_cast<double>(i);
  if (i + 1 >= v.size()) return v.back();
  return v[i] + f * (v[i + 1] - v[i]);
}

}  // namespace

bootstrap_result block_bootstrap_mean(std::span<const double> xs_in, const bootstrap_options& o) {
  std::vector<double> xs;
  xs.reserve(xs_in.size());
  for (double x : xs_in)
    if (std::isfinite(x)) xs.push_back(x);
  bootstrap_result r;
  r.n = xs.size();
  r.seed = o.seed;
  r.resamples = std::max<std::size_t>(o.resamples, 1);
  running_moments m;
  m.push(xs);
  r.mean = m.mean;
  r.ci_low = r.ci_high = m.mean;
  const std::size_t n = xs.size();
  if (n < 2) {
    r.block_length = 1;
    r.resamples = 0;
    return r;
  }
  std::size_t len = o.block_length;
  if (len == 0) len = static_cast<std::size_t>(std::llround(1.5 * std::cbrt(static_cast<double>(n))));
  len = std::clamp<std::size_t>(len, 1, n);
  r.block_length = len;
  // Prefix sums of the centred, circularly extended series: a block sum is one subtraction.
  std::vector<double> prefix(2 * n + 1, 0.0);
  for (std::size_t i = 0; i < 2 * n; ++i) prefix[i + 1] = prefix[i] + (xs[i % n] - m.mean);
  const std::size_t blocks = (n + len - 1) / len;
  const std::size_t last_len = n - (blocks - 1) * len;
  splitmix64 rng{o.seed};
  std::vector<double> means(r.resamples);
  std::size_t extreme = 0;
  const double observed = std::abs(m.mean);
  for (std::size_t b = 0; b < r.resamples; ++b) {
    double s = 0;
    for (std::size_t k = 0; k < blocks; ++k) {
      const std::size_t start = rng.below(n);
      const std::size_t l = k + 1 == blocks ? last_len : len;
      s += prefix[start + l] - prefix[start];
    }
    const double centred = s / static_cast<double>(n);
    means[b] = centred;
    if (std::abs(centred) >= observed) ++extreme;
  }
  running_moments mm;
  mm.push(means);
  r.se = mm.sd();
  std::sort(means.begin(), means.end());
  const double alpha = 1 - o.confidence;
  r.ci_low = m.mean + quantile_sorted(means, alpha / 2);
  r.ci_high = m.mean + quantile_sorted(means, 1 - alpha / 2);
  r.p_value = static_cast<double>(1 + extreme) / static_cast<double>(r.resamples + 1);
  return r;
}

bias_summary summarize(const running_moments& m) { return {m, t_test(m), sign_test(m)}; }

bias_accumulator::bias_accumulator(drift_options drift) : drift_options_(drift) {}

bias_accumulator::group_state& bias_accumulator::state(group_key g) {
  auto it = groups_.find(g);
  if (it == groups_.end()) it = groups_.emplace(g, group_state(drift_options_)).first;
  return it->second;
}

void bias_accumulator::push(group_key g, std::span<const double> errors) {
  group_state& s = state(g);
  for (double e : errors) {
    s.all.push(e);
    if (std::isfinite(e)) s.current += e;
  }
}
void bias_accumulator::push(group_key g, std::span<const float> errors) {
  group_state& s = state(g);
  for (float e : errors) {
    s.all.push(static_cast<double>(e));
    if (std::isfinite(e)) s.current += static_cast<double>(e);
  }
}
void bias_accumulator::push(group_key g, double error) { push(g, std::span<const double>(&error, 1)); }

std::vector<std::pair<group_key, drift_step>> bias_accumulator::end_step() {
  std::vector<std::pair<group_key, drift_step>> out;
  out.reserve(groups_.size());
  for (auto& [key, s] : groups_) {
    s.step_sums.push(s.current);
    out.emplace_back(key, s.drift.push(s.current));
    s.current = 0;
  }
  ++steps_;
  return out;
}

std::vector<bias_accumulator::group_report> bias_accumulator::report() const {
  std::vector<group_report> out;
  for (const auto& [key, s] : groups_) {
    group_report g;
    g.key = key;
    g.summary = summarize(s.all);
    g.step_sums = s.step_sums;
    g.first_alarm = s.drift.first_alarm();
    g.alarm_direction = s.drift.first_alarm_direction();
    g.cumulative_sum = s.drift.cumulative_sums().empty() ? 0.0 : s.drift.cumulative_sums().back();
    out.push_back(g);
  }
  return out;
}

const drift_detector* bias_accumulator::drift(group_key g) const {
  const auto it = groups_.find(g);
  return it == groups_.end() ? nullptr : &it->second.drift;
}

}  // namespace tiebreak::analysis
