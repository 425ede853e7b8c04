// SPDX-License-Identifier: Apache-2.0
/// @file Principal angles (sine/cosine), top singular subspaces, rank-1 coherence, alignment.
#include <tiebreak/analysis/align.hpp>

#include <Eigen/QR>
#include <Eigen/SVD>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace tiebreak::analysis {
namespace {

// Orthonormal basis of the column space, with the numerical rank of a column-pivoted QR.
Eigen::MatrixXd orthonormal_basis(const Eigen::MatrixXd& a) {
  if (a.cols() == 0 || a.rows() == 0) return Eigen::MatrixXd(a.rows(), 0);
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a);
  const index r = qr.rank();
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(a.rows(), r);
  return q;
}

}  // namespace

double frobenius_cosine(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    throw std::invalid_argument("frobenius_cosine: shapes differ");
  const double na = a.norm(), nb = b.norm();
  if (std::isnan(na) || std::isnan(nb)) return std::nan("");
  if (na == 0 || nb == 0) return 0;
  return std::clamp((a / na).cwiseProduct(b / nb).sum(), -1.0, 1.0);
}

principal_angles_result principal_angles(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  if (a.rows() != b.rows()) throw std::invalid_argument("principal_angles: row counts differ");
  Eigen::MatrixXd qa = orthonormal_basis(a), qb = orthonormal_basis(b);
  if (qa.cols() < qb.cols()) std::swap(qa, qb);  // qa spans the larger space
  principal_angles_result r;
  const index q = qb.cols();
  r.angles.resize(q);
  if (q == 0) return r;
  const Eigen::MatrixXd c = qa.transpose() * qb;  // p × q
  Eigen::JacobiSVD<Eigen::MatrixXd> svd_c(c);
  const Eigen::VectorXd cosines = svd_c.singularValues();  // descending: angles ascending
  // Sines: singular values of the part of Q_B outside span(Q_A), ascending with the angles.
  const Eigen::MatrixXd residual = qb - qa * c;
  Eigen::JacobiSVD<Eigen::MatrixXd> svd_s(residual);
  Eigen::VectorXd sines = svd_s.singularValues();  // descending
  std::reverse(sines.data(), sines.data() + sines.size());
  for (index i = 0; i < q; ++i) {
    const double cs = std::min(cosines[i], 1.0);
    const double sn = std::min(sines[i], 1.0);
    r.angles[i] = cs * cs >= 0.5 ? std::asin(sn) : std::acos(cs);
  }
  std::sort(r.angles.data(), r.angles.data() + q);
  r.overlap = c.squaredNorm() / static_cast<double>(q);
  return r;
}

top_subspaces top_singular_subspaces(const Eigen::MatrixXd& m, index k) {
  top_subspaces t;
  const index kk = std::clamp<index>(k, 0, std::min(m.rows(), m.cols()));
  if (kk == 0) {
    t.left.resize(m.rows(), 0);
    t.right.resize(m.cols(), 0);
    return t;
  }
  Eigen::BDCSVD<Eigen::MatrixXd> svd(m, Eigen::ComputeThinU | Eigen::ComputeThinV);
  t.singular_values = svd.singularValues();
  t.left = svd.matrixU().leftCols(kk);
  t.right = svd.matrixV().leftCols(kk);
  return t;
}

subspace_overlap_result subspace_overlap(const top_subspaces& a, const top_subspaces& b) {
  subspace_overlap_result r;
  r.k = std::min(a.left.cols(), b.left.cols());
  r.left = principal_angles(a.left.leftCols(r.k), b.left.leftCols(r.k));
  r.right = principal_angles(a.right.leftCols(r.k), b.right.leftCols(r.k));
  return r;
}

subspace_overlap_result subspace_overlap(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, index k) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    throw std::invalid_argument("subspace_overlap: shapes differ");
  return subspace_overlap(top_singular_subspaces(a, k), top_singular_subspaces(b, k));
}

spectrum_summary rank_summary(const Eigen::VectorXd& s) {
  spectrum_summary out;
  out.singular_values = s;
  if (s.size() == 0) return out;
  out.spectral_norm = s.maxCoeff();
  out.frobenius_norm = s.norm();
  if (out.spectral_norm > 0) {
    const double ratio = out.frobenius_norm / out.spectral_norm;
    out.stable_rank = ratio * ratio;
    const double total = s.sum();
    double h = 0;
    for (index i = 0; i < s.size(); ++i) {
      const double p = s[i] / total;
      if (p > 0) h -= p * std::log(p);
    }
    out.effective_rank = std::exp(h);
  }
  return out;
}

