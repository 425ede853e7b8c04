// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the emulated GEMM and dot product (src/host/include/tiebreak/host/emu_gemm.hpp).
#include <cstdint>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/host/emu_gemm.hpp"
#include "tiebreak/emu/mma_gen.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

/// Random operands of a model: A M x K, B K x N, C M x N (generator tiles along K).
void fill(const mma_model& m, int M, int N, int K, std::uint64_t seed, std::vector<std::uint32_t>& A,
          std::vector<std::uint32_t>& B, std::vector<std::uint32_t>& C) {
  A.resize(static_cast<std::size_t>(M) * K);
  B.resize(static_cast<std::size_t>(K) * N);
  C.resize(static_cast<std::size_t>(M) * N);
  for (int r = 0; r < M; ++r)
    for (int i = 0; i < K; ++i)
      A[static_cast<std::size_t>(r) * K + i] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, static_cast<std::uint64_t>(i / m.k), mma_operand_kind::a, r % m.m, i % m.k));
  for (int i = 0; i < K; ++i)
    for (int c = 0; c < N; ++c)
      B[static_cast<std::size_t>(i) * N + c] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, static_cast<std::uint64_t>(i / m.k), mma_operand_kind::b, i % m.k, c % m.n));
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      C[static_cast<std::size_t>(r) * N + c] =
          static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::c, r % m.m, c % m.n));
}

/// Reference: element by element, the k chunks in order, each through mma_dot on raw encodings.
std::vector<std::uint32_t> reference(const mma_model& m, int M, int N, int K, const std::vector<std::uint32_t>& A,
                                     const std::vector<std::uint32_t>& B, const std::vector<std::uint32_t>& C) {
  std::vector<std::uint32_t> D(C.size());
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) {
      std::uint64_t d = C[static_cast<std::size_t>(r) * N + c];
      for (int k0 = 0; k0 < K; k0 += m.k)
        d = mma_dot(m, d, &A[static_cast<std::size_t>(r) * K + k0], 1, &B[static_cast<std::size_t>(k0) * N + c], N).bits;
      D[static_cast<std::size_t>(r) * N + c] = static_cast<std::uint32_t>(d);
    }
  return D;
}

TEST(MmaGemm, TableModelsEqualElementwiseChunks) {
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    const int M = 24, N = 16, K = m.k * 5;
    std::vector<std::uint32_t> A, B, C;
    fill(m, M, N, K, 3 + static_cast<std::uint64_t>(id), A, B, C);
    std::vector<std::uint32_t> D(C.size());
    gemm(m, M, N, K, A.data(), B.data(), C.data(), D.data());
    EXPECT_EQ(D, reference(m, M, N, K, A, B, C)) << mma_instr_name(id);
    // dot() on one row and column agrees with the GEMM element.
    std::vector<std::uint32_t> col(static_cast<std::size_t>(K));
    for (int i = 0; i < K; ++i) col[static_cast<std::size_t>(i)] = B[static_cast<std::size_t>(i) * N + 3];
    EXPECT_EQ(dot(m, C[2 * N + 3], &A[2 * static_cast<std::size_t>(K)], 1, col.data(), 1, K), D[2 * N + 3]);
  }
}

TEST(MmaGemm, GenericModelAndAliasing) {
  // A model not in the table takes the generic path; D may alias C.
  mma_model m = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  m.group = 4;
  m.grouping = mma_grouping::strided;
  m.align_bits = 27;
  m.align_round = round_mode::rd;
  m.step_round = round_mode::rne;
  const int M = 16, N = 8, K = 64;
  std::vector<std::uint32_t> A, B, C;
  fill(m, M, N, K, 5, A, B, C);
  const auto want = reference(m, M, N, K, A, B, C);
  gemm(m, M, N, K, A.data(), B.data(), C.data(), C.data());
  EXPECT_EQ(C, want);
}

// ---------------------------------------------------------------------------------------------
// The fast path (emu_gemm.hpp, emu::detail::gemm_*) against the general model, zero tolerance.
// ---------------------------------------------------------------------------------------------

std::vector<gemm_kernel> kernels() {
  std::vector<gemm_kernel> r{gemm_kernel::general, gemm_kernel::fast_scalar, gemm_kernel::automatic};
  if (emu::detail::gemm_have_avx2()) r.push_back(gemm_kernel::fast_avx2);
  return r;
}

const char* kernel_name(gemm_kernel k) {
  switch (k) {
    case gemm_kernel::general: return "general";
    case gemm_kernel::fast_scalar: return "fast_scalar";
    case gemm_kernel::fast_avx2: return "fast_avx2";
    default: return "automatic";
  }
}

