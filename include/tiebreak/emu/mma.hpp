// SPDX-License-Identifier: Apache-2.0
/// @file Parameterised model of one tensor-core MMA instruction's arithmetic (mma.sync, wgmma).
///
/// One output element of `D = A*B + C` is `d = C + sum_k a_k * b_k`. Tensor cores do not compute it
/// with k IEEE additions: they form the products, align several of them (and the accumulator) to a
/// common exponent in a fixed-point adder of limited width, add them in one fused step, and
/// normalise the step's sum into the accumulator. The model below describes that with a handful of
/// parameters (docs/tensor-cores.md draws the datapath and lists the probe evidence for each):
///
///   1. products    a_k * b_k are exact (every supported format's product fits in 22 bits).
///   2. grouping    the k products are split into k/group fused steps; `contiguous` groups are
///                  [0, g), [g, 2g), ...; `strided` groups are {j, j + k/g, j + 2k/g, ...}.
///   3. C           joins the first step (`c_order::first`) or the last one (`c_order::last`); every
///                  later step also takes the previous step's result (the running sum) as an addend.
///   4. alignment   the reference exponent E of a step is the largest exponent of its non-zero
///                  addends: `nominal` (ea + eb for a product, the exponent field for C; a product
///                  significand in [1, 4) sits at E or E+1) or `lead` (the exact leading bit). Each
///                  addend is rounded onto the grid 2^(E - align_bits) under `align_round` (rz:
///                  sign-magnitude truncation, rd: two's-complement truncation, rne: rounding);
///                  `align_bits >= mma_align_exact` keeps every bit.
///   5. the sum     of the aligned addends is exact (carries grow the integer; nothing wraps).
///   6. normalise   the step's exact sum is rounded once into `acc_fmt` under `step_round` (with
///                  `ftz`: subnormal results flushed; `overflow_to_inf`: overflow gives Inf even in
///                  rz). acc_fmt is f32, f16 (f16 accumulate) or an f32-range format with fewer
///                  fraction bits (mma_acc_format: FP8 wgmma keeps 13). The last step's result is
///                  narrowed to `c_fmt` under `out_round` when the formats differ (exact when c_fmt
///                  holds every acc_fmt value).
///   7. specials    subnormal inputs are read as zero under `daz`; NaN anywhere, Inf*0, or Infs of
///                  both signs give the canonical NaN of the format (f32 0x7fffffff, f16 0x7fff);
///                  otherwise an Inf addend gives Inf. An all-zero or exactly cancelling step gives
///                  +0, or -0 when every addend is -0 (IEEE 754 6.3; rd: -0 when any is). With
///                  `positive_zero` every zero result is +0 (a sign-magnitude-free fixed-point adder:
///                  sm_90 does this, docs/tensor-cores.md).
///
/// Every rounding decision is made by tiebreak::round_pack: the alignment rounding is round_pack
/// into a synthetic format whose subnormal grid is 2^(E - align_bits), and the normalisation is
/// round_pack into acc_fmt. Addends that lose no bits are shifted exactly (no decision is made).
///
/// The default parameters per instruction (mma_models below) come from the probe suite
/// (cuda/mma, tools/device-mma.sh); a parameter stays marked in `unknown` until the probes and the
/// validation on hardware establish it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::emu {

/// The modelled instructions (CLI names in mma_instr_name).
enum class mma_instr : std::uint8_t {
  mma_m16n8k16_bf16,         ///< mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
  mma_m16n8k16_f16,          ///< mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
  mma_m16n8k8_tf32,          ///< mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
  mma_m16n8k16_f16_f16out,   ///< mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16
  wgmma_k16_bf16,            ///< wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16
  wgmma_k16_f16,             ///< wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16
  wgmma_k32_e4m3,            ///< wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3
  wgmma_k32_e5m2,            ///< wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2
};
inline constexpr int mma_instr_count = 8;
inline constexpr mma_instr all_mma_instrs[mma_instr_count] = {
    mma_instr::mma_m16n8k16_bf16, mma_instr::mma_m16n8k16_f16, mma_instr::mma_m16n8k8_tf32,
    mma_instr::mma_m16n8k16_f16_f16out, mma_instr::wgmma_k16_bf16, mma_instr::wgmma_k16_f16,
    mma_instr::wgmma_k32_e4m3, mma_instr::wgmma_k32_e5m2};

constexpr std::string_view mma_instr_name(mma_instr i) noexcept {
  constexpr std::string_view names[] = {"mma.m16n8k16.bf16", "mma.m16n8k16.f16", "mma.m16n8k8.tf32",
                                        "mma.m16n8k16.f16.f16out", "wgmma.k16.bf16", "wgmma.k16.f16",
                                        "wgmma.k32.e4m3", "wgmma.k32.e5m2"};
  return names[static_cast<int>(i)];
}
constexpr bool parse_mma_instr(std::string_view s, mma_instr& out) noexcept {
  for (mma_instr i : all_mma_instrs) {
    if (mma_instr_name(i) == s) { out = i; return true; }
  }
  return false;
}
/// True for the warpgroup instructions (sm_90a).
constexpr bool is_wgmma(mma_instr i) noexcept { return static_cast<int>(i) >= 4; }

