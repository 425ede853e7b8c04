// SPDX-License-Identifier: Apache-2.0
// tiebreak/fp/sfu.hpp: sm_90's interpolator against the embedded table captured on the H200 (its
// oracle, tiebreak/host/sfu.hpp), the table and its accuracy against exp2, the rule on special inputs,
// the hardware's pinned points, and structure.
#include "tiebreak/fp/sfu.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tiebreak/host/sfu.hpp"

namespace {

using namespace tiebreak;

constexpr std::uint32_t N = sfu::ex2_table_size;

// --- Tier 1: the rule with a made-up table, in constant expressions (g++ here; nvcc evaluates a few
// in tests/gpu/fp/sfu_gpu_test.cu). The linear table T[F] = 1 + F 2^-23 makes every output readable by eye. -----------------
struct linear_table {
  constexpr std::uint32_t operator()(std::uint32_t f) const noexcept { return 0x3f800000u | f; }
};
constexpr std::uint32_t lin(std::uint32_t u) { return sfu::ex2_approx_ftz_bits(u, linear_table{}); }
static_assert(lin(0x3fc00000u) == 0x40400000u);  // 1.5: I = 1, F = 2^22: T = 1.5, times 2 = 3
static_assert(lin(0xbfc00000u) == 0x3ebfffffu);  // -1.5: T[2^23 - 1 - 2^22] 2^-2 (ones' complement)
static_assert(lin(0xbf800000u) == 0x3f000000u);  // -1: F = 0, T[0] 2^-1 = 0.5 exactly
static_assert(lin(0x34000000u) == 0x3f800001u);  // 2^-23: F = 1
static_assert(lin(0x33ffffffu) == 0x3f800000u);  // just below 2^-23: truncated to F = 0
static_assert(lin(0xb4000000u) == 0x3f7ffffeu);  // -2^-23: F = 1, T[2^23 - 2] / 2 = 1 - 2^-23
static_assert(lin(0x00000001u) == 0x3f800000u && lin(0x80000001u) == 0x3f800000u);  // subnormals: 1
static_assert(lin(0x7f800000u) == 0x7f800000u && lin(0xff800000u) == 0u);          // +-Inf
static_assert(lin(0x7fc00000u) == sfu::ex2_nan && lin(0xff800001u) == sfu::ex2_nan);  // NaN
static_assert(lin(0x42fe0000u) == 0x7f000000u);  // 127: 2^127
static_assert(lin(0x42fffffeu) == 0x7f7fff80u);  // 128 - 2^-22: I = 127, F = 2^23 - 2^7: finite
static_assert(lin(0x43000000u) == 0x7f800000u);  // 128: Inf
static_assert(lin(0xc2fc0000u) == 0x00800000u);  // -126: 2^-126, the smallest normal
static_assert(lin(0xc2fc0001u) == 0u);           // just below -126: 2^-127 (1 + ...) flushes
static_assert(sfu::ex2_approx_ftz(-1.0f, linear_table{}) == 0.5f);

// sm_90's interpolator in constant expressions: entries of the captured table (its first and last,
// sqrt(2), a segment's last and the next segment's first, the only step of 3, where the error
// against exp2 is smallest and largest); nvcc evaluates them too (tests/gpu/fp/sfu_gpu_test.cu).
static_assert(sfu::ex2_sm90_entry(0) == 0x3f800000u && sfu::ex2_sm90_entry(1) == 0x3f800001u);
static_assert(sfu::ex2_sm90_entry(N - 1) == 0x3fffffffu);
static_assert(sfu::ex2_sm90_entry(N / 2) == 0x3fb504f3u);  // sqrt(2) correctly rounded
static_assert(sfu::ex2_sm90_entry(12345) == 0x3f802172u);
static_assert(sfu::ex2_sm90_entry(131071) == 0x3f8164d2u && sfu::ex2_sm90_entry(131072) == 0x3f8164d2u);
static_assert(sfu::ex2_sm90_entry(7340031) == 0x3feac0c5u && sfu::ex2_sm90_entry(7340032) == 0x3feac0c8u);
static_assert(sfu::ex2_sm90_entry(7732991) == 0x3ff28025u && sfu::ex2_sm90_entry(4389888) == 0x3fb7f7f5u);
static_assert(sfu::ex2_sm90_segment(0).c1 == 90852 && sfu::ex2_sm90_segment(0).c2 == 494 &&
              sfu::ex2_sm90_segment(0).c0 == 3);
static_assert(sfu::ex2_sm90_segment(63).c1 == 179744 && sfu::ex2_sm90_segment(63).c2 == 980 &&
              sfu::ex2_sm90_segment(63).c0 == 32831540);
static_assert(sfu::ex2_sm90_segment_bits(64) == 0);  // past the last segment
static_assert(sfu::ex2_approx_ftz_bits(0xbf800000u, sfu::ex2_sm90_interpolator{}) == 0x3f000000u);  // -1: 0.5
static_assert(sfu::ex2_approx_ftz_sm90(0.5f) == 0x1.6a09e6p+0f);

// --- Helpers ---------------------------------------------------------------------------------------
std::span<const std::uint32_t> table() { return host::ex2_approx_sm90_table(); }
std::uint32_t ftz_bits(std::uint32_t u) { return sfu::ex2_approx_ftz_bits(u, sfu::ex2_sm90_interpolator{}); }
std::uint32_t full_bits(std::uint32_t u) { return f32_to_bits(host::ex2_approx_sm90(bits_to_f32(u))); }
float ftz(float x) { return host::ex2_approx_ftz_sm90(x); }

std::string hex(std::uint32_t u) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", u);
  return b;
}

