// SPDX-License-Identifier: Apache-2.0
/// @file Tests of bias statistics: distributions against closed forms, moments, t / sign /
/// block-bootstrap tests, drift detection and the per-group accumulator.
#include <tiebreak/analysis/bias.hpp>
#include <tiebreak/analysis/distributions.hpp>
#include <tiebreak/analysis/drift.hpp>
#include <tiebreak/analysis/json.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

namespace {

namespace an = tiebreak::analysis;

// ---- distributions: closed forms --------------------------------------------------------------

TEST(Distributions, StudentTMatchesClosedFormsForOneAndTwoDegreesOfFreedom) {
  for (double t : {-30.0, -2.5, -0.3, 0.0, 0.7, 1.0, 4.0, 100.0}) {
    // df = 1 is the Cauchy law: F(t) = 1/2 + atan(t)/π.
    EXPECT_NEAR(an::student_t_cdf(t, 1), 0.5 + std::atan(t) / std::numbers::pi, 1e-13) << t;
    // df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t²)).
    EXPECT_NEAR(an::student_t_cdf(t, 2), 0.5 + t / (2 * std::sqrt(2 + t * t)), 1e-13) << t;
  }
  // Far tail, relative accuracy: df = 2, P(|T| >= t) = 1 − t / sqrt(2 + t²) = 2 / (sqrt(2 + t²)(t + sqrt(2 + t²))).
  const double t = 1e6;
  const double exact = 2 / (std::sqrt(2 + t * t) * (t + std::sqrt(2 + t * t)));
  EXPECT_NEAR(an::student_t_two_sided_p(t, 2) / exact, 1.0, 1e-10);
}

TEST(Distributions, StudentTTendsToNormalAndQuantileInvertsCdf) {
  // Large df (t tests over millions of errors), against mpmath 1.3 (40 digits):
  // betainc(df/2, 1/2, 0, df/(df + t²), regularized=True). Exercises the log-beta of huge
  // arguments; tolerances are the documented accuracy 1e-16 (df + t²)/t² + 1e-14, times 3.
  const double t196 = 1.959963984540054;
  EXPECT_NEAR(an::student_t_two_sided_p(t196, 1e9) / 0.050000000277295137161, 1.0, 8e-8);
  EXPECT_NEAR(an::student_t_two_sided_p(t196, 1e7) / 0.050000027729512615369, 1.0, 8e-10);
  EXPECT_NEAR(an::student_t_two_sided_p(t196, 1e6) / 0.050000277295221660034, 1.0, 8e-11);
  EXPECT_NEAR(an::student_t_two_sided_p(5.0, 1e4) / 5.8303266136626472905e-7, 1.0, 1e-13);
  EXPECT_NEAR(an::student_t_two_sided_p(1.96, 1e4) / 0.050023520231833049539, 1.0, 1e-12);
  EXPECT_NEAR(an::student_t_two_sided_p(30.0, 1e6) / 1.2020094233663437883e-197, 1.0, 1e-12);
  EXPECT_NEAR(an::normal_cdf(-1.959963984540054), 0.025, 1e-15);
  for (double df : {1.0, 3.0, 10.0, 1000.0})
    for (double q : {0.001, 0.1, 0.5, 0.975, 0.9999})
      EXPECT_NEAR(an::student_t_cdf(an::student_t_quantile(q, df), df), q, 1e-11) << df << " " << q;
  // df = 2 quantile closed form: t = (2q − 1) sqrt(2 / (4 q (1 − q))).
  const double q = 0.975;
  EXPECT_NEAR(an::student_t_quantile(q, 2), (2 * q - 1) * std::sqrt(2 / (4 * q * (1 - q))), 1e-10);
}

TEST(Distributions, BinomialCdfMatchesDirectSums) {
  for (std::uint64_t n : {1u, 7u, 20u, 61u})
    for (double p : {0.5, 0.13}) {
      double acc = 0;
      for (std::uint64_t k = 0; k < n; ++k) {
        acc += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) +
                        k * std::log(p) + (n - k) * std::log1p(-p));
        EXPECT_NEAR(an::binomial_cdf(k, n, p) / acc, 1.0, 1e-11) << n << " " << k << " " << p;
      }
      EXPECT_EQ(an::binomial_cdf(n, n, p), 1.0);
    }
  EXPECT_TRUE(std::isnan(an::incomplete_beta(-1, 1, 0.5)));
}

