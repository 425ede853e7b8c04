// SPDX-License-Identifier: Apache-2.0
/// @file Tests of tiebreak/testing/stats.hpp: the Student-t tail and the bias test's verdicts and
/// false-failure rate.
#include "tiebreak/testing/stats.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/testing/adversarial.hpp"

namespace tt = tiebreak::testing;

namespace {

/// Oracle by a different method: 1 - 2 * integral_0^|t| of the t density, composite Simpson rule
/// with 200000 panels (error far below the 1e-9 asked of it for the t used here).
double t_two_sided_by_quadrature(double t, double df) {
  const double c = std::exp(std::lgamma((df + 1) / 2) - std::lgamma(df / 2)) / std::sqrt(df * M_PI);
  auto pdf = [&](double x) { return c * std::pow(1 + x * x / df, -(df + 1) / 2); };
  const int n = 200000;
  const double h = std::fabs(t) / n;
  double s = pdf(0) + pdf(std::fabs(t));
  for (int i = 1; i < n; ++i) s += (i % 2 ? 4 : 2) * pdf(i * h);
  return 1 - 2 * s * h / 3;
}

}  // namespace

TEST(StudentT, IsTheCoresImplementation) {
  // One implementation of the tail for this library and tiebreak::analysis: the core's
  // (tiebreak/stats/incomplete_beta.hpp, tested against mpmath in tests/host/stats).
  double (*const tail)(double, double) noexcept = &tt::student_t_two_sided_p;
  double (*const beta)(double, double, double, double) noexcept = &tt::regularized_incomplete_beta;
  EXPECT_EQ(tail, &tiebreak::student_t_two_sided_p);
  EXPECT_EQ(beta, &tiebreak::regularized_incomplete_beta);
}

TEST(StudentT, MatchesQuadrature) {
  for (double df : {1.0, 2.0, 3.0, 7.0, 10.0, 29.0, 100.0, 1000.0}) {
    for (double t : {0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, -2.0}) {
      EXPECT_NEAR(tt::student_t_two_sided_p(t, df), t_two_sided_by_quadrature(t, df), 1e-9) << "t=" << t << " df=" << df;
    }
  }
}

TEST(StudentT, MatchesPublishedCriticalValues) {
  // Two-sided 5 % and 1 % critical values (standard tables, 6+ significant digits).
  EXPECT_NEAR(tt::student_t_two_sided_p(12.7062047, 1), 0.05, 1e-8);
  EXPECT_NEAR(tt::student_t_two_sided_p(2.22813885, 10), 0.05, 1e-8);
  EXPECT_NEAR(tt::student_t_two_sided_p(2.84533971, 20), 0.01, 1e-8);
  EXPECT_NEAR(tt::student_t_two_sided_p(1.95996398, 1e9), 0.05, 1e-8);  // normal limit
  // Large df, far tail: the first-order expansion of the t tail about the normal one,
  // P_t(T > t) = Q(t) + phi(t) (t^3 + t) / (4 df) + O(df^-2).
  const double t = 6.0, df = 1e6;
  const double q = std::erfc(t / std::sqrt(2.0)) / 2, phi = std::exp(-t * t / 2) / std::sqrt(2 * M_PI);
  EXPECT_NEAR(tt::student_t_two_sided_p(t, df) / (2 * q), 1 + phi * (t * t * t + t) / (4 * df) / q, 1e-6);
  EXPECT_EQ(tt::student_t_two_sided_p(0.0, 5), 1.0);
  EXPECT_EQ(tt::student_t_two_sided_p(std::numeric_limits<double>::infinity(), 5), 0.0);
  EXPECT_TRUE(std::isnan(tt::student_t_two_sided_p(std::nan(""), 5)));
}

TEST(TestBias, HandComputedSample) {
  // {1, 2, 3, 4, 5}: mean 3, sd sqrt(2.5), t = 3 / (sqrt(2.5)/sqrt(5)) = 3 sqrt 2 = 4.2426.
  const std::vector<int> s{1, 2, 3, 4, 5};
  const auto r = tt::test_bias(s, 0.05, 0.5);
  EXPECT_EQ(r.n, 5u);
  EXPECT_DOUBLE_EQ(r.mean, 3.0);
  EXPECT_DOUBLE_EQ(r.sd, std::sqrt(2.5));
  EXPECT_NEAR(r.t, 3 * std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(r.p, t_two_sided_by_quadrature(r.t, 4), 1e-9);  // 0.0132
  EXPECT_TRUE(r.significant);
  EXPECT_NEAR(r.effect, 3 / std::sqrt(2.5), 1e-12);
  EXPECT_TRUE(r.biased);
  EXPECT_FALSE(tt::test_bias(s, 0.01, 0.5).biased);  // p = 0.013 > 0.01
  EXPECT_FALSE(tt::test_bias(s, 0.05, 2.0).biased);  // effect 1.9 < 2
  const auto a = tt::test_bias(s, 0.05, 2.5, tt::effect_measure::absolute);  // |mean| 3 > 2.5
  EXPECT_TRUE(a.biased);
  EXPECT_DOUBLE_EQ(a.effect, 3.0);
}

TEST(TestBias, DegenerateSamples) {
  EXPECT_FALSE(tt::test_bias(std::vector<double>{0, 0, 0}, 0.05, 0).biased);  // sd 0, mean 0
  const auto c = tt::test_bias(std::vector<double>{0.5, 0.5, 0.5}, 0.05, 0.1);  // sd 0, mean != 0
  EXPECT_TRUE(c.biased);
  EXPECT_EQ(c.p, 0.0);
  const auto one = tt::test_bias(std::vector<double>{1.0}, 0.05, 0.1);
  EXPECT_FALSE(one.valid);
  EXPECT_TRUE(one.biased);
  const auto nan = tt::test_bias(std::vector<double>{1.0, std::nan(""), 2.0}, 0.05, 0.1);
  EXPECT_FALSE(nan.valid);
  EXPECT_NE(nan.summary().find("non-finite sample at index 1"), std::string::npos);
}

TEST(TestBias, FalseFailureRateIsAlpha) {
  // 4000 seeded samples of 30 symmetric errors (uniform on [-0.5, 0.5], mean exactly 0); at
  // alpha = 0.05 with no effect floor the test should reject ~5 %: 200 expected, binomial sd 13.8.
  tt::adversarial::splitmix64 rng(2024);
  int rejected = 0;
  const int trials = 4000;
  for (int k = 0; k < trials; ++k) {
    std::vector<double> s(30);
    for (double& x : s) x = static_cast<double>(rng.next() >> 11) * 0x1p-53 - 0.5;
    rejected += tt::test_bias(s, 0.05, 0.0).biased ? 1 : 0;
  }
  EXPECT_GE(rejected, 200 - 4 * 14);
  EXPECT_LE(rejected, 200 + 4 * 14);
  // An effect floor of 0.5 sd can only lower it: a true zero mean rarely shows |mean|/sd > 0.5.
  tt::adversarial::splitmix64 rng2(2024);
  int rejected_floor = 0;
  for (int k = 0; k < trials; ++k) {
    std::vector<double> s(30);
    for (double& x : s) x = static_cast<double>(rng2.next() >> 11) * 0x1p-53 - 0.5;
    rejected_floor += tt::test_bias(s, 0.05, 0.5).biased ? 1 : 0;
  }
  EXPECT_LT(rejected_floor, rejected);
  RecordProperty("null_rejections_alpha_0_05", rejected);
  RecordProperty("null_rejections_with_floor_0_5", rejected_floor);
}
