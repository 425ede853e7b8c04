// SPDX-License-Identifier: Apache-2.0
/// @file audit-gemm: the exact reference against an independent Boost oracle, scheme identification
/// on D made by the emulated GEMM (emu::gemm) with known schemes, and planted biases.
#include <tiebreak/audit/gemm.hpp>

#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>
#include <tiebreak/host/emu_gemm.hpp>

#include <boost/multiprecision/cpp_int.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace {

using namespace tiebreak;
using boost::multiprecision::cpp_int;
using audit::gemm_dump;

constexpr int oracle_lsb = -1100;  ///< every product, scaled and with C, is a multiple of 2^-1100

/// v = sig·2^e of a finite encoding as a cpp_int in units of 2^oracle_lsb (the oracle's own decode:
/// through to_double, exact for every format here).
cpp_int units(double v) {
  if (v == 0) return 0;
  int e = 0;
  const double m = std::frexp(std::abs(v), &e);  // v = m 2^e, m in [0.5, 1)
  const auto sig = static_cast<std::int64_t>(std::ldexp(m, 53));
  cpp_int x = cpp_int(sig) << (e - 53 - oracle_lsb);
  return v < 0 ? cpp_int(-x) : x;
}

/// True when x is the round-to-nearest-even f64 of the exact value X·2^oracle_lsb.
bool is_rne_of(double x, const cpp_int& X) {
  if (X == 0) return x == 0;
  if (x == 0 || !std::isfinite(x)) return false;
  const cpp_int diff = X - units(x);
  int e = 0;
  std::frexp(x, &e);
  const int ulp_exp = e - 53;  // ulp of x
  const cpp_int ulp = cpp_int(1) << (ulp_exp - oracle_lsb);
  const cpp_int twice = abs(diff) * 2;
  // Below a power of two the gap is half as wide.
  const bool pow2 = std::abs(std::ldexp(std::frexp(x, &e), 1)) == 1.0;
  const bool toward_zero = (diff < 0) == (x > 0);
  const cpp_int gap = pow2 && toward_zero ? cpp_int(ulp / 2) : ulp;
  if (twice < gap) return true;
  if (twice > gap) return false;
  const auto m = static_cast<std::int64_t>(std::ldexp(std::abs(std::frexp(x, &e)), 53));
  return (m & 1) == 0;  // a tie: x must be even
}

std::uint32_t enc(const format_desc& f, double x) {
  return static_cast<std::uint32_t>(f64_bits_to(f, f64_to_bits(x), rounding{round_mode::rne, 0}).bits);
}

/// Random values of `f` with exponents spread over [-spread, spread] (zeros and subnormals included).
std::vector<std::uint32_t> random_matrix(const format_desc& f, std::size_t n, int spread, std::mt19937_64& rng) {
  std::vector<std::uint32_t> v(n);
  std::uniform_real_distribution<double> m(-2, 2);
  std::uniform_int_distribution<int> e(-spread, spread), z(0, 40);
  for (auto& x : v) {
    const int zz = z(rng);
    if (zz == 0) x = 0;
    else if (zz == 1) x = 1;  // smallest subnormal
    else x = enc(f, std::ldexp(m(rng), e(rng)));
  }
  return v;
}

gemm_dump make_dump(const format_desc& fa, const format_desc& fb, std::size_t M, std::size_t N, std::size_t K, int spread,
                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  gemm_dump d;
  d.M = M;
  d.N = N;
  d.K = K;
  d.a_fmt = fa;
  d.b_fmt = fb;
  d.d_fmt = formats::f32;
  d.a = random_matrix(fa, M * K, spread, rng);
  d.b = random_matrix(fb, K * N, spread, rng);
  d.d.assign(M * N, 0);
  return d;
}

/// The oracle: every element as an exact sum of products in cpp_int, then scales and C.
void expect_reference_exact(const gemm_dump& d) {
  const audit::gemm_exact ex = audit::gemm_reference(d, 2);
  const double sa = d.scale_a ? bits_to_f32(*d.scale_a) : 1.0, sb = d.scale_b ? bits_to_f32(*d.scale_b) : 1.0;
  std::size_t checked = 0;
  for (std::size_t i = 0; i < d.M; ++i)
    for (std::size_t j = 0; j < d.N; ++j) {
      cpp_int X = 0;
      bool finite = true;
      for (std::size_t k = 0; k < d.K; ++k) {
        const double a = to_double(d.a_fmt, d.a[i * d.K + k]), b = to_double(d.b_fmt, d.b[k * d.N + j]);
        finite = finite && std::isfinite(a) && std::isfinite(b);
        if (!finite) break;
        // a·b exactly: both have <= 24 significant bits; units of 2^-1100 twice, so divide once.
        X += units(a) * units(b) >> -oracle_lsb;
      }
      if (finite && (d.scale_a || d.scale_b)) X = (X * units(sa) >> -oracle_lsb) * units(sb) >> -oracle_lsb;
      if (finite && !d.c.empty()) X += units(to_double(d.c_fmt, d.c[i * d.N + j]));
      const double x = ex.x[i * d.N + j];
      if (!finite) {
        EXPECT_TRUE(std::isnan(x)) << i << "," << j;
        continue;
      }
      ASSERT_TRUE(is_rne_of(x, X)) << "element (" << i << ", " << j << "): " << x;
      ++checked;
    }
  EXPECT_GT(checked, 0u);
}