// ---- moments and tests ------------------------------------------------------------------------

TEST(RunningMoments, MatchesTwoPassAndMergesExactlyInDistribution) {
  const std::vector<double> x{1, 2, 3, 4, 5, -1, 0, 0, 7.5};
  an::running_moments m;
  m.push(x);
  double mean = 0;
  for (double v : x) mean += v;
  mean /= x.size();
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  EXPECT_NEAR(m.mean, mean, 1e-15);
  EXPECT_NEAR(m.variance(), ss / (x.size() - 1), 1e-14);
  EXPECT_EQ(m.positive, 6u);
  EXPECT_EQ(m.negative, 1u);
  EXPECT_EQ(m.zero, 2u);
  EXPECT_EQ(m.min, -1);
  EXPECT_EQ(m.max, 7.5);
  an::running_moments a, b;
  a.push(std::span(x).first(4));
  b.push(std::span(x).subspan(4));
  a.merge(b);
  EXPECT_EQ(a.n, m.n);
  EXPECT_NEAR(a.mean, m.mean, 1e-15);
  EXPECT_NEAR(a.m2, m.m2, 1e-13);
  EXPECT_EQ(a.positive + a.negative + a.zero, 9u);
}

TEST(RunningMoments, NoCancellationAtLargeOffset) {
  // Values 1e9 + {0, 1, 2}: the naive sum-of-squares formula loses every digit of the variance.
  an::running_moments m;
  for (double v : {1e9, 1e9 + 1, 1e9 + 2}) m.push(v);
  EXPECT_DOUBLE_EQ(m.variance(), 1.0);
}

TEST(RunningMoments, NonFiniteValuesAreCountedNotUsed) {
  an::running_moments m;
  m.push(std::vector<double>{1, NAN, 3, INFINITY, -INFINITY});
  EXPECT_EQ(m.n, 2u);
  EXPECT_EQ(m.nonfinite, 3u);
  EXPECT_EQ(m.mean, 2);
}

TEST(TTest, HandComputedExample) {
  // {1, 2, 3, 4, 5}: mean 3, sd sqrt(2.5), t = 3 / sqrt(0.5) = 3 sqrt 2, df 4.
  an::running_moments m;
  m.push(std::vector<double>{1, 2, 3, 4, 5});
  const auto r = an::t_test(m);
  EXPECT_NEAR(r.t, 3 * std::sqrt(2.0), 1e-14);
  EXPECT_EQ(r.df, 4);
  EXPECT_NEAR(r.cohen_d, 3 / std::sqrt(2.5), 1e-14);
  EXPECT_NEAR(r.hedges_g, r.cohen_d * (1 - 3.0 / 15), 1e-14);
  // p = I_{4/(4+18)}(2, 1/2); with df = 4 the t CDF has the closed form
  // F(t) = 1/2 + (3/8) x (1 − x²/12) / sqrt(1 + t²/4)... use the standard one:
  // P(|T| > t) = 1 − (3/2) s + (1/2) s³ with s = t / sqrt(4 + t²)... which for df = 4 is
  // 1 − s (3 − s²) / 2.
  const double s = r.t / std::sqrt(4 + r.t * r.t);
  EXPECT_NEAR(r.p_value, 1 - s * (3 - s * s) / 2, 1e-13);
  EXPECT_LT(r.ci_low, 3);
  EXPECT_GT(r.ci_high, 3);
  EXPECT_NEAR(r.ci_high - 3, an::student_t_quantile(0.975, 4) * std::sqrt(0.5), 1e-10);
}

