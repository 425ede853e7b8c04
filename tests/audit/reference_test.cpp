// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the f64 attention reference: certification against 60 digits, finite differences
/// for the backward pass, causal and grouped-query shapes, determinism, and bad arguments.
#include "audit_fixtures.hpp"

#include <tiebreak/reference/attention.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace {

namespace ref = tiebreak::reference;
using tiebreak::test::make_problem;

ref::attention_shape shape(std::size_t b, std::size_t h, std::size_t hk, std::size_t sq, std::size_t sk, std::size_t d,
                           std::size_t dv) {
  return {b, h, hk, sq, sk, d, dv};
}

// The f64 reference agrees with a 60-digit recomputation to a few f64 ulps of each row, forward and
// backward, for plain, causal, grouped-query and rectangular problems.
TEST(AttentionReference, CertifiedAgainstMultiprecision) {
  struct c {
    ref::attention_shape s;
    bool causal;
  };
  const c cases[] = {{shape(1, 2, 2, 8, 8, 4, 4), false},
                     {shape(1, 2, 2, 8, 8, 4, 4), true},
                     {shape(2, 4, 2, 6, 9, 8, 5), true},   // GQA, seq_q < seq_k, dim_v != dim
                     {shape(1, 3, 1, 5, 7, 4, 4), false}}; // MQA
  std::uint64_t seed = 11;
  for (const auto& cs : cases) {
    const auto in = make_problem(cs.s, ++seed, 0.3, true);
    ref::attention_options o;
    o.causal = cs.causal;
    const auto out = ref::attention_f64(in, o);
    const auto cert = ref::certify(in, out, o);
    ASSERT_EQ(cert.entries.size(), 6u);
    EXPECT_GE(cert.digits10, 50);
    for (const auto& e : cert.entries) {
      SCOPED_TRACE(e.tensor);
      EXPECT_GT(e.count, 0u);
      EXPECT_LT(e.max_rel_row, 1e-13);
      EXPECT_GE(e.bound, e.max_abs);
      EXPECT_LT(e.bound, 1e-12);
    }
  }
}

// The certificate is not vacuous: a reference that is off by 1e-9 in one element is caught, and the
// reported bound covers the planted error.
TEST(AttentionReference, CertificateCatchesAWrongReference) {
  const auto in = make_problem(shape(1, 2, 2, 8, 8, 4, 4), 5, 0.0, true);
  auto out = ref::attention_f64(in);
  out.o[13] += 1e-9;
  out.dk[7] -= 3e-8;
  const auto cert = ref::certify(in, out);
  for (const auto& e : cert.entries) {
    if (e.tensor == "o") {
      EXPECT_GE(e.bound, 1e-9 * (1 - 1e-6));
      EXPECT_LT(e.bound, 1.01e-9);
    } else if (e.tensor == "dk") {
      EXPECT_GE(e.bound, 3e-8 * (1 - 1e-6));
    } else {
      EXPECT_LT(e.max_rel_row, 1e-13) << e.tensor;
    }
  }
}

// Backward against central finite differences of L = sum(dO ∘ O) with respect to q, k and v.
TEST(AttentionReference, BackwardMatchesFiniteDifferences) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    const auto s = shape(1, 4, 2, 5, 7, 3, 4);  // GQA: dk, dv sum over two query heads
    auto in = make_problem(s, 99, 0.2, true);
    ref::attention_options o;
    o.causal = causal;
    o.scale = 0.7;
    const auto g = ref::attention_f64(in, o);
    auto loss = [&](const ref::attention_inputs& x) {
      ref::attention_inputs f = x;
      f.d_o.clear();
      const auto r = ref::attention_f64(f, o);
      double l = 0;
      for (std::size_t i = 0; i < r.o.size(); ++i) l += x.d_o[i] * r.o[i];
      return l;
    };
    const double h = 1e-6;
    auto check = [&](std::vector<double> ref::attention_inputs::*field, const std::vector<double>& grad, const char* name) {
      for (std::size_t idx = 0; idx < grad.size(); idx += 3) {
        ref::attention_inputs p = in, m = in;
        (p.*field)[idx] += h;
        (m.*field)[idx] -= h;
        const double fd = (loss(p) - loss(m)) / (2 * h);
        EXPECT_NEAR(grad[idx], fd, 1e-7 + 1e-6 * std::abs(fd)) << name << "[" << idx << "]";
      }
    };
    check(&ref::attention_inputs::q, g.dq, "dq");
    check(&ref::attention_inputs::k, g.dk, "dk");
    check(&ref::attention_inputs::v, g.dv, "dv");
    // delta = rowsum(dO ∘ O), up to the summation order (Eigen's dot is vectorised).
    for (std::size_t r = 0; r < s.lse_size(); ++r) {
      double dl = 0, mag = 0;
      for (std::size_t e = 0; e < s.dim_v; ++e) {
        dl += in.d_o[r * s.dim_v + e] * g.o[r * s.dim_v + e];
        mag += std::abs(in.d_o[r * s.dim_v + e] * g.o[r * s.dim_v + e]);
      }
      EXPECT_NEAR(g.delta[r], dl, 4 * 0x1p-52 * mag);
    }
  }
}

