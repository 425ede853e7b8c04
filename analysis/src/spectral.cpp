// SPDX-License-Identifier: Apache-2.0
/// @file Power iteration and Lanczos on the Gram operator, one cache-friendly pass per iteration.
#include <tiebreak/analysis/spectral.hpp>
#include <tiebreak/fp/random.hpp>

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

namespace tiebreak::analysis {
namespace {

// A matrix is seen as L "lines" of length D (rows of a row-major matrix, columns of a
// column-major one), line l at data + l * ld. The Gram operator A = Σ_l line_l line_lᵀ (D × D)
// equals MᵀM when lines are rows and MMᵀ when lines are columns; either way its top eigenvalue
// is sigma_1². One pass over the lines computes s_l = line_l · x and y = Σ_l s_l line_l, so each
// iteration reads the matrix once (the line stays in L1 between the dot and the axpy).
template <class T>
struct line_set {
  const T* data;
  index lines;
  index length;
  index ld;
  bool lines_are_rows;  // x is the right vector; else x is the left vector
};

// Eight independent partial sums in a fixed order: the compiler vectorises the lanes without
// reassociating anything, so SSE2, AVX2 and scalar code give identical bits.
template <class T>
inline double dot_line(const T* a, const double* x, index n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  index i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += static_cast<double>(a[i + j]) * x[i + j];
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(a[i]) * x[i];
  return (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) + tail;
}

template <class T>
inline void axpy_line(double s, const T* a, double* y, index n) {
  for (index i = 0; i < n; ++i) y[i] += s * static_cast<double>(a[i]);
}

// Lines [first, last): s[l] = line_l · x, y += Σ s_l line_l (y not cleared).
template <class T>
[[gnu::always_inline]] inline void gram_chunk_impl(const T* data, index first, index last, index n,
                                                   index ld, const double* x, double* y, double* s) {
  for (index l = first; l < last; ++l) {
    const T* a = data + l * ld;
    const double sl = dot_line(a, x, n);
    s[l] = sl;
    axpy_line(sl, a, y, n);
  }
}

// Runtime dispatch to an AVX2 build of the same loops where the CPU has it. With
// -ffp-contract=off and the fixed lane structure above, every clone performs the same IEEE
// operations in the same order, so the choice never changes a result bit.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define TIEBREAK_ANALYSIS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TIEBREAK_ANALYSIS_CLONES
#endif

TIEBREAK_ANALYSIS_CLONES void gram_chunk(const float* data, index first, index last, index n,
                                         index ld, const double* x, double* y, double* s) {
  gram_chunk_impl(data, first, last, n, ld, x, y, s);
}
TIEBREAK_ANALYSIS_CLONES void gram_chunk(const double* data, index first, index last, index n,
                                         index ld, const double* x, double* y, double* s) {
  gram_chunk_impl(data, first, last, n, ld, x, y, s);
}
TIEBREAK_ANALYSIS_CLONES void dot_chunk(const float* data, index first, index last, index n,
                                        index ld, const double* x, double* s) {
  for (index l = first; l < last; ++l) s[l] = dot_line(data + l * ld, x, n);
}
TIEBREAK_ANALYSIS_CLONES void dot_chunk(const double* data, index first, index last, index n,
                                        index ld, const double* x, double* s) {
  for (index l = first; l < last; ++l) s[l] = dot_line(data + l * ld, x, n);
}

// Lines are processed in fixed chunks whose partial y are summed in chunk order, so the result
// is the same for any number of threads.
constexpr index chunk_lines = 512;

template <class T>
class gram_operator {
 public:
  gram_operator(line_set<T> ls, int threads) : ls_(ls), threads_(std::max(1, threads)) {
    const index chunks = (ls_.lines + chunk_lines - 1) / chunk_lines;
    if (chunks > 1) partial_.resize(ls_.length, chunks);
    s_.resize(ls_.lines);
  }