TEST(TTest, DegenerateSamples) {
  an::running_moments one;
  one.push(2.0);
  EXPECT_EQ(an::t_test(one).p_value, 1);
  an::running_moments same;
  same.push(std::vector<double>{0.5, 0.5, 0.5});
  const auto r = an::t_test(same);
  EXPECT_TRUE(std::isinf(r.t));
  EXPECT_EQ(r.p_value, 0);
  an::running_moments zeros;
  zeros.push(std::vector<double>{0, 0});
  EXPECT_EQ(an::t_test(zeros).t, 0);
  EXPECT_EQ(an::t_test(zeros).p_value, 1);
}

TEST(SignTest, ExactBinomialTails) {
  // 10 of 10 positive: p = 2 · 2^-10.
  EXPECT_NEAR(an::sign_test(10, 0).p_value / (2 * std::ldexp(1.0, -10)), 1.0, 1e-14);
  // 8 of 10: p = 2 · (C(10,0) + C(10,1) + C(10,2)) / 1024 = 112 / 1024.
  EXPECT_NEAR(an::sign_test(8, 2).p_value, 112.0 / 1024, 1e-15);
  EXPECT_EQ(an::sign_test(5, 5).p_value, 1);
  const auto r = an::sign_test(30, 10, 7);
  EXPECT_EQ(r.zero, 7u);
  EXPECT_DOUBLE_EQ(r.sign_skew, 0.5);
  EXPECT_DOUBLE_EQ(r.share_positive, 0.75);
}

TEST(TTestStatistical, DetectsSmallBiasButReportsItsSmallEffect) {
  // Seeded. False-failure rate: with n = 200000, mean 0.02 sd 1, t ≈ 8.9 (p < 1e-15); the
  // chance of t < 5 is < 1e-4. The null sample fails p > 1e-3 with probability 1e-3.
  std::mt19937_64 rng(12345);
  std::normal_distribution<double> biased(0.02, 1.0), null(0.0, 1.0);
  an::running_moments b, z;
  for (int i = 0; i < 200000; ++i) {
    b.push(biased(rng));
    z.push(null(rng));
  }
  const auto rb = an::t_test(b), rz = an::t_test(z);
  EXPECT_GT(rb.t, 5);
  EXPECT_LT(rb.p_value, 1e-6);
  EXPECT_NEAR(rb.cohen_d, 0.02, 0.01);  // "significant" but tiny: the caution of MECHANISM.md
  EXPECT_GT(rz.p_value, 1e-3);
  EXPECT_LT(rb.ci_low, 0.02);
  EXPECT_GT(rb.ci_high, 0.02);
}

// ---- block bootstrap --------------------------------------------------------------------------

std::vector<double> ar1(std::size_t n, double phi, double mean, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> e(0, 1);
  std::vector<double> x(n);
  double prev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    prev = phi * prev + e(rng);
    x[i] = mean + prev;
  }
  return x;
}

TEST(BlockBootstrap, IsDeterministicForASeed) {
  const auto x = ar1(1000, 0.3, 0.1, 9);
  const auto a = an::block_bootstrap_mean(x, {.block_length = 10, .resamples = 500, .seed = 1});
  const auto b = an::block_bootstrap_mean(x, {.block_length = 10, .resamples = 500, .seed = 1});
  const auto c = an::block_bootstrap_mean(x, {.block_length = 10, .resamples = 500, .seed = 2});
  EXPECT_EQ(a.se, b.se);
  EXPECT_EQ(a.ci_low, b.ci_low);
  EXPECT_NE(a.se, c.se);
  EXPECT_EQ(a.block_length, 10u);
}

TEST(BlockBootstrap, ConstantSeriesHasZeroSpread) {
  const std::vector<double> x(100, 2.5);
  const auto r = an::block_bootstrap_mean(x, {.resamples = 100});
  EXPECT_EQ(r.se, 0);
  EXPECT_EQ(r.ci_low, 2.5);
  EXPECT_EQ(r.ci_high, 2.5);
  EXPECT_NEAR(r.p_value, 1.0 / 101, 1e-15);  // every centred resample is 0, never >= 2.5
}

