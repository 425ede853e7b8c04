// SPDX-License-Identifier: Apache-2.0
/// @file The probe's integer output error (attn::bf16_error_units) for every f32 input: against an
/// f64 oracle, for both bf16 neighbours of the input (the results of every rounding the forward
/// kernel does: to nearest-even and stochastic), and the exact integer tally (error_units_tally)
/// against the same errors added one by one in double.
///
/// The oracle: r − x in double (exact: both are floats within one bf16 ulp of each other), divided
/// by the bf16 ulp at r (2^(max(e_r, 1) − 134), e_r the biased exponent of r) and scaled by 2^17, by
/// ldexp (exact): it must be an integer of magnitude at most 2^17, equal to bf16_error_units(r, x),
/// and bf16_error_ulps(r, x) must be that integer times 2^-17.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/attn/flash.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"

namespace tiebreak::test {
namespace {

/// The oracle's error of bf16 r against f32 x, in units of 2^-17 bf16 ulp at r (a double: the test
/// checks that it is an integer).
double oracle_units(std::uint16_t r, std::uint32_t xb) {
  const double rf = static_cast<double>(bits_to_f32(static_cast<std::uint32_t>(r) << 16));
  const double x = static_cast<double>(bits_to_f32(xb));
  const int er = std::max((r >> 7) & 0xff, 1);
  return (rf - x) * bits_to_f64(static_cast<std::uint64_t>(1023 + 151 - er) << 52);  // · 2^(151 − er), exact
}

void check_pair(std::uint16_t r, std::uint32_t xb, mismatch_log& log) {
  const float x = bits_to_f32(xb);
  const bool finite = (r & 0x7f80u) != 0x7f80u && std::isfinite(x);
  if (attn::bf16_error_finite(r, x) != finite) {
    log.add("finite r=" + hex(r) + " x=" + hex(xb));
    return;
  }
  if (!finite) return;
  const double want = oracle_units(r, xb);
  const std::int32_t got = attn::bf16_error_units(r, x);
  const float ulps = attn::bf16_error_ulps(r, x);
  if (want != static_cast<double>(static_cast<std::int64_t>(want)) || std::fabs(want) > 131072.0 ||
      static_cast<double>(got) != want || static_cast<double>(ulps) != want * 0x1p-17)
    log.add("r=" + hex(r) + " x=" + hex(xb) + ": oracle " + std::to_string(want) + ", units " + std::to_string(got) +
            ", ulps " + std::to_string(ulps));
}

TEST(ErrorUnitsExhaustive, BothNeighboursOfEveryFloat) {
  mismatch_log log;
  sweep_blocks("error_units", std::uint64_t{1} << 32, std::uint64_t{1} << 16, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo; i < hi; ++i) {
      const auto xb = static_cast<std::uint32_t>(i);
      const std::uint16_t down = f32_bits_to_bf16_rz(xb);  // toward zero: the neighbour of smaller magnitude
      check_pair(down, xb, log);
      if ((xb & 0xffffu) != 0) check_pair(static_cast<std::uint16_t>(down + 1), xb, log);  // the larger one
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

/// bf16x2_not_finite against the per-half definition, for every 32-bit pair.
TEST(ErrorUnitsExhaustive, PairNotFiniteForEveryPair) {
  mismatch_log log;
  sweep_blocks("bf16x2_not_finite", std::uint64_t{1} << 32, std::uint64_t{1} << 16, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo; i < hi; ++i) {
      const auto pk = static_cast<std::uint32_t>(i);
      const std::uint32_t want = ((pk & 0x7f80u) == 0x7f80u ? 0x8000u : 0u) | ((pk & 0x7f800000u) == 0x7f800000u ? 0x80000000u : 0u);
      if (attn::bf16x2_not_finite(pk) != want) log.add("pk=" + hex(pk));
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

/// The same at every test level, on the pairs that decide it: each half finite at its largest
/// exponent, Inf, NaN, and the smallest fields either side of the borrow.
TEST(ErrorUnits, PairNotFiniteMarksEachHalf) {
  const std::uint16_t finite[] = {0x0000, 0x0001, 0x0080, 0x7f7f, 0x8000, 0xff7f, 0x3f80};
  const std::uint16_t special[] = {0x7f80, 0xff80, 0x7fc0, 0x7fff, 0xffff, 0x7f81};
  for (std::uint16_t a : finite) {
    for (std::uint16_t b : finite) EXPECT_EQ(attn::bf16x2_not_finite(static_cast<std::uint32_t>(b) << 16 | a), 0u);
    for (std::uint16_t b : special) {
      EXPECT_EQ(attn::bf16x2_not_finite(static_cast<std::uint32_t>(b) << 16 | a), 0x80000000u) << hex(a) << " " << hex(b);
      EXPECT_EQ(attn::bf16x2_not_finite(static_cast<std::uint32_t>(a) << 16 | b), 0x8000u) << hex(a) << " " << hex(b);
    }
  }
  for (std::uint16_t a : special)
    for (std::uint16_t b : special) EXPECT_EQ(attn::bf16x2_not_finite(static_cast<std::uint32_t>(b) << 16 | a), 0x80008000u);
}

/// At every test level, in full: the inputs whose larger neighbour starts the next binade (bf16
/// mantissa 0x7f: k = Δ there, 2 Δ elsewhere), and the subnormals and the smallest normal binade (a
/// sampled sweep visits few of them).
TEST(ErrorUnits, EveryBinadeBoundaryAndSubnormal) {
  mismatch_log log;
  auto block = [&](std::uint32_t hi16) {
    for (std::uint32_t lo = 0; lo < 0x10000u; ++lo) {
      const std::uint32_t xb = hi16 << 16 | lo;
      const std::uint16_t down = f32_bits_to_bf16_rz(xb);
      check_pair(down, xb, log);
      if (lo != 0) check_pair(static_cast<std::uint16_t>(down + 1), xb, log);
    }
  };
  for (std::uint32_t sign : {0u, 0x8000u}) {
    for (std::uint32_t e = 0; e < 255; ++e) block(sign | e << 7 | 0x7f);  // mantissa 0x7f: crossing upward
    for (std::uint32_t m = 0; m < 0x100; ++m) block(sign | m);            // exponents 0 and 1
  }
  EXPECT_EQ(log.count(), 0u) << log.report();
}

/// Non-finite pairs are refused (never counted); a result that overflowed to Inf is one of them.
TEST(ErrorUnits, NonFinitePairsAreNotCounted) {
  EXPECT_FALSE(attn::bf16_error_finite(0x7f80, 3.0e38f));
  EXPECT_FALSE(attn::bf16_error_finite(0x7fc0, bits_to_f32(0x7fc00000u)));
  EXPECT_FALSE(attn::bf16_error_finite(0x3f80, bits_to_f32(0xff800000u)));
  EXPECT_TRUE(attn::bf16_error_finite(0x7f7f, 3.0e38f));
  EXPECT_TRUE(attn::bf16_error_finite(0x0000, 1.0e-45f));
}

/// error_units_tally gives the bits of the signed moments of the same errors added one at a time in
/// double (exact there too), for the 64 errors of a forward thread and for longer runs.
TEST(ErrorUnits, TallyEqualsSequentialDoubleMoments) {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int n : {0, 1, 2, 64, 1000, 16384}) {
    attn::error_units_tally t;
    probe::signed_moments ref;
    for (int i = 0; i < n; ++i) {
      state = tiebreak::splitmix64(state);
      const auto xb = static_cast<std::uint32_t>(state);
      if (!std::isfinite(bits_to_f32(xb))) continue;
      const std::uint16_t r = (state >> 40) & 1 ? f32_bits_to_bf16_rne(xb) : f32_bits_to_bf16_rz(xb);
      if (!attn::bf16_error_finite(r, bits_to_f32(xb))) continue;
      const std::int32_t k = attn::bf16_error_units(r, bits_to_f32(xb));
      t.add(k);
      ref.add(static_cast<double>(attn::bf16_error_ulps(r, bits_to_f32(xb))));
    }
    EXPECT_EQ(t.moments(), ref) << n;
    EXPECT_EQ(t.count, ref.count);
  }
  // The forward's row form: accumulate (no count) per element, the row's count added once.
  {
    attn::error_units_tally one, rows;
    for (int row = 0; row < 5; ++row) {
      for (int i = 0; i < 64; ++i) {
        state = tiebreak::splitmix64(state);
        const auto k = static_cast<std::int32_t>(state % 262145) - 131072;  // [-2^17, 2^17]
        one.add(k);
        rows.accumulate(k);
      }
      rows.count += 64;
    }
    EXPECT_EQ(rows.moments(), one.moments());
  }
  // Extremes: a full ulp either way, and half an ulp (round to nearest at a tie).
  attn::error_units_tally t;
  t.add(131072);
  t.add(-131072);
  t.add(65536);
  const probe::signed_moments m = t.moments();
  EXPECT_EQ(m.count, 3u);
  EXPECT_EQ(m.positive, 2u);
  EXPECT_EQ(m.negative, 1u);
  EXPECT_EQ(m.sum, 0.5);
  EXPECT_EQ(m.sum_sq, 2.25);
}

}  // namespace
}  // namespace tiebreak::test