// 64-bit FNV-1a over the table's little-endian bytes (whatever the host's byte order).
std::uint64_t fnv1a_le(std::span<const std::uint32_t> t) {
  std::uint64_t h = 14695981039346656037ull;
  for (const std::uint32_t w : t)
    for (int k = 0; k < 4; ++k) {
      h ^= (w >> (8 * k)) & 0xffu;
      h *= 1099511628211ull;
    }
  return h;
}

// The table as captured on the H200 (ex2_approx_sm90.bin): FNV-1a 64 of its 32 MiB (the same value
// from Python over tools/ex2-pack.py's `untable` of the .bin).
constexpr std::uint64_t pinned_digest = 0x83cc80f65499677full;

// --- (a) the table -----------------------------------------------------------------------------------
TEST(sfu_table, SizeAndPinnedEntries) {
  const auto t = table();
  ASSERT_EQ(t.size(), std::size_t{N});
  EXPECT_EQ(t[0], 0x3f800000u);
  EXPECT_EQ(t[N / 2], 0x3fb504f3u);  // sqrt(2) correctly rounded
  EXPECT_EQ(t[12345], 0x3f802172u);
  EXPECT_EQ(t[N - 1], 0x3fffffffu);
  EXPECT_EQ(table().data(), t.data());  // decoded once
}

