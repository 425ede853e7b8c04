// SPDX-License-Identifier: Apache-2.0
/// @file The f64 attention reference (Eigen products, one (batch, head) per task).
#include <tiebreak/reference/attention.hpp>

#include "check.hpp"
#include "parallel.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <mutex>

namespace tiebreak::reference {
namespace {

using row_matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using const_map = Eigen::Map<const row_matrix>;
using mut_map = Eigen::Map<row_matrix>;

}  // namespace

void detail::check_inputs(const attention_inputs& in, const char* context) {
  const attention_shape& s = in.shape;
  if (const attn::problem_error e = s.validate(); e != attn::problem_error::ok)
    throw reference_error(std::string(context) + "attention shape: " + attn::error_text(e) + " (batch " +
                          std::to_string(s.batch) + ", heads " + std::to_string(s.heads) + ", kv_heads " +
                          std::to_string(s.kv_heads) + ", seq_q " + std::to_string(s.seq_q) + ", seq_k " +
                          std::to_string(s.seq_k) + ", dim " + std::to_string(s.dim) + ", dim_v " +
                          std::to_string(s.dim_v) + ")");
  auto need = [&](const char* name, std::size_t have, std::size_t want) {
    if (have != want)
      throw reference_error(std::string(context) + "attention input '" + name + "' has " + std::to_string(have) +
                            " elements, the shape needs " + std::to_string(want));
  };
  need("q", in.q.size(), s.q_size());
  need("k", in.k.size(), s.k_size());
  need("v", in.v.size(), s.v_size());
  if (!in.d_o.empty()) need("do", in.d_o.size(), s.o_size());
}

double attention_options::scale_for(const attention_shape& s) const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(s.dim));
}

attn::problem attention_options::problem_for(const attention_shape& s) const {
  return attn::problem{s, causal ? attn::mask_kind::causal : attn::mask_kind::none, scale_for(s)};
}

attention_outputs attention_f64(const attention_inputs& in, const attention_options& opt) {
  detail::check_inputs(in, "");
  const attention_shape& s = in.shape;
  const attn::problem pr = opt.problem_for(s);
  const double scale = pr.scale;
  const bool backward = !in.d_o.empty();
  const auto Sq = static_cast<Eigen::Index>(s.seq_q), Sk = static_cast<Eigen::Index>(s.seq_k);
  const auto D = static_cast<Eigen::Index>(s.dim), Dv = static_cast<Eigen::Index>(s.dim_v);

  attention_outputs out;
  out.o.assign(s.o_size(), 0.0);
  out.lse.assign(s.lse_size(), 0.0);
  std::vector<double> dk_part, dv_part;  // per query head; summed over each group afterwards
  if (backward) {
    out.delta.assign(s.lse_size(), 0.0);
    out.dq.assign(s.q_size(), 0.0);
    dk_part.assign(s.batch * s.heads * s.seq_k * s.dim, 0.0);
    dv_part.assign(s.batch * s.heads * s.seq_k * s.dim_v, 0.0);
  }
  const std::size_t tasks = s.batch * s.heads;
  std::mutex progress_mutex;
  std::size_t done = 0;

  detail::parallel_for(tasks, opt.threads, [&](std::size_t task) {
    const std::size_t b = task / s.heads, h = task % s.heads;
    const std::size_t kvh = s.kv_head(h);
    const std::size_t bh = b * s.heads + h;
    const const_map Q(in.q.data() + s.q_offset(b, h, 0), Sq, D);
    const const_map K(in.k.data() + s.k_offset(b, kvh, 0), Sk, D);
    const const_map V(in.v.data() + s.v_offset(b, kvh, 0), Sk, Dv);
    row_matrix P = Q * K.transpose();  // scaled below, entry by entry: S = scale · (q · k)
    for (Eigen::Index i = 0; i < Sq; ++i) {
      const auto n = static_cast<Eigen::Index>(pr.visible_keys(static_cast<std::size_t>(i)));
      double* row = P.row(i).data();
      double m = -std::numeric_limits<double>::infinity();
      for (Eigen::Index j = 0; j < n; ++j) {
        row[j] *= scale;
        m = std::max(m, row[j]);  // NaN scores are skipped here and poison l below
      }
      double l = 0;
      for (Eigen::Index j = 0; j < n; ++j) {
        row[j] = std::exp(row[j] - m);
        l += row[j];
      }
      for (Eigen::Index j = n; j < Sk; ++j) row[j] = 0;
      if (n == 0) {
        out.lse[s.q_row(b, h, static_cast<std::size_t>(i))] = -std::numeric_limits<double>::infinity();
        continue;
      }
      for (Eigen::Index j = 0; j < n; ++j) row[j] /= l;
      out.lse[s.q_row(b, h, static_cast<std::size_t>(i))] = m + std::log(l);
    }
    mut_map O(out.o.data() + s.o_offset(b, h, 0), Sq, Dv);
    O.noalias() = P * V;
    if (backward) {
      const const_map dO(in.d_o.data() + s.o_offset(b, h, 0), Sq, Dv);
      double* delta = out.delta.data() + s.q_row(b, h, 0);
      for (Eigen::Index i = 0; i < Sq; ++i) delta[i] = dO.row(i).dot(O.row(i));
      row_matrix dS = dO * V.transpose();  // dP
      for (Eigen::Index i = 0; i < Sq; ++i)
        for (Eigen::Index j = 0; j < Sk; ++j) dS(i, j) = P(i, j) * (dS(i, j) - delta[i]);
      mut_map dQ(out.dq.data() + s.q_offset(b, h, 0), Sq, D);
      dQ.noalias() = dS * K;
      dQ *= scale;
      mut_map dK(dk_part.data() + bh * s.seq_k * s.dim, Sk, D);
      dK.noalias() = dS.transpose() * Q;
      dK *= scale;
      mut_map dV(dv_part.data() + bh * s.seq_k * s.dim_v, Sk, Dv);
      dV.noalias() = P.transpose() * dO;
    }
    if (opt.progress) {
      std::lock_guard lock(progress_mutex);
      opt.progress(++done, tasks);
    }
  });

  if (backward) {  // dK, dV of a key/value head: its query heads' parts summed in head order
    out.dk.assign(s.k_size(), 0.0);
    out.dv.assign(s.v_size(), 0.0);
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t h = 0; h < s.heads; ++h) {
        const std::size_t kvh = s.kv_head(h), bh = b * s.heads + h;
        for (std::size_t x = 0; x < s.seq_k * s.dim; ++x)
          out.dk[s.k_offset(b, kvh, 0) + x] += dk_part[bh * s.seq_k * s.dim + x];
        for (std::size_t x = 0; x < s.seq_k * s.dim_v; ++x)
          out.dv[s.v_offset(b, kvh, 0) + x] += dv_part[bh * s.seq_k * s.dim_v + x];
      }
  }
  return out;
}

}  // namespace tiebreak::reference
