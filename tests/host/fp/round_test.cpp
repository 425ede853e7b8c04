// SPDX-License-Identifier: Apache-2.0
/// @file round_pack and convert: bit tables, the pinned traps, every format and option, and random
/// and edge-case inputs against the exact Boost oracle (f64 -> narrow, 16-bit sources exhaustively).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "support/dyadic_check.hpp"
#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak::test {
namespace {

constexpr rounding rne{round_mode::rne}, rna{round_mode::rna}, rz{round_mode::rz}, ru{round_mode::ru},
    rd{round_mode::rd}, rto{round_mode::rto};

/// A custom 6-bit IEEE-style format: 3 exponent bits (bias 3), 2 fraction bits; max 14, min subnormal 1/16.
constexpr format_desc e3m2{3, 2, 3, special_style::ieee, 0, "e3m2"};

// --- Tier 1: compile-time tables (also checked by nvcc through the header check) ---------------
static_assert(f64_bits_to(formats::bf16, 0x3ff0100000001000ull, rne).bits == 0x3f81);  // 1+2^-8+2^-40: once
static_assert(f32_bits_to(formats::bf16, 0x3f808000u, rne).bits == 0x3f80);  // tie, even lsb: down
static_assert(f32_bits_to(formats::bf16, 0x3f808000u, rna).bits == 0x3f81);  // tie: away
static_assert(f32_bits_to(formats::bf16, 0x3f80ffffu, rz).bits == 0x3f80);   // truncation
static_assert(f32_bits_to(formats::e4m3, 0x43e80000u, rne).bits == 0x7e);    // 464 -> 448 (tie to even)
static_assert(f32_bits_to(formats::e4m3, 0x43e80001u, rne).bits == 0x7f);    // above 464 -> NaN
static_assert(f32_bits_to(formats::f16, 0x477ff000u, rne).bits == 0x7c00);   // 65520 -> Inf (tie above max)

// --- Tier 2: bit-pattern tables with M (kept mantissa) / G (guard) / R (round) / S (sticky) -------
struct row {
  std::uint32_t f32;
  round_mode mode;
  std::uint16_t bf16;
  const char* why;
};
// f32 = s eeeeeeee MMMMMMM G R SSSSSSSSSSSSSS ; bf16 keeps s, e, M.
const row bf16_rows[] = {
    {0x3f800000, round_mode::rne, 0x3f80, "1.0 exact: G=0 R=0 S=0"},
    {0x3f808000, round_mode::rne, 0x3f80, "M=0000000 G=1 R=0 S=0: tie, lsb 0 stays"},
    {0x3f818000, round_mode::rne, 0x3f82, "M=0000001 G=1 R=0 S=0: tie, lsb 1 goes up"},
    {0x3f808001, round_mode::rne, 0x3f81, "G=1 S=1: above the tie"},
    {0x3f807fff, round_mode::rne, 0x3f80, "G=0 R=1 S=1: below the tie"},
    {0x3f808000, round_mode::rna, 0x3f81, "tie: away from zero"},
    {0xbf808000, round_mode::rna, 0xbf81, "negative tie: away from zero"},
    {0x3f80ffff, round_mode::rz, 0x3f80, "G=1 R=1 S=1: truncated"},
    {0x3f800001, round_mode::ru, 0x3f81, "S=1 only, positive: up"},
    {0xbf800001, round_mode::ru, 0xbf80, "S=1 only, negative: toward +inf = truncate"},
    {0xbf800001, round_mode::rd, 0xbf81, "S=1 only, negative: away"},
    {0x3f800001, round_mode::rto, 0x3f81, "inexact, even lsb: lsb set"},
    {0x3f810001, round_mode::rto, 0x3f81, "inexact, odd lsb: stays"},
    {0x3f820000, round_mode::rto, 0x3f82, "exact: unchanged"},
    {0x7f7fffff, round_mode::rne, 0x7f80, "max f32: overflow to Inf"},
    {0x7f7fffff, round_mode::rz, 0x7f7f, "max f32 toward zero: max bf16"},
    {0x7f7fffff, round_mode::rto, 0x7f7f, "rto never overflows to Inf"},
    {0x00008000, round_mode::rne, 0x0000, "half the smallest bf16 subnormal: tie to 0"},
    {0x00018000, round_mode::rne, 0x0002, "1.5 subnormal ulps: tie to even (2)"},
    {0x00008000, round_mode::rna, 0x0001, "half the smallest subnormal: away"},
    {0x00008000, round_mode::ru, 0x0001, "half the smallest subnormal: up"},
    {0x80008000, round_mode::rd, 0x8001, "negative half subnormal: down"},
    {0x00008000, round_mode::rz, 0x0000, "half subnormal: toward zero"},
};

TEST(round_pack, bf16_bit_table) {
  for (const row& r : bf16_rows) {
    EXPECT_EQ(f32_bits_to(formats::bf16, r.f32, rounding{r.mode}).bits, r.bf16) << r.why;
    EXPECT_EQ(check_convert(formats::bf16, formats::f32, r.f32, rounding{r.mode}, {}), "") << r.why;
  }
}

// --- Traps that have caught well-known libraries -----------------------------------------------

// Double rounding: f64 -> bf16 must round once. Through f32, 1+2^-8+2^-40 first becomes 1+2^-8 (a
// tie) and then 1.0; rounded once it is above the tie: 0x3f81. ml_dtypes 0.6.0 gives 0x3f80
// (observed: np.array([1+2**-8+2**-40]).astype(ml_dtypes.bfloat16) -> 0x3f80).
TEST(round_pack, f64_to_bf16_rounds_once) {
  const std::uint64_t x = f64_to_bits(1.0 + 0x1p-8 + 0x1p-40);
  EXPECT_EQ(f64_bits_to(formats::bf16, x, rne).bits, 0x3f81);
  EXPECT_EQ(f64_bits_to(formats::bf16, f64_to_bits(-(1.0 + 0x1p-8 + 0x1p-40)), rne).bits, 0xbf81);
  // The same trap for f16 (1 + 2^-11 + 2^-40) and e4m3 (1 + 2^-4 + 2^-40).
  EXPECT_EQ(f64_bits_to(formats::f16, f64_to_bits(1.0 + 0x1p-11 + 0x1p-40), rne).bits, 0x3c01);
  EXPECT_EQ(f64_bits_to(formats::e4m3, f64_to_bits(1.0 + 0x1p-4 + 0x1p-40), rne).bits, 0x39);
  // Just below the tie it must go down, even though f32 would round it up to the tie first.
  EXPECT_EQ(f64_bits_to(formats::bf16, f64_to_bits(1.0 + 0x1p-8 - 0x1p-40), rna).bits, 0x3f80);
}

// "Round to nearest" is not one thing: the same input, three modes, three results.
TEST(round_pack, nearest_even_away_and_truncation_differ) {
  const std::uint32_t tie = 0x3f808000u;   // 1 + 2^-8: exactly between 0x3f80 and 0x3f81
  const std::uint32_t near = 0x3f80c000u;  // 1 + 2^-8 + 2^-9: above the tie
  EXPECT_EQ(f32_bits_to(formats::bf16, tie, rne).bits, 0x3f80);
  EXPECT_EQ(f32_bits_to(formats::bf16, tie, rna).bits, 0x3f81);
  EXPECT_EQ(f32_bits_to(formats::bf16, tie, rz).bits, 0x3f80);
  EXPECT_EQ(f32_bits_to(formats::bf16, near, rne).bits, 0x3f81);
  EXPECT_EQ(f32_bits_to(formats::bf16, near, rz).bits, 0x3f80);
}

// FP8 e4m3: max 448. With saturation anything larger is 448; without it, NaN above the rounding
// boundary 464 (464 itself ties to even 448). ml_dtypes 0.6.0 (observed with astype(float8_e4m3fn)):
// 448 -> 0x7e, 464 -> 0x7e, 464.0001 -> 0x7f, 480 -> 0x7f, -464 -> 0xfe, -465 -> 0xff, +-inf -> 0x7f/0xff.
TEST(round_pack, e4m3_saturation_and_nan) {
  const auto e4 = [](float v, rounding r, convert_options o = {}) { return f32_bits_to(formats::e4m3, f32_to_bits(v), r, o).bits; };
  convert_options sat;
  sat.saturate = true;
  convert_options keep_sign;
  keep_sign.nan = nan_policy::preserve;
  EXPECT_EQ(e4(448.f, rne), 0x7e);
  EXPECT_EQ(e4(464.f, rne), 0x7e);
  EXPECT_EQ(e4(464.00003f, rne), 0x7f);
  EXPECT_EQ(e4(480.f, rne), 0x7f);
  EXPECT_EQ(e4(1e30f, rne), 0x7f);
  EXPECT_EQ(e4(-465.f, rne, keep_sign), 0xff);  // ml_dtypes keeps the sign of the NaN
  EXPECT_EQ(e4(-465.f, rne), 0x7f);             // canonical NaN is positive
  EXPECT_EQ(e4(464.00003f, rne, sat), 0x7e);
  EXPECT_EQ(e4(1e30f, rne, sat), 0x7e);
  EXPECT_EQ(e4(-1e30f, rne, sat), 0xfe);
  EXPECT_EQ(e4(HUGE_VALF, rne, sat), 0x7e);
  EXPECT_EQ(e4(HUGE_VALF, rne), 0x7f);
  EXPECT_EQ(e4(-HUGE_VALF, rne, keep_sign), 0xff);
  EXPECT_EQ(e4(500.f, rz), 0x7e);  // toward zero: max finite, never NaN
  EXPECT_EQ(e4(500.f, ru), 0x7f);
  EXPECT_EQ(e4(-500.f, ru), 0xfe);
  EXPECT_EQ(e4(449.f, rto), 0x7e);  // rto: overflow goes to max finite
  const round_result r = f32_bits_to(formats::e4m3, f32_to_bits(500.f), rne, sat);
  EXPECT_TRUE(r.overflow() && r.inexact());
  EXPECT_EQ(r.error(), -52.0);
}

// Subnormal boundaries under every mode: exactly half the smallest subnormal, and half the
// smallest normal, of bf16, f16, e4m3, e5m2 and e3m2, from f64 with and without a sticky bit.
TEST(round_pack, subnormal_boundaries_every_mode_every_format) {
  for (const format_desc& f : {formats::bf16, formats::f16, formats::e4m3, formats::e5m2, e3m2, formats::tf32}) {
    const ref_format F = ref_of(f);
    const double min_sub = std::ldexp(1.0, F.emin - F.man_bits), min_norm = std::ldexp(1.0, F.emin);
    for (double base : {min_sub / 2, min_norm / 2, min_norm - min_sub / 2, min_sub, min_sub * 1.5, min_norm}) {
      for (double v : {base, std::nextafter(base, 0.0), std::nextafter(base, 1.0), -base}) {
        for (round_mode m : all_round_modes) {
          for (std::uint32_t rnd : {0u, 0x7fffffffu, 0x80000000u, 0xffffffffu}) {
            for (bool flush : {false, true}) {
              convert_options o;
              o.flush_output = flush;
              EXPECT_EQ(check_convert(f, formats::f64, f64_to_bits(v), rounding{m, rnd}, o), "")
                  << f.name << " v=" << v;
            }
          }
        }
      }
    }
  }
  // Pinned: half the smallest bf16 subnormal (2^-134) under each mode.
  const std::uint64_t half = f64_to_bits(0x1p-134);
  EXPECT_EQ(f64_bits_to(formats::bf16, half, rne).bits, 0x0000);
  EXPECT_EQ(f64_bits_to(formats::bf16, half, rna).bits, 0x0001);
  EXPECT_EQ(f64_bits_to(formats::bf16, half, rz).bits, 0x0000);
  EXPECT_EQ(f64_bits_to(formats::bf16, half, ru).bits, 0x0001);
  EXPECT_EQ(f64_bits_to(formats::bf16, half, rd).bits, 0x0000);
  EXPECT_EQ(f64_bits_to(formats::bf16, half, rto).bits, 0x0001);
  const round_result u = f64_bits_to(formats::bf16, half, rne);
  EXPECT_TRUE(u.underflow() && u.inexact());
  // Underflow is "tiny before rounding": 2^-126 - 2^-140 rounds up to the smallest normal under
  // rne, yet it was tiny, so underflow is raised; 2^-126 itself is exact, no flag.
  const round_result v = f64_bits_to(formats::bf16, f64_to_bits(0x1p-126 - 0x1p-140), rne);
  EXPECT_EQ(v.bits, 0x0080);
  EXPECT_TRUE(v.underflow());
  EXPECT_EQ(f64_bits_to(formats::bf16, f64_to_bits(0x1p-126), rne).flags, 0);
  // FTZ applies after rounding: a value that rounds up to the smallest normal is kept.
  convert_options ftz;
  ftz.flush_output = true;
  EXPECT_EQ(f64_bits_to(formats::bf16, f64_to_bits(0x1p-126 - 0x1p-140), rne, ftz).bits, 0x0080);
  EXPECT_EQ(f64_bits_to(formats::bf16, f64_to_bits(0x1p-127), rne, ftz).bits, 0x0000);
  EXPECT_EQ(f64_bits_to(formats::bf16, f64_to_bits(-0x1p-127), rne, ftz).bits, 0x8000);
}

// DAZ: subnormal inputs read as signed zeros.
TEST(round_pack, flush_input_reads_subnormals_as_zero) {
  convert_options daz;
  daz.flush_input = true;
  EXPECT_EQ(f32_bits_to(formats::bf16, 0x00400000u, rne, daz).bits, 0x0000);
  EXPECT_EQ(f32_bits_to(formats::bf16, 0x80400000u, rne, daz).bits, 0x8000);
  EXPECT_EQ(f32_bits_to(formats::bf16, 0x00400000u, rne).bits, 0x0040);
  EXPECT_EQ(f32_bits_to(formats::bf16, 0x00800000u, rne, daz).bits, 0x0080);  // normal: kept
}

// NaN policies (docs/rounding.md). ml_dtypes 0.6.0 vectors, obtained once with
//   python3 -c "import numpy as np, ml_dtypes; a=np.array([...],np.uint32).view(np.float32);
//               print([hex(v) for v in a.astype(ml_dtypes.bfloat16).view(np.uint16)])"
// f32 0x7fc00000 -> 0x7fc0, 0xffc00000 -> 0xffc0, 0x7f800001 -> 0x7fc0, 0xff800001 -> 0xffc0,
// 0x7fa00000 -> 0x7fc0, 0x7fffffff -> 0x7fc0, 0xffffffff -> 0xffc0 (sign kept, payload dropped);
// to float8_e4m3fn: 0x7f / 0xff by sign; to float8_e5m2: 0x7e / 0xfe by sign.
// `preserve` agrees with ml_dtypes on NaNs without payload (the common case) and keeps the leading
// payload bits otherwise (IEEE 754 6.2.3), where ml_dtypes drops them.
TEST(round_pack, nan_policies) {
  convert_options canon, pres, quiet;
  pres.nan = nan_policy::preserve;
  quiet.nan = nan_policy::quiet;
  struct nan_row { std::uint32_t in; std::uint16_t canonical, preserve, quiet, ml_dtypes; };
  const nan_row rows[] = {
      {0x7fc00000u, 0x7fff, 0x7fc0, 0x7fc0, 0x7fc0},
      {0xffc00000u, 0x7fff, 0xffc0, 0x7fc0, 0xffc0},
      {0x7f800001u, 0x7fff, 0x7fc0, 0x7fc0, 0x7fc0},
      {0xff800001u, 0x7fff, 0xffc0, 0x7fc0, 0xffc0},
      {0x7fa00000u, 0x7fff, 0x7fe0, 0x7fc0, 0x7fc0},  // payload 0x20 kept by preserve only
      {0x7fffffffu, 0x7fff, 0x7fff, 0x7fc0, 0x7fc0},
      {0xffffffffu, 0x7fff, 0xffff, 0x7fc0, 0xffc0},
  };
  for (const nan_row& r : rows) {
    EXPECT_EQ(f32_bits_to(formats::bf16, r.in, rne, canon).bits, r.canonical) << hex(r.in);
    EXPECT_EQ(f32_bits_to(formats::bf16, r.in, rne, pres).bits, r.preserve) << hex(r.in);
    EXPECT_EQ(f32_bits_to(formats::bf16, r.in, rne, quiet).bits, r.quiet) << hex(r.in);
    // Where no payload bit that bf16 can hold is set (bits 21..16), preserve is exactly ml_dtypes.
    if ((r.in & 0x003f0000u) == 0) {
      EXPECT_EQ(r.preserve, r.ml_dtypes) << hex(r.in);
    }
    // Never Inf, whatever the mode (the add-0x7fff trick turns 0x7f800001 into Inf under rz-like truncation).
    for (round_mode m : all_round_modes) {
      const round_result x = f32_bits_to(formats::bf16, r.in, rounding{m}, pres);
      EXPECT_TRUE(formats::bf16.is_nan(x.bits)) << hex(r.in);
      EXPECT_EQ(x.invalid(), ((r.in >> 22) & 1) == 0) << "signalling NaN raises invalid";
    }
  }
  // e4m3 / e5m2 as ml_dtypes: sign-carrying NaN under preserve.
  EXPECT_EQ(f32_bits_to(formats::e4m3, 0xffc00000u, rne, pres).bits, 0xff);
  EXPECT_EQ(f32_bits_to(formats::e5m2, 0xffc00000u, rne, pres).bits, 0xfe);
  EXPECT_EQ(f32_bits_to(formats::e5m2, 0x7fc00000u, rne, canon).bits, 0x7f);
  EXPECT_EQ(f32_bits_to(formats::f16, 0x7fc00000u, rne, quiet).bits, 0x7e00);
  EXPECT_EQ(f32_bits_to(formats::f16, 0x7fc00000u, rne, canon).bits, 0x7fff);
}

// round_result fields on a worked example: 1 + 2^-8 + 2^-9 (f32) to bf16 under rne.
TEST(round_pack, trace_fields_worked_example) {
  const round_result r = f32_bits_to(formats::bf16, 0x3f80c000u, rne);
  EXPECT_EQ(r.bits, 0x3f81);
  EXPECT_TRUE(r.guard);       // 2^-8
  EXPECT_TRUE(r.round_bit);   // 2^-9
  EXPECT_FALSE(r.sticky);
  EXPECT_EQ(r.lsb_exp, -7);
  EXPECT_EQ(r.window_exp, -23);
  EXPECT_EQ(r.discarded_count, 16);
  EXPECT_EQ(static_cast<std::uint64_t>(r.discarded), 0xc000u);
  EXPECT_EQ(r.step, 1);
  EXPECT_EQ(r.error(), 0x1p-7 - 0x1p-8 - 0x1p-9);
  EXPECT_EQ(r.error_ulps(), 0.25);
  EXPECT_EQ(r.error_sign(), 1);
  EXPECT_TRUE(r.error_exact());
  EXPECT_EQ(r.flags, flag_inexact);
}

// Every 16-bit source (bf16, f16) into every narrower or custom format, every mode, against the
// exact oracle; the option set (saturate, FTZ, DAZ, NaN policy) is drawn per case from a hash.
// The smoke level (the sanitizer build, where this took 25 s of its ctest) visits every 5th source:
// every exponent and sign of both formats, 1/5 of the fractions; the Release build visits them all.
TEST(round_pack, all_16_bit_sources_to_narrow_formats) {
  mismatch_log log;
  const format_desc targets[] = {formats::e4m3, formats::e5m2, e3m2, formats::f16, formats::bf16};
  parallel_sweep("16bit_to_narrow", std::uint64_t{1} << 17, smoke_level ? 5 : 1, [&](std::uint64_t i) {
    const format_desc& from = (i >> 16) ? formats::f16 : formats::bf16;
    const std::uint64_t bits = i & 0xffff;
    for (const format_desc& to : targets) {
      for (round_mode m : all_round_modes) {
        {
          const int opt = static_cast<int>(hash32(i * 64 + static_cast<std::uint64_t>(m) * 8 + to.exp_bits) % 24);
          convert_options o;
          o.saturate = opt & 1;
          o.flush_output = opt & 2;
          o.flush_input = opt & 4;
          o.nan = static_cast<nan_policy>(opt / 8);
          const std::string msg = check_convert(to, from, bits, rounding{m, hash32(i * 8 + opt)}, o);
          if (!msg.empty()) log.add(msg);
        }
      }
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

// f64 -> every format: random doubles plus edge-case generators (ties, near ties with a +-1 sticky
// bit, overflow and subnormal boundaries) against the exact oracle, every mode and option set.
TEST(round_pack, f64_to_every_format_random_and_edges) {
  const format_desc targets[] = {formats::f32, formats::tf32, formats::bf16, formats::f16,
                                 formats::e4m3, formats::e5m2, e3m2};
  mismatch_log log;
  const std::uint64_t samples = full_level ? 140000 : 14000;
  parallel_sweep("f64_to_narrow", samples, 1, [&](std::uint64_t i) {
    splitmix64 g(i + 1);
    const format_desc& to = targets[i % 7];
    const ref_format F = ref_of(to);
    std::uint64_t bits;
    const int kind = static_cast<int>((i / 7) % 6);
    const std::uint64_t r = g();
    if (kind == 0) {
      bits = r;  // anything, NaNs and Infs included
    } else {
      // A value near a grid point, midpoint, or boundary of the target, +-1 f64 ulp or exact.
      const int e = F.emin - F.p - 2 + static_cast<int>(r % static_cast<std::uint64_t>(F.emax - F.emin + F.p + 6));
      const double grid = std::ldexp(static_cast<double>((r >> 8) % (std::uint64_t{1} << F.p)) + (std::uint64_t{1} << F.p), e - F.p);
      double v = grid;
      if (kind == 2) v = grid + std::ldexp(1.0, e - F.p - 1);                     // a midpoint of the target
      if (kind == 3) v = std::nextafter(grid + std::ldexp(1.0, e - F.p - 1), 0);  // just below it
      if (kind == 4) v = std::nextafter(grid + std::ldexp(1.0, e - F.p - 1), HUGE_VAL);
      if (kind == 5) v = std::ldexp(static_cast<double>(F.max_sig) + 0.5 + static_cast<double>((r >> 60) % 3) - 1.0,
                                    F.emax - F.p + 1);                                 // around the overflow boundary
      if (r & 1) v = -v;
      bits = f64_to_bits(v);
    }
    convert_options o;
    o.saturate = (r >> 61) & 1;
    o.flush_output = (r >> 62) & 1;
    o.nan = static_cast<nan_policy>((r >> 40) % 3);
    for (round_mode m : all_round_modes) {
      const std::string msg = check_convert(to, formats::f64, bits, rounding{m, static_cast<std::uint32_t>(r >> 3)}, o);
      if (!msg.empty()) log.add(msg);
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

// Exact values with tails (as emu::add builds them) rounded to f64: round_pack against the oracle.
TEST(round_pack, values_with_tails_to_f64) {
  mismatch_log log;
  parallel_sweep("tails_to_f64", full_level ? 200000 : 20000, 1, [&](std::uint64_t i) {
    splitmix64 g(i * 3 + 11);
    exact_value v;
    v.cls = value_class::finite;
    v.sign = g() & 1;
    v.sig = (static_cast<u128>(g()) << 64 | g()) | (static_cast<u128>(1) << 100);
    v.sig >>= g() % 30;
    if (v.sig < (static_cast<u128>(1) << 64)) v.sig |= static_cast<u128>(1) << 64;
    if (i % 4 == 0) v.sig &= ~low_mask128(60);  // ties and exact cases
    v.exp = -1100 + static_cast<int>(g() % 2000);
    v.tail_sig = g() >> (g() % 64);
    if (v.tail_sig == 0) v.tail_sig = 1;
    v.tail_exp = v.exp - 64 - static_cast<int>(g() % 200);
    v.tail_neg = g() & 1;
    dyadic x;
    x.m = big(static_cast<std::uint64_t>(v.sig >> 64));
    x.m <<= 64;
    x.m += big(static_cast<std::uint64_t>(v.sig));
    x.e = v.exp;
    dyadic t;
    t.m = big(static_cast<std::uint64_t>(v.tail_sig >> 64));
    t.m <<= 64;
    t.m += big(static_cast<std::uint64_t>(v.tail_sig));
    t.e = v.tail_exp;
    x = v.tail_neg ? x - t : x + t;
    if (v.sign) x = -x;
    for (round_mode m : deterministic_round_modes) {
      const round_result got = round_pack(formats::f64, v, rounding{m});
      // The trace fields and bits; error() with a tail is pinned separately (ops_test.cpp).
      const ref_format F = ref_of(formats::f64);
      const expected e = expect_round(F, v.sign, dyadic_bracket(F, x), rounding{m}, {});
      if (got.bits != e.bits || got.flags != e.flags) log.add("tail value " + std::to_string(i) + " mode " + std::string(to_string(m)));
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

TEST(round_pack, to_double_decodes_every_16_bit_encoding) {
  for (const format_desc& f : {formats::bf16, formats::f16}) {
    for (std::uint64_t b = 0; b < 0x10000; ++b) {
      const operand_kind k = kind_of(f, b, false);
      const double d = to_double(f, b);
      if (k == operand_kind::nan) { EXPECT_TRUE(d != d); continue; }
      if (k == operand_kind::inf) { EXPECT_EQ(d, sign_bit(f, b) ? -HUGE_VAL : HUGE_VAL); continue; }
      EXPECT_TRUE(decode_exact(f, b) == dyadic::of_double(d)) << f.name << " " << hex(b);
      EXPECT_EQ(std::signbit(d), sign_bit(f, b));
    }
  }
}

}  // namespace
}  // namespace tiebreak::test