/// Which exponent of an addend the alignment refers to (point 4 above).
enum class mma_exp_ref : std::uint8_t {
  nominal,  ///< ea + eb of a product (exponent fields; subnormals count as emin), C's exponent field
  lead,     ///< the exponent of the addend's exact leading bit
};
/// How the k products are split into fused steps (point 2).
enum class mma_grouping : std::uint8_t { contiguous, strided };
/// Which fused step C joins (point 3).
enum class mma_c_order : std::uint8_t { first, last };

constexpr std::string_view to_string(mma_exp_ref r) noexcept { return r == mma_exp_ref::nominal ? "nominal" : "lead"; }
constexpr std::string_view to_string(mma_grouping g) noexcept { return g == mma_grouping::contiguous ? "contiguous" : "strided"; }
constexpr std::string_view to_string(mma_c_order c) noexcept { return c == mma_c_order::first ? "first" : "last"; }

/// align_bits at or above this value: addends are never rounded at alignment (exact sum).
inline constexpr int mma_align_exact = 1 << 20;
/// Largest finite align_bits the fixed-point adder supports (addends and sum stay in 63 bits).
inline constexpr int mma_align_max = 48;
/// Largest k (products per instruction) the model supports.
inline constexpr int mma_max_k = 32;

/// The accumulator format with f32's exponent range and `man_bits` fraction bits (10 <= man_bits
/// <= 23; 23 is f32 itself). FP8 wgmma on sm_90 normalises its sum into mma_acc_format(13).
TIEBREAK_HDC format_desc mma_acc_format(int man_bits) noexcept {
  constexpr std::string_view names[] = {"e8m10", "e8m11", "e8m12", "e8m13", "e8m14", "e8m15", "e8m16",
                                        "e8m17", "e8m18", "e8m19", "e8m20", "e8m21", "e8m22", "f32"};
  const int i = man_bits < 10 ? 0 : man_bits > 23 ? 13 : man_bits - 10;
  return format_desc{8, i + 10, 127, special_style::ieee, 0, names[i]};
}

/// Parameters of one instruction's arithmetic. Preconditions (mma_model_valid): 1 <= k <= 32,
/// group divides k, 1 <= align_bits <= mma_align_max or align_bits >= mma_align_exact, the formats
/// have at most 23 fraction bits (products fit in 48 bits), acc_fmt and c_fmt are f32 or f16.
struct mma_model {
  format_desc a_fmt = formats::bf16;
  format_desc b_fmt = formats::bf16;
  format_desc c_fmt = formats::f32;    ///< format of C and D
  format_desc acc_fmt = formats::f32;  ///< format every fused step is normalised into
  int m = 16, n = 8, k = 16;           ///< instruction shape (k products per output element)
  int group = 16;                      ///< products per fused step
  mma_grouping grouping = mma_grouping::contiguous;
  mma_c_order c_order = mma_c_order::first;
  mma_exp_ref exp_ref = mma_exp_ref::nominal;
  int align_bits = 24;                 ///< bits kept below the reference exponent E (grid 2^(E-align_bits))
  round_mode align_round = round_mode::rz;
  round_mode step_round = round_mode::rz;
  round_mode out_round = round_mode::rne;  ///< acc_fmt -> c_fmt (only when they differ)
  bool daz = false;                    ///< subnormal A, B and C read as zero
  bool ftz = false;                    ///< subnormal step results flushed to zero
  bool overflow_to_inf = false;        ///< overflowing steps give Inf whatever step_round is
  bool positive_zero = false;          ///< every zero result (step and D) is +0, never -0
};

/// Parameters of mma_model, as bits of a mask (which ones are not established on hardware).
enum mma_param : std::uint32_t {
  mma_param_group = 1u << 0,
  mma_param_grouping = 1u << 1,
  mma_param_c_order = 1u << 2,
  mma_param_exp_ref = 1u << 3,
  mma_param_align_bits = 1u << 4,
  mma_param_align_round = 1u << 5,
  mma_param_step_round = 1u << 6,
  mma_param_out_round = 1u << 7,
  mma_param_acc_fmt = 1u << 8,
  mma_param_daz = 1u << 9,
  mma_param_ftz = 1u << 10,
  mma_param_overflow = 1u << 11,
  mma_param_zero = 1u << 12,
  mma_param_all = (1u << 13) - 1,
};
inline constexpr int mma_param_count = 13;
constexpr std::string_view mma_param_name(int bit) noexcept {
  constexpr std::string_view names[] = {"group", "grouping", "c_order", "exp_ref", "align_bits", "align_round",
                                        "step_round", "out_round", "acc_fmt", "daz", "ftz", "overflow_to_inf",
                                        "positive_zero"};
  return bit >= 0 && bit < mma_param_count ? names[bit] : "?";
}

TIEBREAK_HDC bool same_format(const format_desc& x, const format_desc& y) noexcept {
  return x.exp_bits == y.exp_bits && x.man_bits == y.man_bits && x.bias == y.bias && x.special == y.special &&
         x.pad == y.pad;
}

/// Equality of every arithmetic parameter (the formats by their layout, not their names).
TIEBREAK_HDC bool operator==(const mma_model& x, const mma_model& y) noexcept {
  return same_format(x.a_fmt, y.a_fmt) && same_format(x.b_fmt, y.b_fmt) && same_format(x.c_fmt, y.c_fmt) &&
         same_format(x.acc_fmt, y.acc_fmt) && x.m == y.m && x.n == y.n && x.k == y.k && x.group == y.group &&
         x.grouping == y.grouping && x.c_order == y.c_order && x.exp_ref == y.exp_ref &&
         x.align_bits == y.align_bits && x.align_round == y.align_round && x.step_round == y.step_round &&
         x.out_round == y.out_round && x.daz == y.daz && x.ftz == y.ftz && x.overflow_to_inf == y.overflow_to_inf &&
         x.positive_zero == y.positive_zero;
}

