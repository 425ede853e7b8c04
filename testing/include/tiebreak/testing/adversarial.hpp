// SPDX-License-Identifier: Apache-2.0
/// @file Deterministic, seeded generators of adversarial rounding inputs: ties, near-ties, subnormal and
/// overflow boundaries, and attention score rows with a repeated maximum and same-sign values.
///
/// Inputs are encodings of a *source* format that are meant to be narrowed to a *target* format: by
/// default f32 for targets narrower than f32 (bf16, f16, tf32, e4m3, e5m2) and f64 for f32. Every
/// case is built as an exact value and encoded with round_pack under rz, and kept only if that
/// encoding is exact, so each case is exactly the value claimed. No GoogleTest dependency.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"
#include "tiebreak/testing/describe.hpp"

namespace tiebreak::testing::adversarial {

/// SplitMix64: the seeded generator behind every case (same seed, same cases, on every platform):
/// the core's tiebreak::splitmix64_generator, with a bias-free `below`.
class splitmix64 {
 public:
  explicit splitmix64(std::uint64_t seed) noexcept : g_(seed) {}
  std::uint64_t next() noexcept { return g_.next(); }
  /// Uniform in [0, n) (n > 0), by rejection: no modulo bias.
  std::uint64_t below(std::uint64_t n) noexcept {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t x;
    do { x = next(); } while (x >= limit);
    return x % n;
  }