TEST(sfu_table, NonDecreasingWithStepsOfAtMostThree) {
  const auto t = table();
  std::uint64_t steps[4] = {};
  std::uint64_t bad = 0;
  for (std::uint32_t k = 1; k < N; ++k) {
    if (t[k] < t[k - 1] || t[k] - t[k - 1] > 3) {
      if (++bad <= 4) ADD_FAILURE() << "T[" << k << "] = " << hex(t[k]) << " after " << hex(t[k - 1]);
      continue;
    }
    ++steps[t[k] - t[k - 1]];
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(steps[0], 723106u);
  EXPECT_EQ(steps[1], 6942396u);
  EXPECT_EQ(steps[2], 723104u);
  EXPECT_EQ(steps[3], 1u);
}

TEST(sfu_table, PinnedDigest) {
  const auto t = table();
  const std::uint64_t d = fnv1a_le(t);
  std::printf("[ digest   ] ex2 table FNV-1a 64: 0x%016llx\n", static_cast<unsigned long long>(d));
  EXPECT_EQ(d, pinned_digest) << std::hex << "digest 0x" << d;
  // The digest sees every byte: the last entry's top byte changed is another digest.
  std::vector<std::uint32_t> c(t.begin(), t.end());
  c.back() ^= 0x01000000u;
  EXPECT_NE(fnv1a_le(c), d);
}

// --- (a') the interpolator against the table ------------------------------------------------------------
// The squarer's oracle: every partial product of xl^2 (squarer form: b_i 2^(2i), and b_i b_j 2^(i+j+1)
// for i < j) kept if its column is 19 or more, one by one.
std::uint64_t truncated_square_pairs(std::uint32_t xl) {
  std::uint64_t s = 0;
  for (int i = 0; i < 17; ++i) {
    if (((xl >> i) & 1u) == 0) continue;
    if (2 * i >= 19) s += std::uint64_t{1} << (2 * i);
    for (int j = i + 1; j < 17; ++j)
      if (((xl >> j) & 1u) != 0 && i + j + 1 >= 19) s += std::uint64_t{1} << (i + j + 1);
  }
  return s;
}

TEST(sfu_interpolator, SquarerKeepsThePartialProductsFromColumn19) {
  std::uint32_t differ = 0, first = 0;
  for (std::uint32_t xl = 0; xl < (1u << sfu::ex2_sm90_offset_bits); ++xl)
    if (sfu::ex2_sm90_square(xl) != truncated_square_pairs(xl) && differ++ == 0) first = xl;
  EXPECT_EQ(differ, 0u) << "first at xl = " << first;
  EXPECT_NE(sfu::ex2_sm90_square(0x1ffffu), std::uint64_t{0x1ffffu} * 0x1ffffu);  // not the exact square
  EXPECT_EQ(sfu::ex2_sm90_square(1u << 9), 0u);          // b_9's square, 2^18: dropped
  EXPECT_EQ(sfu::ex2_sm90_square(1u << 10), 1u << 20);   // b_10's, 2^20: kept
  EXPECT_EQ(sfu::ex2_sm90_square(3u << 8), 0u);          // b_8 b_9 at 2^18, b_8's and b_9's squares: dropped
  EXPECT_EQ(sfu::ex2_sm90_square((1u << 8) | (1u << 10)), (1u << 19) + (1u << 20));  // b_8 b_10 at 2^19 kept
}

// The interpolator (64 segments of integer coefficients, a squarer that drops the partial products
// below 2^19; fp/sfu.hpp) gives every entry of the table captured on the H200. A constant 3057
// moved by one, or the squarer's cut by one column, fails it (checked by editing fp/sfu.hpp).
TEST(sfu_table, InterpolatorGivesEveryEntry) {
  const auto t = table();
  ASSERT_EQ(t.size(), std::size_t{N});
  std::size_t differ = 0, first = t.size();
  for (std::uint32_t f = 0; f < N; ++f)
    if (sfu::ex2_sm90_entry(f) != t[f] && differ++ == 0) first = f;
  EXPECT_EQ(differ, 0u) << "first at F = " << first;
}

// The modelled instructions are the rule with the interpolator: the same as with the table, lane by
// lane, on every 4099th encoding (both signs, every exponent).
TEST(sfu_interpolator, RuleWithTheTableAgrees) {
  const host::ex2_table_view view{table().data()};
  std::uint64_t bad = 0;
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 4099) {
    const auto x = static_cast<std::uint32_t>(u);
    if (ftz_bits(x) != sfu::ex2_approx_ftz_bits(x, view)) ++bad;
    if (full_bits(x) != f32_to_bits(sfu::ex2_approx(bits_to_f32(x), view))) ++bad;
  }
  EXPECT_EQ(bad, 0u);
}