/// True when `m` satisfies mma_model's preconditions (acc_fmt: f16 or mma_acc_format(10..23)).
TIEBREAK_HDC bool mma_model_valid(const mma_model& m) noexcept {
  const auto c_ok = [](const format_desc& f) {
    return same_format(f, format_desc{8, 23, 127, special_style::ieee}) ||
           same_format(f, format_desc{5, 10, 15, special_style::ieee});
  };
  const auto acc_ok = [&](const format_desc& f) {
    return c_ok(f) || (f.exp_bits == 8 && f.bias == 127 && f.man_bits >= 10 && f.man_bits <= 23 &&
                       f.special == special_style::ieee && f.pad == 0);
  };
  const bool align_ok = (m.align_bits >= 1 && m.align_bits <= mma_align_max) || m.align_bits >= mma_align_exact;
  return m.k >= 1 && m.k <= mma_max_k && m.group >= 1 && m.k % m.group == 0 && align_ok &&
         m.a_fmt.man_bits <= 23 && m.b_fmt.man_bits <= 23 && c_ok(m.c_fmt) && acc_ok(m.acc_fmt) &&
         m.align_round != round_mode::sr && m.step_round != round_mode::sr && m.out_round != round_mode::sr;
}

/// One output element as the model computes it.
struct mma_result {
  std::uint64_t bits = 0;       ///< D, an encoding of c_fmt
  std::uint8_t flags = 0;       ///< union of the normalisations' tiebreak::flag bits
  bool align_inexact = false;   ///< some addend lost bits at alignment
  int steps = 0;                ///< fused steps taken
};

namespace detail {

/// A decoded operand, packed for the hot loop: the core's unpack narrowed to what an MMA operand
/// needs (significands of every supported format fit in 24 bits). Signalling NaNs are not
/// distinguished (the tensor cores raise no flags).
struct mma_operand {
  static constexpr std::int32_t exp_inf = 1 << 20;  ///< `exp` of an infinity (ssig = +-1)
  static constexpr std::int32_t exp_nan = 1 << 21;  ///< `exp` of a NaN (ssig = +-1)
  std::int32_t ssig;  ///< signed significand; 0 for zeros
  std::int32_t exp;   ///< weight of the lsb (finite); 0 for +0, 1 for -0; exp_inf, exp_nan

  TIEBREAK_HDC value_class cls() const noexcept {
    return exp == exp_nan ? value_class::nan
         : exp == exp_inf ? value_class::inf
         : ssig == 0      ? value_class::zero
                          : value_class::finite;
  }
  TIEBREAK_HDC bool sign() const noexcept { return ssig < 0 || (ssig == 0 && exp == 1); }
  TIEBREAK_HDC std::uint32_t sig() const noexcept {
    return ssig < 0 ? static_cast<std::uint32_t>(-ssig) : static_cast<std::uint32_t>(ssig);
  }
  TIEBREAK_HDC bool special() const noexcept { return exp >= exp_inf; }
};

/// A finite non-zero addend: (-1)^sign * sig * 2^exp.
struct mma_term {
  bool sign;
  std::uint64_t sig;
  int exp;
};

/// The addends of one fused step, with the specials folded into flags.
struct mma_step_in {
  int n = 0;
  mma_term t[mma_max_k + 2];
  bool nan = false, pos_inf = false, neg_inf = false, invalid = false;
  bool any_zero_pos = false, any_zero_neg = false;  ///< signs of the zero addends
  bool any_value = false;                           ///< a finite non-zero addend exists
  int e_ref = 0;                                    ///< largest reference exponent (when any_value)

  TIEBREAK_HDI void push(bool sign, std::uint64_t sig, int exp, int ref) noexcept {
    e_ref = (!any_value || ref > e_ref) ? ref : e_ref;
    any_value = true;
    t[n].sign = sign;
    t[n].sig = sig;
    t[n].exp = exp;
    ++n;
  }
};

TIEBREAK_HDI void mma_add_value(mma_step_in& s, const mma_operand& v, int man_bits, mma_exp_ref ref) noexcept {
  switch (v.cls()) {
    case value_class::nan: s.nan = true; return;
    case value_class::inf: (v.sign() ? s.neg_inf : s.pos_inf) = true; return;
    case value_class::zero: (v.sign() ? s.any_zero_neg : s.any_zero_pos) = true; return;
    default: break;
  }
  const std::uint64_t sig = v.sig();
  s.push(v.sign(), sig, v.exp, ref == mma_exp_ref::nominal ? v.exp + man_bits : v.exp + msb_of(sig));
}

TIEBREAK_HDI void mma_add_product(mma_step_in& s, const mma_operand& x, const mma_operand& y, int man_sum,
                                  mma_exp_ref ref) noexcept {
  const value_class xc = x.cls(), yc = y.cls();
  const bool sign = x.sign() != y.sign();
  if (xc == value_class::nan || yc == value_class::nan) { s.nan = true; return; }
  const bool xinf = xc == value_class::inf, yinf = yc == value_class::inf;
  const bool xzero = xc == value_class::zero, yzero = yc == value_class::zero;
  if ((xinf && yzero) || (xzero && yinf)) { s.nan = true; s.invalid = true; return; }
  if (xinf || yinf) { (sign ? s.neg_inf : s.pos_inf) = true; return; }
  if (xzero || yzero) { (sign ? s.any_zero_neg : s.any_zero_pos) = true; return; }
  const std::uint64_t sig = std::uint64_t{x.sig()} * y.sig();
  const int exp = x.exp + y.exp;
  s.push(sign, sig, exp, ref == mma_exp_ref::nominal ? exp + man_sum : exp + msb_of(sig));
}

/// Sign of a zero step result: IEEE 754 6.3 (all addends -0, or under rd any addend -0 or an exact
/// cancellation).
TIEBREAK_HDC bool mma_zero_sign(const mma_step_in& s, round_mode step_round, bool cancelled) noexcept {
  if (step_round == round_mode::rd) return s.any_zero_neg || cancelled;
  return s.any_zero_neg && !s.any_zero_pos && !cancelled;
}

/// An exact two's-complement sum of addends of any exponent (align_bits >= mma_align_exact):
/// 640 bits with lsb weight 2^lsb, enough for every supported format (span <= 540 bits).
struct mma_wide {
  static constexpr int limbs = 10;
  std::uint64_t w[limbs] = {};
  int lsb = 0;

