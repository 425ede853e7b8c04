// SPDX-License-Identifier: Apache-2.0
/// @file The t, binomial and normal laws, built on the core's incomplete beta.
#include <tiebreak/analysis/distributions.hpp>
#include <tiebreak/stats/incomplete_beta.hpp>

#include <cmath>
#include <limits>

namespace tiebreak::analysis {

double incomplete_beta(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1)) return std::numeric_limits<double>::quiet_NaN();
  return regularized_incomplete_beta(a, b, x, 1 - x);
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

double student_t_two_sided_p(double t, double df) { return tiebreak::student_t_two_sided_p(t, df); }

double student_t_cdf(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return std::numeric_limits<double>::quiet_NaN();
  const double tail = 0.5 * student_t_two_sided_p(t, df);  // P(T > |t|)
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double q, double df) {
  if (!(q > 0 && q < 1) || !(df > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (q == 0.5) return 0;
  if (q < 0.5) return -student_t_quantile(1 - q, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < q && hi < 1e300) hi *= 2;
  for (int i = 0; i < 2000 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < q ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double binomial_cdf(std::uint64_t k, std::uint64_t n, double p) {
  if (!(p >= 0 && p <= 1)) return std::numeric_limits<double>::quiet_NaN();
  if (k >= n) return 1;
  if (p == 0) return 1;
  if (p == 1) return 0;
  // P(X <= k) = I_{1−p}(n − k, k + 1).
  return regularized_incomplete_beta(static_cast<double>(n - k), static_cast<double>(k) + 1, 1 - p, p);
}

}  // namespace tiebreak::analysis
