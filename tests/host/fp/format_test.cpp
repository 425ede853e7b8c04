// SPDX-License-Identifier: Apache-2.0
/// @file Format descriptors: limits of every named format and a custom one, from their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak {
namespace {

constexpr format_desc e3m2{3, 2, 3, special_style::ieee, 0, "e3m2"};

static_assert(formats::e4m3.max_finite(false) == 0x7e && formats::e4m3.emax() == 8);
static_assert(formats::e5m2.max_finite(false) == 0x7b && formats::e5m2.inf(true) == 0xfc);
static_assert(formats::tf32.storage_bits() == 32 && formats::tf32.pack(false, 127, 1) == 0x3f802000u);
static_assert(e3m2.storage_bits() == 6 && e3m2.max_finite(false) == 0x1b && e3m2.emin() == -2);

struct limits_row {
  format_desc f;
  double max_finite, min_normal, min_subnormal;
};

TEST(format, limits_of_every_format) {
  const limits_row rows[] = {
      {formats::f64, 0x1.fffffffffffffp1023, 0x1p-1022, 0x1p-1074},
      {formats::f32, 0x1.fffffep127, 0x1p-126, 0x1p-149},
      {formats::tf32, 0x1.ffcp127, 0x1p-126, 0x1p-136},
      {formats::bf16, 0x1.fep127, 0x1p-126, 0x1p-133},
      {formats::f16, 65504.0, 0x1p-14, 0x1p-24},
      {formats::e4m3, 448.0, 0x1p-6, 0x1p-9},
      {formats::e5m2, 57344.0, 0x1p-14, 0x1p-16},
      {e3m2, 14.0, 0.25, 0.0625},
  };
  for (const limits_row& r : rows) {
    EXPECT_EQ(to_double(r.f, r.f.max_finite(false)), r.max_finite) << r.f.name;
    EXPECT_EQ(to_double(r.f, r.f.max_finite(true)), -r.max_finite) << r.f.name;
    EXPECT_EQ(to_double(r.f, r.f.pack(false, 1, 0)), r.min_normal) << r.f.name;
    EXPECT_EQ(to_double(r.f, r.f.pack(false, 0, 1)), r.min_subnormal) << r.f.name;
    EXPECT_EQ(r.f.has_inf(), r.f.special == special_style::ieee);
  }
  EXPECT_TRUE(formats::e4m3.is_nan(0x7f) && formats::e4m3.is_nan(0xff) && !formats::e4m3.is_nan(0x7e));
  EXPECT_FALSE(formats::e4m3.is_inf(0x78));  // S.1111.000 is the finite 256
  EXPECT_EQ(to_double(formats::e4m3, 0x78), 256.0);
  EXPECT_TRUE(formats::e5m2.is_inf(0x7c) && formats::e5m2.is_nan(0x7d));
}

TEST(format, names_round_trip) {
  for (format_id id : all_format_ids) {
    format_id back{};
    ASSERT_TRUE(parse_format(desc_of(id).name, back));
    EXPECT_EQ(back, id);
  }
  format_id unused{};
  EXPECT_FALSE(parse_format("fp7", unused));
}

}  // namespace
}  // namespace tiebreak