  TIEBREAK_HDI void add(const mma_term& t) noexcept {
    const int sh = t.exp - lsb;
    const int li = sh / 64, bi = sh % 64;
    std::uint64_t part[limbs] = {};
    part[li] = t.sig << bi;
    if (bi != 0 && li + 1 < limbs) part[li + 1] = t.sig >> (64 - bi);
    if (t.sign) {  // w -= part
      std::uint64_t borrow = 0;
      for (int i = 0; i < limbs; ++i) {
        const std::uint64_t d = w[i] - part[i] - borrow;
        borrow = (w[i] < part[i] || (w[i] - part[i]) < borrow) ? 1 : 0;
        w[i] = d;
      }
    } else {  // w += part
      std::uint64_t carry = 0;
      for (int i = 0; i < limbs; ++i) {
        const std::uint64_t s1 = w[i] + part[i];
        const std::uint64_t c1 = s1 < w[i] ? 1 : 0;
        const std::uint64_t s2 = s1 + carry;
        carry = c1 | (s2 < s1 ? 1 : 0);
        w[i] = s2;
      }
    }
  }
  /// Bits [pos, pos + 64) of the (non-negative) value.
  TIEBREAK_HDI std::uint64_t bits_at(int pos) const noexcept {
    const int li = pos / 64, bi = pos % 64;
    std::uint64_t lo = li < limbs ? w[li] >> bi : 0;
    if (bi != 0 && li + 1 < limbs) lo |= w[li + 1] << (64 - bi);
    return lo;
  }
  /// The sum as an exact value: a 128-bit window below the leading bit, the rest as sticky.
  TIEBREAK_HDI exact_value value(bool& is_zero) noexcept {
    const bool neg = (w[limbs - 1] >> 63) != 0;
    if (neg) {  // negate in place
      std::uint64_t carry = 1;
      for (int i = 0; i < limbs; ++i) {
        const std::uint64_t v = ~w[i] + carry;
        carry = (carry != 0 && v == 0) ? 1 : 0;
        w[i] = v;
      }
    }
    int top = -1;
    for (int i = limbs - 1; i >= 0 && top < 0; --i) {
      if (w[i] != 0) top = i * 64 + msb_of(w[i]);
    }
    is_zero = top < 0;
    if (is_zero) return exact_value{};
    const int low = top >= 127 ? top - 127 : 0;
    const u128 sig = (static_cast<u128>(bits_at(low + 64)) << 64) | bits_at(low);
    bool sticky = false;
    for (int i = 0; i < limbs && i * 64 < low; ++i) {
      const int n = low - i * 64;  // bits of limb i below `low`
      const std::uint64_t mask = n >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1);
      sticky = sticky || (w[i] & mask) != 0;
    }
    const u128 window = top - low + 1 >= 128 ? sig : (sig & ((u128{1} << (top - low + 1)) - 1));
    return make_exact(neg, window, lsb + low, sticky);
  }
};

