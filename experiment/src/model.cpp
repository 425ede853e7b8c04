// SPDX-License-Identifier: Apache-2.0
#include "model.hpp"

#include <Eigen/Core>

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"

namespace tiebreak::experiment::detail {

namespace {

void fill_normal(mat& m, std::size_t rows, std::size_t cols, splitmix64_generator g, double sd) {
  m.resize(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(sd * irwin_hall4_unit(g));  // double -> f32: nearest-even
}

std::uint16_t to_bf16(float x) { return f32_bits_to_bf16_rne(std::bit_cast<std::uint32_t>(x)); }
float bf16_to_f32(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

/// Row-wise RMSNorm without gain: z = x / sqrt(mean(x²) + 1e-6); rinv[n] = 1 / that root.
void rmsnorm(const mat& x, mat& z, std::vector<float>& rinv) {
  z.resize(x.rows(), x.cols());
  rinv.resize(static_cast<std::size_t>(x.rows()));
  for (Eigen::Index n = 0; n < x.rows(); ++n) {
    double ss = 0;
    for (Eigen::Index i = 0; i < x.cols(); ++i) ss += static_cast<double>(x(n, i)) * x(n, i);
    const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(x.cols()) + 1e-6));
    rinv[static_cast<std::size_t>(n)] = r;
    for (Eigen::Index i = 0; i < x.cols(); ++i) z(n, i) = x(n, i) * r;
  }
}

/// dx = rinv · (dz − z · mean(dz ∘ z)), row-wise (the derivative of rmsnorm at x).
void rmsnorm_backward(const mat& z, const std::vector<float>& rinv, const mat& dz, mat& dx_accumulate) {
  for (Eigen::Index n = 0; n < z.rows(); ++n) {
    double dot = 0;
    for (Eigen::Index i = 0; i < z.cols(); ++i) dot += static_cast<double>(dz(n, i)) * z(n, i);
    const double mean = dot / static_cast<double>(z.cols());
    const double r = rinv[static_cast<std::size_t>(n)];
    for (Eigen::Index i = 0; i < z.cols(); ++i)
      dx_accumulate(n, i) += static_cast<float>(r * (static_cast<double>(dz(n, i)) - static_cast<double>(z(n, i)) * mean));
  }
}

/// Element (b, s, h, d) of an N x (H D) matrix (row b·S + s, column h·D + d) <-> the per-head dense
/// layout [h][b][s][d] in which head h is one contiguous bhsd tensor with batch B and one head.
std::size_t head_index(const config& c, std::size_t h, std::size_t n, std::size_t d) {
  return (h * c.batch * c.seq + n) * c.head_dim + d;
}
void to_heads_bf16(const config& c, const mat& m, std::vector<std::uint16_t>& out) {
  out.resize(c.batch * c.seq * c.heads * c.head_dim);
  for (std::size_t n = 0; n < c.batch * c.seq; ++n)
    for (std::size_t h = 0; h < c.heads; ++h)
      for (std::size_t d = 0; d < c.head_dim; ++d)
        out[head_index(c, h, n, d)] = to_bf16(m(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(h * c.head_dim + d)));
}
void from_heads_bf16(const config& c, const std::vector<std::uint16_t>& in, mat& m) {
  m.resize(static_cast<Eigen::Index>(c.batch * c.seq), static_cast<Eigen::Index>(c.heads * c.head_dim));
  for (std::size_t n = 0; n < c.batch * c.seq; ++n)
    for (std::size_t h = 0; h < c.heads; ++h)
      for (std::size_t d = 0; d < c.head_dim; ++d)
        m(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(h * c.head_dim + d)) = bf16_to_f32(in[head_index(c, h, n, d)]);
}

attn::problem head_problem(const config& c) {
  attn::problem p;
  p.shape = attn::shape{c.batch, 1, 1, c.seq, c.seq, c.head_dim, c.head_dim};
  p.mask = c.causal ? attn::mask_kind::causal : attn::mask_kind::none;
  p.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  return p;
}

/// Mean cross-entropy of next-token prediction (positions 0 .. S−2 of every sequence) and, when
/// `dlogits` is not null, its gradient with respect to the logits.
double cross_entropy(const config& c, const mat& logits, const std::vector<std::uint32_t>& tokens, mat* dlogits) {
  const std::size_t count = c.batch * (c.seq - 1);
  if (dlogits) dlogits->setZero(logits.rows(), logits.cols());
  double loss = 0;
  std::vector<double> p(c.vocab);
  for (std::size_t b = 0; b < c.batch; ++b) {
    for (std::size_t s = 0; s + 1 < c.seq; ++s) {
      const auto n = static_cast<Eigen::Index>(b * c.seq + s);
      const std::uint32_t target = tokens[b * c.seq + s + 1];
      double mx = -INFINITY;
      for (std::size_t v = 0; v < c.vocab; ++v) mx = std::max(mx, static_cast<double>(logits(n, static_cast<Eigen::Index>(v))));
      double z = 0;
      for (std::size_t v = 0; v < c.vocab; ++v) z += p[v] = std::exp(static_cast<double>(logits(n, static_cast<Eigen::Index>(v))) - mx);
      loss += std::log(z) + mx - static_cast<double>(logits(n, target));
      if (dlogits)
        for (std::size_t v = 0; v < c.vocab; ++v)
          (*dlogits)(n, static_cast<Eigen::Index>(v)) =
              static_cast<float>((p[v] / z - (v == target ? 1.0 : 0.0)) / static_cast<double>(count));
    }
  }
  return loss / static_cast<double>(count);
}

/// The largest scaled score of one head over every row and visible key (what decides whether an
/// offset β·max underflows every P-bar of a row): double from the bf16 Q and K the kernel reads.
double max_scaled_score(const config& c, const attn::problem& p, const std::uint16_t* q, const std::uint16_t* k) {
  double mx = -INFINITY;
  for (std::size_t b = 0; b < c.batch; ++b)
    for (std::size_t i = 0; i < c.seq; ++i)
      for (std::size_t j = 0; j < p.visible_keys(i); ++j) {
        double s = 0;
        for (std::size_t d = 0; d < c.head_dim; ++d)
          s += static_cast<double>(bf16_to_f32(q[(b * c.seq + i) * c.head_dim + d])) * bf16_to_f32(k[(b * c.seq + j) * c.head_dim + d]);
        mx = std::max(mx, s * p.scale);
      }
  return mx;
}

mat embed_tokens(const config& c, const weights& w, const std::vector<std::uint32_t>& tokens) {
  mat x(static_cast<Eigen::Index>(c.batch * c.seq), static_cast<Eigen::Index>(c.d_model));
  for (std::size_t n = 0; n < c.batch * c.seq; ++n) x.row(static_cast<Eigen::Index>(n)) = w.embed.row(tokens[n]);
  return x;
}

}  // namespace

std::vector<mat*> weights::all() {
  std::vector<mat*> r{&embed};
  for (auto* v : {&wq, &wk, &wv, &wo})
    for (mat& m : *v) r.push_back(&m);
  r.push_back(&wout);
  return r;
}
std::vector<const mat*> weights::all() const {
  std::vector<const mat*> r;
  for (mat* m : const_cast<weights*>(this)->all()) r.push_back(m);
  return r;
}
void weights::zeros_like(const weights& w) {
  *this = w;
  for (mat* m : all()) m->setZero();
}

weights init_weights(const config& c, std::uint64_t seed) {
  weights w;
  const std::size_t hd = c.heads * c.head_dim;
  std::uint64_t tag = 0;
  auto gen = [&] { return splitmix64_generator(splitmix64(seed ^ 0x6d6f64656cull) + ++tag * 0x632be59bd9b4e019ull); };
  fill_normal(w.embed, c.vocab, c.d_model, gen(), 1.0);
  for (std::size_t l = 0; l < c.layers; ++l) {
    w.wq.emplace_back();
    w.wk.emplace_back();
    w.wv.emplace_back();
    w.wo.emplace_back();
    fill_normal(w.wq.back(), c.d_model, hd, gen(), c.init_std);
    fill_normal(w.wk.back(), c.d_model, hd, gen(), c.init_std);
    fill_normal(w.wv.back(), c.d_model, hd, gen(), c.init_std);
    fill_normal(w.wo.back(), hd, c.d_model, gen(), c.init_std);
  }
  fill_normal(w.wout, c.d_model, c.vocab, gen(), c.init_std);
  return w;
}

std::vector<std::uint32_t> make_batch(const config& c, data_kind kind, std::uint64_t seed, std::size_t step) {
  std::vector<std::uint32_t> t(c.batch * c.seq);
  splitmix64_generator g(splitmix64(splitmix64(seed ^ 0x64617461ull) + step) + static_cast<std::uint64_t>(kind));
  for (std::size_t b = 0; b < c.batch; ++b) {
    std::uint32_t* row = t.data() + b * c.seq;
    if (kind == data_kind::isotropic) {
      for (std::size_t s = 0; s < c.seq; ++s) row[s] = static_cast<std::uint32_t>(uniform_below(g, c.vocab));
    } else {
      // lowrank: the sink token 0 every 4th position, a motif of 3 tokens from the 8-token
      // sub-vocabulary 1..8 repeated in between: 4 distinct tokens per sequence, each recurring.
      std::uint32_t motif[3];
      for (std::uint32_t& m : motif) m = 1 + static_cast<std::uint32_t>(uniform_below(g, std::min<std::size_t>(8, c.vocab - 1)));
      for (std::size_t s = 0; s < c.seq; ++s) row[s] = s % 4 == 0 ? 0u : motif[s % 4 - 1];
    }
  }
  return t;
}

step_stats train_step(const config& c, const weights& w, const std::vector<std::uint32_t>& tokens,
                      const head_modes& modes, std::uint64_t call_seed, attention_backend& be, weights& grad) {
  const std::size_t L = c.layers, H = c.heads, N = c.batch * c.seq, per_head = N * c.head_dim;
  const attn::problem prob = head_problem(c);
  step_stats st;
  st.delta_error.assign(L * H, 0);
  st.repeated_max_rows.assign(L * H, 0);
  st.p_one.assign(L * H, 0);
  st.output_error_mean.assign(L * H, 0);
  st.o_nonfinite.assign(L * H, 0);
  st.max_score.assign(L * H, -INFINITY);

  struct layer_cache {
    mat x_in, xn, ocat;
    std::vector<float> rinv;
    std::vector<std::uint16_t> q, k, v, o16;
    std::vector<float> o32, lse;
  };
  std::vector<layer_cache> cache(L);
  mat x = embed_tokens(c, w, tokens);
  std::vector<probe::head_counters> counters(c.batch);

  auto args_for = [&](layer_cache& lc, std::size_t l, std::size_t h) {
    attn::flash_args a;
    a.prob = prob;
    a.opt.mode = modes[l * H + h];
    a.opt.beta = c.debias_beta;
    a.opt.exp = c.exp;
    a.opt.seed = splitmix64(call_seed + 0x9e3779b97f4a7c15ull * (l * H + h + 1));
    const std::size_t off = h * per_head;
    a.t.q = lc.q.data() + off;
    a.t.k = lc.k.data() + off;
    a.t.v = lc.v.data() + off;
    a.t.o_bf16 = lc.o16.data() + off;
    a.t.o_f32 = lc.o32.data() + off;
    a.t.lse = lc.lse.data() + h * N;
    return a;
  };

  for (std::size_t l = 0; l < L; ++l) {
    layer_cache& lc = cache[l];
    lc.x_in = x;
    rmsnorm(x, lc.xn, lc.rinv);
    mat proj = lc.xn * w.wq[l];
    to_heads_bf16(c, proj, lc.q);
    proj = lc.xn * w.wk[l];
    to_heads_bf16(c, proj, lc.k);
    proj = lc.xn * w.wv[l];
    to_heads_bf16(c, proj, lc.v);
    lc.o16.assign(H * per_head, 0);
    lc.o32.assign(H * per_head, 0.0f);
    lc.lse.assign(H * N, 0.0f);
    lc.ocat.resize(static_cast<Eigen::Index>(N), static_cast<Eigen::Index>(H * c.head_dim));
    for (std::size_t h = 0; h < H; ++h) {
      attn::flash_args a = args_for(lc, l, h);
      std::fill(counters.begin(), counters.end(), probe::head_counters{});
      a.counters = counters.data();
      be.forward(a);
      probe::head_counters sum;
      for (const auto& hc : counters) sum.merge(hc);
      st.repeated_max_rows[l * H + h] = static_cast<double>(sum.repeated_max_exact);
      st.p_one[l * H + h] = static_cast<double>(sum.p_one);
      st.output_error_mean[l * H + h] =
          sum.output_error.count ? sum.output_error.sum / static_cast<double>(sum.output_error.count) : 0.0;
      const bool f32_out = modes[l * H + h] == attn::out_mode::fp32;
      st.max_score[l * H + h] = max_scaled_score(c, prob, lc.q.data() + h * per_head, lc.k.data() + h * per_head);
      for (std::size_t i = 0; i < per_head; ++i) st.o_nonfinite[l * H + h] += std::isfinite(lc.o32[h * per_head + i]) ? 0 : 1;
      for (std::size_t n = 0; n < N; ++n)
        for (std::size_t d = 0; d < c.head_dim; ++d) {
          const std::size_t i = head_index(c, h, n, d);
          lc.ocat(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(h * c.head_dim + d)) =
              f32_out ? lc.o32[i] : bf16_to_f32(lc.o16[i]);
        }
    }
    x += lc.ocat * w.wo[l];
  }

  mat zf;
  std::vector<float> rinv_f;
  rmsnorm(x, zf, rinv_f);
  const mat logits = zf * w.wout;
  mat dlogits;
  st.loss = cross_entropy(c, logits, tokens, &dlogits);

  grad.zeros_like(w);
  grad.wout = zf.transpose() * dlogits;
  const mat dz = dlogits * w.wout.transpose();
  mat dx = mat::Zero(x.rows(), x.cols());
  rmsnorm_backward(zf, rinv_f, dz, dx);

  std::vector<std::uint16_t> do16, dq16(H * per_head), dk16(H * per_head), dv16(H * per_head);
  std::vector<float> delta(H * N);
  for (std::size_t l = L; l-- > 0;) {
    layer_cache& lc = cache[l];
    grad.wo[l] = lc.ocat.transpose() * dx;
    const mat docat = dx * w.wo[l].transpose();
    to_heads_bf16(c, docat, do16);
    for (std::size_t h = 0; h < H; ++h) {
      attn::flash_args a = args_for(lc, l, h);
      const std::size_t off = h * per_head;
      a.t.dout = do16.data() + off;
      a.t.delta = delta.data() + h * N;
      a.t.dq = dq16.data() + off;
      a.t.dk = dk16.data() + off;
      a.t.dv = dv16.data() + off;
      std::fill(counters.begin(), counters.end(), probe::head_counters{});
      a.counters = counters.data();
      be.backward(a);
      probe::head_counters sum;
      for (const auto& hc : counters) sum.merge(hc);
      st.delta_error[l * H + h] = sum.delta_error.sum;
    }
    mat dq, dk, dv;
    from_heads_bf16(c, dq16, dq);
    from_heads_bf16(c, dk16, dk);
    from_heads_bf16(c, dv16, dv);
    grad.wq[l] = lc.xn.transpose() * dq;
    grad.wk[l] = lc.xn.transpose() * dk;
    grad.wv[l] = lc.xn.transpose() * dv;
    mat dxn = dq * w.wq[l].transpose();
    dxn += dk * w.wk[l].transpose();
    dxn += dv * w.wv[l].transpose();
    rmsnorm_backward(lc.xn, lc.rinv, dxn, dx);  // dx (the residual path) += the branch's gradient
  }
  for (std::size_t n = 0; n < N; ++n) grad.embed.row(tokens[n]) += dx.row(static_cast<Eigen::Index>(n));
  return st;
}

double reference_loss(const config& c, const weights& w, const std::vector<std::uint32_t>& tokens) {
  const std::size_t H = c.heads, D = c.head_dim, S = c.seq;
  const attn::problem prob = head_problem(c);
  mat x = embed_tokens(c, w, tokens);
  std::vector<double> p(S);
  for (std::size_t l = 0; l < c.layers; ++l) {
    mat xn;
    std::vector<float> rinv;
    rmsnorm(x, xn, rinv);
    const mat q = xn * w.wq[l], k = xn * w.wk[l], v = xn * w.wv[l];
    mat ocat(x.rows(), static_cast<Eigen::Index>(H * D));
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t i = 0; i < S; ++i) {
          const auto ri = static_cast<Eigen::Index>(b * S + i);
          const std::size_t nk = prob.visible_keys(i);
          double mx = -INFINITY;
          for (std::size_t j = 0; j < nk; ++j) {
            double s = 0;
            for (std::size_t d = 0; d < D; ++d)
              s += static_cast<double>(q(ri, static_cast<Eigen::Index>(h * D + d))) *
                   k(static_cast<Eigen::Index>(b * S + j), static_cast<Eigen::Index>(h * D + d));
            p[j] = s * prob.scale;
            mx = std::max(mx, p[j]);
          }
          double z = 0;
          for (std::size_t j = 0; j < nk; ++j) z += p[j] = std::exp(p[j] - mx);
          for (std::size_t d = 0; d < D; ++d) {
            double o = 0;
            for (std::size_t j = 0; j < nk; ++j) o += p[j] * v(static_cast<Eigen::Index>(b * S + j), static_cast<Eigen::Index>(h * D + d));
            ocat(ri, static_cast<Eigen::Index>(h * D + d)) = nk ? static_cast<float>(o / z) : 0.0f;
          }
        }
    x += ocat * w.wo[l];
  }
  mat zf;
  std::vector<float> rinv_f;
  rmsnorm(x, zf, rinv_f);
  return cross_entropy(c, zf * w.wout, tokens, nullptr);
}