void rank1_coherence::push(double e, std::span<const double> u, std::span<const double> v) {
  const auto m = static_cast<index>(u.size()), n = static_cast<index>(v.size());
  if (terms_ == 0 && sum_.size() == 0) sum_ = Eigen::MatrixXd::Zero(m, n);
  if (m != sum_.rows() || n != sum_.cols())
    throw std::invalid_argument("rank1_coherence: vector sizes changed between pushes");
  const Eigen::Map<const Eigen::VectorXd> uu(u.data(), m), vv(v.data(), n);
  sum_.noalias() += (e * uu) * vv.transpose();
  sum_of_norms_ += std::abs(e) * uu.norm() * vv.norm();
  weight_sum_ += e;
  ++terms_;
}

namespace {
coherence_result finish(const Eigen::MatrixXd& s, std::size_t terms, double sum_of_norms, double weights) {
  coherence_result r;
  r.terms = terms;
  r.norm_of_sum = s.norm();
  r.sum_of_norms = sum_of_norms;
  r.weight_sum = weights;
  // ‖Σ x_T‖ <= Σ ‖x_T‖; the clamp only hides the last-bit rounding of the two sums.
  if (sum_of_norms > 0) r.coherence = std::min(1.0, r.norm_of_sum / sum_of_norms);
  if (r.norm_of_sum > 0) {
    spectral_options o;
    o.rel_tol = 1e-10;
    o.compute_vectors = false;
    const double s1 = spectral_norm(view_of(s), o).sigma;
    r.dominant_share = std::min(1.0, (s1 / r.norm_of_sum) * (s1 / r.norm_of_sum));
  }
  return r;
}
}  // namespace

coherence_result rank1_coherence::result() const {
  return finish(sum_, terms_, sum_of_norms_, weight_sum_);
}

coherence_result rank1_coherence_of(const Eigen::VectorXd& e, const Eigen::MatrixXd& u,
                                    const Eigen::MatrixXd& v) {
  if (e.size() != u.rows() || e.size() != v.rows())
    throw std::invalid_argument("rank1_coherence_of: e, U and V need one entry/row per term");
  const Eigen::MatrixXd s = u.transpose() * e.asDiagonal() * v;
  const double denom = (e.cwiseAbs().array() * u.rowwise().norm().array() * v.rowwise().norm().array()).sum();
  return finish(s, static_cast<std::size_t>(e.size()), denom, e.sum());
}

gradient_alignment_result gradient_alignment(const Eigen::MatrixXd& g, const top_subspaces& w,
                                             const Eigen::MatrixXd& w_matrix) {
  if (g.rows() != w.left.rows() || g.cols() != w.right.rows())
    throw std::invalid_argument("gradient_alignment: shapes differ");
  gradient_alignment_result r;
  r.k = w.left.cols();
  const double ng = g.norm();
  r.cosine = w_matrix.size() ? frobenius_cosine(g, w_matrix) : 0.0;
  r.per_direction = Eigen::VectorXd::Zero(r.k);
  if (ng == 0 || r.k == 0) return r;
  const Eigen::MatrixXd ug = w.left.transpose() * g;  // k × n
  r.left = ug.norm() / ng;
  r.right = (g * w.right).norm() / ng;
  const Eigen::MatrixXd core = ug * w.right;  // k × k
  r.two_sided = core.norm() / ng;
  r.per_direction = core.diagonal() / ng;
  return r;
}

gradient_alignment_result gradient_alignment(const Eigen::MatrixXd& g, const Eigen::MatrixXd& w, index k) {
  if (g.rows() != w.rows() || g.cols() != w.cols())
    throw std::invalid_argument("gradient_alignment: shapes differ");
  return gradient_alignment(g, top_singular_subspaces(w, std::max<index>(k, 1)), w);
}

update_alignment_tracker::update_alignment_tracker(index k) : k_(std::max<index>(k, 1)) {}

update_step update_alignment_tracker::push(const Eigen::MatrixXd& m) {
  if (steps_ > 0 && (m.rows() != previous_.rows() || m.cols() != previous_.cols()))
    throw std::invalid_argument("update_alignment_tracker: shape changed between steps");
  update_step s;
  s.step = steps_;
  top_subspaces top = top_singular_subspaces(m, k_);
  s.ranks = rank_summary(top.singular_values);
  if (steps_ > 0) {
    s.cosine_with_previous = frobenius_cosine(previous_, m);
    s.overlap_with_previous = subspace_overlap(previous_top_, top);
  }
  previous_ = m;
  previous_top_ = std::move(top);
  ++steps_;
  return s;
}

}  // namespace tiebreak::analysis
