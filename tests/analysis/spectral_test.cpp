// SPDX-License-Identifier: Apache-2.0
/// @file Tests of spectral norms (known spectra, warm starts, slices, determinism) and of the
/// growth monitor (closed-form exponential growth, planted change of rate).
#include <tiebreak/analysis/json.hpp>
#include <tiebreak/analysis/spectral.hpp>

#include <Eigen/QR>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

namespace an = tiebreak::analysis;
using Eigen::MatrixXd;
using Eigen::VectorXd;
using row_major_d = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using row_major_f = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

MatrixXd random_orthonormal(Eigen::Index n, Eigen::Index k, std::mt19937_64& rng) {
  std::normal_distribution<double> g;
  const MatrixXd a = MatrixXd::NullaryExpr(n, k, [&] { return g(rng); });
  Eigen::HouseholderQR<MatrixXd> qr(a);
  return qr.householderQ() * MatrixXd::Identity(n, k);
}

// M = U diag(s) Vᵀ with random orthonormal U (m × r), V (n × r): singular values exactly s.
MatrixXd with_spectrum(Eigen::Index m, Eigen::Index n, const VectorXd& s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const MatrixXd u = random_orthonormal(m, s.size(), rng), v = random_orthonormal(n, s.size(), rng);
  return u * s.asDiagonal() * v.transpose();
}

VectorXd geometric(Eigen::Index r, double top, double ratio) {
  VectorXd s(r);
  for (Eigen::Index i = 0; i < r; ++i) s[i] = top * std::pow(ratio, static_cast<double>(i));
  return s;
}

TEST(SpectralNorm, BothMethodsRecoverAPlantedSpectrum) {
  const MatrixXd m = with_spectrum(60, 90, geometric(40, 7.0, 0.8), 1);
  for (auto method : {an::spectral_method::lanczos, an::spectral_method::power}) {
    const auto r = an::spectral_norm(an::view_of(m), {.method = method, .rel_tol = 1e-12});
    EXPECT_TRUE(r.converged);
    EXPECT_NEAR(r.sigma, 7.0, 7.0 * 1e-11);
    EXPECT_LE(r.sigma, 7.0 * (1 + 1e-15));  // a Rayleigh quotient never exceeds sigma_1
    // The vectors are a singular pair: M v ≈ sigma u.
    ASSERT_EQ(r.left.size(), 60);
    ASSERT_EQ(r.right.size(), 90);
    EXPECT_LT((m * r.right - r.sigma * r.left).norm(), 1e-5);
    EXPECT_NEAR(r.left.norm(), 1.0, 1e-12);
  }
}

TEST(SpectralNorm, LanczosMeetsTolWhenTopValuesAreClose) {
  // sigma_1 = 1, sigma_2 = 0.999: power iteration needs thousands of passes, Lanczos dozens.
  VectorXd s = geometric(50, 0.999, 0.95);
  s[0] = 1.0;
  const MatrixXd m = with_spectrum(200, 150, s, 2);
  const auto r = an::spectral_norm(an::view_of(m), {.rel_tol = 1e-8});
  EXPECT_TRUE(r.converged);
  EXPECT_NEAR(r.sigma, 1.0, 1e-8);
  EXPECT_LT(r.iterations, 80);
  EXPECT_LE(r.error_estimate, 1e-8);
}

TEST(SpectralNorm, LayoutAndPrecisionDoNotMatter) {
  const MatrixXd m = with_spectrum(48, 33, geometric(20, 3.0, 0.7), 3);
  const row_major_d rm = m;
  const row_major_f rf = m.cast<float>();
  const an::spectral_options o{.rel_tol = 1e-12};
  const double col = an::spectral_norm(an::view_of(m), o).sigma;
  const double row = an::spectral_norm(an::view_of(rm), o).sigma;
  const double tr = an::spectral_norm(an::view_of(m).transposed(), o).sigma;
  EXPECT_NEAR(col, 3.0, 3e-11);
  EXPECT_NEAR(row, 3.0, 3e-11);
  EXPECT_NEAR(tr, 3.0, 3e-11);
  // float storage: the norm of the rounded matrix, within float rounding of 3.
  const double f = an::spectral_norm(an::view_of(rf), o).sigma;
  EXPECT_NEAR(f, an::exact_spectrum(an::view_of(rf)).spectral_norm, 1e-10);
  EXPECT_NEAR(f, 3.0, 1e-6);
  // A strided view (every other column) is copied internally and gives the exact answer.
  const an::matrix_view<double> strided{m.data(), m.rows(), m.cols() / 2, 1, 2 * m.rows()};
  EXPECT_NEAR(an::spectral_norm(strided, o).sigma, an::exact_spectrum(strided).spectral_norm, 1e-10);
}

