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

audit::gemm_scale tensor_scale(float v) {
  audit::gemm_scale s;
  s.kind = audit::gemm_scale_kind::tensor;
  s.v = {f32_to_bits(v)};
  return s;
}

/// A scale table of `outer` x `kblocks` values m·2^e (m in [1, 2), e in [-spread, spread]), seeded.
audit::gemm_scale random_scale(audit::gemm_scale_kind kind, std::size_t outer, std::size_t kblocks, int spread,
                               std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  audit::gemm_scale s;
  s.kind = kind;
  s.outer = outer;
  s.kblocks = kblocks;
  std::uniform_real_distribution<float> m(1, 2);
  std::uniform_int_distribution<int> e(-spread, spread);
  for (std::size_t q = 0; q < outer * kblocks; ++q) s.v.push_back(f32_to_bits(std::ldexp(m(rng), e(rng))));
  return s;
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

/// The oracle: every element as an exact sum of products in cpp_int, each times its K block's
/// sa·sb (exact in f64: two 24-bit significands), then C.
void expect_reference_exact(const gemm_dump& d) {
  const audit::gemm_exact ex = audit::gemm_reference(d, 2);
  std::size_t checked = 0;
  for (std::size_t i = 0; i < d.M; ++i)
    for (std::size_t j = 0; j < d.N; ++j) {
      cpp_int X = 0;
      bool finite = true;
      for (std::size_t k = 0; k < d.K; ++k) {
        const double a = to_double(d.a_fmt, d.a[i * d.K + k]), b = to_double(d.b_fmt, d.b[k * d.N + j]);
        finite = finite && std::isfinite(a) && std::isfinite(b);
        if (!finite) break;
        const double sab = static_cast<double>(bits_to_f32(d.scale_a.at(i, k / d.scale_block))) *
                           bits_to_f32(d.scale_b.at(j, k / d.scale_block));
        finite = finite && std::isfinite(sab);
        if (!finite) break;
        // a·b·s exactly: each has <= 48 significant bits; units of 2^-1100, so divide once per product.
        X += (units(a) * units(b) >> -oracle_lsb) * units(sab) >> -oracle_lsb;
      }
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
  d.scale_a = tensor_scale(0.0078125f * 3.0f);
  d.scale_b = tensor_scale(1.5e-3f);
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

// ---- Scales: per row / column, per block along K -------------------------------------------------

TEST(GemmReference, BlockScalesHandChecked) {
  // a = [1 1 1 1], b = [1 1 1 1]^T, blocks of 2 along K: sa = [2, 3], sb = [0.5, 4]:
  // x = 2·0.5·(1 + 1) + 3·4·(1 + 1) = 26; Σ|s a b| = 26.
  gemm_dump d = make_dump(formats::bf16, formats::bf16, 1, 1, 4, 0, 40);
  std::fill(d.a.begin(), d.a.end(), 0x3f80u);
  std::fill(d.b.begin(), d.b.end(), 0x3f80u);
  d.scale_block = 2;
  d.scale_a = {audit::gemm_scale_kind::block, 1, 2, {f32_to_bits(2.0f), f32_to_bits(3.0f)}};
  d.scale_b = {audit::gemm_scale_kind::block, 1, 2, {f32_to_bits(0.5f), f32_to_bits(4.0f)}};
  const audit::gemm_exact ex = audit::gemm_reference(d, 1);
  EXPECT_EQ(ex.x[0], 26.0);
  EXPECT_EQ(ex.abs_sum[0], 26.0);
  // Per row: the same scales as one per-row value 2 and per-column 0.5: x = 1·4 = 4.
  d.scale_a = {audit::gemm_scale_kind::outer, 1, 1, {f32_to_bits(2.0f)}};
  d.scale_b = {audit::gemm_scale_kind::outer, 1, 1, {f32_to_bits(0.5f)}};
  EXPECT_EQ(audit::gemm_reference(d, 1).x[0], 4.0);
}

TEST(GemmReference, PerRowAndPerColumnScales) {
  gemm_dump d = make_dump(formats::e4m3, formats::e4m3, 7, 9, 96, 4, 31);
  d.scale_a = random_scale(audit::gemm_scale_kind::outer, 7, 1, 6, 32);
  d.scale_b = random_scale(audit::gemm_scale_kind::outer, 9, 1, 6, 33);
  expect_reference_exact(d);
}

/// B x B blocks of B's scales, expanded along N (as the reader does).
audit::gemm_scale block_scale_b(std::size_t kblocks, std::size_t N, std::size_t B, int spread, std::uint64_t seed) {
  const audit::gemm_scale blocks = random_scale(audit::gemm_scale_kind::block, (N + B - 1) / B, kblocks, spread, seed);
  audit::gemm_scale s{audit::gemm_scale_kind::block, N, kblocks, {}};
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t kb = 0; kb < kblocks; ++kb) s.v.push_back(blocks.at(j / B, kb));
  return s;
}

TEST(GemmReference, BlockScalesAlongK) {
  // 1 x 128 blocks of A, 128 x 128 of B (two column blocks); K = 264: three blocks, the last of 8
  // (the __int128 path, with C).
  gemm_dump d = make_dump(formats::e4m3, formats::e4m3, 3, 130, 264, 4, 34);
  d.scale_a = random_scale(audit::gemm_scale_kind::block, 3, 3, 5, 35);
  d.scale_b = block_scale_b(3, 130, 128, 5, 36);
  std::mt19937_64 rng(37);
  d.c = random_matrix(formats::bf16, d.M * d.N, 6, rng);
  d.c_fmt = formats::bf16;
  d.scale_a.v[1 * 3 + 2] = 0x7fc00000u;  // a NaN scale: row 1 is NaN
  expect_reference_exact(d);
  // The wide path: e5m2 elements reaching below their leading slice, scale exponents 80 binades apart.
  gemm_dump w = make_dump(formats::e5m2, formats::e5m2, 5, 7, 256, 14, 38);
  w.scale_block = 64;
  w.scale_a = random_scale(audit::gemm_scale_kind::block, 5, 4, 40, 39);
  w.scale_b = block_scale_b(4, 7, 64, 3, 40);
  expect_reference_exact(w);
  EXPECT_GT(audit::gemm_reference(w, 1).sparse_terms, 0u);
}

/// DeepGEMM's scheme, written independently of the audit: per K block of 128, wgmma.k32.e4m3 from
/// zero (emu::gemm), then acc = fmaf(sa·sb, partial, acc) (or acc + (sa·sb)·partial), in host f32
/// arithmetic (IEEE RNE, no contraction).
gemm_dump deepgemm_like(bool fma, std::uint64_t seed) {
  gemm_dump d = make_dump(formats::e4m3, formats::e4m3, 64, 8, 256, 3, seed);
  d.scale_a = random_scale(audit::gemm_scale_kind::block, 64, 2, 4, seed + 1);
  d.scale_b = block_scale_b(2, 8, 128, 4, seed + 2);
  const emu::mma_model& m = emu::mma_entry(emu::mma_instr::wgmma_k32_e4m3).model;
  std::vector<float> acc(d.M * d.N, 0.0f);
  for (std::size_t b = 0; b < 2; ++b) {
    std::vector<std::uint32_t> a(d.M * 128), bb(128 * d.N), c(d.M * d.N, 0), out(d.M * d.N);
    for (std::size_t i = 0; i < d.M; ++i)
      for (std::size_t k = 0; k < 128; ++k) a[i * 128 + k] = d.a[i * d.K + b * 128 + k];
    for (std::size_t k = 0; k < 128; ++k)
      for (std::size_t j = 0; j < d.N; ++j) bb[k * d.N + j] = d.b[(b * 128 + k) * d.N + j];
    emu::gemm(m, static_cast<int>(d.M), static_cast<int>(d.N), 128, a.data(), bb.data(), c.data(), out.data());
    for (std::size_t i = 0; i < d.M; ++i)
      for (std::size_t j = 0; j < d.N; ++j) {
        const float s = bits_to_f32(d.scale_a.at(i, b)) * bits_to_f32(d.scale_b.at(j, b));
        const float p = bits_to_f32(out[i * d.N + j]);
        float& x = acc[i * d.N + j];
        x = fma ? std::fma(s, p, x) : x + s * p;
      }
  }
  for (std::size_t q = 0; q < acc.size(); ++q) d.d[q] = f32_to_bits(acc[q]);
  return d;
}

const audit::gemm_scheme_result* find_scheme(const audit::gemm_identification& id, int promote, int split, bool scale_fma) {
  for (const auto& c : id.candidates)
    if (!c.scheme.fma_f32 && c.scheme.promote == promote && c.scheme.split_k == split && !c.scheme.tree &&
        c.scheme.scale_fma == scale_fma && c.scheme.instr == emu::mma_instr::wgmma_k32_e4m3)
      return &c;
  return nullptr;
}

TEST(GemmIdentify, FindsBlockScalesAndHowTheyAreAdded) {
  for (const bool fma : {true, false}) {
    const gemm_dump d = deepgemm_like(fma, 50);
    audit::gemm_identify_options o;
    o.tiles = 4;  // all of the 64 x 8 output
    const audit::gemm_identification id = audit::identify_gemm(d, o);
    ASSERT_TRUE(id.explained()) << fma;
    const auto* right = find_scheme(id, 128, 1, fma);
    const auto* wrong = find_scheme(id, 128, 1, !fma);
    ASSERT_TRUE(right && wrong);
    EXPECT_EQ(right->mismatches, 0u);
    EXPECT_GT(wrong->mismatches, 0u);
    EXPECT_TRUE(right->scheme.name().find(fma ? "block scales by FMA" : "block scales by mul+add") != std::string::npos);
    const auto* every64 = find_scheme(id, 64, 1, fma);
    ASSERT_TRUE(every64);
    EXPECT_GT(every64->mismatches, 0u);
  }
}

// ---- Along K -------------------------------------------------------------------------------------

/// `d` with K cut to its first P columns of A (rows of B).
gemm_dump prefix(const gemm_dump& d, std::size_t P) {
  gemm_dump p = d;
  p.K = P;
  p.a.clear();
  for (std::size_t i = 0; i < d.M; ++i)
    for (std::size_t k = 0; k < P; ++k) p.a.push_back(d.a[i * d.K + k]);
  p.b.assign(d.b.begin(), d.b.begin() + static_cast<std::ptrdiff_t>(P * d.N));
  return p;
}

TEST(GemmAlongK, RunningSumsOfTheReproducingSchemeAgainstPrefixProducts) {
  // The running sum of one instruction accumulator after P = 64, 128, ... is emu::gemm over the
  // first P columns; the exact prefix is gemm_reference of that prefix (checked above).
  const gemm_dump d = emulated(1, 60);
  const auto cands = audit::gemm_candidates(d);
  const auto it = std::find_if(cands.begin(), cands.end(), [](const audit::gemm_scheme& s) {
    return !s.fma_f32 && s.instr == emu::mma_instr::mma_m16n8k16_bf16 && s.promote == 0 && s.split_k == 1;
  });
  ASSERT_NE(it, cands.end());
  audit::gemm_along_k_options o;
  o.k_block = 64;
  o.tiles = 4;  // all of the 32 x 16 output: 8 tiles rows of 8 columns per 16-row band... every (row, column half)
  const audit::gemm_along_k ak = audit::gemm_along_k_stats(d, *it, o);
  EXPECT_TRUE(ak.reproduces);
  EXPECT_EQ(ak.k_block, 64u);
  ASSERT_EQ(ak.blocks.size(), 4u);
  EXPECT_EQ(ak.rows, 64u);  // 4 tiles x 16 rows
  const emu::mma_model& m = emu::mma_entry(emu::mma_instr::mma_m16n8k16_bf16).model;
  const std::vector<double> full = audit::gemm_reference(d, 1).x;
  for (std::size_t b = 0; b < 4; ++b) {
    const std::size_t P = 64 * (b + 1);
    const gemm_dump p = prefix(d, P);
    const std::vector<double> y = audit::gemm_reference(p, 1).x;
    std::vector<std::uint32_t> c(d.M * d.N, 0), v(d.M * d.N);
    emu::gemm(m, static_cast<int>(d.M), static_cast<int>(d.N), static_cast<int>(P), p.a.data(), p.b.data(), c.data(), v.data());
    std::size_t pos = 0, neg = 0;
    double max_abs = 0;
    for (std::size_t i = 0; i < d.M; ++i)
      for (std::size_t c0 = 0; c0 < d.N; c0 += 8) {  // one sample: row i, columns c0 .. c0 + 7
        double top = 0, sum = 0;
        for (std::size_t j = c0; j < c0 + 8; ++j) top = std::max(top, std::abs(full[i * d.N + j]));
        const double u = audit::row_ulp(formats::f32, top);
        for (std::size_t j = c0; j < c0 + 8; ++j) {
          const double e = (static_cast<double>(bits_to_f32(v[i * d.N + j])) - y[i * d.N + j]) / u;
          sum += e;
          max_abs = std::max(max_abs, std::abs(e));
        }
        pos += sum > 0;
        neg += sum < 0;
      }
    const audit::gemm_along_k_block& blk = ak.blocks[b];
    EXPECT_EQ(blk.k_end, P);
    EXPECT_EQ(blk.part_start, 0u);
    EXPECT_EQ(blk.max_abs_ulps, max_abs) << P;
    EXPECT_EQ(blk.signed_ulps.sign.positive, pos) << P;
    EXPECT_EQ(blk.signed_ulps.sign.negative, neg) << P;
  }
  // Truncation in the tensor core: the running sum drifts toward zero.
  EXPECT_LT(ak.blocks.back().directed_ulps.t.mean, 0.0);
}

TEST(GemmAlongK, AChosenSchemeThatDoesNotReproduceDIsModelledAndSplitPartsRestart) {
  const gemm_dump d = emulated(1, 61);
  audit::gemm_scheme s;
  s.split_k = 2;
  audit::gemm_along_k_options o;
  o.k_block = 96;  // a multiple of k = 16; marks at multiples of 96 and at the part ends: 96, 128, 192, 256
  o.tiles = 2;
  const audit::gemm_along_k ak = audit::gemm_along_k_stats(d, s, o);
  EXPECT_FALSE(ak.reproduces);
  EXPECT_GT(ak.mismatches, 0u);
  ASSERT_EQ(ak.blocks.size(), 4u);
  const std::size_t ends[] = {96, 128, 192, 256}, starts[] = {0, 0, 128, 128};
  for (std::size_t b = 0; b < 4; ++b) {
    EXPECT_EQ(ak.blocks[b].k_end, ends[b]);
    EXPECT_EQ(ak.blocks[b].part_start, starts[b]);
  }
}

TEST(GemmAlongK, BlockScaledRunningSums) {
  const gemm_dump d = deepgemm_like(true, 70);
  audit::gemm_identify_options io;
  io.tiles = 4;
  const audit::gemm_identification id = audit::identify_gemm(d, io);
  ASSERT_TRUE(id.explained());
  audit::gemm_along_k_options o;
  o.tiles = 4;
  o.k_block = 32;  // below the scheme's promotion interval: rounded up to it
  const audit::gemm_along_k ak = audit::gemm_along_k_stats(d, id.candidates.front().scheme, o);
  EXPECT_TRUE(ak.reproduces);
  EXPECT_EQ(ak.k_block, static_cast<std::size_t>(id.candidates.front().scheme.promote));
  ASSERT_FALSE(ak.blocks.empty());
  EXPECT_EQ(ak.blocks.back().k_end, 256u);
  // At K the running sum is D (f32, no C, no epilogue scale): the largest |d - x| / u of the samples.
  const std::vector<double> x = audit::gemm_reference(d, 1).x;
  double max_abs = 0;
  for (std::size_t i = 0; i < d.M; ++i) {
    double top = 0;
    for (std::size_t j = 0; j < d.N; ++j) top = std::max(top, std::abs(x[i * d.N + j]));
    const double u = audit::row_ulp(formats::f32, top);
    for (std::size_t j = 0; j < d.N; ++j)
      max_abs = std::max(max_abs, std::abs((static_cast<double>(bits_to_f32(d.d[i * d.N + j])) - x[i * d.N + j]) / u));
  }
  EXPECT_EQ(ak.blocks.back().max_abs_ulps, max_abs);
  EXPECT_GT(max_abs, 0.0);
}
