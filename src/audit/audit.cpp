// SPDX-License-Identifier: Apache-2.0
/// @file The audit: reference pass, per-row normalised errors, per-head tests, trigger statistics.
#include <tiebreak/audit/audit.hpp>

#include "reference/parallel.hpp"

#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>

namespace tiebreak::audit {
namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();

error_test make_test(const analysis::running_moments& m, const audit_options& o) {
  return make_error_test(m, o.alpha, o.min_effect_ulps);
}

/// Row samples of one tensor in one (batch, head): `rows` rows of `len` elements. Returns per-row
/// signed and directed samples and row scales (NaN for excluded rows) and fills `out`.
struct row_samples {
  std::vector<double> signed_rows, directed_rows, ulp;
};

row_samples row_errors(const double* kernel, const double* ref, std::size_t rows, std::size_t len,
                       const format_desc& f, const audit_options& o, tensor_error& out) {
  row_samples s;
  s.signed_rows.assign(rows, nan_v);
  s.directed_rows.assign(rows, nan_v);
  s.ulp.assign(rows, nan_v);
  analysis::running_moments ms, md;
  for (std::size_t i = 0; i < rows; ++i) {
    const double* k = kernel + i * len;
    const double* r = ref + i * len;
    bool ok = true;
    double max_abs = 0;
    for (std::size_t j = 0; j < len && ok; ++j) {
      ok = std::isfinite(k[j]) && std::isfinite(r[j]);
      max_abs = std::max(max_abs, std::abs(r[j]));
    }
    if (!ok) {
      ++out.excluded_rows;
      continue;
    }
    const double u = row_ulp(f, max_abs);
    double sum_s = 0, sum_d = 0;
    for (std::size_t j = 0; j < len; ++j) {
      const double e = (k[j] - r[j]) / u;
      sum_s += e;
      sum_d += r[j] > 0 ? e : (r[j] < 0 ? -e : 0.0);
      out.max_abs_error_ulps = std::max(out.max_abs_error_ulps, std::abs(e));
    }
    s.ulp[i] = u;
    s.signed_rows[i] = sum_s / static_cast<double>(len);
    s.directed_rows[i] = sum_d / static_cast<double>(len);
    ms.push(s.signed_rows[i]);
    md.push(s.directed_rows[i]);
    ++out.rows;
  }
  out.signed_error = make_test(ms, o);
  out.directed_error = make_test(md, o);
  return s;
}

using row_matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Records one scored row with `exact` keys equal to its maximum and `near` within the tolerance;
/// returns the row's tie indicator (1: the maximum repeats).
double count_tie_row(head_report& hr, std::size_t exact, std::size_t near) {
  ++hr.score_rows;
  hr.tie_rows += exact >= 2;
  hr.near_tie_rows += near >= 2;
  return exact >= 2 ? 1.0 : 0.0;
}

/// The head's tie shares from its counts (0 rows scored: shares stay 0).
void finish_tie_shares(head_report& hr) {
  if (!hr.score_rows) return;
  hr.tie_row_share = static_cast<double>(hr.tie_rows) / static_cast<double>(hr.score_rows);
  hr.near_tie_row_share = static_cast<double>(hr.near_tie_rows) / static_cast<double>(hr.score_rows);
}

/// Tie statistics of one head from the device pass's per-row counts (the same rule as below).
std::vector<double> tie_rows_from_counts(const reference::device_row_ties& t, const attn::shape& s, std::size_t b,
                                         std::size_t h, head_report& hr) {
  std::vector<double> tie(s.seq_q, nan_v);
  for (std::size_t i = 0; i < s.seq_q; ++i) {
    const std::int32_t exact = t.exact[s.q_row(b, h, i)], near = t.near[s.q_row(b, h, i)];
    if (exact < 0) continue;
    tie[i] = count_tie_row(hr, static_cast<std::size_t>(exact), static_cast<std::size_t>(std::max<std::int32_t>(near, 0)));
  }
  finish_tie_shares(hr);
  return tie;
}

/// Tie statistics of one head: rows[i] = 1 for an exact repeated maximum (else 0, NaN if unscored).
std::vector<double> tie_rows(const kernel_dump& d, const attn::problem& pr, std::size_t b, std::size_t h,
                             const audit_options& o, head_report& hr) {
  const attn::shape& s = pr.shape;
  const double scale = pr.scale;
  using cmap = Eigen::Map<const row_matrix>;
  const cmap Q(d.inputs.q.data() + s.q_offset(b, h, 0), static_cast<Eigen::Index>(s.seq_q), static_cast<Eigen::Index>(s.dim));
  const cmap K(d.inputs.k.data() + s.k_offset(b, s.kv_head(h), 0), static_cast<Eigen::Index>(s.seq_k),
               static_cast<Eigen::Index>(s.dim));
  const row_matrix dots = Q * K.transpose();
  const double sgn = scale < 0 ? -1.0 : 1.0;
  std::vector<double> tie(s.seq_q, nan_v);
  for (std::size_t i = 0; i < s.seq_q; ++i) {
    const std::size_t n = pr.visible_keys(i);
    const double* row = dots.row(static_cast<Eigen::Index>(i)).data();
    bool finite = n > 0;
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < n && finite; ++j) {
      finite = std::isfinite(row[j]);
      m = std::max(m, sgn * row[j]);
    }
    if (!finite) continue;
    std::size_t exact = 0, near = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const double key = sgn * row[j];
      exact += key == m;
      near += std::abs(scale) * (m - key) <= o.tie_tolerance;
    }
    tie[i] = count_tie_row(hr, exact, near);
  }
  finish_tie_shares(hr);
  return tie;
}

}  // namespace