TEST(SpectralNorm, EdgeCases) {
  const MatrixXd zero = MatrixXd::Zero(5, 4);
  for (auto method : {an::spectral_method::lanczos, an::spectral_method::power}) {
    const auto r = an::spectral_norm(an::view_of(zero), {.method = method});
    EXPECT_EQ(r.sigma, 0);
    EXPECT_TRUE(r.converged);
  }
  MatrixXd one(1, 1);
  one << -2.5;
  EXPECT_DOUBLE_EQ(an::spectral_norm(an::view_of(one)).sigma, 2.5);
  const VectorXd v = VectorXd::LinSpaced(10, -1, 2);  // a column: its 2-norm
  EXPECT_NEAR(an::spectral_norm(an::view_of(v)).sigma, v.norm(), 1e-14);
  const MatrixXd empty(0, 3);
  EXPECT_EQ(an::spectral_norm(an::view_of(empty)).sigma, 0);
  MatrixXd bad = MatrixXd::Ones(4, 4);
  bad(1, 2) = NAN;
  const auto r = an::spectral_norm(an::view_of(bad));
  EXPECT_TRUE(std::isnan(r.sigma));
  EXPECT_FALSE(r.converged);
  // Rank one: exact after one Lanczos step.
  const MatrixXd r1 = VectorXd::LinSpaced(7, 1, 7) * VectorXd::LinSpaced(5, -2, 2).transpose();
  EXPECT_NEAR(an::spectral_norm(an::view_of(r1)).sigma, VectorXd::LinSpaced(7, 1, 7).norm() *
                                                            VectorXd::LinSpaced(5, -2, 2).norm(), 1e-12);
}

TEST(SpectralNorm, ThreadCountDoesNotChangeABit) {
  // > 512 lines so the operator runs in several chunks.
  const MatrixXd m = with_spectrum(1500, 200, geometric(100, 5.0, 0.97), 4);
  const auto a = an::spectral_norm(an::view_of(m), {.rel_tol = 1e-10, .threads = 1});
  const auto b = an::spectral_norm(an::view_of(m), {.rel_tol = 1e-10, .threads = 2});
  const auto c = an::spectral_norm(an::view_of(m), {.rel_tol = 1e-10, .threads = 3});
  EXPECT_EQ(a.sigma, b.sigma);
  EXPECT_EQ(a.sigma, c.sigma);
  EXPECT_EQ(a.iterations, c.iterations);
  EXPECT_TRUE(a.left == c.left);
  EXPECT_NEAR(a.sigma, 5.0, 5e-9);
}

TEST(SpectralNorm, WarmStartNeedsFewerPasses) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g;
  const MatrixXd m = with_spectrum(64, 768, geometric(64, 2.0, 0.97), 6);
  const MatrixXd next = m + 1e-4 * MatrixXd::NullaryExpr(64, 768, [&] { return g(rng); });
  const an::spectral_options o{.method = an::spectral_method::power, .rel_tol = 1e-8};
  const auto cold = an::spectral_norm(an::view_of(m), o);
  const auto warm = an::spectral_norm(an::view_of(next), o, &cold);
  const auto cold_next = an::spectral_norm(an::view_of(next), o);
  EXPECT_TRUE(warm.converged);
  EXPECT_LT(warm.iterations * 5, cold_next.iterations);
  const double exact = an::exact_spectrum(an::view_of(next)).spectral_norm;
  EXPECT_NEAR(warm.sigma, exact, 1e-7 * exact);
  // A warm start of the wrong shape is ignored, not misused.
  const MatrixXd other = MatrixXd::Identity(3, 3);
  EXPECT_DOUBLE_EQ(an::spectral_norm(an::view_of(other), o, &cold).sigma, 1.0);
}

TEST(SpectralTracker, PerHeadSlicesMatchExactSvdsOverSteps) {
  // 12 heads of a 768 × 768 W_Q (64-row slices), float, drifting over 5 steps by ~1 % per step.
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g(0.0f, 0.02f);
  row_major_f w = row_major_f::NullaryExpr(768, 768, [&] { return g(rng); });
  for (int h = 0; h < 12; ++h)  // each head gets its own dominant direction above the noise
    w.middleRows(h * 64, 64) += (1.0f + 0.1f * h) * VectorXd::Random(64).normalized().cast<float>() *
                                 VectorXd::Random(768).normalized().cast<float>().transpose();
  const an::spectral_options o{.method = an::spectral_method::power, .rel_tol = 1e-8};
  an::spectral_tracker t1(o, 1), t2(o, 2), cold(o, 1);
  for (int step = 0; step < 5; ++step) {
    const auto slices = an::split_rows(an::view_of(w), 64);
    ASSERT_EQ(slices.size(), 12u);
    const auto r1 = t1.push(slices);
    const auto r2 = t2.push(slices);
    cold.reset();
    const auto rc = cold.push(slices);
    EXPECT_EQ(r1.sigma, r2.sigma);  // threads never change a bit
    EXPECT_TRUE(r1.all_converged());
    for (int h = 0; h < 12; ++h) {
      const double exact = an::exact_spectrum(slices[h]).spectral_norm;
      EXPECT_NEAR(r1.sigma[h], exact, 1e-7 * exact) << "step " << step << " head " << h;
    }
    if (step > 0) {
      EXPECT_LT(2 * r1.total_passes, rc.total_passes);  // warm starts at least halve the work
    }
    w += row_major_f::NullaryExpr(768, 768, [&] { return 0.01f * g(rng); });
  }
  EXPECT_EQ(t1.steps(), 5u);
  const auto cols = an::split_cols(an::view_of(w), 64);
  EXPECT_THROW(t1.push(std::span<const an::matrix_view<float>>(cols)), std::invalid_argument);
}