/// Compares gemm (every kernel) and dot (fast and general) with the element-wise reference;
/// returns the number of elements compared.
std::size_t check_all(const mma_model& m, int M, int N, int K, const std::vector<std::uint32_t>& A,
                      const std::vector<std::uint32_t>& B, const std::vector<std::uint32_t>& C, const char* what) {
  const auto want = reference(m, M, N, K, A, B, C);
  std::size_t n = 0;
  for (gemm_kernel kern : kernels()) {
    std::vector<std::uint32_t> D(C.size());
    gemm(m, M, N, K, A.data(), B.data(), C.data(), D.data(), kern);
    std::size_t bad = 0;
    for (std::size_t e = 0; e < D.size(); ++e) {
      if (D[e] != want[e]) {
        if (bad++ < 3)
          ADD_FAILURE() << what << ' ' << kernel_name(kern) << " element " << e << ": got 0x" << std::hex << D[e]
                        << " want 0x" << want[e] << std::dec;
      }
    }
    EXPECT_EQ(bad, 0u) << what << ' ' << kernel_name(kern);
    n += D.size();
    // D aliasing C.
    std::vector<std::uint32_t> CD = C;
    gemm(m, M, N, K, A.data(), B.data(), CD.data(), CD.data(), kern);
    EXPECT_EQ(CD, want) << what << ' ' << kernel_name(kern) << " (D aliases C)";
  }
  // dot on a few rows and columns (strided B column, as in the reference).
  for (int r = 0; r < M; r += 5)
    for (int c = 0; c < N; c += 3) {
      const std::uint32_t* a = &A[static_cast<std::size_t>(r) * K];
      const std::uint32_t* b = &B[static_cast<std::size_t>(c)];
      const std::uint64_t cb = C[static_cast<std::size_t>(r) * N + c];
      const std::uint64_t w = want[static_cast<std::size_t>(r) * N + c];
      EXPECT_EQ(dot(m, cb, a, 1, b, N, K), w) << what << " dot " << r << ',' << c;
      EXPECT_EQ(dot(m, cb, a, 1, b, N, K, gemm_kernel::general), w) << what << " dot general " << r << ',' << c;
      n += 2;
    }
  return n;
}

TEST(MmaGemmFast, EveryTableModelIsCovered) {
  for (mma_instr id : all_mma_instrs) EXPECT_TRUE(emu::detail::gemm_fast_covers(mma_entry(id).model)) << mma_instr_name(id);
  // Not covered (they run the general model): FTZ, signed zeros, several steps, rounded alignment.
  mma_model m = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  m.ftz = true;
  EXPECT_FALSE(emu::detail::gemm_fast_covers(m));
  m = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  m.positive_zero = false;
  EXPECT_FALSE(emu::detail::gemm_fast_covers(m));
  m = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  m.group = 8;
  EXPECT_FALSE(emu::detail::gemm_fast_covers(m));
  m = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  m.align_round = round_mode::rne;
  EXPECT_FALSE(emu::detail::gemm_fast_covers(m));
}

/// gemm_decode against mma_decode: every encoding of the 8- and 16-bit formats, 2^20 random ones
/// and the edges of tf32 and f32, with and without DAZ.
TEST(MmaGemmFast, DecodeEqualsMmaDecode) {
  const format_desc fmts[] = {formats::bf16, formats::f16, formats::e4m3, formats::e5m2, formats::tf32, formats::f32};
  std::size_t n = 0;
  for (const format_desc& f : fmts)
    for (bool daz : {false, true}) {
      const emu::detail::gemm_fmt g = emu::detail::gemm_fmt_of(f, daz);
      const auto check = [&](std::uint64_t bits) {
        const emu::detail::mma_operand want = mma_decode(f, bits, daz);
        const emu::detail::gemm_val got = emu::detail::gemm_decode(g, bits);
        ++n;
        if (want.special()) {
          ASSERT_TRUE(got.special) << f.name << " 0x" << std::hex << bits;
        } else if (want.ssig == 0) {
          ASSERT_TRUE(!got.special && got.sig == 0 && got.exp == emu::detail::gemm_zero_exp) << f.name << " 0x" << std::hex << bits;
        } else {
          ASSERT_TRUE(!got.special && got.sig == want.ssig && got.exp == want.exp) << f.name << " 0x" << std::hex << bits;
        }
      };
      if (f.storage_bits() <= 16) {
        for (std::uint64_t b = 0; b < (std::uint64_t{1} << f.storage_bits()); ++b) check(b);
      } else {
        for (std::uint64_t i = 0; i < (1u << 20); ++i) check(mma_hash(i * 7 + (daz ? 1 : 0)) & 0xffffffffu);
        for (std::uint64_t e : {0ull, 1ull, 0x7f7fffffull, 0x7f800000ull, 0x7f800001ull, 0x7fffffffull, 0x80000000ull,
                                0x807fffffull, 0x00800000ull, 0xff800000ull, 0x00002000ull, 0x007fe000ull})
          check(e);
      }
    }
  RecordProperty("decodes", static_cast<int>(n));
}

