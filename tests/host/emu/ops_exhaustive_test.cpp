// SPDX-License-Identifier: Apache-2.0
/// @file All 2^32 bf16 pairs through emu::add and emu::mul (rne), against the f64 oracle.
///
/// The oracle: both operands decoded to doubles (exact); the sum as a double-double from TwoSum
/// (s + e == a + b exactly), the product exactly in f64 (8 x 8 bits). The bracket of hi with the
/// sign of lo (support/oracle.hpp) gives the expected bits, flags and G/R/S; the error is checked
/// as the exact error rounded once to double and by its exact sign for every pair, and for add
/// the exact align terms (align_bits * 2^align_exp: the smaller addend's bits below the result
/// grid). A mismatch is re-checked with the exact Boost oracle (support/dyadic_check.hpp) for the
/// report. Other modes: ops_test.cpp (random and adversarial operands against Boost).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "support/dyadic_check.hpp"
#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/emu/ops.hpp"

namespace tiebreak::test {
namespace {

enum class op { add, mul };

constexpr ref_format BF16 = ref_of(formats::bf16);  // a constant, so the oracle's format folds

struct operand {
  bool nan = false, inf = false, sign = false;
  double v = 0;  // exact value (finite)
};

inline operand decode_bf16(std::uint32_t b) {
  operand o;
  o.sign = (b >> 15) & 1;
  const std::uint32_t ef = (b >> 7) & 0xff, frac = b & 0x7f;
  if (ef == 0xff) { (frac != 0 ? o.nan : o.inf) = true; return o; }
  const double mag = ef == 0 ? scale2(frac, -133) : scale2(frac | 0x80u, static_cast<int>(ef) - 134);
  o.v = o.sign ? -mag : mag;
  return o;
}

/// Expected result of a special case (NaN, Inf, zero operands), IEEE 754 semantics, canonical NaN.
inline bool special_case(op which, const operand& x, const operand& y, rounding r, std::uint64_t& bits,
                         std::uint8_t& flags, const ref_format& F, std::uint32_t a, std::uint32_t b) {
  flags = 0;
  const bool snan_a = x.nan && ((a >> 6) & 1) == 0, snan_b = y.nan && ((b >> 6) & 1) == 0;
  if (x.nan || y.nan) {
    bits = expected_nan(F, nan_policy::canonical, false, 0);
    flags = (snan_a || snan_b) ? flag_invalid : 0;
    return true;
  }
  if (which == op::add) {
    if (x.inf && y.inf && x.sign != y.sign) { bits = expected_nan(F, nan_policy::canonical, false, 0); flags = flag_invalid; return true; }
    if (x.inf || y.inf) { bits = expected_inf(F, x.inf ? x.sign : y.sign); return true; }
    if (x.v == 0 && y.v == 0) {
      const bool s = x.sign == y.sign ? x.sign : r.mode == round_mode::rd;
      bits = encode(F, s, 0, 0);
      return true;
    }
    return false;
  }
  const bool s = x.sign != y.sign;
  if ((x.inf && y.v == 0 && !y.inf) || (y.inf && x.v == 0 && !x.inf)) {
    bits = expected_nan(F, nan_policy::canonical, false, 0);
    flags = flag_invalid;
    return true;
  }
  if (x.inf || y.inf) { bits = expected_inf(F, s); return true; }
  if (x.v == 0 || y.v == 0) { bits = encode(F, s, 0, 0); return true; }
  return false;
}

/// Cold path: the failed fields (bit mask `bad`: 1 bits, 2 flags, 4 G/R/S, 8 lsb_exp, 16 error_sign,
/// 32 error, 64 align terms) and the exact Boost check (support/dyadic_check.hpp) of the same case.
[[gnu::noinline, gnu::cold]] void report(mismatch_log& log, op which, round_mode m, std::uint32_t a, std::uint32_t b,
                                         std::uint64_t got_bits, unsigned bad) {
  const std::string exact = check_op(formats::bf16, which == op::add ? op_kind_t::add : op_kind_t::mul, a, b, 0,
                                     rounding{m});
  char head[128];  // snprintf, not a chain of std::string operator+ (GCC 12 -Wrestrict false positive)
  std::snprintf(head, sizeof head, "%s %s 0x%x, 0x%x: failed checks mask %u (bits 0x%llx); Boost check: ",
                which == op::add ? "add" : "mul", std::string(to_string(m)).c_str(), a, b, bad,
                static_cast<unsigned long long>(got_bits));
  log.add(head + (exact.empty() ? std::string("passes") : exact));
}

/// What the oracle derives once per finite pair, shared by the modes swept.
struct pair_exact {
  std::uint32_t a, b;
  bool sign;
  double hi, lo;         ///< the exact result hi + lo (TwoSum; lo = 0 for products)
  bracket br;            ///< its neighbours on the bf16 grid and the midpoint comparison
  double align;          ///< add: T(small) - small, the smaller addend's bits below the grid (exact)
  bool aligned;          ///< add: both addends non-zero (the core reports an alignment)
};

/// One mode of one finite pair: bits, flags, G/R/S, lsb_exp, error_sign, error (rounded once) and,
/// for add, the exact align terms; branch-free, the report only on a mismatch.
template <op Which, round_mode M>
[[gnu::always_inline]] inline void check_finite(const pair_exact& c, mismatch_log& log) {
  constexpr rounding r{M};
  const emu::op_result got = Which == op::add ? emu::add(formats::bf16, c.a, c.b, r) : emu::mul(formats::bf16, c.a, c.b, r);
  const expected e = expect_round(BF16, c.sign, c.br, r, convert_options{});
  // One bit per check, so that the hot path has no branches and the report names the field.
  unsigned bad = (got.bits() != e.bits) | (got.round.flags != e.flags) << 1 |
                 ((got.round.guard != c.br.guard) | (got.round.round_bit != c.br.round_bit) |
                  (got.round.sticky != c.br.sticky)) << 2;
  if (!(e.flags & flag_overflow)) {
    // error = result - (hi + lo) = (res - hi) - lo, rounded once. Without lo (products, and sums
    // that fit a double) it is fl(res - hi), one IEEE subtraction. With lo it is d - lo when res - hi
    // is exact (TwoSum's error term zero): one IEEE subtraction again. That holds whenever res and
    // hi are within a factor 2 (Sterbenz) or res is zero; a bf16 sum is a multiple of 2^-133, so a
    // rounded sum is never far from it and this always holds for add. Otherwise the Boost check in
    // the report decides.
    const double res_mag = scale2(static_cast<double>(e.n_out), c.br.q);
    double d, d_err;
    two_sum(c.sign ? -res_mag : res_mag, -c.hi, d, d_err);
    const bool known = c.lo == 0 || d_err == 0;
    const double want_err = c.lo == 0 ? d : d - c.lo;
    const int want_sign = want_err > 0 ? 1 : (want_err < 0 ? -1 : 0);  // rounding keeps the sign
    bad |= (got.round.lsb_exp != c.br.q) << 3 | (got.round.error_sign() != want_sign) << 4 |
           (!known | (got.round.error() != want_err)) << 5;
    if constexpr (Which == op::add) {
      // The exact align terms: align_bits * 2^align_exp, opposite in sign to the smaller addend.
      const double mag = scale2(static_cast<double>(static_cast<std::uint64_t>(got.align_bits)), got.align_exp);
      bad |= ((got.has_alignment != c.aligned) | (mag != std::fabs(c.align)) |
              (mag != 0 && got.small_sign != (c.align > 0))) << 6;
    }
  }
  if (bad != 0) [[unlikely]] report(log, Which, M, c.a, c.b, got.bits(), bad);
}

/// A special case (NaN, Inf, zero operands, exact cancellation): bits and flags only.
template <op Which, round_mode M>
[[gnu::always_inline]] inline void check_special(const operand& x, const operand& y, std::uint32_t a, std::uint32_t b,
                                                 bool exact_zero, mismatch_log& log) {
  constexpr rounding r{M};
  const emu::op_result got = Which == op::add ? emu::add(formats::bf16, a, b, r) : emu::mul(formats::bf16, a, b, r);
  std::uint64_t bits = encode(BF16, M == round_mode::rd, 0, 0);  // exact cancellation: +0, -0 under rd
  std::uint8_t flags = 0;
  if (!exact_zero) special_case(Which, x, y, r, bits, flags, BF16, a, b);
  if (got.bits() != bits || got.round.flags != flags) [[unlikely]] report(log, Which, M, a, b, got.bits(), 1u | 2u);
}

/// Every pair of a block in the modes `Modes`: the oracle once per pair, then each mode.
template <op Which, round_mode... Modes>
[[gnu::flatten]] void check_block(std::uint64_t lo, std::uint64_t hi, mismatch_log& log) {
  for (std::uint64_t i = lo; i < hi; ++i) {
    const auto a = static_cast<std::uint32_t>(i >> 16), b = static_cast<std::uint32_t>(i & 0xffff);
    const operand x = decode_bf16(a), y = decode_bf16(b);
    std::uint64_t unused_bits;
    std::uint8_t unused_flags;
    if (special_case(Which, x, y, rounding{round_mode::rne}, unused_bits, unused_flags, BF16, a, b)) {
      (check_special<Which, Modes>(x, y, a, b, false, log), ...);
      continue;
    }
    pair_exact c;
    c.a = a;
    c.b = b;
    c.lo = 0;
    if constexpr (Which == op::add) two_sum(x.v, y.v, c.hi, c.lo);
    else c.hi = x.v * y.v;  // exact: 8 x 8 bits
    if (c.hi == 0) {
      (check_special<Which, Modes>(x, y, a, b, true, log), ...);
      continue;
    }
    c.sign = c.hi < 0;
    const int lo_sign = c.lo == 0 ? 0 : ((c.lo < 0) == c.sign ? 1 : -1);
    f64_bracket(BF16, std::fabs(c.hi), lo_sign, c.br);  // in place (see f64_bracket)
    if constexpr (Which == op::add) {
      // T(small) - small with T truncating toward zero onto the grid 2^q of the exact sum (the
      // core's lsb_exp, checked above); |small| / 2^q < 2^9, so the conversion truncates exactly.
      const double small = std::fabs(x.v) < std::fabs(y.v) ? x.v : y.v;
      const double t = static_cast<double>(static_cast<std::int64_t>(scale2(small, -c.br.q)));
      c.align = scale2(t, c.br.q) - small;
      c.aligned = x.v != 0 && y.v != 0;
    }
    (check_finite<Which, Modes>(c, log), ...);
  }
}

// Pair i = (a << 16) | b; consecutive pairs share a and step b, which keeps the branches of the
// core and the oracle predictable (sweep_blocks). Modes: rne over every pair, which is what the CI
// budget allows (add 172 s, mul 103 s of wall time on 2 cores at the full level in CI; docs/rounding.md,
// "Test oracles"); the other modes are covered by the random and adversarial samples of ops_test.cpp.
// Add a mode to the template argument list to sweep it too.
TEST(ops_exhaustive, bf16_add_all_pairs_rne) {
  mismatch_log log;
  sweep_blocks("bf16_add_all_pairs_rne", std::uint64_t{1} << 32, 1u << 14,
               [&](std::uint64_t lo, std::uint64_t hi) { check_block<op::add, round_mode::rne>(lo, hi, log); });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

TEST(ops_exhaustive, bf16_mul_all_pairs_rne) {
  mismatch_log log;
  sweep_blocks("bf16_mul_all_pairs_rne", std::uint64_t{1} << 32, 1u << 14,
               [&](std::uint64_t lo, std::uint64_t hi) { check_block<op::mul, round_mode::rne>(lo, hi, log); });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

}  // namespace
}  // namespace tiebreak::test