/// One fused step: aligns, adds and normalises the addends of `s` into acc_fmt.
TIEBREAK_HDI std::uint64_t mma_step(const mma_model& m, const mma_step_in& s, mma_result& out) noexcept {
  const format_desc& acc = m.acc_fmt;
  convert_options o;
  o.flush_output = m.ftz;
  const rounding step_r{m.step_round, 0};
  if (s.nan || (s.pos_inf && s.neg_inf)) {
    const round_result r = round_pack(acc, make_nan(), step_r, o);
    if (s.invalid || (!s.nan && s.pos_inf && s.neg_inf)) out.flags |= flag_invalid;
    return r.bits;
  }
  if (s.pos_inf || s.neg_inf) return acc.inf(s.neg_inf);
  if (!s.any_value) return acc.pack(mma_zero_sign(s, m.step_round, false), 0, 0);

  const int e_ref = s.e_ref;

  exact_value sum;
  bool is_zero = false;
  if (m.align_bits >= mma_align_exact) {
    mma_wide wide;
    int lo = s.t[0].exp;
    for (int i = 1; i < s.n; ++i) lo = s.t[i].exp < lo ? s.t[i].exp : lo;
    wide.lsb = lo;
    for (int i = 0; i < s.n; ++i) wide.add(s.t[i]);
    sum = wide.value(is_zero);
  } else {
    // Grid 2^g: the synthetic format's subnormal lsb. With 52 fraction bits its normal range starts
    // at 2^(g + 52) > 2^(e_ref + 2) > every addend, so round_pack rounds each addend onto the grid.
    const int g = e_ref - m.align_bits;
    const format_desc grid{8, 52, 1 - (g + 52), special_style::ieee, 0, literal("grid")};
    const rounding align_r{m.align_round, 0};
    std::int64_t acc_int = 0;
    for (int i = 0; i < s.n; ++i) {
      const mma_term& t = s.t[i];
      std::uint64_t v;
      if (t.exp >= g) {
        v = t.sig << (t.exp - g);  // exact: no bit below the grid
      } else {
        const round_result r = round_pack(grid, make_exact(t.sign, t.sig, t.exp), align_r);
        v = r.bits & grid.frac_mask();
        out.align_inexact = out.align_inexact || r.inexact();
      }
      acc_int += t.sign ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
    }
    is_zero = acc_int == 0;
    if (!is_zero) {
      const bool neg = acc_int < 0;
      sum = make_exact(neg, static_cast<std::uint64_t>(neg ? -acc_int : acc_int), g);
    }
  }
  if (is_zero) return acc.pack(mma_zero_sign(s, m.step_round, true), 0, 0);
  const round_result r = round_pack(acc, sum, step_r, o);
  out.flags |= r.flags;
  if (m.overflow_to_inf && r.overflow()) return acc.inf(sum.sign);
  return r.bits;
}

}  // namespace detail

/// Decodes an encoding of `f` for mma_dot_with (the core's unpack; `daz` reads subnormals as zero).
TIEBREAK_HDI detail::mma_operand mma_decode(const format_desc& f, std::uint64_t bits, bool daz) noexcept {
  using op = detail::mma_operand;
  const exact_value v = unpack(f, bits, daz);
  const std::int32_t sgn = v.sign ? -1 : 1;
  switch (v.cls) {
    case value_class::nan: return {sgn, op::exp_nan};
    case value_class::inf: return {sgn, op::exp_inf};
    case value_class::zero: return {0, v.sign ? 1 : 0};
    default: return {sgn * static_cast<std::int32_t>(v.sig), v.exp};
  }
}

namespace detail {

static_assert(static_cast<int>(value_class::zero) == 0 && static_cast<int>(value_class::finite) == 1 &&
              static_cast<int>(value_class::inf) == 2 && static_cast<int>(value_class::nan) == 3);

/// Adds (-1)^sign * sig * 2^exp, rounded onto the grid 2^g (the subnormal grid of `grid`) under
/// `r`, to the fixed-point sum `acc` (units of 2^g). Addends with no bit below the grid are shifted
/// exactly; the others go through round_pack. Precondition: |addend| < 2^(g + 52).
TIEBREAK_HDI void mma_align_add(const format_desc& grid, rounding r, int g, bool sign, std::uint64_t sig, int exp,
                                std::int64_t& acc, bool& lost) noexcept {
  if (exp >= g) {
    const std::int64_t sv = sign ? -static_cast<std::int64_t>(sig) : static_cast<std::int64_t>(sig);
    acc += sv << (exp - g);
  } else {
    const round_result rr = round_pack(grid, make_exact(sign, sig, exp), r);
    const auto mag = static_cast<std::int64_t>(rr.bits & grid.frac_mask());
    acc += sign ? -mag : mag;
    lost = lost || rr.inexact();
  }
}

/// The common step without specials (no NaN, no Inf, a non-zero exact sum, finite align_bits):
/// the same arithmetic as mma_add_* + mma_step, in two passes over the operands instead of a list
/// of addends. Returns false, having changed nothing, when the step needs the general path.
template <class Ops>
TIEBREAK_HDI bool mma_step_fast(const mma_model& m, const mma_operand* v, const int* v_man, int nv, const Ops& ops,
                                int step, int ng, std::uint64_t& acc_bits, mma_result& out) noexcept {
  const int man_sum = m.a_fmt.man_bits + m.b_fmt.man_bits;
  const bool nominal = m.exp_ref == mma_exp_ref::nominal;
  constexpr int none = -2147483647 - 1;
  int e_ref = none;
  bool special = false;
  for (int j = 0; j < nv; ++j) {
    special = special || v[j].special();
    if (v[j].ssig != 0) {
      const int r = nominal ? v[j].exp + v_man[j] : v[j].exp + msb_of(std::uint64_t{v[j].sig()});
      e_ref = r > e_ref ? r : e_ref;
    }
  }
  for (int t = 0; t < m.group; ++t) {
    const int i = m.grouping == mma_grouping::contiguous ? step * m.group + t : t * ng + step;
    const mma_operand x = ops.a(i), y = ops.b(i);
    if constexpr (!Ops::finite_only) special = special || x.special() || y.special();
    const std::int64_t p = static_cast<std::int64_t>(x.ssig) * y.ssig;  // 0 when either is zero
    const int r = nominal ? x.exp + y.exp + man_sum
                          : x.exp + y.exp + msb_of(static_cast<std::uint64_t>(p < 0 ? -p : p));
    e_ref = (p != 0 && r > e_ref) ? r : e_ref;
  }
  if (special || e_ref == none) return false;  // Inf/NaN, or nothing but zeros

  const int g = e_ref - m.align_bits;
  const format_desc grid{8, 52, 1 - (g + 52), special_style::ieee, 0, literal("grid")};  // see mma_step
  const rounding align_r{m.align_round, 0};
  std::int64_t acc_int = 0;
  bool lost = false;
  for (int j = 0; j < nv; ++j) {
    if (v[j].ssig != 0) mma_align_add(grid, align_r, g, v[j].ssig < 0, v[j].sig(), v[j].exp, acc_int, lost);
  }
  for (int t = 0; t < m.group; ++t) {
    const int i = m.grouping == mma_grouping::contiguous ? step * m.group + t : t * ng + step;
    const mma_operand x = ops.a(i), y = ops.b(i);
    const std::int64_t p = static_cast<std::int64_t>(x.ssig) * y.ssig;
    if (p == 0) continue;
    const int exp = x.exp + y.exp;
    if (exp >= g) {
      acc_int += p << (exp - g);  // exact: no bit below the grid
    } else {
      mma_align_add(grid, align_r, g, p < 0, static_cast<std::uint64_t>(p < 0 ? -p : p), exp, acc_int, lost);
    }
  }
  if (acc_int == 0) return false;  // exact cancellation: the general path signs the zero
  const bool neg = acc_int < 0;
  convert_options o;
  o.flush_output = m.ftz;
  const exact_value sum = make_exact(neg, static_cast<std::uint64_t>(neg ? -acc_int : acc_int), g);
  const round_result r = round_pack(m.acc_fmt, sum, rounding{m.step_round, 0}, o);
  out.flags |= r.flags;
  out.align_inexact = out.align_inexact || lost;
  acc_bits = (m.overflow_to_inf && r.overflow()) ? m.acc_fmt.inf(neg) : r.bits;
  return true;
}

}  // namespace detail

