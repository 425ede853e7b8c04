// SPDX-License-Identifier: Apache-2.0
/// @file The few distribution functions the tests need: Student t, binomial, normal.
#pragma once

#include <cstdint>

namespace tiebreak::analysis {

/// Regularised incomplete beta I_x(a, b). Preconditions: a > 0, b > 0, 0 <= x <= 1; otherwise NaN.
/// The core's tiebreak::regularized_incomplete_beta (tiebreak/stats/incomplete_beta.hpp, where its
/// measured accuracy is stated), which the header-only tiebreak::testing shares.
[[nodiscard]] double incomplete_beta(double a, double b, double x);

/// P(|T| >= |t|) for Student's t with `df` > 0 degrees of freedom. NaN in, NaN out.
/// Relative accuracy about 1e-16 · (df + t²) / t² + 1e-14 (5e-8 at df = 1e9, |t| = 2).
/// Same function as tiebreak::student_t_two_sided_p.
[[nodiscard]] double student_t_two_sided_p(double t, double df);

/// P(T <= t) for Student's t with `df` > 0 degrees of freedom.
[[nodiscard]] double student_t_cdf(double t, double df);

/// The q-quantile of Student's t, 0 < q < 1 (bisection on student_t_cdf to ~1e-12 relative).
[[nodiscard]] double student_t_quantile(double q, double df);

/// P(X <= k) for X ~ Binomial(n, p), 0 <= p <= 1.
[[nodiscard]] double binomial_cdf(std::uint64_t k, std::uint64_t n, double p);

/// Standard normal CDF.
[[nodiscard]] double normal_cdf(double z);

}  // namespace tiebreak::analysis