  // y = A x; returns ||s||² = ||M x||² (the Rayleigh quotient xᵀAx for unit x).
  double apply(const Eigen::VectorXd& x, Eigen::VectorXd& y) {
    y.setZero(ls_.length);
    const index chunks = (ls_.lines + chunk_lines - 1) / chunk_lines;
    if (chunks <= 1) {
      gram_chunk(ls_.data, 0, ls_.lines, ls_.length, ls_.ld, x.data(), y.data(), s_.data());
    } else {
      partial_.setZero();
      run_chunks(chunks, [&](index c) {
        gram_chunk(ls_.data, c * chunk_lines, std::min(ls_.lines, (c + 1) * chunk_lines),
                   ls_.length, ls_.ld, x.data(), partial_.col(c).data(), s_.data());
      });
      for (index c = 0; c < chunks; ++c) y += partial_.col(c);
    }
    return s_.squaredNorm();
  }

  // s = (line_l · x)_l, i.e. M x (lines are rows) or Mᵀ x (lines are columns).
  const Eigen::VectorXd& dots(const Eigen::VectorXd& x) {
    const index chunks = (ls_.lines + chunk_lines - 1) / chunk_lines;
    run_chunks(chunks, [&](index c) {
      dot_chunk(ls_.data, c * chunk_lines, std::min(ls_.lines, (c + 1) * chunk_lines), ls_.length,
                ls_.ld, x.data(), s_.data());
    });
    return s_;
  }

  const Eigen::VectorXd& last_dots() const { return s_; }

 private:
  template <class F>
  void run_chunks(index chunks, F&& f) {
    const int t = static_cast<int>(std::min<index>(threads_, chunks));
    if (t <= 1) {
      for (index c = 0; c < chunks; ++c) f(c);
      return;
    }
    std::vector<std::thread> pool;
    for (int w = 1; w < t; ++w)
      pool.emplace_back([&, w] {
        for (index c = w; c < chunks; c += t) f(c);
      });
    for (index c = 0; c < chunks; c += t) f(c);
    for (auto& th : pool) th.join();
  }