// --- (b) accuracy against 2^(F 2^-23) ------------------------------------------------------------------
// The oracle: exp2l in x87 extended precision (64-bit significand; its error, ~2^-63 relative, is
// 2^-40 of the unit used here). Error of T[F] in units of 2^-23 (T's ulp on [1, 2)).
TEST(sfu_table, AccuracyAgainstExp2) {
  const auto t = table();
  long double lo = 1e9L, hi = -1e9L, sum = 0;
  std::uint32_t at_lo = 0, at_hi = 0;
  for (std::uint32_t f = 0; f < N; ++f) {
    const long double exact = exp2l(std::ldexp(static_cast<long double>(f), -23));
    const long double e = (static_cast<long double>(bits_to_f32(t[f])) - exact) * 0x1p23L;
    sum += e;
    if (e < lo) lo = e, at_lo = f;
    if (e > hi) hi = e, at_hi = f;
  }
  const double mean = static_cast<double>(sum / N);
  std::printf("[ accuracy ] T - 2^(F 2^-23) in 2^-23: min %.6f (F = %u), max %.6f (F = %u), mean %.6f\n",
              static_cast<double>(lo), at_lo, static_cast<double>(hi), at_hi, mean);
  // The bounds measured on the H200 (-0.7418, +1.3903), attained: equal to them to 4 decimals.
  // (mpmath at 200 bits: -0.7417918 at F = 7732991, +1.3902656 at F = 4389888.)
  EXPECT_GE(lo, -0.7419L);
  EXPECT_LE(hi, 1.3904L);
  EXPECT_EQ(std::lround(static_cast<double>(lo) * 1e4), -7418);
  EXPECT_EQ(std::lround(static_cast<double>(hi) * 1e4), 13903);
  EXPECT_EQ(at_lo, 7732991u);
  EXPECT_EQ(at_hi, 4389888u);
  EXPECT_NEAR(mean, 0.388, 0.0005);
}

// --- (c) the rule on special inputs ----------------------------------------------------------------------
TEST(sfu_rule, EveryNaNGivesTheCanonicalNaN) {
  std::uint64_t bad = 0;
  for (std::uint32_t s = 0; s < 2; ++s)
    for (std::uint32_t m = 1; m < N; ++m) {  // quiet (bit 22) and signalling payloads, both signs
      const std::uint32_t u = (s << 31) | 0x7f800000u | m;
      if (ftz_bits(u) != sfu::ex2_nan || full_bits(u) != sfu::ex2_nan)
        if (++bad <= 4) ADD_FAILURE() << hex(u) << " -> " << hex(ftz_bits(u)) << ", " << hex(full_bits(u));
    }
  EXPECT_EQ(bad, 0u);
}

TEST(sfu_rule, InfinitiesZerosAndSubnormals) {
  for (auto f : {ftz_bits, full_bits}) {
    EXPECT_EQ(f(0x7f800000u), 0x7f800000u);  // +Inf
    EXPECT_EQ(f(0xff800000u), 0u);           // -Inf -> +0
    std::uint64_t bad = 0;
    for (std::uint32_t s = 0; s < 2; ++s)
      for (std::uint32_t m = 0; m < N; ++m)  // +-0 and every subnormal
        if (f((s << 31) | m) != 0x3f800000u) ++bad;
    EXPECT_EQ(bad, 0u);
  }
}

// Walks [lo, hi] (encodings, same sign): every encoding within 2^20 of either end, every 61st in between.
template <class Check>
void walk(std::uint32_t lo, std::uint32_t hi, Check check) {
  for (std::uint64_t u = lo; u <= hi;) {
    check(static_cast<std::uint32_t>(u));
    u += (u - lo < (1u << 20) || hi - u < (1u << 20)) ? 1 : 61;
  }
}

