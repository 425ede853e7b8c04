// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the MMA instruction model (include/tiebreak/emu/mma.hpp): bit tables, paths, oracle.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/emu/mma_gen.hpp"
#include "tiebreak/host/exact.hpp"
#include "tiebreak/host/mma_identify.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

/// A model of shape (ab, c, k) with the given parameters (group = k unless set after).
mma_model make(format_desc ab, format_desc c, int k, int align_bits, round_mode align_round, round_mode step_round) {
  return mma_make(ab, c, formats::f32, 16, 8, k, k, mma_grouping::contiguous, mma_c_order::first, mma_exp_ref::nominal,
                  align_bits, align_round, step_round, round_mode::rne, false, false, false);
}

/// d = c + sum a_i b_i with a, b padded with zeros to m.k.
std::uint64_t dot(const mma_model& m, std::uint64_t c, std::vector<std::uint64_t> a, std::vector<std::uint64_t> b) {
  a.resize(static_cast<std::size_t>(m.k), 0);
  b.resize(static_cast<std::size_t>(m.k), 0);
  return mma_dot(m, c, a.data(), b.data()).bits;
}

// bf16 encodings used below.
constexpr std::uint64_t one = 0x3f80, mone = 0xbf80;            // 1, -1
constexpr std::uint64_t p2m23 = 0x3400, p2m25 = 0x3300;          // 2^-23, 2^-25
constexpr std::uint64_t m2m25 = 0xb300;                          // -2^-25
constexpr std::uint64_t p1_5x2m25 = 0x3340;                      // 1.5 * 2^-25
constexpr std::uint64_t p2p20 = 0x4980, m2p20 = 0xc980, p2m10 = 0x3a80;  // 2^20, -2^20, 2^-10
constexpr std::uint64_t pinf = 0x7f80, minf = 0xff80, qnan = 0x7fc0, zero = 0x0000, mzero = 0x8000;

TEST(MmaModel, BitTableAlignmentWidth) {
  // bf16 x bf16 + f32, one fused step of 16, grid 2^(E - w), truncation (rz), normalisation rz.
  const mma_model w24 = make(formats::bf16, formats::f32, 16, 24, round_mode::rz, round_mode::rz);
  const mma_model w25 = make(formats::bf16, formats::f32, 16, 25, round_mode::rz, round_mode::rz);
  // C = 1 (E = 0), product 2^-23: on the grid 2^-24, kept: 1 + 2^-23 = 0x3f800001.
  EXPECT_EQ(dot(w24, 0x3f800000, {one}, {p2m23}), 0x3f800001u);
  // 1 - 1 + 2^-25: E = 0; w = 24 cuts at 2^-24 and truncates 2^-25 to 0 -> +0 (exact cancellation).
  EXPECT_EQ(dot(w24, 0, {one, mone, one}, {one, one, p2m25}), 0x00000000u);
  // w = 25 keeps it: 2^-25 = 0x33000000.
  EXPECT_EQ(dot(w25, 0, {one, mone, one}, {one, one, p2m25}), 0x33000000u);
}

TEST(MmaModel, BitTableAlignmentRounding) {
  const mma_model rz = make(formats::bf16, formats::f32, 16, 24, round_mode::rz, round_mode::rz);
  const mma_model rd = make(formats::bf16, formats::f32, 16, 24, round_mode::rd, round_mode::rz);
  const mma_model rne = make(formats::bf16, formats::f32, 16, 24, round_mode::rne, round_mode::rz);
  // 1 - 1 - 2^-25, grid 2^-24: rz (sign-magnitude truncation) drops it -> +0; rd (two's complement)
  // floors -0.5 units to -1 unit -> -2^-24 = 0xb3800000.
  EXPECT_EQ(dot(rz, 0, {one, mone, one}, {one, one, m2m25}), 0x00000000u);
  EXPECT_EQ(dot(rd, 0, {one, mone, one}, {one, one, m2m25}), 0xb3800000u);
  // 1 - 1 + 1.5 * 2^-25 = 0.75 units: rne rounds up to 2^-24 = 0x33800000, rz truncates to +0.
  EXPECT_EQ(dot(rne, 0, {one, mone, one}, {one, one, p1_5x2m25}), 0x33800000u);
  EXPECT_EQ(dot(rz, 0, {one, mone, one}, {one, one, p1_5x2m25}), 0x00000000u);
}

