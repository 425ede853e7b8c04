// SPDX-License-Identifier: Apache-2.0
/// @file The integer primitives of config.hpp: clz/msb/low-mask tables, at compile time and run time.
#include <gtest/gtest.h>

#include <cstdint>

#include "tiebreak/fp/config.hpp"

namespace tiebreak {
namespace {

static_assert(clz64(0) == 64 && clz64(1) == 63 && clz64(~std::uint64_t{0}) == 0);
static_assert(clz128(0) == 128 && clz128(u128{1} << 64) == 63 && clz128(1) == 127);
static_assert(msb128(1) == 0 && msb128(u128{1} << 127) == 127 && msb128(0) == -1);
static_assert(popcount32(0) == 0 && popcount32(1) == 1 && popcount32(0x80000001u) == 2 && popcount32(~0u) == 32);
static_assert(low_mask128(0) == 0 && low_mask128(1) == 1 && low_mask128(128) == ~u128{0} && low_mask128(-3) == 0);

TEST(config, every_single_bit_position) {
  for (int i = 0; i < 128; ++i) {
    const u128 x = u128{1} << i;
    EXPECT_EQ(msb128(x), i);
    EXPECT_EQ(msb128(x | 1), i);
    EXPECT_EQ(clz128(x), 127 - i);
    EXPECT_EQ(low_mask128(i) + 1, x);  // 2^i - 1 + 1
    if (i < 64) {
      volatile std::uint64_t v = std::uint64_t{1} << i;  // run time, not constant folded
      EXPECT_EQ(clz64(v), 63 - i);
    }
  }
}

/// popcount32 at run time (the builtin; POPC on the device) equals the constant-evaluated loop.
TEST(config, popcount32_matches_constant_evaluation) {
  std::uint64_t state = 1;
  for (int i = 0; i < 10000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    volatile std::uint32_t v = static_cast<std::uint32_t>(state >> 32);
    int n = 0;
    for (std::uint32_t x = v; x != 0; x >>= 1) n += static_cast<int>(x & 1u);
    EXPECT_EQ(popcount32(v), n);
  }
}

}  // namespace
}  // namespace tiebreak