/// The core of mma_dot on operands given by an accessor: `ops.a(i)` and `ops.b(i)` return the
/// decoded (mma_decode) i-th element of the row of A and of the column of B, 0 <= i < m.k, and
/// `Ops::finite_only` promises that none of them is Inf or NaN.
/// mma_dot decodes raw encodings on the fly; the emulated GEMM decodes every element once.
/// `Fast` = false always takes the general path (the tests compare both paths).
template <bool Fast = true, class Ops>
TIEBREAK_HDI mma_result mma_dot_with(const mma_model& m, std::uint64_t c_bits, const Ops& ops) noexcept {
  mma_result out;
  const int ng = m.k / m.group;
  const int man_sum = m.a_fmt.man_bits + m.b_fmt.man_bits;
  std::uint64_t acc_bits = 0;
  const detail::mma_operand c = mma_decode(m.c_fmt, c_bits, m.daz);
  for (int step = 0; step < ng; ++step) {
    // The values joining this step: the running sum (after the first step) and C (first or last).
    detail::mma_operand v[2];
    int v_man[2];
    int nv = 0;
    if (step > 0) { v[nv] = mma_decode(m.acc_fmt, acc_bits, false); v_man[nv++] = m.acc_fmt.man_bits; }
    const bool with_c = m.c_order == mma_c_order::first ? step == 0 : step == ng - 1;
    if (with_c) { v[nv] = c; v_man[nv++] = m.c_fmt.man_bits; }
    if (Fast && m.align_bits < mma_align_exact &&
        detail::mma_step_fast(m, v, v_man, nv, ops, step, ng, acc_bits, out)) {
      if (m.positive_zero && (acc_bits & ~m.acc_fmt.sign_mask()) == 0) acc_bits = 0;  // underflow to -0
      continue;
    }
    detail::mma_step_in s;
    for (int j = 0; j < nv; ++j) detail::mma_add_value(s, v[j], v_man[j], m.exp_ref);
    for (int t = 0; t < m.group; ++t) {
      const int i = m.grouping == mma_grouping::contiguous ? step * m.group + t : t * ng + step;
      detail::mma_add_product(s, ops.a(i), ops.b(i), man_sum, m.exp_ref);
    }
    acc_bits = detail::mma_step(m, s, out);
    if (m.positive_zero && (acc_bits & ~m.acc_fmt.sign_mask()) == 0) acc_bits = 0;  // -0 -> +0
  }
  out.steps = ng;
  if (same_format(m.acc_fmt, m.c_fmt)) {
    out.bits = acc_bits;
  } else {
    convert_options o;
    o.flush_output = m.ftz;
    const round_result r = convert(m.c_fmt, m.acc_fmt, acc_bits, rounding{m.out_round, 0}, o);
    out.flags |= r.flags;
    out.bits = (m.positive_zero && (r.bits & ~m.c_fmt.sign_mask()) == 0) ? 0 : r.bits;
  }
  return out;
}

namespace detail {
/// mma_dot_with's accessor on raw encodings with strides (decoded on every access).
template <class TA, class TB>
struct mma_raw_ops {
  static constexpr bool finite_only = false;  ///< operands may be Inf or NaN
  const mma_model& m;
  const TA* pa;
  std::ptrdiff_t sa;
  const TB* pb;
  std::ptrdiff_t sb;
  TIEBREAK_HDI mma_operand a(int i) const noexcept {
    return mma_decode(m.a_fmt, static_cast<std::uint64_t>(pa[i * sa]), m.daz);
  }
  TIEBREAK_HDI mma_operand b(int i) const noexcept {
    return mma_decode(m.b_fmt, static_cast<std::uint64_t>(pb[i * sb]), m.daz);
  }
};
/// mma_dot_with's accessor on decoded operands (contiguous). FiniteOnly: the caller guarantees
/// that no operand is Inf or NaN (zeros and subnormals allowed).
template <bool FiniteOnly>
struct mma_decoded_ops {
  static constexpr bool finite_only = FiniteOnly;
  const mma_operand* pa;
  const mma_operand* pb;
  TIEBREAK_HDI mma_operand a(int i) const noexcept { return pa[i]; }
  TIEBREAK_HDI mma_operand b(int i) const noexcept { return pb[i]; }
};
}  // namespace detail

