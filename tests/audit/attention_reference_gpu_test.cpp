// SPDX-License-Identifier: Apache-2.0
/// @file attention_f64_device against the host attention_f64: random problems (causal or not, GQA,
/// odd sizes, rows that see no key, NaN/Inf inputs), the stated per-row bound, and certify() on
/// the GPU's result. Every test skips (GTEST_SKIP) without a usable GPU.
#include "audit_fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

namespace ref = tiebreak::reference;
using namespace tiebreak::test;

#define SKIP_WITHOUT_GPU()                                                                      \
  do {                                                                                          \
    if (const std::string why = ref::device_unavailable_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

ref::attention_shape shape(std::size_t b, std::size_t h, std::size_t hkv, std::size_t sq, std::size_t sk, std::size_t d,
                           std::size_t dv) {
  return {b, h, hkv, sq, sk, d, dv};
}

/// Reduced sizes under compute-sanitizer (tools/device-check.sh sets TIEBREAK_GPU_SWEEP_LOG2=16 there).
bool reduced_sizes() {
  const char* e = std::getenv("TIEBREAK_GPU_SWEEP_LOG2");
  return e && std::atoi(e) < 24;
}

/// Largest observed per-row relative difference over all tests of this binary (printed at the end).
double g_max_rel = 0;

/// Compares one tensor row by row: the same NaN/±Inf places, and max |gpu − host| <= bound · max
/// |host| over the finite elements of the row (`floor` raises the row scale, for LSE: max(|LSE|, 1);
/// `scales`, when given, raises it to the row's magnitude: Σ_c |dO_c · O_c| for delta, the sums of
/// |terms| for the gradients, since these cancel).
/// Returns the largest relative difference.
double compare_rows(const std::string& name, const std::vector<double>& gpu, const std::vector<double>& host,
                    std::size_t len, double floor = 0, const std::vector<double>* scales = nullptr) {
  EXPECT_EQ(gpu.size(), host.size()) << name;
  if (gpu.size() != host.size() || len == 0) return 0;
  double worst = 0;
  std::size_t bad_pattern = 0, bad_value = 0;
  for (std::size_t r = 0; r * len < host.size(); ++r) {
    double scale = floor, diff = 0;
    for (std::size_t j = 0; j < len; ++j) {
      const double g = gpu[r * len + j], h = host[r * len + j];
      if (std::isnan(h) || std::isnan(g) || std::isinf(h) || std::isinf(g)) {
        const bool same = (std::isnan(h) && std::isnan(g)) || (!std::isnan(h) && g == h);
        if (!same && bad_pattern++ < 5)
          ADD_FAILURE() << name << " row " << r << " elem " << j << ": gpu " << g << ", host " << h;
        continue;
      }
      scale = std::max(scale, std::abs(h));
      diff = std::max(diff, std::abs(g - h));
    }
    if (diff == 0) continue;
    if (scales) scale = std::max(scale, (*scales)[r]);
    const double rel = scale > 0 ? diff / scale : INFINITY;
    worst = std::max(worst, rel);
    if (rel > ref::device_rel_bound && bad_value++ < 5)
      ADD_FAILURE() << name << " row " << r << ": max |gpu - host| = " << diff << " of row scale " << scale << " ("
                    << rel << " > " << ref::device_rel_bound << ")";
  }
  g_max_rel = std::max(g_max_rel, worst);
  return worst;
}

/// Row magnitudes of the gradients: the sums of the absolute values of the terms each element sums,
/// bounded per row by one factor (dS cancels by construction, Σ_j dS_ij = 0, so max |dQ row| can be
/// far below the terms it comes from). dQ row i: |scale| Σ_j P_ij (|dP_ij| + |delta_i|) max|K_j|;
/// dK row j: |scale| Σ_(h,i) P_ij (|dP_ij| + |delta_i|) max|Q_i|; dV row j: Σ_(h,i) P_ij max|dO_i|.
struct gradient_magnitudes {
  std::vector<double> dq, dk, dv;
};
gradient_magnitudes magnitudes_of(const ref::attention_inputs& in, const ref::attention_options& o,
                                  const ref::attention_outputs& host) {
  const auto& s = in.shape;
  const double scale = o.scale_for(s), as = std::abs(scale);
  gradient_magnitudes g;
  g.dq.assign(s.batch * s.heads * s.seq_q, 0.0);
  g.dk.assign(s.batch * s.kv_heads * s.seq_k, 0.0);
  g.dv.assign(s.batch * s.kv_heads * s.seq_k, 0.0);
  auto max_abs = [](const double* x, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(x[i]));
    return m;
  };
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h) {
      const std::size_t bh = b * s.heads + h, bkv = b * s.kv_heads + s.kv_head(h);
      for (std::size_t i = 0; i < s.seq_q; ++i) {
        const std::size_t r = bh * s.seq_q + i;
        const double* q = in.q.data() + r * s.dim;
        const double* d_o = in.d_o.data() + r * s.dim_v;
        const double mq = max_abs(q, s.dim), mdo = max_abs(d_o, s.dim_v);
        for (std::size_t j = 0; j < s.seq_k; ++j) {
          if (!ref::visible(s, o.causal, i, j)) continue;
          const double* k = in.k.data() + (bkv * s.seq_k + j) * s.dim;
          const double* v = in.v.data() + (bkv * s.seq_k + j) * s.dim_v;
          double dot = 0, dp = 0;
          for (std::size_t e = 0; e < s.dim; ++e) dot += q[e] * k[e];
          for (std::size_t e = 0; e < s.dim_v; ++e) dp += d_o[e] * v[e];
          const double p = std::exp(dot * scale - host.lse[r]);
          const double t = p * (std::abs(dp) + std::abs(host.delta[r]));
          g.dq[r] += as * t * max_abs(k, s.dim);
          g.dk[bkv * s.seq_k + j] += as * t * mq;
          g.dv[bkv * s.seq_k + j] += p * mdo;
        }
      }
    }
  return g;
}

