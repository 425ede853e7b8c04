// SPDX-License-Identifier: Apache-2.0
// tiebreak/fp/f32_math.hpp: the named binary32 operations and the software exp2 / log2.
#include "tiebreak/fp/f32_math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <thread>

namespace {

using namespace tiebreak;

// Every binary32 input in [lo, hi] (both finite, same sign handled by walking encodings), with the
// test level's stride: all of them at the full level, every 61st at quick, every 997th at smoke.
// TIEBREAK_F32_MATH_EXHAUSTIVE=1 in the environment walks every input (56 s on 2 cores; CI's full
// level takes every 13th).
std::uint32_t stride() {
  if (const char* e = std::getenv("TIEBREAK_F32_MATH_EXHAUSTIVE"); e && *e == '1') return 1;
#if TIEBREAK_TEST_LEVEL_FULL
  return 13;
#elif TIEBREAK_TEST_LEVEL_SMOKE
  return 997;
#else
  return 61;
#endif
}

double ulp_error_f32(float got, double exact) {
  const float ef = static_cast<float>(exact);
  const int e = std::ilogb(ef == 0 ? std::numeric_limits<float>::min() : ef);
  const double ulp = std::ldexp(1.0, std::max(e, -126) - 23);
  return std::abs(static_cast<double>(got) - exact) / ulp;
}

TEST(F32Math, NamedOpsAreIeeeBinary32) {
  EXPECT_EQ(f32::add_rn(1.0f, 0x1p-24f), 1.0f);             // tie to even
  EXPECT_EQ(f32::add_rn(1.0f, 0x1.000002p-24f), 1.0000001f);  // above the tie
  EXPECT_EQ(f32::fma_rn(0x1.001p0f, 0x1.001p0f, -1.0f), 0x1.0008p-11f);  // exact: one rounding
  EXPECT_EQ(f32::sub_rn(f32::mul_rn(0x1.001p0f, 0x1.001p0f), 1.0f), 0x1p-11f);  // the product's tie went to even
  EXPECT_EQ(f32::rint(2.5f), 2.0f);
  EXPECT_EQ(f32::rint(-3.5f), -4.0f);
  EXPECT_EQ(f32::max(-0.0f, 0.0f), 0.0f);
  EXPECT_FALSE(std::signbit(f32::max(-0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(f32::max(0.0f, -0.0f)));
  EXPECT_EQ(f32::max(std::nanf(""), 1.0f), 1.0f);
  EXPECT_EQ(f32::max(1.0f, std::nanf("")), 1.0f);
  EXPECT_TRUE(std::isnan(f32::max(std::nanf(""), std::nanf(""))));
  EXPECT_EQ(f32::div_rn(1.0f, 3.0f), 1.0f / 3.0f);
}

TEST(F32Math, Exp2SpecialValues) {
  EXPECT_EQ(f32_to_bits(f32::exp2_sw(0.0f)), f32_to_bits(1.0f));   // P-bar at the maximum is 1
  EXPECT_EQ(f32_to_bits(f32::exp2_sw(-0.0f)), f32_to_bits(1.0f));
  EXPECT_EQ(f32::exp2_sw(1.0f), 2.0f);
  EXPECT_EQ(f32::exp2_sw(-1.0f), 0.5f);
  EXPECT_EQ(f32::exp2_sw(-126.0f), 0x1p-126f);
  EXPECT_EQ(f32::exp2_sw(127.0f), 0x1p127f);
  EXPECT_EQ(f32::exp2_sw(-f32::inf), 0.0f);
  EXPECT_EQ(f32::exp2_sw(-126.5f), 0.0f);  // below the normal range: flushed
  EXPECT_EQ(f32::exp2_sw(128.0f), f32::inf);
  EXPECT_EQ(f32::exp2_sw(f32::inf), f32::inf);
  EXPECT_TRUE(std::isnan(f32::exp2_sw(std::nanf(""))));
  for (int n = -126; n <= 127; ++n) EXPECT_EQ(f32::exp2_sw(static_cast<float>(n)), std::ldexp(1.0f, n)) << n;
}

// Accuracy against the exact value (libm's double exp2, correctly rounded to within 2^-50 of it):
// below one ulp everywhere on [-126, 128), and monotone non-decreasing on the tested grid.
TEST(F32Math, Exp2BelowOneUlpOnItsRange) {
  struct half_result {
    double worst = 0;
    float worst_x = 0;
    std::uint64_t n = 0;
    std::uint64_t reversals = 0;  // steps where the output moves against the input (not a requirement)
    std::uint64_t in_range_differs = 0;  // exp2_sw_in_range(x) != exp2_sw(x) (bits)
  };
  // One thread per sign (the full level walks about 2.2e9 inputs).
  auto walk = [](int sign, half_result& out) {
    const float hi = sign ? 126.0f : 0x1.fffffep6f;  // |x| range per sign
    const std::uint32_t top = f32_to_bits(hi);
    float prev = 1.0f;
    for (std::uint64_t b = 0; b <= top; b += stride()) {
      const float x = bits_to_f32(static_cast<std::uint32_t>(b) | (sign ? 0x80000000u : 0u));
      const float y = f32::exp2_sw(x);
      const double err = ulp_error_f32(y, std::exp2(static_cast<double>(x)));
      ++out.n;
      if (err > out.worst) {
        out.worst = err;
        out.worst_x = x;
      }
      out.reversals += (sign == 0 ? y < prev : y > prev) ? 1 : 0;
      out.in_range_differs += f32_to_bits(f32::exp2_sw_in_range(x)) != f32_to_bits(y) ? 1 : 0;
      prev = y;
    }
  };
  half_result r[2];
  std::thread t1(walk, 1, std::ref(r[1]));
  walk(0, r[0]);
  t1.join();
  for (const auto& h : r) {
    EXPECT_LT(h.worst, 1.0) << "at x = " << h.worst_x;
    EXPECT_EQ(h.in_range_differs, 0u) << "exp2_sw_in_range is not exp2_sw on [-126, 128)";
  }
  std::printf("exp2_sw: %llu inputs, %llu non-monotone steps, max error %.4f ulp at %a\n",
              static_cast<unsigned long long>(r[0].n + r[1].n), static_cast<unsigned long long>(r[0].reversals + r[1].reversals),
              std::max(r[0].worst, r[1].worst), r[0].worst > r[1].worst ? r[0].worst_x : r[1].worst_x);
}

// exp2_sw_in_range: exp2_sw's bits on [-126, 128) (the walk above compares every input it visits;
// here the ends of the range and its binade boundaries, always), and min_nan's semantics.
TEST(F32Math, InRangeExp2AndMinNan) {
  for (float x : {-126.0f, -0x1.f7fffep6f, -125.5f, -1.0f, -0x1p-149f, -0.0f, 0.0f, 0x1p-149f, 0.5f, 127.0f, 127.5f,
                  0x1.fffffep6f}) {
    EXPECT_EQ(f32_to_bits(f32::exp2_sw_in_range(x)), f32_to_bits(f32::exp2_sw(x))) << x;
  }
  for (int n = -125; n <= 127; ++n)
    for (float d : {-0x1p-17f, 0.0f, 0x1p-17f}) {
      const float x = static_cast<float>(n) + d;
      EXPECT_EQ(f32_to_bits(f32::exp2_sw_in_range(x)), f32_to_bits(f32::exp2_sw(x))) << x;
    }
  EXPECT_EQ(f32::min_nan(1.0f, 2.0f), 1.0f);
  EXPECT_EQ(f32::min_nan(2.0f, -f32::inf), -f32::inf);
  EXPECT_TRUE(std::signbit(f32::min_nan(0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(f32::min_nan(-0.0f, 0.0f)));
  EXPECT_TRUE(std::isnan(f32::min_nan(std::nanf(""), 1.0f)));  // NaN propagates, unlike fminf
  EXPECT_TRUE(std::isnan(f32::min_nan(1.0f, std::nanf(""))));
  EXPECT_TRUE(std::isnan(f32::min_nan(-f32::inf, std::nanf(""))));
}

TEST(F32Math, Log2) {
  EXPECT_EQ(f32::log2_sw(1.0f), 0.0f);
  EXPECT_EQ(f32::log2_sw(0.0f), -f32::inf);
  EXPECT_EQ(f32::log2_sw(f32::inf), f32::inf);
  EXPECT_TRUE(std::isnan(f32::log2_sw(-1.0f)));
  EXPECT_TRUE(std::isnan(f32::log2_sw(std::nanf(""))));
  for (int n = -149; n <= 127; ++n) EXPECT_EQ(f32::log2_sw(std::ldexp(1.0f, n)), static_cast<float>(n)) << n;
  double worst = 0;
  for (std::uint64_t b = 1; b < 0x7f800000u; b += 64 * stride() + 1) {
    const float x = bits_to_f32(static_cast<std::uint32_t>(b));
    const double exact = std::log2(static_cast<double>(x));
    // Absolute error in ulps of the result, or of 2^-24 near log2 x = 0 (the function's
    // cancellation-free form is accurate in absolute terms there).
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(static_cast<float>(exact == 0 ? 1 : exact)), -1) - 23);
    worst = std::max(worst, std::abs(static_cast<double>(f32::log2_sw(x)) - exact) / ulp);
  }
  EXPECT_LT(worst, 4.0);
  std::printf("log2_sw: max error %.4f ulp\n", worst);
}

}  // namespace