/// The row scale: ulp in `f` of max_abs rounded to nearest-even into `f` (the core decides the
/// grid: round_result::lsb_exp). All-zero rows use the smallest subnormal's ulp; an overflowing
/// maximum uses the ulp of the largest finite value.
double row_ulp(const format_desc& f, double max_abs) {
  const int min_lsb = f.emin() - f.man_bits;
  if (!(max_abs > 0)) return std::ldexp(1.0, min_lsb);
  const round_result r = f64_bits_to(f, f64_to_bits(max_abs), rounding{round_mode::rne, 0});
  if (r.overflow() || f.is_inf(r.bits)) return std::ldexp(1.0, f.emax() - f.man_bits);
  return std::ldexp(1.0, std::max(r.lsb_exp, min_lsb));
}

error_test make_error_test(const analysis::running_moments& m, double alpha, double min_effect_ulps) {
  error_test e;
  e.moments = m;
  e.t = analysis::t_test(m, 0, 0.95);
  e.sign = analysis::sign_test(m);
  e.significant = m.n >= 2 && e.t.p_value < alpha / 2;
  e.biased = e.significant && std::abs(e.t.mean) >= min_effect_ulps;
  return e;
}

audit_report run_audit(const kernel_dump& d, const audit_options& o) {
  using clock = std::chrono::steady_clock;
  const auto& s = d.inputs.shape;
  audit_report r;
  r.shape = s;
  r.options = o;
  r.options.progress = nullptr;
  r.source = d.source;
  r.container = d.container;
  r.layout = d.layout;
  r.tensors = d.tensors;
  reference::attention_options ro;
  ro.causal = o.causal;
  ro.scale = o.scale;
  ro.threads = o.threads;
  const attn::problem pr = ro.problem_for(s);
  r.scale = pr.scale;
  if (o.progress) ro.progress = [&](std::size_t done, std::size_t total) { o.progress("reference", done, total); };
  if (d.o.size() != s.o_size()) throw reference::reference_error("audit: kernel output 'o' size disagrees with the shape");

  const auto t0 = clock::now();
  const bool on_device = o.device == audit_options::device_kind::cuda;
  reference::device_row_ties device_ties;
  device_ties.tie_tolerance = o.tie_tolerance;
  reference::attention_outputs ref;
  if (on_device) {
    reference::device_timing dt;
    ref = reference::attention_f64_device(d.inputs, ro, &device_ties, &dt);
    r.device_timing = dt;
  } else {
    ref = reference::attention_f64(d.inputs, ro);
  }
  const auto t1 = clock::now();
  if (o.certify) r.certificate = reference::certify(d.inputs, ref, ro);

  const format_desc fo = d.info("o")->format;
  const bool have_do = !d.inputs.d_o.empty();
  r.heads.resize(s.batch * s.heads);
  std::mutex progress_mutex;
  std::size_t done = 0;
  const std::size_t total = r.heads.size() + s.batch * s.kv_heads;
  auto tick = [&] {
    if (!o.progress) return;
    std::lock_guard lock(progress_mutex);
    o.progress("statistics", ++done, total);
  };

  reference::detail::parallel_for(r.heads.size(), o.threads, [&](std::size_t task) {
    head_report& hr = r.heads[task];
    hr.batch = task / s.heads;
    hr.head = task % s.heads;
    hr.kv_head = s.kv_head(hr.head);
    const std::size_t off_o = s.o_offset(hr.batch, hr.head, 0);
    const row_samples rs = row_errors(d.o.data() + off_o, ref.o.data() + off_o, s.seq_q, s.dim_v, fo, o, hr.o);
    hr.biased = hr.o.biased();

    if (have_do) {  // delta error: e_δ = Σ_j dO_ij (O_kernel − O_ref)_ij, normalised by u_i Σ_j |dO_ij|
      analysis::running_moments m;
      for (std::size_t i = 0; i < s.seq_q; ++i) {
        bool ok = !std::isnan(rs.ulp[i]);
        for (std::size_t j = 0; j < s.dim_v && ok; ++j) ok = std::isfinite(d.inputs.d_o[off_o + i * s.dim_v + j]);
        if (!ok) {
          ++hr.delta_excluded_rows;
          continue;
        }
        double e = 0, w = 0;
        for (std::size_t j = 0; j < s.dim_v; ++j) {
          const std::size_t x = off_o + i * s.dim_v + j;
          e += d.inputs.d_o[x] * (d.o[x] - ref.o[x]);
          w += std::abs(d.inputs.d_o[x]);
        }
        hr.delta_error_sum += e;
        if (w > 0) m.push(e / (rs.ulp[i] * w));
      }
      hr.delta = make_test(m, o);
      hr.delta_biased = hr.delta->biased;
    }
    if (!d.dq.empty()) {
      hr.dq.emplace();
      const std::size_t off = s.q_offset(hr.batch, hr.head, 0);
      row_errors(d.dq.data() + off, ref.dq.data() + off, s.seq_q, s.dim, d.info("dq")->format, o, *hr.dq);
    }
    if (!d.lse.empty()) {
      hr.lse.emplace();
      const std::size_t off = s.q_row(hr.batch, hr.head, 0);
      row_errors(d.lse.data() + off, ref.lse.data() + off, s.seq_q, 1, d.info("lse")->format, o, *hr.lse);
    }

    const std::vector<double> tie = on_device ? tie_rows_from_counts(device_ties, s, hr.batch, hr.head, hr)
                                              : tie_rows(d, pr, hr.batch, hr.head, o, hr);
    analysis::running_moments ts, td, os, od;
    for (std::size_t i = 0; i < s.seq_q; ++i) {
      if (std::isnan(rs.signed_rows[i]) || std::isnan(tie[i])) continue;
      (tie[i] > 0 ? ts : os).push(rs.signed_rows[i]);
      (tie[i] > 0 ? td : od).push(rs.directed_rows[i]);
    }
    hr.o_tie_signed = make_test(ts, o);
    hr.o_tie_directed = make_test(td, o);
    hr.o_rest_signed = make_test(os, o);
    hr.o_rest_directed = make_test(od, o);

    hr.v_sign_skew.assign(s.dim_v, 0.0);
    for (std::size_t e = 0; e < s.dim_v; ++e) {
      std::uint64_t pos = 0, neg = 0;
      for (std::size_t j = 0; j < s.seq_k; ++j) {
        const double x = d.inputs.v[s.v_offset(hr.batch, hr.kv_head, j) + e];
        pos += x > 0;
        neg += x < 0;
      }
      hr.v_sign_skew[e] = analysis::sign_test(pos, neg).sign_skew;
      hr.v_mean_abs_skew += std::abs(hr.v_sign_skew[e]) / static_cast<double>(s.dim_v);
    }
    tick();
  });

  r.kv_heads.resize(s.batch * s.kv_heads);
  reference::detail::parallel_for(r.kv_heads.size(), o.threads, [&](std::size_t task) {
    kv_head_report& kr = r.kv_heads[task];
    kr.batch = task / s.kv_heads;
    kr.kv_head = task % s.kv_heads;
    if (!d.dk.empty()) {
      kr.dk.emplace();
      const std::size_t off = s.k_offset(kr.batch, kr.kv_head, 0);
      row_errors(d.dk.data() + off, ref.dk.data() + off, s.seq_k, s.dim, d.info("dk")->format, o, *kr.dk);
    }
    if (!d.dv.empty()) {
      kr.dv.emplace();
      const std::size_t off = s.v_offset(kr.batch, kr.kv_head, 0);
      row_errors(d.dv.data() + off, ref.dv.data() + off, s.seq_k, s.dim_v, d.info("dv")->format, o, *kr.dv);
    }
    tick();
  });

  for (const head_report& hr : r.heads) {
    r.o_signed_all.merge(hr.o.signed_error.moments);
    r.o_directed_all.merge(hr.o.directed_error.moments);
    r.heads_biased += hr.biased;
    r.heads_delta_biased += hr.delta_biased;
    r.excluded_rows += hr.o.excluded_rows;
  }
  const auto t2 = clock::now();
  r.seconds_reference = std::chrono::duration<double>(t1 - t0).count();
  r.seconds_statistics = std::chrono::duration<double>(t2 - t1).count();
  return r;
}

}  // namespace tiebreak::audit
