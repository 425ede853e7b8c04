// SPDX-License-Identifier: Apache-2.0
/// @file One-sample t test of a signed error sample against zero mean, with an effect-size floor.
///
/// Used by the HasUnbiasedError matcher (matchers.hpp); usable alone. No dependency beyond <cmath>
/// and the core: the Student-t tail is the core's (tiebreak/stats/incomplete_beta.hpp), shared with
/// tiebreak::analysis.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <limits>
#include <string>

#include "tiebreak/stats/incomplete_beta.hpp"

namespace tiebreak::testing {

/// What "effect" means in a bias test.
enum class effect_measure : unsigned char {
  standardized,  ///< |mean| / sd (Cohen's d): unitless, the default
  absolute,      ///< |mean| in the sample's own units (e.g. ulps of a row scale)
};

/// Outcome of `test_bias`. `biased` is the verdict: significant AND effect > min_effect.
struct bias_test_result {
  std::size_t n = 0;
  double mean = 0;        ///< sample mean
  double sd = 0;          ///< sample standard deviation (n - 1 in the denominator)
  double t = 0;           ///< mean / (sd / sqrt(n)); +-inf when sd == 0 and mean != 0
  double p = 1;           ///< two-sided p value, Student t with n - 1 degrees of freedom
  double effect = 0;      ///< |mean| / sd or |mean|, per `measure`
  double alpha = 0;
  double min_effect = 0;
  effect_measure measure = effect_measure::standardized;
  bool significant = false;  ///< p < alpha
  bool biased = false;       ///< significant && effect > min_effect
  bool valid = true;         ///< false: fewer than 2 samples or a non-finite sample (`biased` is then true)
  std::string problem;       ///< why the test is not valid

  /// "n=1000 mean=0.0123 sd=0.29 t=1.34 p=0.18 effect(|mean|/sd)=0.042 [alpha=0.001 min_effect=0.05]".
  std::string summary() const {
    if (!valid) return "bias test not applicable: " + problem;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "n=%zu mean=%.6g sd=%.6g t=%.6g p=%.6g effect(%s)=%.6g [alpha=%g min_effect=%g]: %s", n,
                  mean, sd, t, p, measure == effect_measure::standardized ? "|mean|/sd" : "|mean|", effect,
                  alpha, min_effect,
                  biased ? "biased (significant and above the effect floor)"
                         : (significant ? "significant but below the effect floor" : "not significant"));
    return buf;
  }
};

/// The regularized incomplete beta I_x(a, b) (`one_minus_x` = 1 − x without cancellation; NaN if
/// the continued fraction does not converge) and the two-sided Student-t tail P(|T| >= |t|) with
/// `df` > 0 degrees of freedom (infinite |t| gives 0; NaN, NaN). One implementation for the
/// library and these tests: the core's (tiebreak/stats/incomplete_beta.hpp, accuracy stated there).
using tiebreak::regularized_incomplete_beta;
using tiebreak::student_t_two_sided_p;

/// Tests whether a sample of signed errors has mean zero.
///
/// Preconditions: `samples` is a forward range of arithmetic values (read twice), 0 < alpha < 1,
/// min_effect >= 0. The verdict `biased` is true iff the two-sided one-sample t test rejects mean 0
/// at level alpha AND the effect (|mean|/sd, or |mean| for effect_measure::absolute) exceeds
/// min_effect. False-failure rate: for independent samples of a distribution with mean exactly 0,
/// P(biased) <= P(p < alpha) = alpha (exact for normal errors, asymptotically otherwise); the effect
/// floor only lowers it. Samples must be independent: aggregate correlated errors (per row, per head)
/// first. A sample with sd == 0 is biased iff its mean is non-zero. NaN/Inf samples and n < 2 make
/// the test invalid, reported as biased with `problem` set.
template <class Range>
bias_test_result test_bias(const Range& samples, double alpha, double min_effect,
                           effect_measure measure = effect_measure::standardized) {
  bias_test_result r;
  r.alpha = alpha;
  r.min_effect = min_effect;
  r.measure = measure;
  long double sum = 0;
  for (const auto& v : samples) {
    const auto x = static_cast<long double>(v);
    if (!std::isfinite(x)) {
      r.valid = false;
      r.biased = true;
      r.problem = "non-finite sample at index " + std::to_string(r.n);
      return r;
    }
    sum += x;
    ++r.n;
  }
  if (r.n < 2) {
    r.valid = false;
    r.biased = true;
    r.problem = "need at least 2 samples, got " + std::to_string(r.n);
    return r;
  }
  const long double mean = sum / static_cast<long double>(r.n);
  long double ss = 0;
  for (const auto& v : samples) {
    const long double dx = static_cast<long double>(v) - mean;
    ss += dx * dx;
  }
  r.mean = static_cast<double>(mean);
  r.sd = static_cast<double>(std::sqrt(ss / static_cast<long double>(r.n - 1)));
  if (r.sd == 0) {
    r.t = r.mean == 0 ? 0 : (r.mean > 0 ? HUGE_VAL : -HUGE_VAL);
    r.p = r.mean == 0 ? 1 : 0;
    r.effect = r.mean == 0 ? 0 : (measure == effect_measure::standardized ? HUGE_VAL : std::fabs(r.mean));
  } else {
    r.t = r.mean / (r.sd / std::sqrt(static_cast<double>(r.n)));
    r.p = student_t_two_sided_p(r.t, static_cast<double>(r.n - 1));
    r.effect = measure == effect_measure::standardized ? std::fabs(r.mean) / r.sd : std::fabs(r.mean);
  }
  if (std::isnan(r.p)) {
    r.valid = false;
    r.biased = true;
    r.problem = "the t distribution's tail did not converge (t=" + std::to_string(r.t) + ")";
    return r;
  }
  r.significant = r.p < alpha;
  r.biased = r.significant && r.effect > min_effect;
  return r;
}

}  // namespace tiebreak::testing