TEST(sfu_rule, OutOfRange) {
  std::uint64_t bad = 0;
  // x >= 128 -> +Inf (both variants).
  walk(0x43000000u, 0x7f800000u, [&](std::uint32_t u) {
    if (ftz_bits(u) != 0x7f800000u || full_bits(u) != 0x7f800000u) ++bad;
  });
  // x <= -128 -> +0 under ftz (ex2_approx: see BelowMinus126WithoutFtz).
  walk(0xc3000000u, 0xff800000u, [&](std::uint32_t u) {
    if (ftz_bits(u) != 0u) ++bad;
  });
  // -126 > x > -127: 2^x is subnormal, flushed.
  walk(0xc2fc0001u, 0xc2fe0000u, [&](std::uint32_t u) {
    if (ftz_bits(u) != 0u) ++bad;
  });
  EXPECT_EQ(bad, 0u);
}

TEST(sfu_rule, IntegersArePowersOfTwo) {
  for (int n = -126; n <= 127; ++n) {
    const float x = static_cast<float>(n);
    EXPECT_EQ(ftz(x), std::ldexp(1.0f, n)) << n;
    EXPECT_EQ(host::ex2_approx_sm90(x), std::ldexp(1.0f, n)) << n;
  }
}

// ex2.approx.f32 below -126: y = ex2.approx.ftz(x / 2), then y * y rounded once to binary32 with
// subnormals. Oracle: x / 2 by ldexpf (exact), the product in double (exact: 48 bits), then one
// rounding to float (nearest-even, subnormals kept). Every x in [-160, -126); below, +0.
TEST(sfu_rule, BelowMinus126WithoutFtz) {
  std::uint64_t bad = 0, nonzero = 0, n = 0;
  std::uint32_t smallest = 0xffffffffu;
  for (std::uint32_t u = 0xc2fc0001u; u <= 0xc3200000u; ++u) {  // (-126, ..., -160]
    const float x = bits_to_f32(u);
    const double y = ftz(std::ldexp(x, -1));
    const std::uint32_t want = f32_to_bits(static_cast<float>(y * y));
    const std::uint32_t got = full_bits(u);
    ++n;
    if (got != 0) ++nonzero, smallest = std::min(smallest, got);
    if (got != want && ++bad <= 4) ADD_FAILURE() << hex(u) << ": " << hex(got) << ", oracle " << hex(want);
  }
  EXPECT_EQ(bad, 0u) << "of " << n;
  EXPECT_GT(nonzero, n / 2);  // subnormal results down to x ~ -150
  EXPECT_EQ(smallest, 1u);    // ... the smallest subnormal among them
  // (-127, -126): subnormal, nonzero without ftz.
  EXPECT_NE(full_bits(0xc2fc0001u), 0u);
  EXPECT_LT(full_bits(0xc2fc0001u), 0x00800000u);
  walk(0xc3200001u, 0xff800000u, [&](std::uint32_t u) {
    if (full_bits(u) != 0u) ++bad;
  });
  EXPECT_EQ(bad, 0u);
}

TEST(sfu_rule, WithoutFtzEqualsFtzFromMinus126Up) {
  std::uint64_t bad = 0, n = 0;
  for (std::uint64_t u = 0; u <= 0x7f800000u; u += 13) {
    ++n;
    if (full_bits(static_cast<std::uint32_t>(u)) != ftz_bits(static_cast<std::uint32_t>(u))) ++bad;
  }
  for (std::uint64_t u = 0x80000000u; u <= 0xc2fc0000u; u += 13) {  // -0 ... -126
    ++n;
    if (full_bits(static_cast<std::uint32_t>(u)) != ftz_bits(static_cast<std::uint32_t>(u))) ++bad;
  }
  EXPECT_EQ(full_bits(0xc2fc0000u), 0x00800000u);  // -126 itself
  EXPECT_EQ(bad, 0u) << "of " << n;
}

