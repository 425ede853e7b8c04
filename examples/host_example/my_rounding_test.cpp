// SPDX-License-Identifier: Apache-2.0
/// @file Example: testing your own rounding code with tiebreak::testing.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <tiebreak/testing.hpp>

#include "my_kernel.hpp"

namespace tt = tiebreak::testing;
using tt::IsRoundedFrom;

namespace {
float f32_from_bits(std::uint64_t b) {
  const auto u = static_cast<std::uint32_t>(b);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
tiebreak::convert_options torch_nan() {
  tiebreak::convert_options o;
  o.nan = tiebreak::nan_policy::quiet;  // the kernel's documented NaN: 0x7fc0
  return o;
}
}  // namespace

TEST(MyKernel, RoundsTiesToEven) {
  EXPECT_THAT(my_f32_to_bf16(1.00390625f), IsRoundedFrom(1.00390625f, "bf16", "rne"));
  EXPECT_THAT(my_f32_to_bf16(1.01171875f), IsRoundedFrom(1.01171875f, "bf16", "rne"));
}

TEST(MyKernel, AdversarialInputs) {
  std::vector<float> in;
  for (std::uint64_t b : tt::adversarial::ties("bf16", 1, 2)) in.push_back(f32_from_bits(b));
  for (std::uint64_t b : tt::adversarial::near_ties("bf16", 1, 2)) in.push_back(f32_from_bits(b));
  for (std::uint64_t b : tt::adversarial::subnormal_boundaries("bf16")) in.push_back(f32_from_bits(b));
  for (std::uint64_t b : tt::adversarial::overflow_boundaries("bf16")) in.push_back(f32_from_bits(b));
  std::vector<std::uint16_t> out;
  for (float x : in) out.push_back(my_f32_to_bf16(x));
  EXPECT_THAT(out, ::testing::Pointwise(tt::IsRoundingOf("bf16", "rne", torch_nan()), in));
}

TEST(MyKernel, StridedSweepOfAllF32) {
  tt::sweep_options opt;
  opt.stride = 9973;  // ~430k encodings; stride 1 checks all 2^32 (minutes, resumable with opt.checkpoint)
  const tt::sweep_report rep = tt::for_all_f32(
      [](std::uint32_t x) {
        const std::uint64_t want = tiebreak::f32_bits_to(tiebreak::formats::bf16, x, tiebreak::rne_t{}, torch_nan()).bits;
        const std::uint16_t got = my_f32_to_bf16(f32_from_bits(x));
        return tt::sweep_check{got == want, got, want};
      },
      opt);
  EXPECT_EQ(rep.mismatches, 0u) << rep.summary();
}

TEST(MyKernel, ErrorOfRoundingRandomValuesIsUnbiased) {
  tt::adversarial::splitmix64 rng(7);
  std::vector<double> err_ulps;
  for (int i = 0; i < 10000; ++i) {
    const auto x = static_cast<std::uint32_t>(0x3f800000u | (rng.next() & 0x7fffffu));  // [1, 2)
    const double exact = f32_from_bits(x);
    const double got = tiebreak::to_double(tiebreak::formats::bf16, my_f32_to_bf16(f32_from_bits(x)));
    err_ulps.push_back((got - exact) / 0x1p-7);  // bf16 ulp in [1, 2)
  }
  EXPECT_THAT(err_ulps, tt::HasUnbiasedError(1e-3, 0.05));
}