/// gemm_round against what mma_dot does with a step's exact sum: round_pack into acc_fmt under
/// step_round, overflow_to_inf, positive_zero, then the conversion into c_fmt. The exponents
/// sweep overflow, the normal range, subnormals and total underflow; the significands are
/// random widths, powers of two, their neighbours and exact ties.
TEST(MmaGemmFast, RoundEqualsRoundPack) {
  std::size_t n = 0;
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    emu::detail::gemm_fast_plan p;
    ASSERT_TRUE(emu::detail::gemm_fast_plan_of(m, p));
    const auto want = [&](bool neg, std::uint64_t mag, int g) {
      convert_options o;
      o.flush_output = m.ftz;
      const round_result r = round_pack(m.acc_fmt, make_exact(neg, mag, g), rounding{m.step_round, 0}, o);
      std::uint64_t acc = (m.overflow_to_inf && r.overflow()) ? m.acc_fmt.inf(neg) : r.bits;
      if ((acc & ~m.acc_fmt.sign_mask()) == 0) acc = 0;
      if (same_format(m.acc_fmt, m.c_fmt)) return acc;
      const round_result c = convert(m.c_fmt, m.acc_fmt, acc, rounding{m.out_round, 0}, o);
      return (c.bits & ~m.c_fmt.sign_mask()) == 0 ? std::uint64_t{0} : c.bits;
    };
    const int lo = m.acc_fmt.emin() - m.acc_fmt.man_bits - 40, hi = m.acc_fmt.emax() + 4;
    std::uint64_t r = 17 + static_cast<std::uint64_t>(id);
    for (int g0 = lo; g0 <= hi; ++g0) {
      for (int w = 1; w <= 33; ++w) {
        const int g = g0 - w;  // the value's exponent sweeps [lo, hi] for every width
        for (int v = 0; v < 12; ++v) {
          r = mma_hash(r);
          std::uint64_t mag;
          switch (v) {
            case 0: mag = std::uint64_t{1} << (w - 1); break;
            case 1: mag = (std::uint64_t{1} << w) - 1; break;
            case 2: mag = (std::uint64_t{1} << (w - 1)) + 1; break;
            case 3: mag = (std::uint64_t{3} << (w - 1)) >> 1; break;                  // 1.1000...
            case 4: mag = ((std::uint64_t{1} << w) - 1) & ~std::uint64_t{1}; break;  // 1.11...10
            default: mag = (r & ((std::uint64_t{1} << (w - 1)) - 1)) | (std::uint64_t{1} << (w - 1)); break;
          }
          if (mag == 0) continue;
          const bool neg = (r >> 63) != 0;
          const std::uint64_t got = emu::detail::gemm_round(p, neg, mag, g), exp = want(neg, mag, g);
          ++n;
          ASSERT_EQ(got, exp) << mma_instr_name(id) << " neg " << neg << " mag 0x" << std::hex << mag << std::dec
                              << " g " << g;
        }
      }
    }
  }
  RecordProperty("roundings", static_cast<int>(n));
}

/// Random GEMMs: every chunk along K is one generated tile, so each GEMM mixes all eight scenarios
/// (typical, wide, cancel, ties, raw with NaN/Inf/subnormals, subnormal, big_c, tiny_c); shapes not
/// multiples of 8 exercise the partial column blocks.
TEST(MmaGemmFast, RandomAndGeneratedTilesEqualReference) {
  std::size_t n = 0;
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    int seen[mma_scenario_count] = {};
    for (std::uint64_t seed = 100; seed < 104; ++seed) {
      const int M = 19, N = 21, K = m.k * 24;
      for (int t = 0; t < K / m.k; ++t) ++seen[static_cast<int>(mma_tile_scenario(seed, static_cast<std::uint64_t>(t)))];
      std::vector<std::uint32_t> A, B, C;
      fill(m, M, N, K, seed, A, B, C);
      n += check_all(m, M, N, K, A, B, C, mma_instr_name(id).data());
    }
    for (int s = 0; s < mma_scenario_count; ++s) EXPECT_GT(seen[s], 0) << "scenario " << s << " not drawn";
  }
  RecordProperty("elements", static_cast<int>(n));
  std::printf("RandomAndGeneratedTilesEqualReference: %zu elements compared\n", n);
}