 private:
  tiebreak::splitmix64_generator g_;
};

/// The default source format for a target: f32 below f32's precision (tf32 included), f64 for f32.
/// Precondition: `to` is not f64 (no wider named format exists; throws std::invalid_argument).
inline format_desc source_format(format_spec to) {
  const format_desc& f = to.desc;
  if (f.precision() < 24 && f.exp_bits <= 8) return formats::f32;
  if (f.precision() < 53 && f.exp_bits <= 11) return formats::f64;
  throw std::invalid_argument("tiebreak::testing::adversarial: no wider source format for " + std::string(f.name));
}

namespace detail {

/// Encoding of (-1)^sign * sig * 2^exp in `from`, if exactly representable and finite.
inline bool encode_exact(const format_desc& from, bool sign, u128 sig, int exp, std::uint64_t& out) {
  if (sig == 0) { out = from.pack(sign, 0, 0); return true; }
  const round_result r = round_pack(from, make_exact(sign, sig, exp), rz_t{});
  if (r.inexact() || r.overflow()) return false;
  out = r.bits;
  return true;
}

/// Significand and grid exponent of a finite encoding of `f`: value = sig * 2^q (q for subnormals too).
inline void grid_of(const format_desc& f, std::uint64_t bits, u128& sig, int& q) {
  const std::uint64_t ef = f.exp_field_of(bits), frac = f.frac_of(bits);
  sig = ef == 0 ? frac : (frac | (std::uint64_t{1} << f.man_bits));
  q = (ef == 0 ? f.emin() : static_cast<int>(ef) - f.bias) - f.man_bits;
}

/// Largest exponent field holding finite values.
inline std::uint64_t max_finite_field(const format_desc& f) {
  return f.special == special_style::ieee ? f.exp_field_max() - 1 : f.exp_field_max();
}

/// Next encoding away from zero / toward zero in `from` (same sign), for +-1 ulp neighbours.
inline std::uint64_t step_away(const format_desc& from, std::uint64_t bits) { return bits + (std::uint64_t{1} << from.pad); }
inline std::uint64_t step_toward(const format_desc& from, std::uint64_t bits) { return bits - (std::uint64_t{1} << from.pad); }

inline void sort_unique(const format_desc& from, std::vector<std::uint64_t>& v) {
  std::sort(v.begin(), v.end(), [&](std::uint64_t a, std::uint64_t b) {
    const auto oa = ordinal(from, a), ob = ordinal(from, b);
    return oa != ob ? oa < ob : a < b;
  });
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace detail

/// Exact ties: source values exactly halfway between two adjacent `to` values (guard bit 1, every
/// later bit 0), in every binade of `to` (subnormal binade included), both signs, both parities of
/// the kept lsb (so rne rounds some up and some down), `per_binade` random significands each.
/// Order: by binade, sign, parity; last, the two ties above the largest finite value M (+ and -),
/// which rne rounds out of range where M's lsb is odd (Inf; every IEEE-style format) and down to M
/// where it is even (e4m3: M = 448 = 1.110b * 2^8). Deterministic in `seed`. Preconditions: `from` has >= 1 more bit of precision than `to`
/// and covers its range.
inline std::vector<std::uint64_t> ties(format_spec to, format_spec from, std::uint64_t seed = 1,
                                       std::size_t per_binade = 1) {
  const format_desc t = to.desc, f = from.desc;
  splitmix64 rng(seed);
  std::vector<std::uint64_t> out;
  const std::uint64_t top = detail::max_finite_field(t);
  for (std::uint64_t ef = 0; ef <= top; ++ef) {
    for (int sign = 0; sign < 2; ++sign) {
      for (std::uint64_t parity = 0; parity < 2; ++parity) {
        for (std::size_t k = 0; k < per_binade; ++k) {
          std::uint64_t frac = rng.next() & t.frac_mask();
          if (ef == top) frac = std::min(frac, t.max_frac());
          if ((frac & 1) != parity) {
            frac ^= 1;
            if (frac > (ef == top ? t.max_frac() : t.frac_mask())) frac -= 2;
          }
          u128 sig;
          int q;
          detail::grid_of(t, t.pack(sign != 0, ef, frac), sig, q);
          std::uint64_t enc;
          if (detail::encode_exact(f, sign != 0, 2 * sig + 1, q - 1, enc)) out.push_back(enc);
        }
      }
    }
  }
  // The tie above the largest finite value.
  u128 msig;
  int mq;
  detail::grid_of(t, t.max_finite(false), msig, mq);
  for (int sign = 0; sign < 2; ++sign) {
    std::uint64_t enc;
    if (detail::encode_exact(f, sign != 0, 2 * msig + 1, mq - 1, enc)) out.push_back(enc);
  }
  return out;
}
inline std::vector<std::uint64_t> ties(format_spec to, std::uint64_t seed = 1, std::size_t per_binade = 1) {
  return ties(to, source_format(to), seed, per_binade);
}

/// Near-ties: for each tie of ties(to, from, seed, per_binade), its two neighbours in `from`, one
/// source ulp below and one above in magnitude, in that order. Below: guard 0 and every later bit 1
/// (rounds toward zero in rne/rna); above: guard 1 and sticky 1 (rounds away in rne/rna).
inline std::vector<std::uint64_t> near_ties(format_spec to, format_spec from, std::uint64_t seed = 1,
                                            std::size_t per_binade = 1) {
  const format_desc f = from.desc;
  std::vector<std::uint64_t> out;
  for (std::uint64_t x : ties(to, from, seed, per_binade)) {
    out.push_back(detail::step_toward(f, x));  // a tie is an odd multiple of a half-ulp: never a power of 2 ...
    out.push_back(detail::step_away(f, x));    // ... nor the largest value of `from`, so both neighbours exist
  }
  return out;
}
inline std::vector<std::uint64_t> near_ties(format_spec to, std::uint64_t seed = 1, std::size_t per_binade = 1) {
  return near_ties(to, source_format(to), seed, per_binade);
}

/// Inputs at the subnormal boundaries of `to`, both signs, sorted by value (-0 before +0): for each
/// anchor a of {smallest subnormal, largest subnormal, smallest normal} the points a and a +- u/2
/// (u is the subnormal spacing 2^(emin - man_bits); five distinct ties per sign: u/2, 3u/2,
/// max_sub - u/2, max_sub + u/2 = min_normal - u/2, min_normal + u/2) and the `from` neighbours
/// (+-1 source ulp) of each; plus the smallest `from` value (rounds to 0 or the smallest subnormal)
/// and the zeros.
inline std::vector<std::uint64_t> subnormal_boundaries(format_spec to, format_spec from) {
  const format_desc t = to.desc, f = from.desc;
  const int q = t.emin() - t.man_bits;  // u = 2^q
  // Anchors in units of u/2 = 2^(q-1): min_sub = 2, max_sub = 2 (2^m - 1), min_normal = 2^(m+1).
  const u128 anchors[] = {2, 2 * ((u128{1} << t.man_bits) - 1), u128{1} << (t.man_bits + 1)};
  std::vector<std::uint64_t> out;
  for (int sign = 0; sign < 2; ++sign) {
    out.push_back(f.pack(sign != 0, 0, 0));
    out.push_back(f.pack(sign != 0, 0, 1));  // the smallest source value
    for (u128 a : anchors) {
      for (u128 m : {a - 1, a, a + 1}) {  // a - u/2, a, a + u/2
        std::uint64_t enc;
        if (!detail::encode_exact(f, sign != 0, m, q - 1, enc)) continue;
        out.push_back(enc);
        if ((enc & ~f.sign_mask()) != 0) out.push_back(detail::step_toward(f, enc));
        out.push_back(detail::step_away(f, enc));
      }
    }
  }
  detail::sort_unique(f, out);
  return out;
}
inline std::vector<std::uint64_t> subnormal_boundaries(format_spec to) {
  return subnormal_boundaries(to, source_format(to));
}

/// Inputs at the overflow boundary of `to`, both signs, sorted by value: the largest finite value M,
/// M + u/2 (a tie: rne rounds it to Inf where M's lsb is odd, to M in e4m3), M + u (u: the ulp of M;
/// e4m3 has no encoding there), the `from` neighbours of each, the largest finite and the infinite
/// `from` values.
inline std::vector<std::uint64_t> overflow_boundaries(format_spec to, format_spec from) {
  const format_desc t = to.desc, f = from.desc;
  u128 msig;
  int q;
  detail::grid_of(t, t.max_finite(false), msig, q);
  std::vector<std::uint64_t> out;
  for (int sign = 0; sign < 2; ++sign) {
    for (u128 m : {2 * msig, 2 * msig + 1, 2 * msig + 2}) {  // M, M + u/2, M + u in units of u/2
      std::uint64_t enc;
      if (!detail::encode_exact(f, sign != 0, m, q - 1, enc)) continue;
      out.push_back(enc);
      out.push_back(detail::step_toward(f, enc));
      if (enc != f.max_finite(sign != 0)) out.push_back(detail::step_away(f, enc));
    }
    out.push_back(f.max_finite(sign != 0));
    if (f.has_inf()) out.push_back(f.inf(sign != 0));
  }
  detail::sort_unique(f, out);
  return out;
}
inline std::vector<std::uint64_t> overflow_boundaries(format_spec to) {
  return overflow_boundaries(to, source_format(to));
}

/// Rows of attention scores whose maximum repeats, with one value column of a single sign: the
/// pattern that makes flash attention's BF16 output biased (shared/MECHANISM.md). Every entry is a
/// bf16 value stored as float (exact in f32).
///
/// Row r: `scores[r*cols + t]` for key t; the maximum appears `max_count[r]` (2..min(cols, 4)) times,
/// every other score is strictly smaller; the maximum is positive in some rows and negative in
/// others. `values[r*cols + t]` is V[t, i] for one feature i: all of one sign per row (the sign
/// alternates between rows); at the positions of the maximum (`max_positions`) they share one
/// binade, and the first two of them have significands of opposite parity, so their exact sum is a
/// bf16 round-to-nearest tie; elsewhere they are 2^-13..2^-8 times as large, each below half a bf16
/// ulp of that sum but far above its f32 ulp: the same-sign tail that sets the sticky bit and breaks
/// the tie away from zero.
struct score_rows {
  std::size_t rows = 0, cols = 0;
  std::vector<float> scores;
  std::vector<float> values;
  std::vector<std::size_t> max_count;
  std::vector<std::vector<std::size_t>> max_positions;  ///< per row, ascending
};

/// Precondition: d >= 2. Deterministic in (n, d, seed).
inline score_rows repeated_max_rows(std::size_t n, std::size_t d, std::uint64_t seed) {
  if (d < 2) throw std::invalid_argument("repeated_max_rows: need at least 2 columns");
  splitmix64 rng(seed);
  const format_desc bf = formats::bf16;
  auto bf16_value = [&](bool sign, std::uint64_t sig8, int exp) {  // sig8 in [128, 255]: exactly bf16
    return static_cast<float>(to_double(formats::f32, round_pack(formats::f32, make_exact(sign, sig8, exp), rz_t{}).bits));
  };
  score_rows out;
  out.rows = n;
  out.cols = d;
  out.scores.resize(n * d);
  out.values.resize(n * d);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t reps = 2 + rng.below(std::min<std::size_t>(d, 4) - 1);
    std::vector<std::size_t> pos(d);
    for (std::size_t t = 0; t < d; ++t) pos[t] = t;
    for (std::size_t t = 0; t < reps; ++t) std::swap(pos[t], pos[t + rng.below(d - t)]);  // partial shuffle
    std::vector<std::size_t> maxpos(pos.begin(), pos.begin() + static_cast<std::ptrdiff_t>(reps));
    std::sort(maxpos.begin(), maxpos.end());

    // The maximum: |m| in [2^-2, 2^3), positive in 3 rows of 4.
    const bool max_neg = rng.below(4) == 0;
    const float m = bf16_value(max_neg, 128 + rng.below(128), -9 + static_cast<int>(rng.below(5)));
    // Other scores: m - g with g in [0.25, 8), rounded toward zero to bf16 and kept strictly below m.
    const bool vneg = (r % 2) == 1;
    const int vexp = -10 + static_cast<int>(rng.below(6));  // value binade 2^(vexp+7) in [2^-3, 2^2]
    for (std::size_t t = 0; t < d; ++t) {
      const bool is_max = std::binary_search(maxpos.begin(), maxpos.end(), t);
      float s = m;
      if (!is_max) {
        for (int tries = 0;; ++tries) {
          const double g = 0.25 * static_cast<double>(1 + rng.below(31)) * (1 + tries);
          const round_result rr = f64_bits_to(bf, f64_to_bits(static_cast<double>(m) - g), rz_t{});
          s = static_cast<float>(to_double(bf, rr.bits));
          if (s < m) break;
        }
      }
      out.scores[r * d + t] = s;
      std::uint64_t sig = 128 + rng.below(128);
      int e = vexp;
      if (is_max) {
        if (t == maxpos[1]) {
          // Opposite parity to the first maximum's value: their sum has an odd 9-bit significand.
          const auto first_bits = f32_to_bits(out.values[r * d + maxpos[0]]);
          const std::uint64_t first_sig = ((first_bits >> 16) & 0x7f) | 0x80;
          if ((sig & 1) == (first_sig & 1)) sig = sig == 255 ? 254 : sig + 1;
        }
      } else {
        e = vexp - 9 - static_cast<int>(rng.below(4));  // < 2^(vexp-1): below half a bf16 ulp of the tie sum
      }
      out.values[r * d + t] = bf16_value(vneg, sig, e);
    }
    out.max_count.push_back(reps);
    out.max_positions.push_back(std::move(maxpos));
  }
  return out;
}

}  // namespace tiebreak::testing::adversarial