TEST(ExactSpectrum, RanksOfKnownSpectra) {
  // r equal singular values: stable rank = effective rank = r.
  VectorXd flat = VectorXd::Constant(6, 2.0);
  const auto a = an::exact_spectrum(an::view_of(MatrixXd(with_spectrum(20, 10, flat, 8))));
  EXPECT_NEAR(a.stable_rank, 6, 1e-10);
  EXPECT_NEAR(a.effective_rank, 6, 1e-6);
  // s = (3, 1): stable rank (9 + 1)/9; effective rank exp(−(¾ ln ¾ + ¼ ln ¼)).
  VectorXd s(2);
  s << 3, 1;
  const auto b = an::exact_spectrum(an::view_of(MatrixXd(with_spectrum(8, 5, s, 9))));
  EXPECT_NEAR(b.stable_rank, 10.0 / 9, 1e-12);
  EXPECT_NEAR(b.effective_rank, std::exp(-(0.75 * std::log(0.75) + 0.25 * std::log(0.25))), 1e-8);
  EXPECT_NEAR(b.frobenius_norm, std::sqrt(10.0), 1e-12);
  const auto c = an::check_spectral_norm(an::view_of(MatrixXd(with_spectrum(8, 5, s, 9))), 3.0 * (1 + 1e-3));
  EXPECT_NEAR(c.rel_error, 1e-3, 1e-9);
  EXPECT_NEAR(an::frobenius_norm(an::view_of(MatrixXd(with_spectrum(8, 5, s, 9)))), std::sqrt(10.0), 1e-12);
  MatrixXd huge = MatrixXd::Constant(2, 2, 1e300);  // no overflow in the Frobenius norm
  EXPECT_NEAR(an::frobenius_norm(an::view_of(huge)) / 2e300, 1.0, 1e-15);
}

TEST(GrowthFit, ExactExponentialGrowth) {
  std::vector<double> step, logs;
  for (int i = 0; i < 10; ++i) {
    step.push_back(i * 10.0);
    logs.push_back(std::log(1.5 * std::exp(0.003 * i * 10.0)));
  }
  const auto f = an::fit_growth(step, logs);
  EXPECT_NEAR(f.slope, 0.003, 1e-15);
  EXPECT_NEAR(f.intercept, std::log(1.5), 1e-14);
  EXPECT_NEAR(f.residual_sd, 0, 1e-14);
  EXPECT_THROW((void)an::fit_growth(std::vector<double>{1, 1}, std::vector<double>{0, 1}), std::invalid_argument);
}

TEST(GrowthMonitorStatistical, AlarmsWhenGrowthRateChanges) {
  // log sigma = 0.001 t + noise (sd 0.002) for 300 steps, then the rate jumps to 0.005.
  // Seeded. Before the change the z-scores are N(0, ~1): with h = 8 a false alarm within 250
  // steps has probability < 1e-3. After the change the drift adds 0.004 t / 0.002 = 2 t sd, so
  // the alarm comes within ~5 steps; > 30 is impossible short of a bug.
  std::mt19937_64 rng(8);
  std::normal_distribution<double> noise(0.0, 0.002);
  an::growth_monitor mon({.baseline_steps = 50, .cusum_k = 0.5, .cusum_h = 8});
  double log_sigma = 0;
  for (int t = 0; t < 400; ++t) {
    log_sigma += t < 300 ? 0.001 : 0.005;
    const auto g = mon.push(t, std::exp(log_sigma + noise(rng)));
    EXPECT_EQ(g.in_baseline, t < 50);
    if (t < 300) {
      EXPECT_FALSE(g.alarm) << t;
    }
  }
  ASSERT_TRUE(mon.baseline().has_value());
  EXPECT_NEAR(mon.baseline()->slope, 0.001, 1e-4);
  EXPECT_NEAR(mon.baseline()->residual_sd, 0.002, 6e-4);
  ASSERT_TRUE(mon.first_alarm_step().has_value());
  EXPECT_GE(*mon.first_alarm_step(), 300);
  EXPECT_LT(*mon.first_alarm_step(), 330);
  EXPECT_GT(mon.fit_all().slope, 0.001);
  EXPECT_THROW(mon.push(399, 1.0), std::invalid_argument);  // steps must increase
  EXPECT_THROW(mon.push(500, -1.0), std::invalid_argument);
}

TEST(SpectralJson, RequiredFields) {
  const MatrixXd m = with_spectrum(10, 10, geometric(5, 2.0, 0.5), 10);
  const nlohmann::json j = an::spectral_norm(an::view_of(m));
  EXPECT_NEAR(j["spectral_norm"].get<double>(), 2.0, 1e-5);
  EXPECT_TRUE(j["converged"].get<bool>());
}

}  // namespace