// Causal masking: a row never depends on keys after its diagonal; a row that sees no key (seq_q >
// seq_k, bottom-right alignment) gets O = 0 and LSE = −inf.
TEST(AttentionReference, CausalMaskAndEmptyRows) {
  const auto s = shape(1, 1, 1, 6, 4, 4, 4);  // rows 0, 1 see no key
  auto in = make_problem(s, 3);
  ref::attention_options o;
  o.causal = true;
  const auto a = ref::attention_f64(in, o);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a.lse[i], -INFINITY);
    for (std::size_t e = 0; e < 4; ++e) EXPECT_EQ(a.o[i * 4 + e], 0.0);
  }
  EXPECT_TRUE(std::isfinite(a.lse[2]));
  // Row 2 sees key 0 only: O = v[0] exactly.
  for (std::size_t e = 0; e < 4; ++e) EXPECT_EQ(a.o[2 * 4 + e], in.v[e]);
  // Changing the last key/value changes only the last row.
  in.v[3 * 4 + 1] += 1.0;
  in.k[3 * 4 + 2] -= 2.0;
  const auto b = ref::attention_f64(in, o);
  for (std::size_t x = 0; x < 5 * 4; ++x) EXPECT_EQ(a.o[x], b.o[x]) << x;
  EXPECT_NE(a.o[5 * 4 + 1], b.o[5 * 4 + 1]);
}

// Grouped-query attention equals multi-head attention with K and V repeated per group: O bitwise,
// dK/dV as the sum over the group.
TEST(AttentionReference, GroupedQueryEqualsRepeatedHeads) {
  const auto s = shape(2, 4, 2, 6, 6, 4, 3);
  const auto in = make_problem(s, 21, 0.0, true);
  ref::attention_inputs mha = in;
  mha.shape.kv_heads = 4;
  mha.k.clear();
  mha.v.clear();
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 4; ++h) {
      const std::size_t kv = b * 2 + h / 2;
      mha.k.insert(mha.k.end(), in.k.begin() + kv * 24, in.k.begin() + (kv + 1) * 24);
      mha.v.insert(mha.v.end(), in.v.begin() + kv * 18, in.v.begin() + (kv + 1) * 18);
    }
  const auto g = ref::attention_f64(in), m = ref::attention_f64(mha);
  EXPECT_EQ(g.o, m.o);
  EXPECT_EQ(g.lse, m.lse);
  EXPECT_EQ(g.dq, m.dq);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t kv = 0; kv < 2; ++kv)
      for (std::size_t x = 0; x < 24; ++x)
        EXPECT_EQ(g.dk[(b * 2 + kv) * 24 + x], m.dk[(b * 4 + 2 * kv) * 24 + x] + m.dk[(b * 4 + 2 * kv + 1) * 24 + x]);
}

// One thread or several: bitwise the same result.
TEST(AttentionReference, DeterministicAcrossThreadCounts) {
  const auto in = make_problem(shape(2, 3, 3, 16, 16, 8, 8), 8, 0.0, true);
  ref::attention_options one, many;
  one.threads = 1;
  many.threads = 4;
  const auto a = ref::attention_f64(in, one), b = ref::attention_f64(in, many);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
}

// NaN in one key poisons every row that sees it and no other.
TEST(AttentionReference, NonFiniteInputsPropagateToTheirRows) {
  const auto s = shape(1, 2, 1, 4, 4, 4, 4);
  auto in = make_problem(s, 4);
  in.k[2 * 4] = NAN;  // key 2
  ref::attention_options o;
  o.causal = true;
  const auto a = ref::attention_f64(in, o);
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(std::isnan(a.o[(h * 4 + i) * 4]), i >= 2) << h << " " << i;
}

TEST(AttentionReference, RejectsInconsistentProblems) {
  auto in = make_problem(shape(1, 2, 2, 4, 4, 4, 4), 1);
  in.v.pop_back();
  EXPECT_THROW((void)ref::attention_f64(in), ref::reference_error);
  auto bad = make_problem(shape(1, 3, 2, 4, 4, 4, 4), 1);  // kv_heads does not divide heads
  EXPECT_THROW((void)ref::attention_f64(bad), ref::reference_error);
  const auto big = make_problem(shape(1, 1, 1, 2048, 2048, 2, 2), 1);
  EXPECT_THROW((void)ref::certify(big, ref::attention_outputs{}), ref::reference_error);
}

}  // namespace
