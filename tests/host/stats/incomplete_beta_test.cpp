// SPDX-License-Identifier: Apache-2.0
/// @file The incomplete beta and Student-t tail of the core (stats/incomplete_beta.hpp) against
/// mpmath 1.3 at 60 digits: betainc(a, b, 0, x, regularized=True), and for x > 1/2
/// 1 − betainc(b, a, 0, 1 − x); Student t with x = df / (df + t²) from the exact df and t.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tiebreak/stats/incomplete_beta.hpp"

namespace tiebreak::test {
namespace {

struct beta_case {
  double a, b, x, expected, rel_tol;
};

TEST(incomplete_beta, matches_mpmath) {
  // Tolerances: the measured accuracy (file comment of the header) plus the rounding of x to a
  // double, which moves I by about (a + b) · 2^-53 relatively.
  const beta_case cases[] = {
      {0.5, 0.5, 0.3, 0.369010119565545382755, 1e-14},
      {2.5, 10, 0.7, 0.999896062504117729441, 1e-14},
      {100, 0.1, 0.3, 1.17856157356087338421e-55, 1e-13},
      {0.1, 100, 0.01, 0.975892711294801844392, 1e-13},
      {100, 100, 0.5, 0.5, 1e-13},
      {100, 100, 0.3, 1.84111411158005694984e-9, 1e-13},
      {10, 2.5, 0.99, 0.998936009926700146663, 1e-14},
      {1, 1, 0.25, 0.25, 1e-15},
      {500, 501, 0.5, 0.512612509089180400953, 1e-12},
      {900, 101, 0.87, 0.00211072590307636099877, 1e-12},
  };
  for (const beta_case& c : cases) {
    const double got = regularized_incomplete_beta(c.a, c.b, c.x, 1 - c.x);
    EXPECT_NEAR(got / c.expected, 1.0, c.rel_tol) << "I_" << c.x << "(" << c.a << ", " << c.b << ")";
    // The symmetry the implementation switches on: I_x(a, b) = 1 − I_{1−x}(b, a).
    EXPECT_NEAR(regularized_incomplete_beta(c.b, c.a, 1 - c.x, c.x), 1 - c.expected, 1e-13);
  }
  EXPECT_EQ(regularized_incomplete_beta(2, 3, 0, 1), 0.0);
  EXPECT_EQ(regularized_incomplete_beta(2, 3, 1, 0), 1.0);
}

TEST(incomplete_beta, student_t_tail_matches_mpmath) {
  struct t_case {
    double t, df, expected;
  };
  // Up to df = 1e10, where a normal approximation of the tail would be off by (t^4 + t^2) / (4 df)
  // (1.6e-6 relative at df = 1e8, |t| = 5); the stated accuracy is 1e-16 (df + t²) / t² + 1e-14.
  const t_case cases[] = {
      {2.0, 3, 0.139325968558843176848},
      {0.5, 30, 0.62072300488512728596},
      {5.0, 1e8, 5.73304110126728601687e-7},
      {1.959963984540054, 1e8, 0.0500000027729511854115},
      {3.0, 1e10, 0.00269979606990796167556},
  };
  for (const t_case& c : cases) {
    const double tol = 3 * (1e-16 * (c.df + c.t * c.t) / (c.t * c.t) + 1e-14);
    EXPECT_NEAR(student_t_two_sided_p(c.t, c.df) / c.expected, 1.0, tol) << "t=" << c.t << " df=" << c.df;
    EXPECT_EQ(student_t_two_sided_p(-c.t, c.df), student_t_two_sided_p(c.t, c.df));
  }
  EXPECT_EQ(student_t_two_sided_p(0.0, 5), 1.0);
  EXPECT_EQ(student_t_two_sided_p(std::numeric_limits<double>::infinity(), 5), 0.0);
  EXPECT_EQ(student_t_two_sided_p(1e200, 5), 0.0);  // t² overflows
  EXPECT_TRUE(std::isnan(student_t_two_sided_p(std::nan(""), 5)));
  EXPECT_TRUE(std::isnan(student_t_two_sided_p(1.0, 0)));
}

}  // namespace
}  // namespace tiebreak::test
