// SPDX-License-Identifier: Apache-2.0
/// @file Tests of low-rank alignment: principal angles of planted subspaces, coherence closed
/// forms, gradient alignment, and the streaming tracker.
#include <tiebreak/analysis/align.hpp>
#include <tiebreak/analysis/json.hpp>

#include <Eigen/QR>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

namespace {

namespace an = tiebreak::analysis;
using Eigen::MatrixXd;
using Eigen::VectorXd;

MatrixXd random_orthogonal(Eigen::Index n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  Eigen::HouseholderQR<MatrixXd> qr(MatrixXd::NullaryExpr(n, n, [&] { return g(rng); }));
  return qr.householderQ();
}

// Span{e1, e2, e3} and span{e1, cos a e2 + sin a e4, cos b e3 + sin b e5}, both rotated by one
// random orthogonal Q: principal angles exactly {0, a, b}.
struct planted_pair {
  MatrixXd a, b;
};
planted_pair planted(double angle1, double angle2, std::uint64_t seed) {
  MatrixXd a = MatrixXd::Zero(12, 3), b = MatrixXd::Zero(12, 3);
  a(0, 0) = a(1, 1) = a(2, 2) = 1;
  b(0, 0) = 1;
  b(1, 1) = std::cos(angle1);
  b(3, 1) = std::sin(angle1);
  b(2, 2) = std::cos(angle2);
  b(4, 2) = std::sin(angle2);
  const MatrixXd q = random_orthogonal(12, seed);
  return {q * a, q * b};
}

TEST(PrincipalAngles, PlantedAnglesAreRecovered) {
  const auto p = planted(0.3, 1.2, 1);
  // Scale and mix the columns: the angles depend on the spans only.
  MatrixXd mix(3, 3);
  mix << 2, 1, 0, 0, 3, 1, 1, 0, 0.5;
  const auto r = an::principal_angles(p.a * mix, 7.0 * p.b);
  ASSERT_EQ(r.angles.size(), 3);
  EXPECT_NEAR(r.angles[0], 0.0, 1e-7);  // sin-based: √eps-free
  EXPECT_NEAR(r.angles[1], 0.3, 1e-14);
  EXPECT_NEAR(r.angles[2], 1.2, 1e-14);
  EXPECT_NEAR(r.overlap, (1 + std::pow(std::cos(0.3), 2) + std::pow(std::cos(1.2), 2)) / 3, 1e-14);
  EXPECT_NEAR(r.largest(), 1.2, 1e-14);
}

TEST(PrincipalAngles, TinyAndRightAnglesKeepFullAccuracy) {
  // acos(cos 1e-10) = 0 in double; the sine branch recovers 1e-10 with a small relative error.
  const auto p = planted(1e-10, std::numbers::pi / 2, 2);
  const auto r = an::principal_angles(p.a, p.b);
  EXPECT_NEAR(r.angles[1], 1e-10, 1e-14);
  EXPECT_NEAR(r.angles[2], std::numbers::pi / 2, 1e-14);
  EXPECT_EQ(r.angles[0] < 1e-14, true);
}

TEST(PrincipalAngles, DifferentDimensionsAndRankDeficiency) {
  // A 2-d subspace inside a 3-d one: both angles 0. Rank-deficient input spans 2 dimensions.
  const auto p = planted(0.5, 0.9, 3);
  MatrixXd inside(12, 2);
  inside << p.a.col(0) + p.a.col(1), p.a.col(2);
  const auto r = an::principal_angles(p.a, inside);
  ASSERT_EQ(r.angles.size(), 2);
  EXPECT_LT(r.angles.maxCoeff(), 1e-7);
  MatrixXd deficient(12, 3);
  deficient << p.b.col(1), 2 * p.b.col(1), p.b.col(0);
  EXPECT_EQ(an::principal_angles(p.a, deficient).angles.size(), 2);
  EXPECT_THROW((void)an::principal_angles(MatrixXd::Ones(3, 1), MatrixXd::Ones(4, 1)), std::invalid_argument);
}

TEST(SubspaceOverlap, TopSingularSubspacesOfPlantedMatrices) {
  // A = U diag(5, 4, 1e-3…) Vᵀ; B has the same V and its top-2 left subspace rotated by 0.2 rad
  // within span{u2, u3}: left angles {0, 0.2}, right angles {0, 0}.
  const MatrixXd u = random_orthogonal(30, 4), v = random_orthogonal(20, 5);
  VectorXd s = VectorXd::Constant(20, 1e-3);
  s[0] = 5;
  s[1] = 4;
  MatrixXd ub = u;
  ub.col(1) = std::cos(0.2) * u.col(1) + std::sin(0.2) * u.col(2);
  ub.col(2) = -std::sin(0.2) * u.col(1) + std::cos(0.2) * u.col(2);
  const MatrixXd a = u.leftCols(20) * s.asDiagonal() * v.transpose();
  const MatrixXd b = ub.leftCols(20) * s.asDiagonal() * v.transpose();
  const auto r = an::subspace_overlap(a, b, 2);
  EXPECT_EQ(r.k, 2);
  EXPECT_NEAR(r.left.angles[0], 0.0, 1e-7);
  EXPECT_NEAR(r.left.angles[1], 0.2, 1e-10);
  EXPECT_LT(r.right.angles.maxCoeff(), 1e-7);
  EXPECT_NEAR(an::frobenius_cosine(a, a * 3), 1.0, 1e-15);
  EXPECT_NEAR(an::frobenius_cosine(a, -a), -1.0, 1e-15);
  EXPECT_EQ(an::frobenius_cosine(a, MatrixXd::Zero(30, 20)), 0.0);
}

TEST(RankSummary, ClosedForms) {
  VectorXd s(4);
  s << 4, 2, 2, 0;
  const auto r = an::rank_summary(s);
  EXPECT_DOUBLE_EQ(r.spectral_norm, 4);
  EXPECT_DOUBLE_EQ(r.stable_rank, 24.0 / 16);
  // p = (1/2, 1/4, 1/4): entropy = 1.5 ln 2, effective rank 2^1.5.
  EXPECT_NEAR(r.effective_rank, std::pow(2.0, 1.5), 1e-14);
}

TEST(Rank1Coherence, OneForIdenticalDirectionsEvenWithSignFlips) {
  const VectorXd u = VectorXd::LinSpaced(5, 1, 5), v = VectorXd::LinSpaced(7, -3, 3);
  an::rank1_coherence c;
  // e u vᵀ with (e, u) → (−e, −u) is the same matrix: still one direction.
  for (int t = 0; t < 10; ++t) {
    const double e = 0.1 * (t + 1);
    const VectorXd ut = (t % 2 ? -1.0 : 1.0) * (t + 1) * u;
    const double sign = t % 2 ? -1.0 : 1.0;
    c.push(sign * e, std::span<const double>(ut.data(), 5), std::span<const double>(v.data(), 7));
  }
  const auto r = c.result();
  EXPECT_NEAR(r.coherence, 1.0, 1e-14);
  EXPECT_NEAR(r.dominant_share, 1.0, 1e-10);
  EXPECT_EQ(r.terms, 10u);
}

TEST(Rank1Coherence, OrthogonalTermsGiveOneOverSqrtT) {
  // T equal-weight terms e_t u_t v_tᵀ with orthonormal u_t and v_t: ‖S‖_F = √T, Σ norms = T.
  const int T = 9;
  const MatrixXd u = random_orthogonal(12, 6).leftCols(T).transpose();  // T × 12, rows orthonormal
  const MatrixXd v = random_orthogonal(15, 7).leftCols(T).transpose();
  const VectorXd e = VectorXd::Constant(T, -2.0);
  const auto r = an::rank1_coherence_of(e, u, v);
  EXPECT_NEAR(r.coherence, 1 / std::sqrt(double(T)), 1e-14);
  EXPECT_NEAR(r.dominant_share, 1.0 / T, 1e-8);
  EXPECT_NEAR(r.weight_sum, -2.0 * T, 1e-14);
}

TEST(Rank1Coherence, CancellingTermsGiveZeroAndBatchEqualsStreaming) {
  const VectorXd u = VectorXd::LinSpaced(4, 1, 4), v = VectorXd::LinSpaced(3, 1, 3);
  MatrixXd uu(2, 4), vv(2, 3);
  uu << u.transpose(), u.transpose();
  vv << v.transpose(), v.transpose();
  VectorXd e(2);
  e << 1.5, -1.5;
  EXPECT_NEAR(an::rank1_coherence_of(e, uu, vv).coherence, 0.0, 1e-15);
  // Random terms: batch and streaming agree.
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g;
  const MatrixXd ru = MatrixXd::NullaryExpr(50, 6, [&] { return g(rng); });
  const MatrixXd rv = MatrixXd::NullaryExpr(50, 8, [&] { return g(rng); });
  const VectorXd re = VectorXd::NullaryExpr(50, [&] { return g(rng); });
  an::rank1_coherence c;
  for (int t = 0; t < 50; ++t) {
    const VectorXd a = ru.row(t).transpose(), b = rv.row(t).transpose();
    c.push(re[t], std::span<const double>(a.data(), 6), std::span<const double>(b.data(), 8));
  }
  const auto batch = an::rank1_coherence_of(re, ru, rv);
  EXPECT_NEAR(c.result().coherence, batch.coherence, 1e-13);
  EXPECT_GT(batch.coherence, 0.0);
  EXPECT_LT(batch.coherence, 0.5);  // 50 random directions in 48 dimensions
  const VectorXd bad(3);
  EXPECT_THROW(c.push(1.0, std::span<const double>(bad.data(), 3), std::span<const double>(bad.data(), 3)),
               std::invalid_argument);
}

TEST(GradientAlignment, AlongAndAgainstTheTopDirections) {
  const MatrixXd u = random_orthogonal(10, 12), v = random_orthogonal(8, 13);
  VectorXd s(8);
  s << 8, 4, 2, 1, 0.5, 0.25, 0.1, 0.05;
  const MatrixXd w = u.leftCols(8) * s.asDiagonal() * v.transpose();
  // G = −3 u1 v1ᵀ: all of it along the top direction, pushing sigma_1 down.
  const MatrixXd g1 = -3.0 * u.col(0) * v.col(0).transpose();
  const auto r1 = an::gradient_alignment(g1, w, 2);
  EXPECT_NEAR(r1.two_sided, 1.0, 1e-12);
  EXPECT_NEAR(r1.per_direction[0], -1.0, 1e-12);
  EXPECT_NEAR(r1.per_direction[1], 0.0, 1e-12);
  EXPECT_NEAR(r1.cosine, -8.0 / s.norm(), 1e-12);
  // G = u5 v6ᵀ: orthogonal to the top-2 subspaces on both sides.
  const MatrixXd g2 = u.col(4) * v.col(5).transpose();
  const auto r2 = an::gradient_alignment(g2, w, 2);
  EXPECT_NEAR(r2.two_sided, 0.0, 1e-12);
  EXPECT_NEAR(r2.left, 0.0, 1e-12);
  // G = u1 v6ᵀ: in the top left subspace, outside the top right one.
  const auto r3 = an::gradient_alignment(MatrixXd(u.col(0) * v.col(5).transpose()), w, 2);
  EXPECT_NEAR(r3.left, 1.0, 1e-12);
  EXPECT_NEAR(r3.right, 0.0, 1e-12);
  EXPECT_NEAR(r3.two_sided, 0.0, 1e-12);
}

TEST(UpdateAlignmentTracker, RepeatedUpdatesAreAlignedRandomOnesAreNot) {
  const VectorXd a = VectorXd::LinSpaced(16, -1, 1), b = VectorXd::LinSpaced(12, 0.5, 2);
  std::mt19937_64 rng(14);
  std::normal_distribution<double> g;
  an::update_alignment_tracker tracker(1);
  // Rank-1 updates along one direction with small noise: cosine ≈ 1, angle ≈ 0.
  for (int step = 0; step < 4; ++step) {
    const MatrixXd upd = (1.0 + step) * a * b.transpose() + 1e-6 * MatrixXd::NullaryExpr(16, 12, [&] { return g(rng); });
    const auto s = tracker.push(upd);
    EXPECT_EQ(s.step, static_cast<std::size_t>(step));
    EXPECT_NEAR(s.ranks.stable_rank, 1.0, 1e-6);
    if (step == 0) {
      EXPECT_FALSE(s.cosine_with_previous.has_value());
    } else {
      EXPECT_NEAR(*s.cosine_with_previous, 1.0, 1e-9);
      EXPECT_LT(s.overlap_with_previous->left.angles[0], 1e-5);
    }
  }
  EXPECT_THROW(tracker.push(MatrixXd::Ones(3, 3)), std::invalid_argument);
  // Independent Gaussian updates: cosine near 0 (|cos| < 0.3 fails with probability < 1e-6 for
  // 192 entries), top-1 angles large.
  an::update_alignment_tracker noise(1);
  noise.push(MatrixXd::NullaryExpr(16, 12, [&] { return g(rng); }));
  const auto s = noise.push(MatrixXd::NullaryExpr(16, 12, [&] { return g(rng); }));
  EXPECT_LT(std::abs(*s.cosine_with_previous), 0.3);
  const nlohmann::json j = s;
  EXPECT_TRUE(j["overlap_with_previous"]["left"].contains("principal_angles_deg"));
}

}  // namespace