  line_set<T> ls_;
  int threads_;
  Eigen::MatrixXd partial_;
  Eigen::VectorXd s_;
};

Eigen::VectorXd seeded_start(index n, std::uint64_t seed) {
  // splitmix64 → uniform in [-1, 1): a fixed, platform-independent start vector.
  Eigen::VectorXd v(n);
  tiebreak::splitmix64_generator g(seed);
  for (index i = 0; i < n; ++i) {
    const std::uint64_t r = g.next();
    v[i] = static_cast<double>(r >> 11) * 0x1.0p-52 - 1.0;
  }
  return v;
}

template <class T>
spectral_norm_result run_power(gram_operator<T>& op, const line_set<T>& ls, Eigen::VectorXd x,
                               const spectral_options& o, double known_ratio) {
  spectral_norm_result r;
  r.convergence_ratio = known_ratio;
  Eigen::VectorXd y;
  double prev_spread = -1;
  for (int it = 0; it < std::max(1, o.max_iterations); ++it) {
    const double rho = op.apply(x, y);  // rho = ||Mx||²
    ++r.iterations;
    const double ny = y.norm();         // ||MᵀM x||
    if (!(std::isfinite(ny) && std::isfinite(rho))) {
      r.sigma = std::numeric_limits<double>::quiet_NaN();
      r.error_estimate = r.residual = r.sigma;
      return r;
    }
    if (rho == 0) break;  // x in the null space: the zero matrix (a random start is never)
    // For unit x: sigma_a = ||Mx|| <= sigma_b = ||MᵀMx|| / ||Mx|| <= sigma_1 (Cauchy-Schwarz),
    // and sigma_b² − sigma_a² is the squared residual of the triplet (Mx/sigma_a, sigma_b, y/||y||).
    const double sigma_a = std::sqrt(rho);
    const double sigma_b = ny / sigma_a;
    const Eigen::VectorXd s = op.last_dots() / sigma_a;  // unit; the other singular vector
    x = y / ny;
    const double spread = std::max(0.0, sigma_b - sigma_a);
    // The spread shrinks by r² per pass (r = (sigma_2/sigma_1)²), and sigma_1 − sigma_b is about
    // spread · r / (1 − r) once the iterate lies mostly in the top two directions.
    if (prev_spread > 0 && spread > 1e-15 * sigma_b)
      r.convergence_ratio = std::clamp(std::sqrt(spread / prev_spread), 0.0, 0.9999);
    prev_spread = spread;
    const double ratio = r.convergence_ratio;
    r.residual = std::sqrt(std::max(0.0, sigma_b * sigma_b - sigma_a * sigma_a));
    r.error_estimate = ratio > 0 ? spread * std::max(1.0, ratio / (1 - ratio)) : spread;
    r.sigma = sigma_b;
    if (ls.lines_are_rows) {
      r.left = s;
      r.right = x;
    } else {
      r.left = x;
      r.right = s;
    }
    // Without a ratio estimate one pass proves nothing unless the spread is at rounding level.
    const bool ratio_known = ratio > 0 || it > 0;
    if (r.error_estimate <= o.rel_tol * sigma_b && (ratio_known || spread <= 1e-15 * sigma_b)) {
      r.converged = true;
      return r;
    }
  }
  if (r.sigma == 0) {  // zero matrix (or x orthogonal to the row space after an exact zero)
    r.converged = true;
    r.error_estimate = r.residual = 0;
    Eigen::VectorXd e = Eigen::VectorXd::Zero(ls.lines);
    if (ls.lines > 0) e[0] = 1;
    const Eigen::VectorXd xn = x / std::max(x.norm(), std::numeric_limits<double>::min());
    r.left = ls.lines_are_rows ? e : xn;
    r.right = ls.lines_are_rows ? xn : e;
  }
  return r;
}

template <class T>
spectral_norm_result run_lanczos(gram_operator<T>& op, const line_set<T>& ls, Eigen::VectorXd x,
                                 const spectral_options& o) {
  spectral_norm_result r;
  const index n = ls.length;
  const index kmax = std::min<index>(std::max(1, o.max_iterations), n);
  Eigen::MatrixXd q(n, kmax);
  Eigen::VectorXd alpha(kmax), beta(kmax);
  q.col(0) = x / x.norm();
  Eigen::VectorXd w;
  double theta = 0, bound = std::numeric_limits<double>::infinity(), resid = bound;
  Eigen::VectorXd ritz;  // coefficients of the top Ritz vector in q
  index k = 0;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> tri;
  for (; k < kmax; ++k) {
    op.apply(q.col(k), w);
    ++r.iterations;
    if (!w.allFinite()) {
      r.sigma = r.error_estimate = r.residual = std::numeric_limits<double>::quiet_NaN();
      return r;
    }
    alpha[k] = q.col(k).dot(w);
    w -= alpha[k] * q.col(k);
    if (k > 0) w -= beta[k - 1] * q.col(k - 1);
    // Full reorthogonalisation, twice ("twice is enough", Parlett): keeps the Ritz values free
    // of ghost copies at the cost of 4 k n flops, small next to the n·L pass.
    for (int rep = 0; rep < 2; ++rep) w -= q.leftCols(k + 1) * (q.leftCols(k + 1).transpose() * w);
    beta[k] = w.norm();
    // Tridiagonal T_k: its largest eigenvalue theta approximates sigma_1².
    tri.computeFromTridiagonal(alpha.head(k + 1), beta.head(k), Eigen::ComputeEigenvectors);
    const Eigen::VectorXd& ev = tri.eigenvalues();  // ascending
    theta = ev[k];
    ritz = tri.eigenvectors().col(k);
    resid = beta[k] * std::abs(ritz[k]);  // ||A y − theta y|| for the Ritz vector y
    // An eigenvalue lies within resid of theta; with a gap delta to the rest of the spectrum it
    // lies within resid² / delta (Kato-Temple). The next Ritz value stands in for lambda_2.
    bound = resid;
    if (k > 0) {
      const double gap = theta - ev[k - 1];
      if (gap > 0) bound = std::min(bound, resid * resid / gap);
    }
    const double scale = std::max(theta, std::numeric_limits<double>::min());
    // sigma = sqrt(theta): a relative error e in theta is e/2 in sigma.
    // beta ≈ 0: the Krylov space is invariant and theta is exact up to rounding.
    if (bound <= 2 * o.rel_tol * scale || beta[k] <= 1e-13 * theta) {
      r.converged = true;
      ++k;
      break;
    }
    if (k + 1 < kmax) q.col(k + 1) = w / beta[k];
  }
  k = std::min(k, kmax);
  theta = std::max(theta, 0.0);
  r.sigma = std::sqrt(theta);
  if (k >= 2 && theta > 0) {
    const Eigen::VectorXd& ev = tri.eigenvalues();
    r.convergence_ratio = std::clamp(ev[k - 2] / theta, 0.0, 0.9999);  // Ritz estimate of (s2/s1)²
  }
  r.error_estimate = r.sigma > 0 ? std::sqrt(theta + bound) - r.sigma : std::sqrt(bound);
  Eigen::VectorXd xv = q.leftCols(k) * ritz.head(k);
  xv /= xv.norm();
  if (r.sigma > 0) r.residual = resid / r.sigma;
  if (!o.compute_vectors) {
    (ls.lines_are_rows ? r.right : r.left) = xv;
    return r;
  }
  Eigen::VectorXd other = op.dots(xv);
  ++r.iterations;
  const double no = other.norm();
  if (no > 0) {
    other /= no;
  } else {
    other = Eigen::VectorXd::Zero(ls.lines);
    if (ls.lines > 0) other[0] = 1;
  }
  r.left = ls.lines_are_rows ? other : xv;
  r.right = ls.lines_are_rows ? xv : other;
  return r;
}

template <class T>
line_set<T> lines_of(matrix_view<T> m) {
  if (m.col_stride == 1 || m.cols == 1) return {m.data, m.rows, m.cols, m.row_stride, true};
  if (m.row_stride == 1 || m.rows == 1) return {m.data, m.cols, m.rows, m.col_stride, false};
  return {nullptr, 0, 0, 0, true};  // general strides: caller copies
}

}  // namespace

template <class T>
spectral_norm_result spectral_norm(matrix_view<T> m, const spectral_options& options,
                                   const spectral_norm_result* warm) {
  if (m.rows == 0 || m.cols == 0) {
    spectral_norm_result r;
    r.converged = true;
    // No singular vectors exist ("empty if not computed"): a 2^62 x 0 header must not allocate
    // 2^62 zeros.
    return r;
  }
  line_set<T> ls = lines_of(m);
  std::vector<T> copy;
  if (ls.data == nullptr) {  // neither rows nor columns contiguous: copy to row-major once
    copy.resize(static_cast<std::size_t>(m.rows * m.cols));
    for (index i = 0; i < m.rows; ++i)
      for (index j = 0; j < m.cols; ++j) copy[static_cast<std::size_t>(i * m.cols + j)] = m(i, j);
    ls = {copy.data(), m.rows, m.cols, m.cols, true};
  }
  Eigen::VectorXd x;
  if (warm != nullptr) {
    const Eigen::VectorXd& w = ls.lines_are_rows ? warm->right : warm->left;
    if (w.size() == ls.length && w.allFinite() && w.squaredNorm() > 0) x = w / w.norm();
  }
  if (x.size() == 0) x = seeded_start(ls.length, options.seed).normalized();
  gram_operator<T> op(ls, options.threads);
  const double ratio = warm != nullptr && x.size() > 0 ? warm->convergence_ratio : 0.0;
  return options.method == spectral_method::power ? run_power(op, ls, std::move(x), options, ratio)
                                                  : run_lanczos(op, ls, std::move(x), options);
}

bool spectral_batch_result::all_converged() const {
  return std::all_of(converged.begin(), converged.end(), [](std::uint8_t c) { return c != 0; });
}

spectral_tracker::spectral_tracker(spectral_options options, int threads)
    : options_(options), threads_(std::max(1, threads)) {
  options_.threads = 1;  // parallelism is across slices
}

void spectral_tracker::reset() {
  steps_ = 0;
  state_.clear();
  shapes_.clear();
}

template <class T>
spectral_batch_result spectral_tracker::push_impl(std::span<const matrix_view<T>> slices) {
  if (steps_ == 0) {
    shapes_.clear();
    for (const auto& s : slices) shapes_.emplace_back(s.rows, s.cols);
    state_.assign(slices.size(), spectral_norm_result{});
  } else {
    if (slices.size() != shapes_.size())
      throw std::invalid_argument("spectral_tracker: slice count changed between steps");
    for (std::size_t i = 0; i < slices.size(); ++i)
      if (slices[i].rows != shapes_[i].first || slices[i].cols != shapes_[i].second)
        throw std::invalid_argument("spectral_tracker: slice shape changed between steps");
  }
  const std::size_t n = slices.size();
  auto work = [&](std::size_t i) {
    const spectral_norm_result* warm = steps_ > 0 ? &state_[i] : nullptr;
    spectral_norm_result r = spectral_norm(slices[i], options_, warm);
    state_[i] = std::move(r);
  };
  const int t = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads_), n));
  if (t <= 1) {
    for (std::size_t i = 0; i < n; ++i) work(i);
  } else {
    std::vector<std::thread> pool;
    for (int w = 1; w < t; ++w)
      pool.emplace_back([&, w] {
        for (std::size_t i = static_cast<std::size_t>(w); i < n; i += static_cast<std::size_t>(t)) work(i);
      });
    for (std::size_t i = 0; i < n; i += static_cast<std::size_t>(t)) work(i);
    for (auto& th : pool) th.join();
  }
  ++steps_;
  spectral_batch_result out;
  out.sigma.resize(n);
  out.error_estimate.resize(n);
  out.iterations.resize(n);
  out.converged.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.sigma[i] = state_[i].sigma;
    out.error_estimate[i] = state_[i].error_estimate;
    out.iterations[i] = state_[i].iterations;
    out.converged[i] = state_[i].converged ? 1 : 0;
    out.total_passes += state_[i].iterations;
  }
  return out;
}