TEST(GemmReference, WideExponentSpreadBf16) {
  // Spread ±40: most rows need several 20-bit slices (the sparse levels and the Boost path).
  const gemm_dump d = make_dump(formats::bf16, formats::bf16, 9, 13, 300, 40, 1);
  expect_reference_exact(d);
  EXPECT_GT(audit::gemm_reference(d, 1).sparse_terms, 0u);
}

TEST(GemmReference, NarrowSpreadTakesTheInt128Path) {
  expect_reference_exact(make_dump(formats::bf16, formats::bf16, 8, 16, 256, 3, 2));
  expect_reference_exact(make_dump(formats::f16, formats::f16, 5, 7, 96, 6, 3));
}

TEST(GemmReference, MixedFp8AndF32Inputs) {
  expect_reference_exact(make_dump(formats::e4m3, formats::e5m2, 6, 9, 128, 4, 4));
  expect_reference_exact(make_dump(formats::f32, formats::f32, 4, 5, 64, 60, 5));
}

TEST(GemmReference, ScalesAndC) {
  gemm_dump d = make_dump(formats::e4m3, formats::e4m3, 5, 8, 64, 3, 6);
  d.scale_a = f32_to_bits(0.0078125f * 3.0f);
  d.scale_b = f32_to_bits(1.5e-3f);
  std::mt19937_64 rng(7);
  d.c = random_matrix(formats::bf16, d.M * d.N, 10, rng);
  d.c_fmt = formats::bf16;
  expect_reference_exact(d);
}

TEST(GemmReference, LongKIsChunked) {
  expect_reference_exact(make_dump(formats::bf16, formats::bf16, 2, 3, 8192 + 512, 5, 8));
}

TEST(GemmReference, NanRowAndInfColumnGiveNan) {
  gemm_dump d = make_dump(formats::bf16, formats::bf16, 4, 8, 32, 3, 9);
  d.a[1 * 32 + 5] = 0x7fc0;  // NaN in row 1
  d.b[7 * 8 + 2] = 0x7f80;   // +Inf in column 2
  expect_reference_exact(d);
}

// ---- Identification ------------------------------------------------------------------------------

/// D by the emulated GEMM of mma.m16n8k16.bf16 (the cuda/ kernel's twin), split-K `parts` ways,
/// partials summed in order in f32 (host float addition: IEEE RNE, no contraction).
gemm_dump emulated(std::size_t parts, std::uint64_t seed) {
  gemm_dump d = make_dump(formats::bf16, formats::bf16, 32, 16, 256, 6, seed);
  const emu::mma_model& m = emu::mma_entry(emu::mma_instr::mma_m16n8k16_bf16).model;
  const std::size_t ks = d.K / parts;
  std::vector<float> acc(d.M * d.N, 0.0f);
  for (std::size_t p = 0; p < parts; ++p) {
    std::vector<std::uint32_t> a(d.M * ks), b(ks * d.N), c(d.M * d.N, 0), out(d.M * d.N);
    for (std::size_t i = 0; i < d.M; ++i)
      for (std::size_t k = 0; k < ks; ++k) a[i * ks + k] = d.a[i * d.K + p * ks + k];
    for (std::size_t k = 0; k < ks; ++k)
      for (std::size_t j = 0; j < d.N; ++j) b[k * d.N + j] = d.b[(p * ks + k) * d.N + j];
    emu::gemm(m, static_cast<int>(d.M), static_cast<int>(d.N), static_cast<int>(ks), a.data(), b.data(), c.data(), out.data());
    for (std::size_t q = 0; q < out.size(); ++q) acc[q] = p == 0 ? bits_to_f32(out[q]) : acc[q] + bits_to_f32(out[q]);
  }
  for (std::size_t q = 0; q < acc.size(); ++q) d.d[q] = f32_to_bits(acc[q]);
  return d;
}

