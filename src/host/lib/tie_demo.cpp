// SPDX-License-Identifier: Apache-2.0
/// @file The tie-breaking demonstration sweep over all same-binade bf16 pairs.

#include "tiebreak/host/tie_demo.hpp"

#include <cmath>
#include <stdexcept>

#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::host {

const char* to_string(demo_tail t) noexcept {
  switch (t) {
    case demo_tail::none: return "none";
    case demo_tail::same_sign: return "same-sign";
    default: return "opposite-sign";
  }
}

const char* to_string(demo_accum a) noexcept { return a == demo_accum::f32 ? "f32" : "bf16"; }

std::uint16_t demo_tail_bits(std::uint16_t a, demo_tail t) noexcept {
  if (t == demo_tail::none) return 0;
  const auto shifted = static_cast<std::uint16_t>(a - (demo_tail_shift << 7));  // exponent field - 12
  return t == demo_tail::same_sign ? shifted : static_cast<std::uint16_t>(shifted ^ 0x8000u);
}

demo_randoms demo_random_bits(std::uint64_t seed, std::uint64_t index) noexcept {
  demo_randoms r{};
  std::uint64_t state = splitmix64(seed ^ splitmix64(index));
  for (auto& per_accum : r) {
    for (auto& per_tail : per_accum) {
      state = splitmix64(state);
      per_tail[0] = static_cast<std::uint32_t>(state);
      per_tail[1] = static_cast<std::uint32_t>(state >> 32);
    }
  }
  return r;
}

demo_pair_result demo_pair(std::uint16_t a, std::uint16_t b, const demo_randoms& rnd) {
  // Work in units u = 2^(e - 146): a = A * 2^12 u, b = B * 2^12 u, t = A u, with A, B the 8-bit
  // significands. Every exact sum is an integer below 2^23 (at most 23 significant bits), so the f32
  // accumulator holds it exactly; round_pack confirms that (inexact flag) and does the encoding.
  const bool sign = (a >> 15) != 0;
  const int e = (a >> 7) & 0xff;
  const int unit_exp = e - formats::bf16.bias - formats::bf16.man_bits - demo_tail_shift;
  const std::int64_t big_a = 128 + (a & 0x7f), big_b = 128 + (b & 0x7f);
  const std::int64_t pair_units = (big_a + big_b) << demo_tail_shift;
  const std::int64_t exact_units[3] = {pair_units, pair_units + big_a, pair_units - big_a};

  const auto f32_of = [&](std::int64_t units) {
    const round_result r = round_pack(formats::f32, make_exact(sign, static_cast<u128>(units), unit_exp), rne_t{});
    if (r.inexact()) throw std::logic_error("tie demo: f32 accumulation was not exact");
    return static_cast<std::uint32_t>(r.bits);
  };
  const auto units_of = [&](std::uint16_t bits) {
    const exact_value v = unpack(formats::bf16, bits);
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(v.sig) << (v.exp - unit_exp));
  };
  // result - exact in ulps of bf16 at the exact sum's binade (2^(msb - 7) units), signed.
  const auto error_ulps = [&](std::uint16_t bits, std::int64_t exact) {
    const int msb = 63 - clz64(static_cast<std::uint64_t>(exact));
    const double mag = std::ldexp(static_cast<double>(units_of(bits) - exact), -(msb - formats::bf16.man_bits));
    return sign ? -mag : mag;
  };

  demo_pair_result out{};
  const std::uint32_t acc_pair = f32_of(pair_units);
  constexpr int f32i = static_cast<int>(demo_accum::f32), bf16i = static_cast<int>(demo_accum::bf16);
  for (int t = 0; t < 3; ++t) {
    const std::uint32_t acc = t == 0 ? acc_pair : f32_of(exact_units[t]);
    const std::int64_t tail_units = t == 0 ? 0 : (t == 1 ? big_a : -big_a);
    for (int m = 0; m < 3; ++m) {
      // f32 accumulation, one rounding to bf16.
      const std::uint16_t r32 = f32_bits_to_bf16(acc, rounding{demo_modes[m], rnd[f32i][t][0]});
      out.bits[f32i][t][m] = r32;
      out.error_ulps[f32i][t][m] = error_ulps(r32, exact_units[t]);
      // bf16 accumulation: a + b rounded to bf16, then + t rounded to bf16.
      std::uint16_t r16 = f32_bits_to_bf16(acc_pair, rounding{demo_modes[m], rnd[bf16i][t][0]});
      if (t != 0) {
        const std::uint32_t acc2 = f32_of(units_of(r16) + tail_units);
        r16 = f32_bits_to_bf16(acc2, rounding{demo_modes[m], rnd[bf16i][t][1]});
      }
      out.bits[bf16i][t][m] = r16;
      out.error_ulps[bf16i][t][m] = error_ulps(r16, exact_units[t]);
    }
  }
  return out;
}

demo_table run_tie_demo(std::uint64_t seed, const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  demo_table table;
  table.seed = seed;
  for (int ac = 0; ac < 2; ++ac) {
    for (int t = 0; t < 3; ++t) {
      for (int m = 0; m < 3; ++m) {
        demo_cell& c = table.cells[static_cast<std::size_t>((ac * 3 + t) * 3 + m)];
        c.accum = demo_accums[ac];
        c.tail = demo_tails[t];
        c.mode = demo_modes[m];
      }
    }
  }
  const std::uint64_t binades = 2 * static_cast<std::uint64_t>(demo_exp_hi - demo_exp_lo + 1);
  std::uint64_t index = 0, done = 0;
  for (unsigned sign = 0; sign < 2; ++sign) {
    for (unsigned e = demo_exp_lo; e <= static_cast<unsigned>(demo_exp_hi); ++e) {
      for (unsigned fa = 0; fa < 128; ++fa) {
        for (unsigned fb = 0; fb < 128; ++fb, ++index) {
          const auto a = static_cast<std::uint16_t>(sign << 15 | e << 7 | fa);
          const auto b = static_cast<std::uint16_t>(sign << 15 | e << 7 | fb);
          const demo_pair_result r = demo_pair(a, b, demo_random_bits(seed, index));
          const bool tie = ((fa + fb) & 1u) != 0;
          ++table.pairs;
          if (tie) ++table.ties;
          for (std::size_t i = 0; i < table.cells.size(); ++i) {
            demo_cell& c = table.cells[i];
            const double err = r.error_ulps[i / 9][(i / 3) % 3][i % 3];
            const double away = sign ? -err : err;  // + = away from zero
            ++c.pairs;
            c.sum_error_all += away;
            if (tie) {
              ++c.ties;
              c.sum_error_ties += away;
              if (away > 0) ++c.ties_away;
              else if (away < 0) ++c.ties_toward;
            }
          }
        }
      }
      ++done;
      if (progress) progress(done, binades);
    }
  }
  return table;
}

}  // namespace tiebreak::host
