// SPDX-License-Identifier: Apache-2.0
/// @file run_audit with the GPU reference against the host one: the same report up to the stated
/// f64 bound (tie statistics exactly, verdicts equal, row means within 1e-8 ulps). Skips without a GPU.
#include "audit_fixtures.hpp"

#include <tiebreak/audit/audit.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace {

namespace ref = tiebreak::reference;
namespace audit = tiebreak::audit;
using namespace tiebreak::test;
using tiebreak::round_mode;

void expect_same_test(const audit::error_test& g, const audit::error_test& c, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(g.moments.n, c.moments.n);
  if (c.moments.n == 0) return;
  // Reference differences are <= 1e-13 of the row scale; in ulps of a bf16 row scale (2^-8 of it)
  // that is <= 3e-11 per element.
  EXPECT_NEAR(g.t.mean, c.t.mean, 1e-8);
  EXPECT_EQ(g.biased, c.biased);
}

TEST(AuditGpu, SameReportAsTheHost) {
  if (const std::string why = ref::device_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    auto in = make_problem({2, 4, 2, 150, 170, 32, 32}, 3, 0.6, true, 0.2);
    for (std::size_t x = 0; x < 2 * 2; ++x)  // every key value 17 times in each kv head: exact ties
      for (std::size_t j = 10; j < 170; ++j)
        for (std::size_t e = 0; e < 32; ++e) in.k[(x * 170 + j) * 32 + e] = in.k[(x * 170 + j % 10) * 32 + e];
    const auto dump = emulate_kernel(in, causal, [](std::size_t, std::size_t h) { return h % 2 ? round_mode::rz : round_mode::rne; });
    audit::audit_options o;
    o.causal = causal;
    const audit::audit_report cpu = audit::run_audit(dump, o);
    o.device = audit::audit_options::device_kind::cuda;
    const audit::audit_report gpu = audit::run_audit(dump, o);
    ASSERT_TRUE(gpu.device_timing.has_value());
    ASSERT_EQ(gpu.heads.size(), cpu.heads.size());
    std::size_t ties = 0;
    for (std::size_t x = 0; x < cpu.heads.size(); ++x) {
      SCOPED_TRACE("head " + std::to_string(x));
      const auto &g = gpu.heads[x], &c = cpu.heads[x];
      EXPECT_EQ(g.score_rows, c.score_rows);
      EXPECT_EQ(g.tie_rows, c.tie_rows);
      EXPECT_EQ(g.near_tie_rows, c.near_tie_rows);
      EXPECT_EQ(g.o.rows, c.o.rows);
      EXPECT_EQ(g.biased, c.biased);
      EXPECT_EQ(g.delta_biased, c.delta_biased);
      expect_same_test(g.o.signed_error, c.o.signed_error, "o signed");
      expect_same_test(g.o.directed_error, c.o.directed_error, "o directed");
      expect_same_test(g.o_tie_signed, c.o_tie_signed, "o tie signed");
      expect_same_test(g.o_rest_directed, c.o_rest_directed, "o rest directed");
      ASSERT_TRUE(g.delta && c.delta);
      expect_same_test(*g.delta, *c.delta, "delta");
      ties += c.tie_rows;
    }
    EXPECT_GT(ties, 0u);
    EXPECT_EQ(gpu.heads_biased, cpu.heads_biased);
    const auto j = audit::to_json(gpu);
    EXPECT_EQ(j["device"], "cuda");
    EXPECT_TRUE(j["timing_s"].contains("reference_device"));
  }
}

}  // namespace