/// One output element d = C + sum_{i<k} a[i*a_stride] * b[i*b_stride], as model `m` computes it.
///
/// Preconditions: mma_model_valid(m); a and b hold m.k encodings of a_fmt and b_fmt (TA, TB any
/// unsigned integer type wide enough); c_bits an encoding of c_fmt. Rounding: as parameterised
/// (align_round at alignment, step_round per fused step, out_round to c_fmt); NaN: canonical NaN of
/// c_fmt for any NaN input, Inf*0 and Inf-Inf. The result's `bits` is an encoding of c_fmt.
template <class TA, class TB>
TIEBREAK_HDI mma_result mma_dot(const mma_model& m, std::uint64_t c_bits, const TA* a, std::ptrdiff_t a_stride,
                                const TB* b, std::ptrdiff_t b_stride) noexcept {
  return mma_dot_with(m, c_bits, detail::mma_raw_ops<TA, TB>{m, a, a_stride, b, b_stride});
}

/// mma_dot on contiguous arrays of m.k encodings.
TIEBREAK_HDI mma_result mma_dot(const mma_model& m, std::uint64_t c_bits, const std::uint64_t* a,
                                const std::uint64_t* b) noexcept {
  return mma_dot(m, c_bits, a, 1, b, 1);
}

/// One row of the default table: an instruction, its model and what the hardware established.
struct mma_model_entry {
  mma_instr id;
  std::string_view ptx;        ///< the PTX instruction the probes execute
  mma_model model;
  std::uint32_t unknown;       ///< mma_param bits NOT pinned on hardware (mma_param_all: none pinned);
                               ///< those without observable effect (mma_observable) are not unverified
  std::string_view evidence;   ///< where the parameters come from
};

/// The parameters (mma_param bits) whose value can change some result of model `m`, the others
/// as in `m`. A parameter outside the mask has no observable effect: no input can tell its values
/// apart, so no case can pin it, and leaving it unpinned leaves nothing unverified. Conservative:
/// a parameter leaves the mask only by one of these arguments (tests/mma/mma_test.cpp checks each
/// on generated tiles by flipping the parameter):
///   out_round        acc_fmt -> c_fmt is exact: the same format (no narrowing at all), or c_fmt has
///                    acc_fmt's exponent field and at least its fraction bits (mma_acc_format(13) ->
///                    f32, FP8 wgmma). Every f32-output row: the accumulator already is the output.
///   overflow_to_inf  step_round rne or rna (round_pack gives Inf on overflow anyway); or no step can
///                    overflow: align_round rz (or exact) and step_round rz never grow a magnitude,
///                    so a step stays below 2^(emax_acc + 1) when max|C| and max|acc| plus k * max|a b|
///                    do, with |a b| < 2^(emax_a + emax_b + 2). f16 and FP8 inputs into an f32-range
///                    accumulator: k max|a b| < 2^37, the room above f32's max finite is 2^104.
TIEBREAK_HDC std::uint32_t mma_observable(const mma_model& m) noexcept {
  std::uint32_t mask = mma_param_all;
  const format_desc &acc = m.acc_fmt, &c = m.c_fmt;
  const bool exact_out = same_format(acc, c) ||
                         (c.exp_bits == acc.exp_bits && c.bias == acc.bias && c.man_bits >= acc.man_bits);
  if (exact_out) mask &= ~static_cast<std::uint32_t>(mma_param_out_round);
  bool overflow_effect = true;
  if (m.step_round == round_mode::rne || m.step_round == round_mode::rna) {
    overflow_effect = false;
  } else if (m.step_round == round_mode::rz &&
             (m.align_round == round_mode::rz || m.align_bits >= mma_align_exact) && c.emax() <= acc.emax()) {
    // max(|C|, |acc|) = 2^(emax+1) - 2^(emax - man) for the wider of the two with the top exponent.
    const int man_top = c.emax() == acc.emax() && c.man_bits > acc.man_bits ? c.man_bits : acc.man_bits;
    int log2_k = 0;
    while ((1 << log2_k) < m.k) ++log2_k;
    overflow_effect = log2_k + m.a_fmt.emax() + m.b_fmt.emax() + 2 > acc.emax() - man_top;
  }
  if (!overflow_effect) mask &= ~static_cast<std::uint32_t>(mma_param_overflow);
  return mask;
}

/// The parameters of row `e` that could change a result and were not pinned on hardware: what
/// `tiebreak mma` flags as unverified.
TIEBREAK_HDC std::uint32_t mma_unverified(const mma_model_entry& e) noexcept { return e.unknown & mma_observable(e.model); }

