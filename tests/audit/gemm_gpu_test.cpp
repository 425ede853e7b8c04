// SPDX-License-Identifier: Apache-2.0
/// @file audit-gemm on the device: the project's tensor-core GEMM (gpu::mma_gemm), whose scheme is
/// known, is identified from its D alone. Skips without a GPU that runs the kernel.
#include <tiebreak/audit/gemm.hpp>

#include <tiebreak/emu/ops.hpp>
#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>
#include <tiebreak/gpu/mma.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

using namespace tiebreak;

/// a, b random bf16 (exponents spread over ±6 binades); d = the kernel's product, split `parts` ways
/// along K with the partials summed in f32 (emu::add, RNE) in order.
audit::gemm_dump kernel_dump(std::size_t parts) {
  constexpr std::size_t M = 64, N = 32, K = 1024;
  const emu::mma_instr id = emu::mma_instr::mma_m16n8k16_bf16;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> sig(-2, 2);
  std::uniform_int_distribution<int> ex(-6, 6);
  audit::gemm_dump d;
  d.M = M;
  d.N = N;
  d.K = K;
  d.a_fmt = d.b_fmt = formats::bf16;
  d.d_fmt = formats::f32;
  for (std::size_t q = 0; q < M * K + K * N; ++q) {
    const auto v = static_cast<std::uint32_t>(
        f64_bits_to(formats::bf16, f64_to_bits(std::ldexp(sig(rng), ex(rng))), rounding{round_mode::rne, 0}).bits);
    (q < M * K ? d.a : d.b).push_back(v);
  }
  const std::size_t kp = K / parts;
  d.d.assign(M * N, 0);
  std::vector<std::uint32_t> a(M * kp), b(kp * N), c(M * N, 0), out(M * N);
  for (std::size_t p = 0; p < parts; ++p) {
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t k = 0; k < kp; ++k) a[i * kp + k] = d.a[i * K + p * kp + k];
    for (std::size_t k = 0; k < kp; ++k)
      for (std::size_t j = 0; j < N; ++j) b[k * N + j] = d.b[(p * kp + k) * N + j];
    gpu::mma_gemm(id, static_cast<int>(M), static_cast<int>(N), static_cast<int>(kp), a.data(), b.data(), c.data(), out.data());
    for (std::size_t q = 0; q < out.size(); ++q)
      d.d[q] = p == 0 ? out[q]
                      : static_cast<std::uint32_t>(emu::add(formats::f32, d.d[q], out[q], rounding{round_mode::rne, 0}).round.bits);
  }
  return d;
}

std::size_t mismatches_of(const audit::gemm_identification& id, int split, int promote) {
  for (const auto& c : id.candidates)
    if (!c.scheme.fma_f32 && c.scheme.instr == emu::mma_instr::mma_m16n8k16_bf16 && c.scheme.split_k == split &&
        c.scheme.promote == promote && !c.scheme.tree)
      return c.mismatches;
  ADD_FAILURE() << "candidate not tried";
  return 0;
}

TEST(GemmGpu, TheProjectsKernelIsIdentified) {
  if (!gpu::mma_available(emu::mma_instr::mma_m16n8k16_bf16)) GTEST_SKIP() << gpu::mma_device_description();
  audit::gemm_identify_options o;
  o.tiles = 16;  // all 4 x 4 tiles of the 64 x 32 output
  const audit::gemm_identification plain = audit::identify_gemm(kernel_dump(1), o);
  ASSERT_TRUE(plain.explained());
  EXPECT_EQ(mismatches_of(plain, 1, 0), 0u);
  EXPECT_GT(mismatches_of(plain, 2, 0), 0u);
  const audit::gemm_identification split = audit::identify_gemm(kernel_dump(4), o);
  ASSERT_TRUE(split.explained());
  EXPECT_EQ(mismatches_of(split, 4, 0), 0u);
  EXPECT_GT(mismatches_of(split, 1, 0), 0u);
}

}  // namespace