/// Runs both references and compares every tensor; returns the largest row difference.
double compare(const ref::attention_inputs& in, const ref::attention_options& o, ref::attention_outputs* gpu_out = nullptr) {
  const auto host = ref::attention_f64(in, o);
  const auto gpu = ref::attention_f64_device(in, o);
  const auto& s = in.shape;
  double w = 0;
  w = std::max(w, compare_rows("o", gpu.o, host.o, s.dim_v));
  w = std::max(w, compare_rows("lse", gpu.lse, host.lse, 1, 1.0));
  if (!in.d_o.empty()) {
    std::vector<double> delta_scale(host.delta.size(), 0.0);
    for (std::size_t r = 0; r < delta_scale.size(); ++r)
      for (std::size_t c = 0; c < s.dim_v; ++c)
        delta_scale[r] += std::abs(in.d_o[r * s.dim_v + c] * host.o[r * s.dim_v + c]);
    w = std::max(w, compare_rows("delta", gpu.delta, host.delta, 1, 0, &delta_scale));
    const gradient_magnitudes g = magnitudes_of(in, o, host);
    w = std::max(w, compare_rows("dq", gpu.dq, host.dq, s.dim, 0, &g.dq));
    w = std::max(w, compare_rows("dk", gpu.dk, host.dk, s.dim, 0, &g.dk));
    w = std::max(w, compare_rows("dv", gpu.dv, host.dv, s.dim_v, 0, &g.dv));
  } else {
    EXPECT_TRUE(gpu.dq.empty() && gpu.dk.empty() && gpu.dv.empty() && gpu.delta.empty());
  }
  if (gpu_out) *gpu_out = gpu;
  return w;
}

struct random_case {
  const char* name;
  ref::attention_shape s;
  bool causal;
  double scale;  // 0: default 1/sqrt(dim)
};

class RandomProblems : public testing::TestWithParam<random_case> {};

TEST_P(RandomProblems, MatchesHostReferenceWithinBound) {
  SKIP_WITHOUT_GPU();
  const random_case& c = GetParam();
  if (reduced_sizes() && c.s.seq_q * c.s.seq_k > 100000) GTEST_SKIP() << "reduced sizes (TIEBREAK_GPU_SWEEP_LOG2)";
  for (const bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "forward + backward" : "forward");
    const auto in = make_problem(c.s, 1000 + c.s.seq_q * 7 + c.s.dim, 0.4, backward, 0.1);
    ref::attention_options o;
    o.causal = c.causal;
    if (c.scale != 0) o.scale = c.scale;
    const double w = compare(in, o);
    std::printf("[attention-ref] %-28s %s max row rel diff %.3g\n", c.name, backward ? "fwd+bwd" : "fwd    ", w);
  }
}