std::size_t mismatches_of(const audit::gemm_identification& id, int split, int promote, bool fma = false) {
  for (const auto& c : id.candidates)
    if (c.scheme.split_k == split && c.scheme.promote == promote && !c.scheme.tree && c.scheme.fma_f32 == fma &&
        (fma || c.scheme.instr == emu::mma_instr::mma_m16n8k16_bf16))
      return c.mismatches;
  ADD_FAILURE() << "candidate not tried";
  return 0;
}

TEST(GemmIdentify, FindsTheEmulatedKernelWithoutSplit) {
  const gemm_dump d = emulated(1, 11);
  audit::gemm_identify_options o;
  o.tiles = 4;  // all of the 32 x 16 output
  const audit::gemm_identification id = audit::identify_gemm(d, o);
  EXPECT_EQ(id.elements, 512u);
  ASSERT_TRUE(id.explained());
  EXPECT_EQ(mismatches_of(id, 1, 0), 0u);
  EXPECT_GT(mismatches_of(id, 2, 0), 0u);
  EXPECT_GT(mismatches_of(id, 1, 0, true), 0u);  // f32 FMA is not the tensor core
}

TEST(GemmIdentify, FindsSplitK) {
  const gemm_dump d = emulated(2, 12);
  audit::gemm_identify_options o;
  o.tiles = 4;
  const audit::gemm_identification id = audit::identify_gemm(d, o);
  ASSERT_TRUE(id.explained());
  EXPECT_EQ(mismatches_of(id, 2, 0), 0u);
  EXPECT_GT(mismatches_of(id, 1, 0), 0u);
  // Promotion every 128 = split-K 2 summed in order, when C is zero: the same bits, both reported.
  EXPECT_EQ(mismatches_of(id, 1, 128), 0u);
}

TEST(GemmIdentify, SaysSoWhenNothingExplainsD) {
  gemm_dump d = emulated(1, 13);
  for (auto& x : d.d) x ^= 1;  // flip every lsb
  audit::gemm_identify_options o;
  o.tiles = 2;
  const audit::gemm_identification id = audit::identify_gemm(d, o);
  EXPECT_FALSE(id.explained());
}

TEST(GemmIdentify, ShapesThatAreNotMultiplesOfTheTileAreCoveredAndTheSampleEnds) {
  gemm_dump d = make_dump(formats::bf16, formats::bf16, 40, 20, 32, 2, 14);
  std::fill(d.d.begin(), d.d.end(), 0u);
  audit::gemm_identify_options o;
  o.tiles = 1000;  // more than there are: 3 x 3 distinct tile positions
  const audit::gemm_identification id = audit::identify_gemm(d, o);
  EXPECT_EQ(id.tiles, 9u);
  std::vector<char> seen(d.M * d.N, 0);
  for (const auto& [r, c] : id.tile_origins)
    for (std::size_t i = 0; i < 16; ++i)
      for (std::size_t j = 0; j < 8; ++j) seen[(r + i) * d.N + c + j] = 1;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<std::ptrdiff_t>(d.M * d.N));
  o.tiles = 5;
  EXPECT_EQ(audit::identify_gemm(d, o).tiles, 5u);
}

// ---- Statistics: planted biases ----------------------------------------------------------------

gemm_dump rounded_output(round_mode mode, std::uint64_t seed) {
  gemm_dump d = make_dump(formats::bf16, formats::bf16, 64, 64, 64, 2, seed);
  const audit::gemm_exact ex = audit::gemm_reference(d, 2);
  d.d_fmt = formats::bf16;
  // The f64 reference rounded into bf16: exact value within 2^-53, far below bf16's ulp (a double
  // rounding would need the exact value within 2^-53 of a bf16 tie: it is not, for this seed).
  for (std::size_t q = 0; q < d.d.size(); ++q)
    d.d[q] = static_cast<std::uint32_t>(f64_bits_to(formats::bf16, f64_to_bits(ex.x[q]), rounding{mode, 0}).bits);
  return d;
}

TEST(GemmStatistics, RoundUpIsBiasedNearestIsNot) {
  const audit::gemm_report up = audit::run_gemm_audit(rounded_output(round_mode::ru, 21));
  EXPECT_TRUE(up.biased);
  EXPECT_GT(up.row_signed.t.mean, 0.05);
  EXPECT_EQ(up.negative, 0u);
  const audit::gemm_report rz = audit::run_gemm_audit(rounded_output(round_mode::rz, 21));
  EXPECT_TRUE(rz.biased);
  EXPECT_LT(rz.row_directed.t.mean, -0.05);  // toward zero: directed error negative
  const audit::gemm_report rn = audit::run_gemm_audit(rounded_output(round_mode::rne, 21));
  EXPECT_FALSE(rn.biased);
  EXPECT_LE(rn.max_abs_error_ulps, 0.5);
}

}  // namespace