TEST(BlockBootstrapStatistical, StandardErrorMatchesAr1TheoryOnlyWithBlocks) {
  // AR(1), phi = 0.6, unit innovations: Var(mean) ≈ σ_x² (1 + φ) / ((1 − φ) n), σ_x² = 1 / (1 − φ²).
  // Seeded. The bootstrap se has ~5 % relative sampling error here; the ±20 % band fails with
  // probability < 1e-4. iid resampling (block 1) must undershoot by sqrt((1 − φ)/(1 + φ)) = 0.5.
  const double phi = 0.6;
  const std::size_t n = 40000;
  const auto x = ar1(n, phi, 0.0, 77);
  const double var_x = 1 / (1 - phi * phi);
  const double theory = std::sqrt(var_x * (1 + phi) / ((1 - phi) * n));
  const auto blocks = an::block_bootstrap_mean(x, {.block_length = 100, .resamples = 1000, .seed = 3});
  const auto iid = an::block_bootstrap_mean(x, {.block_length = 1, .resamples = 1000, .seed = 3});
  EXPECT_NEAR(blocks.se / theory, 1.0, 0.2);
  EXPECT_NEAR(iid.se / theory, 0.5, 0.1);
}

TEST(BlockBootstrapStatistical, PValueSeparatesBiasFromNoise) {
  // Seeded. Biased: mean 0.2 with se ≈ 0.02 (10 se away): p hits its floor 1/(B+1).
  // Null: p < 0.01 with probability 0.01.
  const auto biased = ar1(20000, 0.5, 0.2, 5);
  const auto null = ar1(20000, 0.5, 0.0, 6);
  const auto rb = an::block_bootstrap_mean(biased, {.resamples = 999});
  const auto rn = an::block_bootstrap_mean(null, {.resamples = 999});
  EXPECT_DOUBLE_EQ(rb.p_value, 1.0 / 1000);
  EXPECT_GT(rn.p_value, 0.01);
  EXPECT_LT(rb.ci_low, 0.2);
  EXPECT_GT(rb.ci_high, 0.2);
}

// ---- drift ------------------------------------------------------------------------------------

TEST(Cusum, ClosedFormOnAConstantShift) {
  // Known sigma 1, k = 0.5, h = 5: a constant value 1 adds 0.5 per step, so s_pos = 0.5 t and the
  // first alarm is at the 11th value (s_pos = 5.5 > 5), index 10. Cumulative sum = t exactly.
  an::drift_detector d({.target_mean = 0, .sigma = 1, .k = 0.5, .h = 5});
  for (int i = 0; i < 20; ++i) {
    const auto s = d.push(1.0);
    EXPECT_DOUBLE_EQ(s.s_pos, 0.5 * (i + 1));
    EXPECT_EQ(s.s_neg, 0);
    EXPECT_EQ(s.cumulative_sum, i + 1);
    EXPECT_EQ(s.alarm, i >= 10 ? 1 : 0) << i;
  }
  EXPECT_EQ(d.first_alarm(), 10u);
  EXPECT_EQ(d.first_alarm_direction(), 1);
}

TEST(Cusum, DownwardShiftAndNaN) {
  an::drift_detector d({.sigma = 2, .k = 0.5, .h = 1});
  d.push(-2);  // z = -1: s_neg = 0.5
  d.push(NAN);
  EXPECT_EQ(d.nan_count(), 1u);
  const auto s = d.push(-4);  // z = -2: s_neg = 0.5 + 1.5 = 2 > 1
  EXPECT_DOUBLE_EQ(s.s_neg, 2.0);
  EXPECT_EQ(s.alarm, -1);
  EXPECT_EQ(s.step, 2u);
  EXPECT_EQ(d.first_alarm(), 2u);
}