void adamw_update(const config& c, weights& w, const weights& grad, adam_state& s) {
  if (s.t == 0) {
    s.m.zeros_like(w);
    s.v.zeros_like(w);
  }
  ++s.t;
  const double b1 = c.adam_beta1, b2 = c.adam_beta2;
  const double c1 = 1.0 - std::pow(b1, static_cast<double>(s.t)), c2 = 1.0 - std::pow(b2, static_cast<double>(s.t));
  const auto ws = w.all();
  const auto gs = grad.all();
  const auto ms = s.m.all();
  const auto vs = s.v.all();
  for (std::size_t k = 0; k < ws.size(); ++k) {
    const double wd = k == 0 ? 0.0 : c.weight_decay;  // no decay on the embedding
    float* wp = ws[k]->data();
    const float* gp = gs[k]->data();
    float* mp = ms[k]->data();
    float* vp = vs[k]->data();
    for (Eigen::Index i = 0; i < ws[k]->size(); ++i) {
      const double g = gp[i];
      const double m = b1 * mp[i] + (1.0 - b1) * g;
      const double v = b2 * vp[i] + (1.0 - b2) * g * g;
      mp[i] = static_cast<float>(m);
      vp[i] = static_cast<float>(v);
      const double upd = (m / c1) / (std::sqrt(v / c2) + c.adam_eps) + wd * wp[i];
      wp[i] = static_cast<float>(wp[i] - c.lr * upd);
    }
  }
}

}  // namespace tiebreak::experiment::detail
