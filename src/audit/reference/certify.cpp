// SPDX-License-Identifier: Apache-2.0
/// @file Certification of the f64 attention reference by a ~60-digit recomputation (Boost cpp_bin_float).
///
/// The recomputation uses plain loops in the textbook order, not Eigen: it is an independent second
/// implementation as well as a more precise one. With u = 10^-60 and at most 2^20 terms per sum,
/// its relative error is below 10^-50 of each row's magnitude (exp and log of cpp_bin_float are
/// accurate to a few ulps); `bound` adds 10^-40 of the row maximum to stay well clear of it.
#include <tiebreak/reference/attention.hpp>

#include "check.hpp"
#include "parallel.hpp"

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <algorithm>
#include <cmath>

namespace tiebreak::reference {
namespace {

namespace mp = boost::multiprecision;
using real = mp::number<mp::cpp_bin_float<60>, mp::et_off>;
constexpr double mp_error_rel = 1e-40;

struct mp_outputs {
  std::vector<real> o, lse, delta, dq, dk, dv;
};

/// One (batch, head) in multiprecision; dK/dV parts go to the per-query-head buffers.
void head_mp(const attention_inputs& in, const attn::problem& pr, const real& scale, std::size_t b, std::size_t h,
             mp_outputs& out, std::vector<real>& dk_part, std::vector<real>& dv_part) {
  const attention_shape& s = pr.shape;
  const std::size_t bh = b * s.heads + h, kvh = s.kv_head(h);
  const double* q = in.q.data() + s.q_offset(b, h, 0);
  const double* k = in.k.data() + s.k_offset(b, kvh, 0);
  const double* v = in.v.data() + s.v_offset(b, kvh, 0);
  std::vector<real> p(s.seq_q * s.seq_k, real(0));
  for (std::size_t i = 0; i < s.seq_q; ++i) {
    const std::size_t n = pr.visible_keys(i);
    real* row = p.data() + i * s.seq_k;
    for (std::size_t j = 0; j < n; ++j) {
      real acc = 0;
      for (std::size_t d = 0; d < s.dim; ++d) acc += real(q[i * s.dim + d]) * real(k[j * s.dim + d]);
      row[j] = scale * acc;
    }
    if (n == 0) {
      out.lse[s.q_row(b, h, i)] = -std::numeric_limits<real>::infinity();
      continue;
    }
    real m = row[0];
    for (std::size_t j = 1; j < n; ++j) m = std::max(m, row[j]);
    real l = 0;
    for (std::size_t j = 0; j < n; ++j) {
      row[j] = exp(row[j] - m);
      l += row[j];
    }
    for (std::size_t j = 0; j < n; ++j) row[j] /= l;
    out.lse[s.q_row(b, h, i)] = m + log(l);
    for (std::size_t e = 0; e < s.dim_v; ++e) {
      real acc = 0;
      for (std::size_t j = 0; j < n; ++j) acc += row[j] * real(v[j * s.dim_v + e]);
      out.o[s.o_offset(b, h, i) + e] = acc;
    }
  }
  if (in.d_o.empty()) return;
  const double* dO = in.d_o.data() + s.o_offset(b, h, 0);
  for (std::size_t i = 0; i < s.seq_q; ++i) {
    const std::size_t n = pr.visible_keys(i);
    real delta = 0;
    for (std::size_t e = 0; e < s.dim_v; ++e) delta += real(dO[i * s.dim_v + e]) * out.o[s.o_offset(b, h, i) + e];
    out.delta[s.q_row(b, h, i)] = delta;
    for (std::size_t j = 0; j < n; ++j) {
      const real pij = p[i * s.seq_k + j];
      real dp = 0;
      for (std::size_t e = 0; e < s.dim_v; ++e) dp += real(dO[i * s.dim_v + e]) * real(v[j * s.dim_v + e]);
      const real ds = pij * (dp - delta);
      for (std::size_t d = 0; d < s.dim; ++d) {
        out.dq[s.q_offset(b, h, i) + d] += scale * ds * real(k[j * s.dim + d]);
        dk_part[(bh * s.seq_k + j) * s.dim + d] += scale * ds * real(q[i * s.dim + d]);
      }
      for (std::size_t e = 0; e < s.dim_v; ++e) dv_part[(bh * s.seq_k + j) * s.dim_v + e] += pij * real(dO[i * s.dim_v + e]);
    }
  }
}

certificate_entry compare(const std::string& name, const std::vector<double>& ref, const std::vector<real>& mpv,
                          std::size_t row_len) {
  if (ref.size() != mpv.size())
    throw reference_error("certify: reference '" + name + "' has " + std::to_string(ref.size()) +
                          " elements, expected " + std::to_string(mpv.size()));
  certificate_entry e;
  e.tensor = name;
  double max_mag = 0;
  for (std::size_t r = 0; r * row_len < ref.size(); ++r) {
    double row_diff = 0, row_mag = 0;
    for (std::size_t x = r * row_len; x < (r + 1) * row_len; ++x) {
      const double exact = static_cast<double>(mpv[x]);
      if (!std::isfinite(exact) && !std::isfinite(ref[x])) continue;  // e.g. LSE = −inf on both sides
      if (!std::isfinite(exact)) continue;  // NaN inputs: nothing to certify
      ++e.count;
      const real diff = abs(real(ref[x]) - mpv[x]);
      row_diff = std::max(row_diff, static_cast<double>(diff));
      row_mag = std::max(row_mag, std::abs(exact));
    }
    e.max_abs = std::max(e.max_abs, row_diff);
    if (row_mag > 0) e.max_rel_row = std::max(e.max_rel_row, row_diff / row_mag);
    else if (row_diff > 0) e.max_rel_row = std::numeric_limits<double>::infinity();
    max_mag = std::max(max_mag, row_mag);
  }
  // Rounding the difference to double (round to nearest) can lose half an ulp of it: widen by 2^-52.
  e.bound = e.max_abs * (1 + 0x1p-52) + mp_error_rel * max_mag;
  return e;
}

}  // namespace

double certificate::max_rel_row() const noexcept {
  double m = 0;
  for (const auto& e : entries) m = std::max(m, e.max_rel_row);
  return m;
}

certificate certify(const attention_inputs& in, const attention_outputs& ref, const attention_options& opt) {
  detail::check_inputs(in, "certify: ");
  const attention_shape& s = in.shape;
  const std::size_t work = s.batch * s.heads * s.seq_q * s.seq_k * std::max(s.dim, s.dim_v);
  if (work > max_certified_work)
    throw reference_error("certify: problem too large for the multiprecision check (" + std::to_string(work) +
                          " > " + std::to_string(max_certified_work) + " multiply-adds)");
  const attn::problem pr = opt.problem_for(s);
  const real scale = real(pr.scale);
  mp_outputs m;
  m.o.assign(s.o_size(), real(0));
  m.lse.assign(s.lse_size(), real(0));
  std::vector<real> dk_part, dv_part;
  const bool backward = !in.d_o.empty();
  if (backward) {
    m.delta.assign(s.lse_size(), real(0));
    m.dq.assign(s.q_size(), real(0));
    dk_part.assign(s.batch * s.heads * s.seq_k * s.dim, real(0));
    dv_part.assign(s.batch * s.heads * s.seq_k * s.dim_v, real(0));
  }
  detail::parallel_for(s.batch * s.heads, opt.threads, [&](std::size_t t) {
    head_mp(in, pr, scale, t / s.heads, t % s.heads, m, dk_part, dv_part);
  });
  certificate c;
  c.digits10 = std::numeric_limits<real>::digits10;
  c.entries.push_back(compare("o", ref.o, m.o, s.dim_v));
  c.entries.push_back(compare("lse", ref.lse, m.lse, 1));
  if (backward) {
    m.dk.assign(s.k_size(), real(0));
    m.dv.assign(s.v_size(), real(0));
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t h = 0; h < s.heads; ++h) {
        const std::size_t kvh = s.kv_head(h), bh = b * s.heads + h;
        for (std::size_t x = 0; x < s.seq_k * s.dim; ++x) m.dk[s.k_offset(b, kvh, 0) + x] += dk_part[bh * s.seq_k * s.dim + x];
        for (std::size_t x = 0; x < s.seq_k * s.dim_v; ++x) m.dv[s.v_offset(b, kvh, 0) + x] += dv_part[bh * s.seq_k * s.dim_v + x];
      }
    c.entries.push_back(compare("delta", ref.delta, m.delta, 1));
    c.entries.push_back(compare("dq", ref.dq, m.dq, s.dim));
    c.entries.push_back(compare("dk", ref.dk, m.dk, s.dim));
    c.entries.push_back(compare("dv", ref.dv, m.dv, s.dim_v));
  }
  return c;
}

}  // namespace tiebreak::reference