TEST(CusumStatistical, EstimatedSigmaCatchesBiasFromTheFirstStep) {
  // Per-step sums with a bias of 0.5 sd from step 0 (the paper's case). Seeded. Expected run
  // length to alarm for a 0.5 sd shift with k = 0.5, h = 5: ~30 steps; failing to alarm within
  // 400 steps has probability < 1e-6. Null series: the ARL is ~930 per side, so an alarm within
  // 100 steps has probability ~0.2 per seed; this seed is fixed and checked.
  std::mt19937_64 rng(99);
  std::normal_distribution<double> biased(0.5, 1.0), null(0.0, 1.0);
  an::drift_detector db({.warmup_steps = 30}), dn({.warmup_steps = 30});
  for (int i = 0; i < 400; ++i) {
    db.push(biased(rng));
    if (i < 100) dn.push(null(rng));
  }
  ASSERT_TRUE(db.first_alarm().has_value());
  EXPECT_EQ(db.first_alarm_direction(), 1);
  EXPECT_LT(*db.first_alarm(), 400u);
  EXPECT_NEAR(db.sigma(), 1.0, 0.35);  // from 30 values
  EXPECT_FALSE(dn.first_alarm().has_value());
  EXPECT_NEAR(db.cumulative_sums().back(), 200, 80);  // 400 × 0.5 ± 4 sd
}

TEST(CusumStatistical, StepChangeIsFoundSoonAfterItHappens) {
  // Mean 0 for 300 steps, then 1 sd. Known sigma. Seeded; the in-control ARL (~470 two-sided)
  // makes a false alarm before 300 a ~45 % event in general, so the seed is fixed and the
  // assertion is on the detection delay: for a 1 sd shift the ARL is ~10 steps, and a delay
  // > 60 has probability < 1e-6.
  std::mt19937_64 rng(4);
  std::normal_distribution<double> e(0.0, 1.0);
  an::drift_detector d({.sigma = 1, .h = 8});  // h = 8: in-control ARL ~ 2e4
  for (int i = 0; i < 400; ++i) d.push(e(rng) + (i >= 300 ? 1.0 : 0.0));
  ASSERT_TRUE(d.first_alarm().has_value());
  EXPECT_GE(*d.first_alarm(), 300u);
  EXPECT_LT(*d.first_alarm(), 360u);
}

// ---- per-group accumulator --------------------------------------------------------------------

TEST(BiasAccumulator, GroupsMatchSeparateMomentsAndStepSumsFeedDrift) {
  an::bias_accumulator acc({.sigma = 1, .k = 0.5, .h = 5});
  const an::group_key h0{2, 0}, h1{2, 1};
  an::running_moments ref0;
  for (int step = 0; step < 12; ++step) {
    const std::vector<double> e0{0.25, 0.5, 0.25};  // per-step sum 1: a steady bias
    const std::vector<double> e1{1.0, -1.0};        // per-step sum 0
    acc.push(h0, e0);
    acc.push(h1, std::vector<float>{1.0f, -1.0f});
    ref0.push(e0);
    const auto steps = acc.end_step();
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0].first, h0);  // key order
    EXPECT_DOUBLE_EQ(steps[0].second.cumulative_sum, step + 1.0);
    EXPECT_EQ(steps[1].second.cumulative_sum, 0.0);
  }
  const auto rep = acc.report();
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_EQ(rep[0].summary.moments.n, ref0.n);
  EXPECT_DOUBLE_EQ(rep[0].summary.moments.mean, ref0.mean);
  EXPECT_EQ(rep[0].first_alarm, 10u);  // same closed form as Cusum.ClosedFormOnAConstantShift
  EXPECT_FALSE(rep[1].first_alarm.has_value());
  EXPECT_EQ(rep[1].summary.sign.positive, 12u);
  EXPECT_EQ(rep[1].summary.sign.negative, 12u);
  EXPECT_EQ(rep[0].step_sums.n, 12u);
  EXPECT_DOUBLE_EQ(rep[0].cumulative_sum, 12.0);
  EXPECT_EQ(acc.steps(), 12u);
  EXPECT_NE(acc.drift(h0), nullptr);
  EXPECT_EQ(acc.drift({9, 9}), nullptr);
}

TEST(BiasJson, FieldsAndNonFiniteAsStrings) {
  an::running_moments m;
  m.push(std::vector<double>{0.5, 0.5});
  const nlohmann::json j = an::t_test(m);
  EXPECT_EQ(j["mean"], 0.5);
  EXPECT_EQ(j["t"], "inf");  // docs/json.md
  EXPECT_EQ(j["p_value"], 0.0);
  const nlohmann::json s = an::sign_test(3, 1);
  EXPECT_EQ(s["positive"], 3);
}

}  // namespace
