// SPDX-License-Identifier: Apache-2.0
/// @file emu::add/sub/mul/fma: special-case tables, the FMA double-rounding trap, and random and
/// adversarial f32/f64/bf16/e4m3 operands against the exact Boost oracle, with the align/round
/// split of the error.
#include <gtest/gtest.h>

#include <cstdint>

#include "support/dyadic_check.hpp"
#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/emu/ops.hpp"

namespace tiebreak::test {
namespace {

constexpr rounding rne{round_mode::rne}, rd{round_mode::rd};

// --- special cases (IEEE 754 6.2, 6.3, 7.2) ---------------------------------------------------
TEST(ops, special_cases) {
  const auto& f = formats::bf16;
  EXPECT_EQ(emu::add(f, 0x3f80, 0xbf80, rne).bits(), 0x0000);  // x - x = +0
  EXPECT_EQ(emu::add(f, 0x3f80, 0xbf80, rd).bits(), 0x8000);   // ... -0 under rd
  EXPECT_EQ(emu::add(f, 0x8000, 0x8000, rne).bits(), 0x8000);  // -0 + -0 = -0
  EXPECT_EQ(emu::add(f, 0x8000, 0x0000, rne).bits(), 0x0000);
  EXPECT_EQ(emu::add(f, 0x7f80, 0xff80, rne).bits(), 0x7fff);  // Inf - Inf: canonical NaN, invalid
  EXPECT_TRUE(emu::add(f, 0x7f80, 0xff80, rne).round.invalid());
  EXPECT_EQ(emu::add(f, 0x7f80, 0x3f80, rne).bits(), 0x7f80);
  EXPECT_EQ(emu::sub(f, 0x7f80, 0x7f80, rne).bits(), 0x7fff);
  EXPECT_EQ(emu::mul(f, 0x7f80, 0x0000, rne).bits(), 0x7fff);  // Inf * 0 invalid
  EXPECT_TRUE(emu::mul(f, 0x7f80, 0x0000, rne).round.invalid());
  EXPECT_EQ(emu::mul(f, 0xff80, 0x3f80, rne).bits(), 0xff80);
  EXPECT_EQ(emu::mul(f, 0x8000, 0x3f80, rne).bits(), 0x8000);
  EXPECT_EQ(emu::fma(f, 0x7f80, 0x0000, 0x7fc0, rne).bits(), 0x7fff);  // 0 * Inf + NaN: invalid
  EXPECT_TRUE(emu::fma(f, 0x7f80, 0x0000, 0x7fc0, rne).round.invalid());
  EXPECT_EQ(emu::fma(f, 0x7f80, 0x3f80, 0xff80, rne).bits(), 0x7fff);  // Inf - Inf
  EXPECT_EQ(emu::fma(f, 0x3f80, 0x8000, 0x0000, rne).bits(), 0x0000);  // -0 + +0 = +0
  EXPECT_EQ(emu::fma(f, 0x3f80, 0x8000, 0x8000, rne).bits(), 0x8000);  // -0 + -0 = -0
  convert_options pres;
  pres.nan = nan_policy::preserve;
  EXPECT_EQ(emu::add(f, 0xffc1, 0x7fc2, rne, pres).bits(), 0xffc1);  // first NaN operand propagates
  EXPECT_TRUE(emu::add(f, 0x3f80, 0x7f81, rne).round.invalid());     // signalling NaN
  EXPECT_FALSE(emu::add(f, 0x3f80, 0x7fc1, rne).round.invalid());
}

// --- FMA is rounded once (never the product in f32 and then the sum again) ---------------------
// bf16 a = b = 1 + 2^-7: a*b = 1 + 2^-6 + 2^-14. With c = -(1 + 2^-6) the exact result is 2^-14;
// any intermediate rounding of the product to bf16 gives 0 (and to bf16 after f32: also wrong
// in other cases). f32 FMA: a = 1 + 2^-23, a*a = 1 + 2^-22 + 2^-46; c = -1 gives 2^-22 + 2^-46,
// which f32(a*a) + c would give as 2^-22.
TEST(ops, fma_rounds_once) {
  EXPECT_EQ(emu::fma(formats::bf16, 0x3f81, 0x3f81, 0xbf82, rne).bits(), 0x3880);  // 2^-14
  const auto r = emu::fma(formats::f32, 0x3f800001u, 0x3f800001u, 0xbf800000u, rne);
  EXPECT_EQ(r.bits(), f32_to_bits(0x1p-22f + 0x1p-46f));
  EXPECT_EQ(check_op(formats::f32, op_kind_t::fma, 0x3f800001u, 0x3f800001u, 0xbf800000u, rne), "");
  // bf16 FMA whose product is a bf16 tie plus a tiny sticky part from c: round once, upward.
  // a*b = (1 + 2^-7)(1 + 2^-7) = 1 + 2^-6 + 2^-14 ; c = 2^-9: exact 1 + 2^-6 + 2^-9 + 2^-14 -> 0x3f82 under rne.
  EXPECT_EQ(check_op(formats::bf16, op_kind_t::fma, 0x3f81, 0x3f81, 0x3b00, rne), "");
}

// --- error decomposition, worked example --------------------------------------------------------
// bf16 1.0 + 1.5 * 2^-8 (0x3bc0): exact 1 + 2^-8 + 2^-9. Result grid 2^-7: the alignment shifts
// out the whole small addend's bits below 2^-7 (T(small) = 0): align = -(2^-8 + 2^-9); rne rounds
// up to 1 + 2^-7: round error = 2^-7; total = 2^-7 - 2^-8 - 2^-9 = 2^-9.
TEST(ops, error_decomposition_worked_example) {
  const auto r = emu::add(formats::bf16, 0x3f80, 0x3bc0, rne);
  EXPECT_EQ(r.bits(), 0x3f81);
  EXPECT_EQ(r.round.error(), 0x1p-9);
  EXPECT_EQ(r.align_error(), -(0x1p-8 + 0x1p-9));
  EXPECT_EQ(r.round_error(), 0x1p-7);
  EXPECT_EQ(r.align_error() + r.round_error(), r.round.error());
  EXPECT_EQ(r.exp_diff, 8);
}

// error() is documented as (result - exact) rounded once to double. With a tail (addends more
// than the window apart) it must still be: bf16 0x0003 + 0x1c19 under ru has the exact error
// 2^-78 - 3 * 2^-133, whose nearest double is 0x1.fffffffffffffp-79 (not 2^-78).
TEST(ops, error_rounded_once_with_tail) {
  const auto r = emu::add(formats::bf16, 0x0003, 0x1c19, rounding{round_mode::ru});
  EXPECT_EQ(r.bits(), 0x1c1a);
  EXPECT_EQ(r.round.error_sign(), 1);
  EXPECT_EQ(r.round.error(), 0x1.fffffffffffffp-79);
}

// --- random and adversarial operands against Boost ---------------------------------------------
struct op_case_gen {
  const format_desc& f;
  splitmix64 g;
  std::uint64_t any() {
    const ref_format F = ref_of(f);
    const int total = 1 + F.exp_bits + F.man_bits + F.pad;
    const std::uint64_t mask = total >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << total) - 1;
    return g() & mask & ~((std::uint64_t{1} << F.pad) - 1);
  }
  /// An operand near `x` in exponent: same binade, +-k binades, or far away (alignment cases).
  std::uint64_t near(std::uint64_t x) {
    const ref_format F = ref_of(f);
    const std::uint64_t r = g();
    const std::uint64_t sh = static_cast<std::uint64_t>(F.man_bits + F.pad);
    const std::int64_t ef = static_cast<std::int64_t>((x >> sh) & ((1u << F.exp_bits) - 1));
    std::int64_t d = static_cast<std::int64_t>(r % 5) - 2;
    if ((r >> 8) % 4 == 0) d = static_cast<std::int64_t>((r >> 16) % (2 * F.p + 8)) - F.p - 4;
    std::int64_t e2 = ef + d;
    const std::int64_t emax_field = (1 << F.exp_bits) - 2;
    e2 = e2 < 0 ? 0 : (e2 > emax_field ? emax_field : e2);
    const std::uint64_t frac = (r >> 24) & ((std::uint64_t{1} << F.man_bits) - 1);
    const std::uint64_t sign = (r >> 63) << (F.exp_bits + F.man_bits + F.pad);
    return sign | (static_cast<std::uint64_t>(e2) << sh) | (frac << F.pad);
  }
};

void random_ops(const format_desc& f, std::uint64_t n, const char* name) {
  mismatch_log log;
  parallel_sweep(name, n, 1, [&](std::uint64_t i) {
    op_case_gen gen{f, splitmix64(i * 0x9e37 + f.man_bits)};
    const std::uint64_t a = gen.any();
    std::uint64_t b = (i % 3 == 0) ? gen.any() : gen.near(a);
    std::uint64_t c = gen.near(a);
    if (i % 11 == 0) b = a ^ (std::uint64_t{1} << (f.storage_bits() - 1));  // exact cancellation
    if (i % 13 == 0) c = gen.near(b);
    const rounding r{all_round_modes[i % std::size(all_round_modes)], static_cast<std::uint32_t>(gen.g())};
    convert_options o;
    o.flush_output = (i % 17) == 0;
    o.flush_input = (i % 19) == 0;
    o.saturate = (i % 23) == 0;
    for (op_kind_t k : {op_kind_t::add, op_kind_t::sub, op_kind_t::mul, op_kind_t::fma}) {
      const std::string m = check_op(f, k, a, b, c, r, o);
      if (!m.empty()) log.add(m);
    }
  });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

TEST(ops, random_and_adversarial_f64) { random_ops(formats::f64, full_level ? 60000 : 6000, "ops_f64"); }
TEST(ops, random_and_adversarial_f32) { random_ops(formats::f32, full_level ? 60000 : 6000, "ops_f32"); }
TEST(ops, random_and_adversarial_bf16) { random_ops(formats::bf16, full_level ? 60000 : 6000, "ops_bf16"); }
TEST(ops, random_and_adversarial_f16) { random_ops(formats::f16, full_level ? 30000 : 3000, "ops_f16"); }
TEST(ops, random_and_adversarial_e4m3) { random_ops(formats::e4m3, full_level ? 30000 : 3000, "ops_e4m3"); }

// Ties and near ties (+-1 sticky) of f32 additions: a = 1.x, b = the same plus half an ulp pattern.
TEST(ops, f32_add_ties_and_near_ties_every_mode) {
  mismatch_log log;
  splitmix64 g(5);
  for (int i = 0; i < 20000; ++i) {
    const std::uint32_t a = 0x3f800000u | static_cast<std::uint32_t>(g() & 0x7fffff);
    const int d = 1 + static_cast<int>(g() % 30);  // b is d binades below a
    const std::uint32_t b_exp = 127u - static_cast<std::uint32_t>(d);
    std::uint32_t b = (b_exp << 23) | 0x400000u;                // 1.5 * 2^-d: makes halves
    if (i % 3 == 1) b += 1;                                      // + sticky
    if (i % 3 == 2) b -= 1;                                      // - sticky
    if (g() & 1) b |= 0x80000000u;
    for (round_mode m : deterministic_round_modes) {
      const std::string msg = check_op(formats::f32, op_kind_t::add, a, b, 0, rounding{m});
      if (!msg.empty()) log.add(msg);
    }
  }
  EXPECT_EQ(log.count(), 0u) << log.report();
}

}  // namespace
}  // namespace tiebreak::test