TEST(MmaModel, BitTableNormalisation) {
  // Exact alignment, so only the normalisation rounds: 1 + 2^-24 is a tie in f32 (lsb 2^-23).
  const mma_model rz = make(formats::bf16, formats::f32, 16, mma_align_exact, round_mode::rz, round_mode::rz);
  const mma_model rne = make(formats::bf16, formats::f32, 16, mma_align_exact, round_mode::rz, round_mode::rne);
  const mma_model rna = make(formats::bf16, formats::f32, 16, mma_align_exact, round_mode::rz, round_mode::rna);
  const std::uint64_t p2m24 = 0x3380;
  EXPECT_EQ(dot(rz, 0x3f800000, {one}, {p2m24}), 0x3f800000u);   // M=1.0 G=1 S=0: truncated
  EXPECT_EQ(dot(rne, 0x3f800000, {one}, {p2m24}), 0x3f800000u);  // tie, lsb 0: stays even
  EXPECT_EQ(dot(rna, 0x3f800000, {one}, {p2m24}), 0x3f800001u);  // tie: away
  EXPECT_EQ(dot(rne, 0x3f800001, {one}, {p2m24}), 0x3f800002u);  // tie, lsb 1: up to even
  // Sticky below the tie: 1 + 2^-24 + 2^-40 rounds up under rne.
  EXPECT_EQ(dot(rne, 0x3f800000, {one, one}, {p2m24, 0x2b80}), 0x3f800001u);
}

TEST(MmaModel, BitTableGrouping) {
  // 2^20 at k=0, -2^20 at k=1, 2^-10 at k=9; w = 24 puts the grid at 2^-4 next to 2^20.
  mma_model g16 = make(formats::bf16, formats::f32, 16, 24, round_mode::rz, round_mode::rz);
  mma_model g8 = g16;
  g8.group = 8;
  std::vector<std::uint64_t> a(16, zero), b(16, zero);
  a[0] = p2p20; b[0] = one;
  a[1] = m2p20; b[1] = one;
  a[9] = p2m10; b[9] = one;
  // One step of 16: 2^-10 is aligned to 2^20 and lost; the big pair cancels -> +0.
  EXPECT_EQ(mma_dot(g16, 0, a.data(), b.data()).bits, 0x00000000u);
  // Steps [0,8) and [8,16): the pair cancels in step 1, step 2 adds 2^-10 exactly = 0x3a800000.
  EXPECT_EQ(mma_dot(g8, 0, a.data(), b.data()).bits, 0x3a800000u);
  // Strided groups {0,2,4,..} and {1,3,..}: 2^20 alone in step 1; step 2 holds -2^20 and 2^-10
  // with the running sum 2^20: 2^-10 lost again -> +0.
  mma_model g8s = g8;
  g8s.grouping = mma_grouping::strided;
  EXPECT_EQ(mma_dot(g8s, 0, a.data(), b.data()).bits, 0x00000000u);
}