/// One scenario per GEMM (every chunk of K the same scenario), for each scenario and instruction.
TEST(MmaGemmFast, EachScenarioEqualsReference) {
  std::size_t n = 0;
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    for (int s = 0; s < mma_scenario_count; ++s) {
      std::uint64_t seed = 1;
      while (static_cast<int>(mma_tile_scenario(seed, 0)) != s) ++seed;
      const int M = 16, N = 13, K = m.k * 6;
      std::vector<std::uint32_t> A(static_cast<std::size_t>(M) * K), B(static_cast<std::size_t>(K) * N),
          C(static_cast<std::size_t>(M) * N);
      // Tile 0 of `seed` everywhere, the k index shifted per chunk so the chunks differ.
      for (int r = 0; r < M; ++r)
        for (int i = 0; i < K; ++i)
          A[static_cast<std::size_t>(r) * K + i] = static_cast<std::uint32_t>(
              mma_gen_element(m, seed, 0, mma_operand_kind::a, (r + i / m.k) % m.m, i % m.k));
      for (int i = 0; i < K; ++i)
        for (int c = 0; c < N; ++c)
          B[static_cast<std::size_t>(i) * N + c] = static_cast<std::uint32_t>(
              mma_gen_element(m, seed, 0, mma_operand_kind::b, i % m.k, (c + 3 * (i / m.k)) % m.n));
      for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c)
          C[static_cast<std::size_t>(r) * N + c] =
              static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::c, r % m.m, c % m.n));
      n += check_all(m, M, N, K, A, B, C, mma_instr_name(id).data());
    }
  }
  std::printf("EachScenarioEqualsReference: %zu elements compared\n", n);
}