// Odd sizes: seq not a multiple of the tiles (64 x 32, or 32 x 16 for dims > 128), dims 1, 64, 128,
// 200, 256, seq_q != seq_k both ways, GQA and MQA, negative and large scales.
INSTANTIATE_TEST_SUITE_P(
    Gpu, RandomProblems,
    testing::Values(random_case{"d64", shape(1, 2, 2, 100, 100, 64, 64), false, 0},
                    random_case{"d64_causal", shape(1, 2, 2, 100, 100, 64, 64), true, 0},
                    random_case{"gqa_d128_causal_sq<sk", shape(2, 4, 2, 77, 130, 128, 128), true, 0},
                    random_case{"mqa_d1_causal_sq>sk", shape(1, 3, 1, 130, 77, 1, 1), true, 0},
                    random_case{"d200_dv256", shape(1, 2, 1, 65, 33, 200, 256), false, 0},
                    random_case{"d256_causal", shape(1, 1, 1, 97, 97, 256, 256), true, 0},
                    random_case{"dv64_neg_scale", shape(1, 3, 1, 257, 257, 128, 64), true, -0.3},
                    random_case{"sharp_scale", shape(1, 2, 2, 64, 200, 32, 48), false, 2.0},
                    random_case{"one_row_one_key", shape(3, 2, 1, 1, 1, 7, 5), false, 0},
                    random_case{"s1024_d128", shape(1, 2, 1, 1024, 1024, 128, 128), true, 0}),
    [](const testing::TestParamInfo<random_case>& i) {
      std::string n = i.param.name;
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

// Causal with seq_q > seq_k: the first seq_q - seq_k rows see no key: O = 0, LSE = -inf, dQ = 0.
TEST(AttentionReferenceGpu, RowsThatSeeNoKey) {
  SKIP_WITHOUT_GPU();
  const auto s = shape(1, 2, 1, 50, 20, 16, 16);
  const auto in = make_problem(s, 77, 0.2, true);
  ref::attention_options o;
  o.causal = true;
  ref::attention_outputs g;
  compare(in, o, &g);
  for (std::size_t h = 0; h < s.heads; ++h)
    for (std::size_t i = 0; i < s.seq_q; ++i) {
      const std::size_t r = h * s.seq_q + i;
      const bool none = i < s.seq_q - s.seq_k;
      if (none) {
        EXPECT_EQ(g.lse[r], -INFINITY) << i;
        EXPECT_EQ(g.delta[r], 0.0) << i;
        for (std::size_t e = 0; e < s.dim_v; ++e) EXPECT_EQ(g.o[r * s.dim_v + e], 0.0) << i;
        for (std::size_t e = 0; e < s.dim; ++e) EXPECT_EQ(g.dq[r * s.dim + e], 0.0) << i;
      } else {
        EXPECT_TRUE(std::isfinite(g.lse[r])) << i;
      }
    }
}

// NaN/Inf propagate exactly as on the host (masked pairs included: both take 0·x in their dense
// products), causal and not; the finite elements still agree within the bound.
TEST(AttentionReferenceGpu, NonFiniteInputsPropagateLikeTheHost) {
  SKIP_WITHOUT_GPU();
  struct plant {
    const char* tensor;
    std::size_t index;
    double value;
  };
  const plant plants[] = {{"q", 3 * 16 + 2, NAN},      {"k", 5 * 16, INFINITY}, {"v", 7 * 16 + 1, -INFINITY},
                          {"do", 4 * 16 + 3, NAN},     {"v", 39 * 16 + 15, NAN}};
  for (const bool causal : {false, true})
    for (const plant& p : plants) {
      SCOPED_TRACE(std::string(p.tensor) + (causal ? " causal" : " full"));
      auto in = make_problem(shape(1, 2, 1, 40, 40, 16, 16), 99, 0.1, true);
      std::vector<double>& t = std::string(p.tensor) == "q" ? in.q
                               : std::string(p.tensor) == "k" ? in.k
                               : std::string(p.tensor) == "v" ? in.v
                                                              : in.d_o;
      t[p.index] = p.value;
      ref::attention_options o;
      o.causal = causal;
      compare(in, o);
    }
}

// The GPU's result passes the same 60-digit certificate as the host's.
TEST(AttentionReferenceGpu, CertifiedByMultiprecision) {
  SKIP_WITHOUT_GPU();
  struct c {
    ref::attention_shape s;
    bool causal;
  };
  const c cases[] = {{shape(1, 2, 2, 8, 8, 4, 4), true},
                     {shape(2, 4, 2, 37, 45, 16, 8), true},
                     {shape(1, 3, 1, 70, 33, 24, 24), false},
                     {shape(1, 1, 1, 20, 20, 130, 3), true}};
  std::uint64_t seed = 41;
  for (const auto& cs : cases) {
    const auto in = make_problem(cs.s, ++seed, 0.3, true);
    ref::attention_options o;
    o.causal = cs.causal;
    const auto gpu = ref::attention_f64_device(in, o);
    const auto cert = ref::certify(in, gpu, o);
    ASSERT_EQ(cert.entries.size(), 6u);
    for (const auto& e : cert.entries) {
      SCOPED_TRACE(e.tensor);
      EXPECT_GT(e.count, 0u);
      EXPECT_LT(e.max_rel_row, 1e-13);
      EXPECT_GE(e.bound, e.max_abs);
    }
    std::printf("[attention-ref] certificate seq %zux%zu dim %zu: max rel row %.3g\n", cs.s.seq_q, cs.s.seq_k, cs.s.dim,
                cert.max_rel_row());
  }
}

// The tie counts from the device's dot products match the host's rule on bf16 inputs with planted
// repeated maxima (bf16 products are exact in f64 and these sums too, so every order agrees).
TEST(AttentionReferenceGpu, TieCountsMatchTheHostRule) {
  SKIP_WITHOUT_GPU();
  const auto s = shape(1, 2, 1, 90, 70, 8, 8);
  auto in = make_problem(s, 5, 0.0, false);
  for (std::size_t j = 10; j < s.seq_k; ++j)  // every key value 7 times: repeated maxima in most rows
    for (std::size_t e = 0; e < s.dim; ++e) in.k[j * s.dim + e] = in.k[(j % 10) * s.dim + e];
  for (const bool causal : {false, true})
    for (const double scale : {0.35, -0.35}) {
      ref::attention_options o;
      o.causal = causal;
      o.scale = scale;
      ref::device_row_ties t;
      t.tie_tolerance = 0.05;
      (void)ref::attention_f64_device(in, o, &t);
      std::size_t tie_rows = 0;
      for (std::size_t h = 0; h < s.heads; ++h)
        for (std::size_t i = 0; i < s.seq_q; ++i) {
          const std::size_t n = causal ? (i + s.seq_k + 1 <= s.seq_q ? 0 : std::min(s.seq_k, i + s.seq_k + 1 - s.seq_q)) : s.seq_k;
          int exact = -1, near = -1;
          if (n > 0) {
            std::vector<double> key(n);
            double m = -INFINITY;
            for (std::size_t j = 0; j < n; ++j) {
              double acc = 0;
              for (std::size_t e = 0; e < s.dim; ++e) acc += in.q[(h * s.seq_q + i) * s.dim + e] * in.k[j * s.dim + e];
              key[j] = (scale < 0 ? -1 : 1) * acc;
              m = std::max(m, key[j]);
            }
            exact = near = 0;
            for (double k : key) exact += k == m, near += std::abs(scale) * (m - k) <= t.tie_tolerance;
          }
          EXPECT_EQ(t.exact[h * s.seq_q + i], exact) << h << " " << i;
          EXPECT_EQ(t.near[h * s.seq_q + i], near) << h << " " << i;
          tie_rows += exact >= 2;
        }
      EXPECT_GT(tie_rows, 0u);  // the plant works
    }
}

// Problems the kernels do not take are refused with reference_error, not run.
TEST(AttentionReferenceGpu, RefusesDimsAbove256) {
  SKIP_WITHOUT_GPU();
  const auto in = make_problem(shape(1, 1, 1, 4, 4, 257, 4), 1);
  EXPECT_THROW((void)ref::attention_f64_device(in), ref::reference_error);
}

class Summary : public testing::Environment {
 public:
  void TearDown() override {
    std::printf("[attention-ref] max observed row relative difference gpu vs host: %.3g (bound %.3g)\n", g_max_rel,
                ref::device_rel_bound);
  }
};
const auto* const summary_env = testing::AddGlobalTestEnvironment(new Summary);

}  // namespace
