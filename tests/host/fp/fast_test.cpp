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

// The pair form (flash.hpp's stochastic output): lo takes the word's high 16 random bits, hi its low 16.
static_assert(f32x2_bits_to_bf16x2_sr(0x3f808000u, 0xbf808000u, 0x80008000u) == 0xbf813f81u);  // both up
static_assert(f32x2_bits_to_bf16x2_sr(0x3f808000u, 0xbf808000u, 0x7fff7fffu) == 0xbf803f80u);  // both down
static_assert(f32x2_bits_to_bf16x2_sr(0x7f7fffffu, 0xff7fffffu, 0x00010001u) == 0xff807f80u);  // max finite -> ±Inf
static_assert(f32x2_bits_to_bf16x2_sr(0x7fffffffu, 0xffffffffu, 0xffffffffu) == 0x7fff7fffu);  // NaNs: canonical
static_assert(f32x2_bits_to_bf16x2_sr(0xff800001u, 0x00000000u, 0xffffffffu) == 0x00007fffu);
static_assert(f32x2_bits_to_bf16x2_sr_not_nan(0x7fff0000u, 0x7fff0000u, 0xffffffffu) == 0x7fff7fffu);

// The pair form against the scalar one, sign, exponent carries and NaN patterns included.
TEST(fast, bf16x2_sr_equals_scalar_pairs) {
  splitmix64 g(23);
  const std::uint32_t edge[] = {0x00000000u, 0x80000000u, 0x0000ffffu, 0x8000ffffu, 0x007fffffu, 0x3f80ffffu,
                                0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0xffffffffu,
                                0x7fc00000u, 0x7fff0000u, 0xffff0000u, 0x7fffffffu};
  std::vector<std::uint32_t> xs(std::begin(edge), std::end(edge));
  for (int i = 0; i < 4096; ++i) xs.push_back(static_cast<std::uint32_t>(g()));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    for (std::size_t j = 0; j < xs.size(); j += 61) {
      const std::uint32_t r = i < 16 ? (i % 2 ? 0xffffffffu : 0u) : static_cast<std::uint32_t>(g());
      const std::uint32_t want = static_cast<std::uint32_t>(f32_bits_to_bf16_sr(xs[i], r)) |
                                 static_cast<std::uint32_t>(f32_bits_to_bf16_sr(xs[j], r << 16)) << 16;
      ASSERT_EQ(f32x2_bits_to_bf16x2_sr(xs[i], xs[j], r), want) << std::hex << xs[i] << " " << xs[j] << " " << r;
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