spectral_batch_result spectral_tracker::push(std::span<const matrix_view<float>> slices) {
  return push_impl(slices);
}
spectral_batch_result spectral_tracker::push(std::span<const matrix_view<double>> slices) {
  return push_impl(slices);
}

template <class T>
spectrum_summary exact_spectrum(matrix_view<T> m) {
  spectrum_summary out;
  if (m.rows == 0 || m.cols == 0) return out;
  const Eigen::MatrixXd a = m.to_matrix();
  out.singular_values = Eigen::BDCSVD<Eigen::MatrixXd>(a).singularValues();
  const Eigen::VectorXd& sv = out.singular_values;
  bool valid = sv.allFinite();
  for (index i = 0; valid && i < sv.size(); ++i) valid = sv[i] >= 0 && (i == 0 || sv[i] <= sv[i - 1]);
  if (!valid && a.allFinite()) {
    const Eigen::MatrixXd gram = a.rows() >= a.cols() ? Eigen::MatrixXd(a.transpose() * a)
                                                      : Eigen::MatrixXd(a * a.transpose());
    const Eigen::VectorXd ev = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(gram, Eigen::EigenvaluesOnly).eigenvalues();
    out.singular_values.resize(ev.size());
    for (index i = 0; i < ev.size(); ++i) out.singular_values[i] = std::sqrt(std::max(0.0, ev[ev.size() - 1 - i]));
    out.method = "gram_eigen";
  }
  out.spectral_norm = out.singular_values[0];
  out.frobenius_norm = out.singular_values.norm();
  if (out.spectral_norm > 0) {
    const double ratio = out.frobenius_norm / out.spectral_norm;
    out.stable_rank = ratio * ratio;
    const double total = out.singular_values.sum();
    double h = 0;
    for (index i = 0; i < out.singular_values.size(); ++i) {
      const double p = out.singular_values[i] / total;
      if (p > 0) h -= p * std::log(p);
    }
    out.effective_rank = std::exp(h);
  }
  return out;
}

