// SPDX-License-Identifier: Apache-2.0
/// @file fast.hpp: bit tables for every mode, NaN never becoming Inf, and a quick random check of the
/// bulk loops (tiebreak/host/bulk_convert.hpp) against round_pack (the full 2^32 proof is
/// fast_exhaustive_test.cpp, label exhaustive).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support/sweep.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/host/bulk_convert.hpp"

namespace tiebreak::test {
namespace {

using host::convert_f32_to_bf16;
using host::convert_f32_to_bf16_sr;

static_assert(f32_bits_to_bf16_rna(0x3f808000u) == 0x3f81);
static_assert(f32_bits_to_bf16_ru(0x3f800001u) == 0x3f81 && f32_bits_to_bf16_ru(0xbf800001u) == 0xbf80);
static_assert(f32_bits_to_bf16_rd(0xbf800001u) == 0xbf81 && f32_bits_to_bf16_rd(0x3f800001u) == 0x3f80);
static_assert(f32_bits_to_bf16_rto(0x3f800001u) == 0x3f81 && f32_bits_to_bf16_rto(0x7f7fffffu) == 0x7f7f);
static_assert(f32_bits_to_bf16_sr(0x3f808000u, 0x80000000u) == 0x3f81);
static_assert(f32_bits_to_bf16_sr(0x3f808000u, 0x7fffffffu) == 0x3f80);
static_assert(f32_bits_to_bf16_sr(0xbf808000u, 0x80000000u) == 0xbf81);  // magnitude rounds away

// The add-0x7fff trick applied to a NaN (0x7f800001 + 0x7fff = 0x7f808000 -> 0x7f80, Inf) is the
// classic bug; every mode must return the canonical NaN for every NaN pattern of the low half.
TEST(fast, nan_never_becomes_inf) {
  for (std::uint32_t hi : {0x7f80u, 0xff80u, 0x7fffu, 0xffc0u}) {
    for (std::uint32_t lo = (hi & 0x7f) == 0 ? 1u : 0u; lo < 0x10000u; ++lo) {
      const std::uint32_t x = (hi << 16) | lo;
      for (round_mode m : all_round_modes) EXPECT_EQ(f32_bits_to_bf16(x, rounding{m, lo * 977u}), 0x7fff) << std::hex << x;
    }
  }
}

TEST(fast, random_inputs_equal_round_pack) {
  splitmix64 g(17);
  std::vector<std::uint32_t> in(1 << 16), rnd(1 << 16);
  std::vector<std::uint16_t> out(1 << 16);
  for (std::size_t i = 0; i < in.size(); ++i) { in[i] = static_cast<std::uint32_t>(g()); rnd[i] = static_cast<std::uint32_t>(g()); }
  for (round_mode m : all_round_modes) {
    if (m == round_mode::sr) convert_f32_to_bf16_sr(in.data(), rnd.data(), out.data(), in.size());
    else convert_f32_to_bf16(in.data(), out.data(), in.size(), m);
    for (std::size_t i = 0; i < in.size(); ++i) {
      const rounding r{m, m == round_mode::sr ? rnd[i] : 0u};
      ASSERT_EQ(out[i], f32_bits_to(formats::bf16, in[i], r).bits) << to_string(m) << " " << std::hex << in[i];
    }
  }
}

}  // namespace
}  // namespace tiebreak::test