/// A model from every parameter, in the order the probe prints them (tiebreak_mma_identify).
TIEBREAK_HDC mma_model mma_make(format_desc ab, format_desc c, format_desc acc, int m, int n, int k, int group,
                                mma_grouping grouping, mma_c_order c_order, mma_exp_ref exp_ref, int align_bits,
                                round_mode align_round, round_mode step_round, round_mode out_round, bool daz,
                                bool ftz, bool overflow_to_inf, bool positive_zero = false) noexcept {
  mma_model r;
  r.a_fmt = ab;
  r.b_fmt = ab;
  r.c_fmt = c;
  r.acc_fmt = acc;
  r.m = m;
  r.n = n;
  r.k = k;
  r.group = group;
  r.grouping = grouping;
  r.c_order = c_order;
  r.exp_ref = exp_ref;
  r.align_bits = align_bits;
  r.align_round = align_round;
  r.step_round = step_round;
  r.out_round = out_round;
  r.daz = daz;
  r.ftz = ftz;
  r.overflow_to_inf = overflow_to_inf;
  r.positive_zero = positive_zero;
  return r;
}

/// The default model of every instruction on sm_90 (H100/H200).
///
/// From the H200 probe runs of 2026-11-29 and 2026-12-01 (tools/device-check.sh stage mma;
/// docs/tensor-cores.md has the output and the analysis). Each row reproduces every designed case
/// and every random probe tile of those runs bit for bit (tests/mma/mma_replay_test.cpp replays the
/// first run's records from tests/mma/data/), and 10^8 random and adversarial elements per
/// instruction with the model evaluated on the host: 0 mismatches. A parameter is left out of
/// `unknown` only where a recorded case rules out every other value of the hypothesis grid
/// (mma_hypotheses) with the other parameters as in the row. The same model compiled for the device
/// (gpu::mma_validate) matches the hardware on 100 663 296 elements per instruction (second run of
/// 2026-12-01, after the fix in docs/tensor-cores.md, "Resolved defect").
inline constexpr mma_model_entry mma_models[mma_instr_count] = {
    {mma_instr::mma_m16n8k16_bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
     mma_make(formats::bf16, formats::f32, formats::f32, 16, 8, 16, 16, mma_grouping::contiguous, mma_c_order::first,
              mma_exp_ref::nominal, 25, round_mode::rz, round_mode::rz, round_mode::rne, false, false, true, true),
     mma_param_out_round, "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
    {mma_instr::mma_m16n8k16_f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
     mma_make(formats::f16, formats::f32, formats::f32, 16, 8, 16, 16, mma_grouping::contiguous, mma_c_order::first,
              mma_exp_ref::nominal, 25, round_mode::rz, round_mode::rz, round_mode::rne, false, false, false, true),
     mma_param_out_round | mma_param_overflow,
     "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
    {mma_instr::mma_m16n8k8_tf32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
     mma_make(formats::tf32, formats::f32, formats::f32, 16, 8, 8, 8, mma_grouping::contiguous, mma_c_order::first,
              mma_exp_ref::nominal, 25, round_mode::rz, round_mode::rz, round_mode::rne, false, false, true, true),
     mma_param_out_round, "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
    {mma_instr::mma_m16n8k16_f16_f16out, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
     mma_make(formats::f16, formats::f16, formats::f16, 16, 8, 16, 16, mma_grouping::contiguous, mma_c_order::first,
              mma_exp_ref::nominal, 25, round_mode::rz, round_mode::rne, round_mode::rne, false, false, false, true),
     mma_param_out_round | mma_param_overflow,
     "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
    {mma_instr::wgmma_k16_bf16, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
     mma_make(formats::bf16, formats::f32, formats::f32, 64, 8, 16, 16, mma_grouping::contiguous, mma_c_order::first,
              mma_exp_ref::nominal, 25, round_mode::rz, round_mode::rz, round_mode::rne, false, false, true, true),
     mma_param_out_round, "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
    {mma_instr::wgmma_k16_f16, "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16",
     mma_make(formats::f16, formats::f32, formats::f32, 64, 8, 16, 16, mma_grouping::contiguous, mma_c_order::first,
              mma_exp_ref::nominal, 25, round_mode::rz, round_mode::rz, round_mode::rne, false, false, false, true),
     mma_param_out_round | mma_param_overflow,
     "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
    {mma_instr::wgmma_k32_e4m3, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
     mma_make(formats::e4m3, formats::f32, mma_acc_format(13), 64, 8, 32, 32, mma_grouping::contiguous,
              mma_c_order::first, mma_exp_ref::nominal, 13, round_mode::rz, round_mode::rz, round_mode::rne, false, false,
              false, true),
     mma_param_out_round | mma_param_ftz | mma_param_overflow,
     "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
    {mma_instr::wgmma_k32_e5m2, "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2",
     mma_make(formats::e5m2, formats::f32, mma_acc_format(13), 64, 8, 32, 32, mma_grouping::contiguous,
              mma_c_order::first, mma_exp_ref::nominal, 13, round_mode::rz, round_mode::rz, round_mode::rne, false, false,
              false, true),
     mma_param_out_round | mma_param_ftz | mma_param_overflow,
     "H200 2026-12-01: every designed case and random probe tile, and 1e8 elements (model on the host, and on the device), 0 mismatches"},
};

/// The table row of an instruction.
constexpr const mma_model_entry& mma_entry(mma_instr i) noexcept { return mma_models[static_cast<int>(i)]; }

static_assert(mma_model_valid(mma_models[0].model) && mma_model_valid(mma_models[3].model) &&
              mma_model_valid(mma_models[6].model) && mma_model_valid(mma_models[7].model));

}  // namespace tiebreak::emu