template <class T>
spectral_check check_spectral_norm(matrix_view<T> m, double estimate) {
  spectral_check c;
  c.estimate = estimate;
  c.exact = exact_spectrum(m).spectral_norm;
  c.rel_error = c.exact > 0 ? std::abs(estimate - c.exact) / c.exact : std::abs(estimate);
  return c;
}

template <class T>
double frobenius_norm(matrix_view<T> m) {
  double scale = 0, ssq = 1;  // LAPACK dlassq: sum of squares without overflow
  if (m.rows == 0 || m.cols == 0) return 0;  // a 2^62 x 0 view: no loop over empty rows
  for (index i = 0; i < m.rows; ++i)
    for (index j = 0; j < m.cols; ++j) {
      const double v = std::abs(static_cast<double>(m(i, j)));
      if (v == 0) continue;
      if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN() + v;
      if (scale < v) {
        ssq = 1 + ssq * (scale / v) * (scale / v);
        scale = v;
      } else {
        ssq += (v / scale) * (v / scale);
      }
    }
  return scale * std::sqrt(ssq);
}

growth_fit fit_growth(std::span<const double> step, std::span<const double> log_sigma) {
  if (step.size() != log_sigma.size() || step.size() < 2)
    throw std::invalid_argument("fit_growth: need at least two (step, log sigma) pairs of equal count");
  growth_fit f;
  f.n = step.size();
  const double nn = static_cast<double>(f.n);
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < f.n; ++i) {
    mx += step[i];
    my += log_sigma[i];
  }
  mx /= nn;
  my /= nn;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < f.n; ++i) {
    sxx += (step[i] - mx) * (step[i] - mx);
    sxy += (step[i] - mx) * (log_sigma[i] - my);
  }
  if (!(sxx > 0)) throw std::invalid_argument("fit_growth: all steps are equal");
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  f.mean_step = mx;
  f.sxx = sxx;
  if (f.n >= 3) {
    double rss = 0;
    for (std::size_t i = 0; i < f.n; ++i) {
      const double e = log_sigma[i] - (f.intercept + f.slope * step[i]);
      rss += e * e;
    }
    f.residual_sd = std::sqrt(rss / (nn - 2));
    f.slope_se = f.residual_sd / std::sqrt(sxx);
  }
  return f;
}