TEST(MmaModel, BitTableSpecials) {
  mma_model m = make(formats::bf16, formats::f32, 16, 24, round_mode::rz, round_mode::rz);
  EXPECT_EQ(dot(m, 0, {pinf}, {zero}), 0x7fffffffu);          // Inf * 0: canonical NaN
  EXPECT_EQ(dot(m, 0, {pinf, minf}, {one, one}), 0x7fffffffu); // Inf - Inf
  EXPECT_EQ(dot(m, 0, {pinf}, {one}), 0x7f800000u);           // Inf
  EXPECT_EQ(dot(m, 0xff800000, {one}, {one}), 0xff800000u);    // C = -Inf
  EXPECT_EQ(dot(m, 0, {qnan}, {one}), 0x7fffffffu);           // NaN input
  // Overflow: 2^127 * 2^2 = 2^129. rz gives the largest finite value, overflow_to_inf gives Inf.
  EXPECT_EQ(dot(m, 0, {0x7f00}, {0x4080}), 0x7f7fffffu);
  m.overflow_to_inf = true;
  EXPECT_EQ(dot(m, 0, {0x7f00}, {0x4080}), 0x7f800000u);
  // Zero signs: (-0) + (+0)*1 = +0; (-0) + (-0)*1 (all addends -0) = -0; 1 - 1 = +0.
  m.overflow_to_inf = false;
  EXPECT_EQ(dot(m, 0x80000000, {zero}, {one}), 0x00000000u);
  std::vector<std::uint64_t> mz(16, mzero), ones(16, one);
  EXPECT_EQ(mma_dot(m, 0x80000000, mz.data(), ones.data()).bits, 0x80000000u);
  EXPECT_EQ(dot(m, 0x3f800000, {mone}, {one}), 0x00000000u);
  // Subnormal input 2^-133 (bf16 0x0001) times 1: kept (f32 subnormal 2^16 * 2^-149), flushed by DAZ.
  EXPECT_EQ(dot(m, 0, {0x0001}, {one}), 0x00010000u);
  m.daz = true;
  EXPECT_EQ(dot(m, 0, {0x0001}, {one}), 0x00000000u);
  // FTZ: a subnormal f32 result becomes +0.
  m.daz = false;
  m.ftz = true;
  EXPECT_EQ(dot(m, 0, {0x0001}, {one}), 0x00000000u);
}

TEST(MmaModel, BitTableF16Accumulate) {
  // C = 1 (f16 0x3c00) + 2^-11 + 2^-24: through an f32 accumulator truncated (rz), the exact sum
  // 1 + 2^-11 + 2^-24 keeps 1 + 2^-11 (a tie in f16), which rne sends to the even 1.0 = 0x3c00;
  // rounded directly into f16 (rne) it is above the tie: 1 + 2^-10 = 0x3c01.
  mma_model f32acc = make(formats::f16, formats::f16, 16, 30, round_mode::rz, round_mode::rz);
  mma_model f16acc = f32acc;
  f16acc.acc_fmt = formats::f16;
  f16acc.step_round = round_mode::rne;
  const std::uint64_t h1 = 0x3c00, h2m11 = 0x1000, h2m24 = 0x0001;  // 1, 2^-11, 2^-24 (f16 subnormal)
  EXPECT_EQ(dot(f32acc, h1, {h1, h1}, {h2m11, h2m24}), 0x3c00u);
  EXPECT_EQ(dot(f16acc, h1, {h1, h1}, {h2m11, h2m24}), 0x3c01u);
}

TEST(MmaModel, BitTableFp8) {
  // e4m3, w = 13: C = 1 (f32) + 2^-13 (2^-6 * 2^-7) kept (0x3f800400); 2^-14 (2^-7 * 2^-7) cut.
  const mma_model m = mma_entry(mma_instr::wgmma_k32_e4m3).model;
  mma_model w13 = make(formats::e4m3, formats::f32, 32, 13, round_mode::rz, round_mode::rz);
  w13.m = m.m;
  const std::uint64_t e2m6 = 0x08, e2m7 = 0x04;  // e4m3: 2^-6 (min normal), 2^-7 (subnormal)
  EXPECT_EQ(dot(w13, 0x3f800000, {e2m6}, {e2m7}), 0x3f800400u);
  EXPECT_EQ(dot(w13, 0x3f800000, {e2m7}, {e2m7}), 0x3f800000u);
}