/// Hand-made adversarial operands: overflow (to Inf or max finite, then Inf as the next C), exact
/// cancellation against C, -0 everywhere, all-zero rows, NaN and Inf scattered in A, B and C,
/// subnormal products, the largest exponent spread, and sums of subnormal products that underflow
/// to zero (negative ones to -0, which positive_zero makes +0).
TEST(MmaGemmFast, AdversarialEqualsReference) {
  std::size_t n = 0;
  for (mma_instr id : all_mma_instrs) {
    const mma_model& m = mma_entry(id).model;
    const format_desc& fa = m.a_fmt;
    const format_desc& fb = m.b_fmt;
    const format_desc& fc = m.c_fmt;
    const int M = 12, N = 11, K = m.k * 4;
    for (int kind = 0; kind < 8; ++kind) {
      std::vector<std::uint32_t> A(static_cast<std::size_t>(M) * K), B(static_cast<std::size_t>(K) * N),
          C(static_cast<std::size_t>(M) * N);
      for (std::size_t e = 0; e < A.size(); ++e) {
        const std::uint64_t r = mma_hash(e * 31 + static_cast<std::uint64_t>(kind) * 1000003u + static_cast<std::uint64_t>(id));
        const bool neg = (r & 1) != 0;
        switch (kind) {
          case 0: A[e] = static_cast<std::uint32_t>(fa.max_finite(false) - (r & 1u)); break;             // overflow
          case 1: A[e] = static_cast<std::uint32_t>(fa.pack(neg, static_cast<std::uint64_t>(fa.bias), 0)); break;  // +-1
          case 2: A[e] = static_cast<std::uint32_t>(fa.sign_mask()); break;                               // -0
          case 3: A[e] = (e / K) % 3 == 0 ? 0u : static_cast<std::uint32_t>(fa.pack(neg, 1, r >> 40 & fa.frac_mask())); break;
          case 4: A[e] = static_cast<std::uint32_t>(r % 7 == 0 ? (r % 2 ? fa.inf(neg) : fa.encoding_mask() & ~fa.sign_mask())
                                                             : fa.pack(neg, static_cast<std::uint64_t>(fa.bias), r >> 30 & fa.frac_mask()));
            if (!fa.has_inf() && r % 7 == 0) A[e] = static_cast<std::uint32_t>(fa.encoding_mask() & ~fa.sign_mask() & ~((std::uint64_t{1} << fa.pad) - 1));
            break;
          case 5: A[e] = static_cast<std::uint32_t>(fa.pack(neg, 0, (r >> 20 & fa.frac_mask()) | 1u)); break;  // subnormal
          case 7: A[e] = static_cast<std::uint32_t>(fa.pack(neg, 0, (r >> 20 & fa.frac_mask()) | 1u)); break;
          default: A[e] = static_cast<std::uint32_t>(fa.pack(neg, (e % 2) ? fa.exp_field_max() - 1 : 1, r >> 20 & fa.frac_mask())); break;
        }
      }
      for (std::size_t e = 0; e < B.size(); ++e) {
        const std::uint64_t r = mma_hash(e * 131 + static_cast<std::uint64_t>(kind) * 7919u + static_cast<std::uint64_t>(id) + 5);
        const bool neg = kind == 0 ? false : (r & 1) != 0;
        switch (kind) {
          case 0: B[e] = static_cast<std::uint32_t>(fb.max_finite(neg)); break;
          case 2: B[e] = static_cast<std::uint32_t>((r & 1) ? fb.sign_mask() : fb.pack(true, static_cast<std::uint64_t>(fb.bias), 0)); break;
          case 4: B[e] = static_cast<std::uint32_t>(r % 11 == 0 ? fb.inf(neg) : fb.pack(neg, static_cast<std::uint64_t>(fb.bias) - 1, r >> 30 & fb.frac_mask()));
            if (!fb.has_inf() && r % 11 == 0) B[e] = static_cast<std::uint32_t>(fb.max_finite(neg) + 1);  // e4m3 NaN
            break;
          case 5: B[e] = static_cast<std::uint32_t>(fb.pack(neg, r % 3, r >> 20 & fb.frac_mask())); break;
          case 7: B[e] = static_cast<std::uint32_t>(fb.pack(neg, 0, (r >> 20 & fb.frac_mask()) | 1u)); break;
          case 6: B[e] = static_cast<std::uint32_t>(fb.pack(neg, (e % 3) ? fb.exp_field_max() - 1 : 1, r >> 20 & fb.frac_mask())); break;
          default: B[e] = static_cast<std::uint32_t>(fb.pack(neg, static_cast<std::uint64_t>(fb.bias) + (r % 3), r >> 20 & fb.frac_mask())); break;
        }
      }
      for (std::size_t e = 0; e < C.size(); ++e) {
        const std::uint64_t r = mma_hash(e + 77 + static_cast<std::uint64_t>(kind));
        switch (kind) {
          case 0: C[e] = static_cast<std::uint32_t>(fc.max_finite(false)); break;
          case 2: C[e] = static_cast<std::uint32_t>(fc.sign_mask()); break;
          case 7: C[e] = static_cast<std::uint32_t>(r % 3 == 0 ? fc.pack(r & 2, 0, 1) : (r & 1) ? fc.sign_mask() : 0); break;
          case 4: C[e] = static_cast<std::uint32_t>(r % 5 == 0 ? fc.inf(r & 1) : r % 5 == 1 ? fc.encoding_mask() : fc.pack(false, static_cast<std::uint64_t>(fc.bias), 0)); break;
          case 6: C[e] = static_cast<std::uint32_t>(fc.pack(r & 1, (r % 2) ? 1 : fc.exp_field_max() - 1, r >> 20 & fc.frac_mask())); break;
          default: C[e] = static_cast<std::uint32_t>(fc.pack(r & 1, static_cast<std::uint64_t>(fc.bias) + (r % 4), r >> 20 & fc.frac_mask())); break;
        }
      }
      if (kind == 1) {
        // Exact cancellation: C = -(row of A) . (column of B) where it is representable, B = +-1.
        for (std::size_t e = 0; e < B.size(); ++e) B[e] = static_cast<std::uint32_t>(fb.pack(e % 2, static_cast<std::uint64_t>(fb.bias), 0));
        for (int r = 0; r < M; ++r)
          for (int c = 0; c < N; ++c) {
            long s = 0;
            for (int i = 0; i < m.k; ++i) {
              const bool na = (A[static_cast<std::size_t>(r) * K + i] & fa.sign_mask()) != 0;
              const bool nb = (B[static_cast<std::size_t>(i) * N + c] & fb.sign_mask()) != 0;
              s += na != nb ? -1 : 1;
            }
            const exact_value v = make_exact(s > 0, static_cast<std::uint64_t>(s < 0 ? -s : s), 0);
            C[static_cast<std::size_t>(r) * N + c] = static_cast<std::uint32_t>(round_pack(fc, v, rounding{round_mode::rne, 0}).bits);
          }
      }
      char what[64];
      std::snprintf(what, sizeof what, "%s adversarial %d", mma_instr_name(id).data(), kind);
      n += check_all(m, M, N, K, A, B, C, what);
    }
  }
  std::printf("AdversarialEqualsReference: %zu elements compared\n", n);
}

}  // namespace
