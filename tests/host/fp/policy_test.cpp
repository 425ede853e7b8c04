// SPDX-License-Identifier: Apache-2.0
/// @file Rounding policies: the rounds_up table, names, overflow per mode, and the exact
/// stochastic-rounding probability (counted exhaustively over the random bits that matter).
#include <gtest/gtest.h>

#include <cstdint>

#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak::test {
namespace {

static_assert(rounds_up(rne_t{}, false, false, true, false, 0) == false);  // tie, even lsb
static_assert(rounds_up(rne_t{}, false, true, true, false, 0) == true);    // tie, odd lsb
static_assert(rounds_up(rna_t{}, true, false, true, false, 0) == true);
static_assert(rounds_up(ru_t{}, true, false, true, true, 0) == false);
static_assert(rounds_up(rd_t{}, true, false, false, true, 0) == true);
static_assert(rounds_up(sr_t{0x80000000u}, false, false, true, false, 0x80000000u) == true);
static_assert(rounds_up(sr_t{0x7fffffffu}, false, false, true, false, 0x80000000u) == false);

// Every (sign, lsb, guard, sticky) against the definitions of the modes.
TEST(policy, rounds_up_table) {
  for (int i = 0; i < 16; ++i) {
    const bool sign = i & 1, lsb = i & 2, g = i & 4, s = i & 8;
    EXPECT_EQ(rounds_up(rounding{round_mode::rne}, sign, lsb, g, s, 0), g && (s || lsb));
    EXPECT_EQ(rounds_up(rounding{round_mode::rna}, sign, lsb, g, s, 0), g);
    EXPECT_FALSE(rounds_up(rounding{round_mode::rz}, sign, lsb, g, s, 0));
    EXPECT_EQ(rounds_up(rounding{round_mode::ru}, sign, lsb, g, s, 0), (g || s) && !sign);
    EXPECT_EQ(rounds_up(rounding{round_mode::rd}, sign, lsb, g, s, 0), (g || s) && sign);
    EXPECT_FALSE(rounds_up(rounding{round_mode::rto}, sign, lsb, g, s, 0));
  }
  EXPECT_TRUE(overflows_to_inf(rounding{round_mode::rne}, true));
  EXPECT_FALSE(overflows_to_inf(rounding{round_mode::rz}, false));
  EXPECT_TRUE(overflows_to_inf(rounding{round_mode::ru}, false));
  EXPECT_FALSE(overflows_to_inf(rounding{round_mode::ru}, true));
  EXPECT_FALSE(overflows_to_inf(rounding{round_mode::rto}, true));
}

TEST(policy, names_round_trip) {
  for (round_mode m : all_round_modes) {
    round_mode back{};
    ASSERT_TRUE(parse_round_mode(to_string(m), back));
    EXPECT_EQ(back, m);
  }
  round_mode unused{};
  EXPECT_FALSE(parse_round_mode("nearest", unused));
}

// sr, f32 -> bf16: only the top 16 bits of `random` matter (the low 16 bits of top32 are zero), so
// counting over all 2^16 of them is exhaustive: exactly (x & 0xffff) of them round away, i.e. the
// probability is the discarded fraction. Discarded patterns: every 97th (all in 2^16 x 97 steps
// would take minutes), four low halves of `random`.
TEST(policy, sr_probability_f32_to_bf16_exhaustive) {
  mismatch_log log;
  parallel_sweep("sr_probability_bf16", std::uint64_t{1} << 16, full_level ? 97 : 997, [&](std::uint64_t d) {
    const std::uint32_t x = 0x3f800000u | static_cast<std::uint32_t>(d) | ((d & 1) << 16);
    for (std::uint32_t low : {0u, 1u, 0x7fffu, 0xffffu}) {
      std::uint32_t ups = 0;
      for (std::uint32_t hi = 0; hi < 0x10000u; ++hi) {
        const std::uint32_t rnd = (hi << 16) | low;
        const std::uint64_t b = f32_bits_to(formats::bf16, x, rounding{round_mode::sr, rnd}).bits;
        ups += b != (x >> 16);
        if (f32_bits_to_bf16_sr(x, rnd) != b) log.add("fast sr differs " + hex(x));
      }
      if (ups != d) log.add("sr count " + hex(x) + ": " + std::to_string(ups) + " != " + std::to_string(d));
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

// sr with few discarded bits (bf16 -> e4m3: 4 bits below the lsb): the count over the top 4 bits
// of `random` is the discarded value d out of 16; with more than 32 discarded bits (f64 -> bf16)
// the decision is random >= 2^32 - top32, bits beyond the first 32 ignored.
TEST(policy, sr_probability_small_and_wide_cases) {
  for (std::uint64_t b = 0x3f80; b < 0x3f90; ++b) {  // 1 + d/128, d in [0, 16): 4 bits discarded
    const std::uint32_t d = static_cast<std::uint32_t>(b & 0xf);
    for (std::uint32_t low : {0u, 0x0fffffffu, 0x5a5a5a5u}) {
      std::uint32_t ups = 0;
      for (std::uint32_t j = 0; j < 16; ++j) {
        const auto r = convert(formats::e4m3, formats::bf16, b, rounding{round_mode::sr, (j << 28) | low});
        ups += r.bits != 0x38;
      }
      EXPECT_EQ(ups, d) << hex(b);
    }
  }
  splitmix64 g(3);
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t x = 0x3ff0000000000000ull | (g() >> 12);  // 1.f: 45 bits discarded into bf16
    const auto top32 = static_cast<std::uint32_t>((x >> 13) & 0xffffffffu);  // bits 44..13 of the fraction
    if (top32 == 0) continue;
    const std::uint32_t threshold = static_cast<std::uint32_t>((std::uint64_t{1} << 32) - top32);
    const std::uint64_t down = f64_bits_to(formats::bf16, x, rounding{round_mode::rz}).bits;
    EXPECT_EQ(f64_bits_to(formats::bf16, x, rounding{round_mode::sr, threshold}).bits, down + 1);
    EXPECT_EQ(f64_bits_to(formats::bf16, x, rounding{round_mode::sr, threshold - 1}).bits, down);
  }
}

}  // namespace
}  // namespace tiebreak::test