/// The exactly rounded dot product: c + sum a_i b_i in rationals, rounded once by round_pack.
std::uint64_t oracle(const mma_model& m, std::uint64_t c, const std::vector<std::uint64_t>& a,
                     const std::vector<std::uint64_t>& b, round_mode mode, bool& defined) {
  host::rational s = host::value_of(m.c_fmt, c);
  for (std::size_t i = 0; i < a.size(); ++i) s += host::value_of(m.a_fmt, a[i]) * host::value_of(m.b_fmt, b[i]);
  defined = true;
  if (s == 0) return 0;  // sign of an exact zero: not compared
  return round_pack(m.c_fmt, host::from_rational(s).window, rounding{mode, 0}).bits;
}

TEST(MmaModel, ExactAlignmentEqualsCorrectlyRoundedDot) {
  // With exact alignment and one fused step the model rounds the exact sum once: it must equal the
  // exactly rounded dot product computed with Boost rationals, in every mode.
  int compared = 0;
  for (mma_instr id : all_mma_instrs) {
    if (same_format(mma_entry(id).model.c_fmt, formats::f16)) continue;  // f32 C only
    for (round_mode mode : {round_mode::rne, round_mode::rz, round_mode::ru, round_mode::rd}) {
      mma_model m = mma_entry(id).model;
      m.group = m.k;
      m.align_bits = mma_align_exact;
      m.step_round = mode;
      m.acc_fmt = m.c_fmt;  // one rounding, straight into C's format (FP8 rows normalise to 13 bits)
      for (std::uint64_t tile = 0; tile < 48; ++tile) {
        if (mma_tile_scenario(7, tile) == mma_scenario::raw) continue;  // finite inputs only
        for (int row = 0; row < 4; ++row) {
          std::vector<std::uint64_t> a, b;
          for (int i = 0; i < m.k; ++i) {
            a.push_back(mma_gen_element(m, 7, tile, mma_operand_kind::a, row, i));
            b.push_back(mma_gen_element(m, 7, tile, mma_operand_kind::b, i, row));
          }
          const std::uint64_t c = mma_gen_element(m, 7, tile, mma_operand_kind::c, row, row);
          bool defined = false;
          const std::uint64_t want = oracle(m, c, a, b, mode, defined);
          const std::uint64_t got = mma_dot(m, c, a.data(), b.data()).bits;
          if (want == 0 && (got & 0x7fffffffu) == 0) continue;  // exact zero
          ASSERT_EQ(got, want) << mma_instr_name(id) << " mode " << to_string(mode) << " tile " << tile << " row " << row;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(MmaModel, FastPathEqualsGeneralPath) {
  // mma_dot_with<true> (two passes, no addend list) against <false> (the general path) on generated
  // tiles of every scenario, for parameter sets covering every branch.
  for (mma_instr id : all_mma_instrs) {
    const mma_model base = mma_entry(id).model;
    std::vector<mma_model> ms;
    for (int w : {8, 13, 24, 25, 31, 48})
      for (round_mode ar : {round_mode::rz, round_mode::rd, round_mode::rne}) {
        mma_model m = base;
        m.align_bits = w;
        m.align_round = ar;
        m.step_round = w == 25 ? round_mode::rne : round_mode::rz;
        m.exp_ref = w == 31 ? mma_exp_ref::lead : mma_exp_ref::nominal;
        m.group = w == 13 ? base.k / 2 : (w == 48 ? 4 : base.k);
        m.grouping = w == 48 ? mma_grouping::strided : mma_grouping::contiguous;
        m.c_order = w == 8 ? mma_c_order::last : mma_c_order::first;
        m.ftz = w == 24;
        m.daz = w == 31;
        ms.push_back(m);
      }
    for (const mma_model& m : ms) {
      ASSERT_TRUE(mma_model_valid(m));
      for (std::uint64_t tile = 0; tile < 40; ++tile)
        for (int row = 0; row < 8; ++row) {
          std::vector<std::uint64_t> a, b;
          for (int i = 0; i < m.k; ++i) {
            a.push_back(mma_gen_element(m, 11, tile, mma_operand_kind::a, row, i));
            b.push_back(mma_gen_element(m, 11, tile, mma_operand_kind::b, i, row % 8));
          }
          const std::uint64_t c = mma_gen_element(m, 11, tile, mma_operand_kind::c, row, row % 8);
          const emu::detail::mma_raw_ops<std::uint64_t, std::uint64_t> ops{m, a.data(), 1, b.data(), 1};
          const mma_result fast = mma_dot_with<true>(m, c, ops);
          const mma_result general = mma_dot_with<false>(m, c, ops);
          ASSERT_EQ(fast.bits, general.bits) << mma_instr_name(id) << " tile " << tile << " row " << row;
          ASSERT_EQ(fast.align_inexact, general.align_inexact);
        }
    }
  }
}

TEST(MmaModel, TableAndNames) {
  for (mma_instr id : all_mma_instrs) {
    const mma_model_entry& e = mma_entry(id);
    EXPECT_EQ(e.id, id);
    EXPECT_TRUE(mma_model_valid(e.model));
    mma_instr back{};
    ASSERT_TRUE(parse_mma_instr(mma_instr_name(id), back));
    EXPECT_EQ(back, id);
    EXPECT_EQ(e.model.k % e.model.group, 0);
  }
  mma_instr x{};
  EXPECT_FALSE(parse_mma_instr("mma.m16n8k16.fp64", x));
  mma_model bad = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  bad.group = 3;
  EXPECT_FALSE(mma_model_valid(bad));
  bad.group = 16;
  bad.align_bits = 49;
  EXPECT_FALSE(mma_model_valid(bad));
}

/// The inputs the observability checks use: the designed identification cases, generated tiles of
/// every scenario (element (0, 0)), and the largest magnitudes (C = +-max, every product +-max * max)
/// where an overflow would show.
std::vector<mma_case> observability_cases(const mma_model& m) {
  std::vector<mma_case> out = mma_identify_cases(m);
  for (std::uint64_t tile = 0; tile < 20000; ++tile) {
    mma_case cs;
    cs.c = mma_gen_element(m, 5, tile, mma_operand_kind::c, 0, 0);
    for (int i = 0; i < m.k; ++i) {
      cs.a.push_back(mma_gen_element(m, 5, tile, mma_operand_kind::a, 0, i));
      cs.b.push_back(mma_gen_element(m, 5, tile, mma_operand_kind::b, i, 0));
    }
    out.push_back(cs);
  }
  for (int sc = 0; sc < 2; ++sc)
    for (int sp = 0; sp < 2; ++sp) {
      mma_case cs;
      cs.c = m.c_fmt.max_finite(sc != 0);
      cs.a.assign(static_cast<std::size_t>(m.k), m.a_fmt.max_finite(sp != 0));
      cs.b.assign(static_cast<std::size_t>(m.k), m.b_fmt.max_finite(false));
      out.push_back(cs);
    }
  return out;
}

/// Number of cases on which models x and y differ.
int differences(const mma_model& x, const mma_model& y, const std::vector<mma_case>& cases) {
  int n = 0;
  for (const mma_case& cs : cases)
    n += mma_dot(x, cs.c, cs.a.data(), cs.b.data()).bits != mma_dot(y, cs.c, cs.a.data(), cs.b.data()).bits;
  return n;
}

// mma_observable's claims, on data: for every row, a parameter declared without observable effect
// changes no result when flipped (every other value of the hypothesis grid).
TEST(MmaObservable, ParametersWithoutEffectChangeNoResult) {
  const round_mode modes[] = {round_mode::rz, round_mode::rne, round_mode::rna, round_mode::ru, round_mode::rd};
  for (const mma_model_entry& e : mma_models) {
    SCOPED_TRACE(std::string(mma_instr_name(e.id)));
    const std::uint32_t obs = mma_observable(e.model);
    const std::vector<mma_case> cases = observability_cases(e.model);
    if ((obs & mma_param_out_round) == 0)
      for (round_mode r : modes) {
        mma_model y = e.model;
        y.out_round = r;
        EXPECT_EQ(differences(e.model, y, cases), 0) << "out_round " << to_string(r);
      }
    if ((obs & mma_param_overflow) == 0) {
      mma_model y = e.model;
      y.overflow_to_inf = !y.overflow_to_inf;
      EXPECT_EQ(differences(e.model, y, cases), 0) << "overflow_to_inf";
    }
  }
}

// What the table says as a result: the f32-output rows leave nothing observable unpinned; FP8
// wgmma leaves ftz, which does matter: a subnormal C on acc13's grid (2^-130) survives or flushes.
TEST(MmaObservable, TableRows) {
  for (mma_instr i : {mma_instr::mma_m16n8k16_bf16, mma_instr::mma_m16n8k16_f16, mma_instr::mma_m16n8k8_tf32,
                      mma_instr::wgmma_k16_bf16, mma_instr::wgmma_k16_f16, mma_instr::mma_m16n8k16_f16_f16out}) {
    EXPECT_NE(mma_entry(i).unknown, 0u) << mma_instr_name(i);  // out_round was never pinned ...
    EXPECT_EQ(mma_unverified(mma_entry(i)), 0u) << mma_instr_name(i);  // ... and cannot be
  }
  for (mma_instr i : {mma_instr::wgmma_k32_e4m3, mma_instr::wgmma_k32_e5m2}) {
    const mma_model& m = mma_entry(i).model;
    EXPECT_EQ(mma_unverified(mma_entry(i)), static_cast<std::uint32_t>(mma_param_ftz)) << mma_instr_name(i);
    mma_model flushed = m;
    flushed.ftz = !m.ftz;
    std::vector<std::uint64_t> a(static_cast<std::size_t>(m.k), 0), b(static_cast<std::size_t>(m.k), 0);
    const std::uint64_t c = 0x00080000;  // 2^-130, f32 subnormal
    EXPECT_EQ(mma_dot(m, c, a.data(), b.data()).bits, m.ftz ? 0u : c);
    EXPECT_NE(mma_dot(flushed, c, a.data(), b.data()).bits, mma_dot(m, c, a.data(), b.data()).bits);
  }
}

// The rule is not vacuous: where the narrowing rounds (f32 accumulator, f16 output) out_round is
// observable, and where a bf16 step can overflow in rz, overflow_to_inf is.
TEST(MmaObservable, ParametersWithEffectAreKept) {
  mma_model f16out = mma_entry(mma_instr::mma_m16n8k16_f16_f16out).model;
  f16out.acc_fmt = formats::f32;
  f16out.step_round = round_mode::rz;
  ASSERT_NE(mma_observable(f16out) & mma_param_out_round, 0u);
  mma_model up = f16out;
  up.out_round = round_mode::ru;
  // 1 + 2^-11 (f16: a tie): rne keeps 1, ru gives 1 + 2^-10.
  EXPECT_NE(dot(f16out, 0x3c00, {0x1000}, {0x3c00}), dot(up, 0x3c00, {0x1000}, {0x3c00}));

  const mma_model& bf = mma_entry(mma_instr::mma_m16n8k16_bf16).model;
  ASSERT_NE(mma_observable(bf) & mma_param_overflow, 0u);
  mma_model sat = bf;
  sat.overflow_to_inf = !bf.overflow_to_inf;
  // f32 max + 2^52 * 2^52 = 2^128: overflows in rz.
  EXPECT_NE(dot(bf, 0x7f7fffff, {0x59800000 >> 16}, {0x59800000 >> 16}),
            dot(sat, 0x7f7fffff, {0x59800000 >> 16}, {0x59800000 >> 16}));
}

}  // namespace
