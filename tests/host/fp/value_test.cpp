// SPDX-License-Identifier: Apache-2.0
/// @file unpack: every 8- and 16-bit encoding against the field definitions (Boost exact); NaN
/// payloads and signalling; DAZ; compare_magnitude.
#include <gtest/gtest.h>

#include <cstdint>

#include "support/dyadic_check.hpp"
#include "support/oracle.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::test {
namespace {

constexpr format_desc e3m2{3, 2, 3, special_style::ieee, 0, "e3m2"};

TEST(value, unpack_every_small_encoding) {
  for (const format_desc& f : {formats::bf16, formats::f16, formats::e4m3, formats::e5m2, e3m2}) {
    const std::uint64_t n = std::uint64_t{1} << f.storage_bits();
    for (std::uint64_t b = 0; b < n; ++b) {
      for (bool daz : {false, true}) {
        const exact_value v = unpack(f, b, daz);
        const operand_kind k = kind_of(f, b, daz);
        EXPECT_EQ(v.sign, sign_bit(f, b));
        switch (k) {
          case operand_kind::nan: EXPECT_EQ(v.cls, value_class::nan); break;
          case operand_kind::inf: EXPECT_EQ(v.cls, value_class::inf); break;
          case operand_kind::zero: EXPECT_EQ(v.cls, value_class::zero); break;
          default: {
            ASSERT_EQ(v.cls, value_class::finite);
            dyadic d;
            d.m = big(static_cast<std::uint64_t>(v.sig));
            d.e = v.exp;
            if (v.sign) d = -d;
            EXPECT_TRUE(d == decode_exact(f, b)) << f.name << " " << hex(b);
          }
        }
      }
    }
  }
}

TEST(value, nan_payload_and_signalling) {
  const exact_value q = unpack(formats::f32, 0xffc00001u);
  EXPECT_EQ(q.cls, value_class::nan);
  EXPECT_TRUE(q.sign);
  EXPECT_FALSE(q.nan_signaling);
  EXPECT_EQ(q.nan_payload, (std::uint64_t{0x400001} << 41));
  const exact_value s = unpack(formats::bf16, 0x7f81);
  EXPECT_TRUE(s.nan_signaling);
  EXPECT_EQ(s.nan_payload, std::uint64_t{1} << 57);
  EXPECT_FALSE(unpack(formats::e4m3, 0x7f).nan_signaling);  // fn formats have one NaN, never signalling
}

TEST(value, compare_magnitude) {
  const exact_value a = unpack(formats::f32, f32_to_bits(1.5f)), b = unpack(formats::f32, f32_to_bits(-1.5f)),
                    c = unpack(formats::f32, f32_to_bits(1.75f)), d = unpack(formats::bf16, 0x3fc0);
  EXPECT_EQ(compare_magnitude(a, b), 0);
  EXPECT_EQ(compare_magnitude(a, c), -1);
  EXPECT_EQ(compare_magnitude(c, a), 1);
  EXPECT_EQ(compare_magnitude(a, d), 0);  // same value, different windows
}

}  // namespace
}  // namespace tiebreak::test
