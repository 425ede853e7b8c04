// SPDX-License-Identifier: Apache-2.0
/// @file Checks __float2bfloat16_rn against tiebreak's round_pack: adversarial inputs, then a sweep
/// of f32 encodings batched on the GPU: every 1021st by default; TIEBREAK_EXAMPLE_STRIDE=1 checks
/// all 2^32 (with TIEBREAK_EXAMPLE_THREADS=16 and TIEBREAK_EXAMPLE_CHECKPOINT=file to resume).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <tiebreak/testing.hpp>

#include "convert_kernel.hpp"

namespace tt = tiebreak::testing;

namespace {
float f32_from_bits(std::uint64_t b) {
  const auto u = static_cast<std::uint32_t>(b);
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace

TEST(Float2Bfloat16Rn, SingleTie) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  const float x = 1.00390625f;  // 1 + 2^-8: halfway between bf16 1.0 and 1.0078125
  std::uint16_t got = 0;
  ASSERT_TRUE(f32_to_bf16_rn_on_gpu(&x, &got, 1));
  EXPECT_THAT(got, tt::IsRoundedFrom(x, "bf16", "rne"));
}

TEST(Float2Bfloat16Rn, AdversarialInputsRoundToNearestEven) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> in;
  for (std::uint64_t b : tt::adversarial::ties("bf16", 1, 4)) in.push_back(f32_from_bits(b));
  for (std::uint64_t b : tt::adversarial::near_ties("bf16", 2, 4)) in.push_back(f32_from_bits(b));
  for (std::uint64_t b : tt::adversarial::subnormal_boundaries("bf16")) in.push_back(f32_from_bits(b));
  for (std::uint64_t b : tt::adversarial::overflow_boundaries("bf16")) in.push_back(f32_from_bits(b));
  in.push_back(f32_from_bits(0x7fc00000u));  // NaN: NVIDIA's canonical 0x7fff expected
  std::vector<std::uint16_t> out(in.size());
  const char* err = nullptr;
  ASSERT_TRUE(f32_to_bf16_rn_on_gpu(in.data(), out.data(), in.size(), &err)) << err;
  EXPECT_THAT(out, ::testing::Pointwise(tt::IsRoundingOf("bf16", "rne"), in));
}

TEST(Float2Bfloat16Rn, SweepOfF32Encodings) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device";
  tt::sweep_options opt;
  opt.threads = 1;  // one GPU batch per chunk; more threads overlap the host checks of chunks
  if (const char* t = std::getenv("TIEBREAK_EXAMPLE_THREADS")) opt.threads = static_cast<unsigned>(std::strtoul(t, nullptr, 10));
  opt.chunk_size = std::uint64_t{1} << 26;
  opt.stride = 1021;
  if (const char* s = std::getenv("TIEBREAK_EXAMPLE_STRIDE")) opt.stride = std::strtoull(s, nullptr, 10);
  if (const char* c = std::getenv("TIEBREAK_EXAMPLE_CHECKPOINT")) opt.checkpoint = c;
  const tt::sweep_report rep = tt::sweep(
      std::uint64_t{1} << 32,
      [](std::uint64_t begin, std::uint64_t end, std::uint64_t stride, tt::sweep_sink& sink) {
        std::vector<float> in;
        for (std::uint64_t i = (begin + stride - 1) / stride * stride; i < end; i += stride) in.push_back(f32_from_bits(i));
        std::vector<std::uint16_t> out(in.size());
        const char* err = "";
        if (!f32_to_bf16_rn_on_gpu(in.data(), out.data(), in.size(), &err)) throw std::runtime_error(err);
        for (std::size_t k = 0; k < in.size(); ++k) {
          std::uint32_t x;
          std::memcpy(&x, &in[k], sizeof x);
          const std::uint64_t want = tiebreak::f32_bits_to(tiebreak::formats::bf16, x, tiebreak::rne_t{}).bits;
          if (out[k] != want) sink.mismatch(x, out[k], want);
        }
      },
      opt);
  EXPECT_EQ(rep.mismatches, 0u) << rep.summary();
  RecordProperty("checked", static_cast<int>(rep.checked));
  std::printf("%s\n", rep.summary().c_str());
}
