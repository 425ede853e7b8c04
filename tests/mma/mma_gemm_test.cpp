// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the emulated GEMM and dot product (src/host/include/tiebreak/host/emu_gemm.hpp).
#include <cstdint>
#include <cstdio>
#include <cstring>
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
  std::vector<gemm_kernel> r{gemm_kernel::general, gemm_kernel::fast_scalar, gemm_kernel::fast_vector,
                             gemm_kernel::automatic};
  if (emu::detail::gemm_have_avx2()) r.push_back(gemm_kernel::fast_avx2);
  return r;
}

const char* kernel_name(gemm_kernel k) {
  switch (k) {
    case gemm_kernel::general: return "general";
    case gemm_kernel::fast_scalar: return "fast_scalar";
    case gemm_kernel::fast_vector: return "fast_vector";
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

using emu::detail::gemm_vec;

/// One decoded lane against mma_decode (zeros: sig 0 and gemm_zero_exp; Inf and NaN: special).
::testing::AssertionResult lane_equals_mma_decode(const format_desc& f, bool daz, std::uint64_t bits, std::int32_t sig,
                                                  std::int32_t exp, bool special) {
  const emu::detail::mma_operand want = mma_decode(f, bits, daz);
  const bool ok = want.special() ? special
                : want.ssig == 0 ? !special && sig == 0 && exp == emu::detail::gemm_zero_exp
                                 : !special && sig == want.ssig && exp == want.exp;
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << f.name << " daz " << daz << " 0x" << std::hex << bits << std::dec << ": got sig "
                                       << sig << " exp " << exp << " special " << special;
}

/// gemm_decode (1 lane and 8 lanes) against mma_decode: every encoding of the 8- and 16-bit
/// formats, 2^20 random ones and the edges of tf32 and f32, with and without DAZ.
TEST(MmaGemmFast, DecodeEqualsMmaDecode) {
  const format_desc fmts[] = {formats::bf16, formats::f16, formats::e4m3, formats::e5m2, formats::tf32, formats::f32};
  std::size_t n = 0;
  for (const format_desc& f : fmts)
    for (bool daz : {false, true}) {
      const emu::detail::gemm_fmt g = emu::detail::gemm_fmt_of(f, daz);
      std::vector<std::uint64_t> all;
      if (f.storage_bits() <= 16) {
        for (std::uint64_t b = 0; b < (std::uint64_t{1} << f.storage_bits()); ++b) all.push_back(b);
      } else {
        for (std::uint64_t i = 0; i < (1u << 20); ++i) all.push_back(splitmix64(i * 7 + (daz ? 1 : 0)) & 0xffffffffu);
        for (std::uint64_t e : {0ull, 1ull, 0x7f7fffffull, 0x7f800000ull, 0x7f800001ull, 0x7fffffffull, 0x80000000ull,
                                0x807fffffull, 0x00800000ull, 0xff800000ull, 0x00002000ull, 0x007fe000ull})
          all.push_back(e);
      }
      while (all.size() % 8 != 0) all.push_back(all[all.size() % 8]);
      for (std::size_t i = 0; i < all.size(); i += 8) {
        std::uint32_t b8[8];
        for (int l = 0; l < 8; ++l) b8[l] = static_cast<std::uint32_t>(all[i + static_cast<std::size_t>(l)]);
        gemm_vec<8>::u32 v;
        std::memcpy(&v, b8, sizeof v);
        emu::detail::gemm_dec<8> d;
        emu::detail::gemm_decode<8>(g, v, d);
        for (int l = 0; l < 8; ++l) {
          const emu::detail::gemm_val one = emu::detail::gemm_decode_one(g, b8[l]);
          ASSERT_TRUE(lane_equals_mma_decode(f, daz, b8[l], one.sig, one.exp, one.special)) << " (1 lane)";
          ASSERT_TRUE(lane_equals_mma_decode(f, daz, b8[l], d.sig[l], d.exp[l], d.special[l] != 0)) << " (lane " << l << " of 8)";
          n += 2;
        }
      }
    }
  RecordProperty("decodes", static_cast<int>(n));
}

/// The models whose normalisation the fast path implements: every table row with step_round rz
/// and rne and overflow_to_inf off and on. Their (acc_fmt, c_fmt) pairs: (f32, f32), (e8m13, f32)
/// and (f16, f16).
std::vector<mma_model> normalisation_models() {
  std::vector<mma_model> r;
  for (mma_instr id : all_mma_instrs)
    for (round_mode step : {round_mode::rz, round_mode::rne})
      for (bool ovf : {false, true}) {
        mma_model m = mma_entry(id).model;
        m.step_round = step;
        m.overflow_to_inf = ovf;
        r.push_back(m);
      }
  return r;
}

/// The core's normalisation of a step's exact sum (-1)^neg * mag * 2^g, as mma_dot does it
/// (mma_step_fast, then mma_dot_with): round_pack into acc_fmt under step_round, Inf on overflow
/// under overflow_to_inf, positive_zero, then convert into c_fmt under out_round. mag == 0 (an
/// exact cancellation) gives +0 under positive_zero.
std::uint32_t core_round(const mma_model& m, bool neg, std::uint64_t mag, int g) {
  if (mag == 0) return 0;
  convert_options o;
  o.flush_output = m.ftz;
  const round_result r = round_pack(m.acc_fmt, make_exact(neg, mag, g), rounding{m.step_round, 0}, o);
  std::uint64_t acc = (m.overflow_to_inf && r.overflow()) ? m.acc_fmt.inf(neg) : r.bits;
  if ((acc & ~m.acc_fmt.sign_mask()) == 0) acc = 0;
  if (same_format(m.acc_fmt, m.c_fmt)) return static_cast<std::uint32_t>(acc);
  const round_result c = convert(m.c_fmt, m.acc_fmt, acc, rounding{m.out_round, 0}, o);
  return (c.bits & ~m.c_fmt.sign_mask()) == 0 ? 0u : static_cast<std::uint32_t>(c.bits);
}

/// Runs gemm_round on batches of 8 lanes (L = 8) and on each lane alone (L = 1), and compares
/// every lane's bits with core_round.
struct round_lanes {
  const mma_model& m;
  emu::detail::gemm_fast_plan p;
  int n = 0;
  std::int32_t neg[8] = {}, g[8] = {};
  std::uint32_t mag[8] = {};
  std::size_t checked = 0;

  explicit round_lanes(const mma_model& model) : m(model) { EXPECT_TRUE(emu::detail::gemm_fast_plan_of(m, p)); }

  ::testing::AssertionResult add(bool ng, std::uint32_t mg, int gg) {
    neg[n] = ng ? -1 : 0;
    mag[n] = mg;
    g[n] = gg;
    return ++n == 8 ? flush() : ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult flush() {
    if (n == 0) return ::testing::AssertionSuccess();
    for (int l = n; l < 8; ++l) { neg[l] = neg[0]; mag[l] = mag[0]; g[l] = g[0]; }
    gemm_vec<8>::i32 vn, vg;
    gemm_vec<8>::u32 vm, out8;
    std::memcpy(&vn, neg, sizeof vn);
    std::memcpy(&vg, g, sizeof vg);
    std::memcpy(&vm, mag, sizeof vm);
    emu::detail::gemm_round<8>(p, vn, vm, vg, out8);
    const int lanes = n;
    n = 0;
    for (int l = 0; l < lanes; ++l) {
      gemm_vec<1>::u32 out1;
      emu::detail::gemm_round<1>(p, gemm_vec<1>::i32{neg[l]}, gemm_vec<1>::u32{mag[l]}, gemm_vec<1>::i32{g[l]}, out1);
      const std::uint32_t want = core_round(m, neg[l] != 0, mag[l], g[l]);
      ++checked;
      if (out8[l] != want || out1[0] != want)
        return ::testing::AssertionFailure()
               << m.acc_fmt.name << "->" << m.c_fmt.name << " step " << to_string(m.step_round) << " ovf_to_inf "
               << m.overflow_to_inf << ": neg " << (neg[l] != 0) << " mag 0x" << std::hex << mag[l] << std::dec << " g "
               << g[l] << ": 8 lanes 0x" << std::hex << out8[l] << ", 1 lane 0x" << out1[0] << ", round_pack 0x" << want;
    }
    return ::testing::AssertionSuccess();
  }
};

/// Hand-checked normalisations (value = (-1)^neg mag 2^g; the comment gives the kept bits K,
/// guard G and sticky S where bits are dropped). Each row checks gemm_round (1 and 8 lanes) and
/// core_round (the round_pack composition the sweeps below compare with).
TEST(MmaGemmFast, RoundTable) {
  struct row {
    mma_instr id;  // the model's formats; step_round and overflow_to_inf as given
    round_mode step;
    bool ovf;
    bool neg;
    std::uint32_t mag;
    int g;
    std::uint32_t want;
    const char* what;
  };
  constexpr mma_instr f32 = mma_instr::mma_m16n8k16_bf16;     // acc f32, c f32
  constexpr mma_instr f16 = mma_instr::mma_m16n8k16_f16_f16out;  // acc f16, c f16
  constexpr mma_instr e8m13 = mma_instr::wgmma_k32_e4m3;      // acc e8m13, c f32
  constexpr round_mode rz = round_mode::rz, rne = round_mode::rne;
  const row rows[] = {
      {f32, rz, false, false, 1, 0, 0x3f800000, "1.0 exact"},
      {f32, rz, false, true, 1, 0, 0xbf800000, "-1.0 exact"},
      {f32, rne, false, false, (1u << 24) + 1, 0, 0x4b800000, "K=2^23 G=1 S=0: tie, K even: stays"},
      {f32, rz, false, false, (1u << 24) + 3, 0, 0x4b800001, "K=2^23+1 G=1 S=0: rz truncates"},
      {f32, rne, false, false, (1u << 24) + 3, 0, 0x4b800002, "K=2^23+1 G=1 S=0: tie, K odd: up to even"},
      {f32, rne, false, true, (1u << 24) + 3, 0, 0xcb800002, "the same, negative"},
      {f32, rne, false, false, (1u << 25) + 1, 0, 0x4c000000, "K=2^23 G=0 S=1: near-tie below (tie - 1)"},
      {f32, rne, false, false, (1u << 25) + 2, 0, 0x4c000000, "K=2^23 G=1 S=0: tie, K even"},
      {f32, rne, false, false, (1u << 25) + 3, 0, 0x4c000001, "K=2^23 G=1 S=1: near-tie above (tie + 1)"},
      {f32, rz, false, false, (1u << 25) + 3, 0, 0x4c000000, "K=2^23 G=1 S=1: rz truncates"},
      {f32, rne, false, false, (1u << 25) + 5, 0, 0x4c000001, "K=2^23+1 G=0 S=1: tie - 1, K odd: stays"},
      {f32, rne, false, false, (1u << 25) + 6, 0, 0x4c000002, "K=2^23+1 G=1 S=0: tie, K odd: up"},
      {f32, rne, false, false, (1u << 25) - 1, 0, 0x4c000000, "K=2^24-1 G=1: carry out, 2^25"},
      {f32, rz, false, false, (1u << 25) - 1, 0, 0x4bffffff, "K=2^24-1 G=1: rz, no carry"},
      {f32, rne, false, false, 0xffffffffu, -32, 0x3f800000, "32-bit input, K=2^24-1 G=1 S=1: carry to 1.0"},
      {f32, rz, false, false, 0xffffffffu, -32, 0x3f7fffff, "32-bit input under rz"},
      {f32, rz, false, false, 1, -149, 0x00000001, "min subnormal, exact"},
      {f32, rne, false, false, 3, -150, 0x00000002, "subnormal K=1 G=1 S=0: tie, K odd: up"},
      {f32, rz, false, false, 3, -150, 0x00000001, "subnormal, rz"},
      {f32, rne, false, false, 1, -150, 0x00000000, "half the min subnormal: tie, K=0 even: +0"},
      {f32, rne, false, true, 1, -150, 0x00000000, "the same, negative: positive_zero gives +0"},
      {f32, rne, false, false, 3, -151, 0x00000001, "subnormal K=0 G=1 S=1: up to the min subnormal"},
      {f32, rz, false, true, 3, -151, 0x00000000, "rz underflow to -0: positive_zero gives +0"},
      {f32, rne, false, false, (1u << 24) - 1, -150, 0x00800000, "subnormal K=2^23-1 G=1: carry to min normal"},
      {f32, rz, false, false, (1u << 24) - 1, -150, 0x007fffff, "the same under rz: max subnormal"},
      {f32, rne, false, false, 0xffffffffu, -182, 0x00000000, "33 bits dropped, all below half the min subnormal: +0"},
      {f32, rne, false, false, 0xffffffffu, -181, 0x00000001, "32 bits dropped, K=0 G=bit 31 S=1: up to the min subnormal"},
      {f32, rz, false, false, 0xffffffffu, -181, 0x00000000, "32 bits dropped, rz: +0"},
      {f32, rne, false, false, 0x80000000u, -181, 0x00000000, "32 bits dropped, K=0 G=1 S=0: tie, K even: +0"},
      {f32, rz, false, false, (1u << 24) - 1, 104, 0x7f7fffff, "max finite, exact"},
      {f32, rz, true, false, (1u << 25) - 1, 103, 0x7f7fffff, "just below 2^128: rz gives max finite (no overflow)"},
      {f32, rne, false, false, (1u << 25) - 1, 103, 0x7f800000, "just below 2^128: rne carries out to Inf"},
      {f32, rz, false, false, (1u << 25) - 1, 104, 0x7f7fffff, "overflow, rz: max finite"},
      {f32, rz, true, false, (1u << 25) - 1, 104, 0x7f800000, "overflow, rz with overflow_to_inf: Inf"},
      {f32, rz, true, true, (1u << 25) - 1, 104, 0xff800000, "the same, negative: -Inf"},
      {f32, rne, false, true, 1, 200, 0xff800000, "far overflow, rne: -Inf"},
      {f32, rz, false, false, 0, 0, 0x00000000, "exact cancellation: +0"},
      {f32, rz, false, true, 0, 0, 0x00000000, "exact cancellation, negative flag: +0"},
      {f16, rne, false, false, 1, 0, 0x3c00, "f16 1.0"},
      {f16, rne, false, true, 1, 0, 0xbc00, "f16 -1.0"},
      {f16, rne, false, false, (1u << 11) + 1, 0, 0x6800, "f16 K=2^10 G=1 S=0: tie, K even"},
      {f16, rne, false, false, (1u << 11) + 3, 0, 0x6802, "f16 K=2^10+1 G=1 S=0: tie, K odd: up"},
      {f16, rz, false, false, (1u << 11) + 3, 0, 0x6801, "f16 rz"},
      {f16, rne, false, false, 65519, 0, 0x7bff, "f16 K=2047 G=0 S=1: max finite (tie - 1)"},
      {f16, rne, false, false, 65520, 0, 0x7c00, "f16 K=2047 G=1 S=0: tie, K odd: carry out to Inf"},
      {f16, rz, false, false, 65520, 0, 0x7bff, "f16 rz: max finite"},
      {f16, rz, true, false, 65536, 0, 0x7c00, "f16 overflow, rz with overflow_to_inf: Inf"},
      {f16, rne, false, false, 1, -24, 0x0001, "f16 min subnormal"},
      {f16, rne, false, false, 1, -25, 0x0000, "f16 half the min subnormal: +0"},
      {f16, rne, false, false, 3, -25, 0x0002, "f16 subnormal tie, K odd: up"},
      {f16, rne, false, false, (1u << 11) - 1, -25, 0x0400, "f16 subnormal carry to min normal"},
      {e8m13, rz, false, false, 1, 0, 0x3f800000, "e8m13 1.0 in f32"},
      {e8m13, rz, false, false, (1u << 14) + 3, 0, 0x46800400, "e8m13 K=2^13+1 G=1: rz"},
      {e8m13, rne, false, false, (1u << 14) + 3, 0, 0x46800800, "e8m13 K=2^13+1 G=1 S=0: tie, K odd: up"},
      {e8m13, rne, false, false, (1u << 14) + 1, 0, 0x46800000, "e8m13 tie, K even"},
      {e8m13, rz, false, false, 1, -139, 0x00000400, "e8m13 min subnormal (2^-139) in f32"},
      {e8m13, rz, false, true, 1, -140, 0x00000000, "e8m13 below the min subnormal, rz: +0"},
      {e8m13, rz, false, false, (1u << 15) - 1, 114, 0x7f7ffc00, "e8m13 overflow, rz: its max finite"},
      {e8m13, rne, false, false, (1u << 15) - 1, 114, 0x7f800000, "e8m13 overflow, rne: Inf"},
  };
  for (const row& r : rows) {
    mma_model m = mma_entry(r.id).model;
    m.step_round = r.step;
    m.overflow_to_inf = r.ovf;
    EXPECT_EQ(core_round(m, r.neg, r.mag, r.g), r.want) << r.what << " (round_pack)";
    round_lanes lanes(m);
    for (int copy = 0; copy < 3; ++copy) lanes.add(r.neg, r.mag, r.g);  // lanes 0..2 of the batch
    const ::testing::AssertionResult res = lanes.flush();
    EXPECT_TRUE(res) << r.what;
  }
}

/// gemm_round against round_pack (core_round), lane by lane, for every normalisation model: the
/// exponent sweeps overflow, the normal range, subnormals and total underflow for every width
/// 1..32 (powers of two, their neighbours, exact ties, 1.11...10, random), then 2^24 random lanes
/// (random widths, with ties, near-ties +-1 and carries forced into a third of them).
TEST(MmaGemmFast, RoundEqualsRoundPack) {
  const std::vector<mma_model> models = normalisation_models();
  std::size_t sweep = 0, random = 0;
  std::uint64_t r = 17;
  const std::size_t random_per_model = (std::size_t{1} << 24) / models.size() + 1;
  for (const mma_model& m : models) {
    round_lanes lanes(m);
    const int lo = m.acc_fmt.emin() - m.acc_fmt.man_bits - 40, hi = m.acc_fmt.emax() + 4;
    for (int g0 = lo; g0 <= hi; ++g0) {
      for (int w = 1; w <= 32; ++w) {
        const int g = g0 - w;  // the value's exponent sweeps [lo, hi] for every width
        for (int v = 0; v < 12; ++v) {
          r = splitmix64(r);
          const std::uint64_t top = std::uint64_t{1} << (w - 1);
          std::uint64_t mag;
          switch (v) {
            case 0: mag = top; break;
            case 1: mag = (top << 1) - 1; break;
            case 2: mag = top + 1; break;
            case 3: mag = (3 * top) >> 1; break;               // 1.1000...
            case 4: mag = ((top << 1) - 1) & ~std::uint64_t{1}; break;  // 1.11...10
            default: mag = (r & (top - 1)) | top; break;
          }
          ASSERT_TRUE(lanes.add((r >> 63) != 0, static_cast<std::uint32_t>(mag), g));
        }
      }
    }
    ASSERT_TRUE(lanes.flush());
    sweep += lanes.checked;
    const std::size_t before = lanes.checked;
    for (std::size_t i = 0; i < random_per_model; ++i) {
      r = splitmix64(r + i);
      const int w = 1 + static_cast<int>(r % 32);
      const std::uint64_t top = std::uint64_t{1} << (w - 1);
      std::uint64_t mag = ((r >> 8) & (top - 1)) | top;
      const int cut = 1 + static_cast<int>((r >> 40) % static_cast<std::uint64_t>(w));  // bits below the cut
      switch ((r >> 46) % 6) {
        case 0: mag = (mag & ~((std::uint64_t{1} << cut) - 1)) | (std::uint64_t{1} << (cut - 1)); break;  // a tie at the cut
        case 1: mag = (mag & ~((std::uint64_t{1} << cut) - 1)) | (std::uint64_t{1} << (cut - 1)) | 1u; break;  // tie + 1
        case 2: mag = ((mag & ~((std::uint64_t{1} << cut) - 1)) | (std::uint64_t{1} << (cut - 1))) - 1; break;  // tie - 1
        case 3: mag = (top << 1) - 1 - ((r >> 50) & 1); break;  // all ones (carry out)
        default: break;
      }
      if (mag == 0 || mag >= (std::uint64_t{1} << 32)) mag = top;
      const int e = lo + static_cast<int>((r >> 52) % static_cast<std::uint64_t>(hi - lo + 1));
      ASSERT_TRUE(lanes.add((r >> 63) != 0, static_cast<std::uint32_t>(mag), e - (w - 1)));
    }
    ASSERT_TRUE(lanes.flush());
    random += lanes.checked - before;
  }
  RecordProperty("sweep_lanes", static_cast<int>(sweep));
  RecordProperty("random_lanes", static_cast<int>(random));
  std::printf("RoundEqualsRoundPack: %zu sweep lanes, %zu random lanes, each through 1 and 8 lanes\n", sweep, random);
}

/// gemm_finish (C truncated onto the grid, added to the products' sum, gemm_round) against the
/// core, lane by lane: C aligned by mma_align_add (round_pack rz onto the grid, as mma_step_fast
/// does), added, then core_round. 2^24 random lanes over the normalisation models: C random
/// finite encodings (zeros, -0, subnormals included) with its reference at or up to 40 below R,
/// the products' sum random (widths 0..31, either sign), a quarter of the lanes cancelling C's
/// aligned value exactly (+0) or to within one unit.
TEST(MmaGemmFast, FinishEqualsCore) {
  const std::vector<mma_model> models = normalisation_models();
  std::size_t checked = 0;
  std::uint64_t r = 99;
  const std::size_t per_model = (std::size_t{1} << 24) / models.size() + 1;
  for (const mma_model& m : models) {
    emu::detail::gemm_fast_plan p;
    ASSERT_TRUE(emu::detail::gemm_fast_plan_of(m, p));
    const int man_sum = m.a_fmt.man_bits + m.b_fmt.man_bits;
    const std::uint64_t c_mask = (std::uint64_t{1} << m.c_fmt.storage_bits()) - 1;
    std::int32_t acc[8], rm[8];
    std::uint32_t cbits[8];
    std::uint32_t want[8];
    for (std::size_t i = 0; i < per_model; i += 8) {
      for (int l = 0; l < 8; ++l) {
        r = splitmix64(r + i + static_cast<std::uint64_t>(l));
        std::uint64_t cb = r & c_mask;
        const emu::detail::mma_operand cv0 = mma_decode(m.c_fmt, cb, m.daz);
        if (cv0.special() || (r >> 40) % 8 == 0) cb = (r >> 40) % 16 == 0 ? m.c_fmt.sign_mask() : 0;  // zeros
        const emu::detail::mma_operand cv = mma_decode(m.c_fmt, cb, m.daz);
        // R - man_sum: C's reference or above it; with C zero, anywhere from underflow to overflow.
        const int c_ref = cv.ssig != 0 ? cv.exp + m.c_fmt.man_bits - man_sum : 0;
        const int span = m.acc_fmt.emax() - m.acc_fmt.emin() + m.acc_fmt.man_bits + 80;
        const int rmv = cv.ssig != 0 ? c_ref + static_cast<int>((r >> 20) % 41)
                                     : m.acc_fmt.emin() - m.acc_fmt.man_bits - 40 - man_sum + m.align_bits +
                                           static_cast<int>((r >> 20) % static_cast<std::uint64_t>(span));
        const int g = rmv + man_sum - m.align_bits;
        // C on the grid as the core aligns it (round_pack rz onto 2^g).
        const format_desc grid{8, 52, 1 - (g + 52), special_style::ieee, 0, literal("grid")};
        std::int64_t c_on_grid = 0;
        bool lost = false;
        if (cv.ssig != 0)
          emu::detail::mma_align_add(grid, rounding{m.align_round, 0}, g, cv.ssig < 0, cv.sig(), cv.exp, c_on_grid, lost);
        // The products' sum: |acc| < 2^31.
        std::int64_t a;
        const std::uint64_t r2 = splitmix64(r);
        switch (r2 % 8) {
          case 0: a = -c_on_grid; break;                                    // exact cancellation
          case 1: a = -c_on_grid + ((r2 >> 8) & 1 ? 1 : -1); break;          // cancellation to one unit
          default: {
            const int w = static_cast<int>((r2 >> 8) % 32);
            a = static_cast<std::int64_t>((r2 >> 16) & ((std::uint64_t{1} << w) - 1));
            if ((r2 >> 63) != 0) a = -a;
          }
        }
        if (a >= (std::int64_t{1} << 31) || a <= -(std::int64_t{1} << 31)) a = 0;
        acc[l] = static_cast<std::int32_t>(a);
        rm[l] = rmv;
        cbits[l] = static_cast<std::uint32_t>(cb);
        const std::int64_t total = a + c_on_grid;
        want[l] = core_round(m, total < 0, static_cast<std::uint64_t>(total < 0 ? -total : total), g);
      }
      gemm_vec<8>::i32 va, vr;
      gemm_vec<8>::u32 vc, out8;
      std::memcpy(&va, acc, sizeof va);
      std::memcpy(&vr, rm, sizeof vr);
      std::memcpy(&vc, cbits, sizeof vc);
      emu::detail::gemm_dec<8> c8;
      emu::detail::gemm_decode<8>(p.c, vc, c8);
      emu::detail::gemm_finish<8>(p, va, vr, c8, out8);
      for (int l = 0; l < 8; ++l) {
        emu::detail::gemm_dec<1> c1;
        emu::detail::gemm_decode<1>(p.c, gemm_vec<1>::u32{cbits[l]}, c1);
        gemm_vec<1>::u32 out1;
        emu::detail::gemm_finish<1>(p, gemm_vec<1>::i32{acc[l]}, gemm_vec<1>::i32{rm[l]}, c1, out1);
        ++checked;
        ASSERT_TRUE(out8[l] == want[l] && out1[0] == want[l])
            << m.acc_fmt.name << "->" << m.c_fmt.name << " step " << to_string(m.step_round) << " ovf_to_inf "
            << m.overflow_to_inf << ": acc " << acc[l] << " rm " << rm[l] << " C 0x" << std::hex << cbits[l] << ": 8 lanes 0x"
            << out8[l] << ", 1 lane 0x" << out1[0] << ", core 0x" << want[l];
      }
    }
  }
  RecordProperty("lanes", static_cast<int>(checked));
  std::printf("FinishEqualsCore: %zu lanes, each through 1 and 8 lanes\n", checked);
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
        const std::uint64_t r = splitmix64(e * 31 + static_cast<std::uint64_t>(kind) * 1000003u + static_cast<std::uint64_t>(id));
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
        const std::uint64_t r = splitmix64(e * 131 + static_cast<std::uint64_t>(kind) * 7919u + static_cast<std::uint64_t>(id) + 5);
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
        const std::uint64_t r = splitmix64(e + 77 + static_cast<std::uint64_t>(kind));
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