// --- (d) what the H200 returned -------------------------------------------------------------------------
TEST(sfu_hardware, PinnedPoints) {
  // -2^-23 (1 + 2^-11 + ...): F = 1, T[2^23 - 2] / 2. With 1 - F (T[2^23 - 1] / 2) it would be 0x3f7fffff.
  EXPECT_EQ(ftz_bits(0xb40004c0u), 0x3f7ffffeu);
  EXPECT_EQ(f32_to_bits(ftz(bits_to_f32(0xb40004c0u))), 0x3f7ffffeu);
  // 2^-24 (1 + ...): truncated to F = 0 (rounding would give F = 1).
  EXPECT_EQ(ftz_bits(0x33801540u), 0x3f800000u);
  EXPECT_EQ(host::ex2_approx_sm90(-1.0f), 0.5f);
  EXPECT_EQ(ftz(-1.0f), 0.5f);
}

// --- (e) structure, through the float functions ---------------------------------------------------------
// Non-decreasing in x on the fixed-point grid x = k 2^-23, |k| <= 2^24 (x in [-2, 2], exact in
// binary32). Every other input maps to the grid point below its magnitude (Truncation), so this is
// monotonicity on [-2, 2]; Periodicity carries it to [-126, 128).
TEST(sfu_structure, MonotoneOnTheGrid) {
  std::uint64_t bad = 0;
  float prev = 0;
  for (std::int32_t k = -(1 << 24); k <= (1 << 24); ++k) {
    const float y = ftz(std::ldexp(static_cast<float>(k), -23));
    if (y < prev && ++bad <= 4) ADD_FAILURE() << "k = " << k;
    prev = y;
  }
  EXPECT_EQ(bad, 0u);
}

// ex2(I + r) = 2^I ex2(r) and ex2(-(I + r)) = 2^-I ex2(-r) for integer I and r in [0, 1): every
// x >= 1 is I + r with r exact and on the grid.
TEST(sfu_structure, Periodicity) {
  std::mt19937 g(20240518);
  std::uint64_t bad = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float x = bits_to_f32(0x3f800000u + static_cast<std::uint32_t>(g() % (0x42fe0000u - 0x3f800000u)));  // [1, 127)
    const float I = std::floor(x), r = x - I;  // exact
    const int n = static_cast<int>(I);
    if (ftz(x) != std::ldexp(ftz(r), n)) ++bad;
    if (x <= 125.0f && ftz(-x) != std::ldexp(ftz(-r), -n)) ++bad;  // stays normal
  }
  EXPECT_EQ(bad, 0u);
}

// For x = F 2^-23, 0 < F < 2^23: ex2(-x) = ex2(1 - x - 2^-23) / 2, the ones' complement of F,
// checked on all F.
TEST(sfu_structure, NegativeFractionsAreTheOnesComplement) {
  std::uint64_t bad = 0, differs_from_twos = 0;
  for (std::uint32_t f = 1; f < N; ++f) {
    const float x = std::ldexp(static_cast<float>(f), -23);
    const float g = std::ldexp(static_cast<float>(N - 1 - f), -23);  // 1 - x - 2^-23, exact
    const float neg = ftz(-x);
    if (neg != ftz(g) * 0.5f && ++bad <= 4) ADD_FAILURE() << "F = " << f;
    if (neg != ftz(1.0f - x) * 0.5f) ++differs_from_twos;
  }
  EXPECT_EQ(bad, 0u);
  // 1 - x instead would differ wherever T steps: on every F but the 723106 flat steps.
  EXPECT_EQ(differs_from_twos, N - 1 - 723106u);
}

// Below 2^-23 of resolution the magnitude is truncated (toward zero for both signs): random x in
// (0, 1), whose fraction has more bits than the grid's 23.
TEST(sfu_structure, MagnitudeTruncatedToTheGrid) {
  std::mt19937 g(7);
  std::uint64_t bad = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float x = bits_to_f32(0x30000000u + static_cast<std::uint32_t>(g() % (0x3f800000u - 0x30000000u)));  // [2^-31, 1)
    const float q = static_cast<float>(std::ldexp(std::floor(std::ldexp(static_cast<double>(x), 23)), -23));
    if (ftz(x) != ftz(q) || ftz(-x) != ftz(-q)) ++bad;
  }
  EXPECT_EQ(bad, 0u);
}

}  // namespace