growth_monitor::growth_monitor(growth_options options) : options_(options) {
  options_.baseline_steps = std::max<std::size_t>(options_.baseline_steps, 3);
}

growth_step growth_monitor::push(double step, double sigma) {
  if (!(sigma > 0) || !std::isfinite(sigma))
    throw std::invalid_argument("growth_monitor: sigma must be positive and finite");
  if (!std::isfinite(step) || (!steps_.empty() && !(step > steps_.back())))
    throw std::invalid_argument("growth_monitor: steps must be finite and increasing");
  growth_step g;
  g.step = step;
  g.sigma = sigma;
  g.log_sigma = std::log(sigma);
  steps_.push_back(step);
  logs_.push_back(g.log_sigma);
  if (!fit_) {
    if (steps_.size() == options_.baseline_steps) fit_ = fit_growth(steps_, logs_);
    return g;
  }
  const growth_fit& f = *fit_;
  g.in_baseline = false;
  g.predicted_log_sigma = f.intercept + f.slope * step;
  const double sd = std::max(f.residual_sd, options_.min_residual_sd);
  const double dx = step - f.mean_step;
  const double pred_sd = sd * std::sqrt(1 + 1 / static_cast<double>(f.n) + dx * dx / f.sxx);
  g.z = (g.log_sigma - g.predicted_log_sigma) / pred_sd;
  const int a = cusum_.update(g.z, options_.cusum_k, options_.cusum_h);
  if (a != 0 && !first_alarm_) first_alarm_ = step;
  g.cusum = cusum_;
  g.alarm = first_alarm_.has_value();
  return g;
}

growth_fit growth_monitor::fit_all() const { return fit_growth(steps_, logs_); }

#define TIEBREAK_INSTANTIATE(T)                                                                  \
  template spectral_norm_result spectral_norm<T>(matrix_view<T>, const spectral_options&,        \
                                                 const spectral_norm_result*);                   \
  template spectrum_summary exact_spectrum<T>(matrix_view<T>);                                   \
  template spectral_check check_spectral_norm<T>(matrix_view<T>, double);                        \
  template double frobenius_norm<T>(matrix_view<T>);
TIEBREAK_INSTANTIATE(float)
TIEBREAK_INSTANTIATE(double)
#undef TIEBREAK_INSTANTIATE

}  // namespace tiebreak::analysis
