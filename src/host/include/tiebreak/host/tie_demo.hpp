// SPDX-License-Identifier: Apache-2.0
/// @file The tie-breaking demonstration: how a tiny tail decides every bf16 round-to-nearest tie.
///
/// Domain: every ordered pair (a, b) of bf16 values with equal sign and equal exponent field e, for
/// both signs and e in [demo_exp_lo, demo_exp_hi] (the binades where the tail a * 2^-12 is a normal
/// bf16 and a + b cannot overflow). a + b then needs 9 significant bits; exactly when the fraction
/// fields have an odd sum, the 9th bit is a 1 and the sum is a round-to-nearest tie in bf16.
/// A third term, the tail t (none, +a * 2^-12 or -a * 2^-12, itself a bf16), is far below half an ulp
/// of the sum but survives an f32 accumulator, so it alone decides the tie. This is the flash-attention
/// mechanism: several P-bar = 1 terms give exact bf16 products whose sum is a tie, and the f32
/// accumulation of the many tiny terms of the other keys sets the sticky bit.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "tiebreak/fp/policy.hpp"

namespace tiebreak::host {

inline constexpr int demo_exp_lo = 13;    ///< smallest exponent field: the tail a * 2^-12 is normal
inline constexpr int demo_exp_hi = 252;   ///< largest exponent field: a + b + t rounded up stays finite
inline constexpr int demo_tail_shift = 12;

enum class demo_tail : std::uint8_t { none, same_sign, opposite_sign };
/// f32: a + b (+ t) accumulated in f32 (rne), rounded once to bf16 in the mode under test.
/// bf16: sequential bf16 accumulation, every partial sum rounded to bf16 in the mode under test.
enum class demo_accum : std::uint8_t { f32, bf16 };

inline constexpr demo_tail demo_tails[] = {demo_tail::none, demo_tail::same_sign, demo_tail::opposite_sign};
inline constexpr demo_accum demo_accums[] = {demo_accum::f32, demo_accum::bf16};
inline constexpr round_mode demo_modes[] = {round_mode::rne, round_mode::rz, round_mode::sr};

[[nodiscard]] const char* to_string(demo_tail t) noexcept;
[[nodiscard]] const char* to_string(demo_accum a) noexcept;

/// The tail term for `a` (bf16 bits, exponent field >= demo_exp_lo): a * 2^-12 with the sign of a
/// (same_sign) or the opposite sign; 0 for none.
[[nodiscard]] std::uint16_t demo_tail_bits(std::uint16_t a, demo_tail t) noexcept;

/// Random bits for stochastic rounding, per [accum][tail][step] (step 0: a + b, step 1: + t; the
/// f32 variant uses [f32][tail][0] for its single bf16 rounding).
using demo_randoms = std::array<std::array<std::array<std::uint32_t, 2>, 3>, 2>;

/// Every variant of one pair: result bits and the signed error result - exact(a + b + t), in ulps of
/// bf16 at the exact sum's binade, per [accum][tail][mode index into demo_modes].
struct demo_pair_result {
  std::uint16_t bits[2][3][3];
  double error_ulps[2][3][3];
};

/// Evaluates one pair. Preconditions: a and b are bf16 encodings with equal sign and equal exponent
/// field in [demo_exp_lo, demo_exp_hi]. Rounding: f32 accumulation is rne (and exact in this domain:
/// the core's inexact flag is checked and std::logic_error thrown otherwise); every bf16 rounding
/// uses the mode under test, sr taking its random bits from `rnd`. Equal to tiebreak::emu::sum on
/// [a, b(, t)] with sequential order (tests/cli/tie_demo_test.cpp checks it bit for bit).
[[nodiscard]] demo_pair_result demo_pair(std::uint16_t a, std::uint16_t b, const demo_randoms& rnd);

/// One row of the table: one accumulator, one tail, one mode, aggregated over the domain.
struct demo_cell {
  demo_accum accum = demo_accum::f32;
  demo_tail tail = demo_tail::none;
  round_mode mode = round_mode::rne;
  std::uint64_t pairs = 0;        ///< pairs in the domain
  std::uint64_t ties = 0;         ///< pairs whose a + b is a bf16 tie (odd fraction sum)
  std::uint64_t ties_away = 0;    ///< ties whose result is larger in magnitude than the exact sum
  std::uint64_t ties_toward = 0;  ///< ties whose result is smaller in magnitude
  double sum_error_ties = 0;      ///< sum over ties of the error in ulps, + = away from zero
  double sum_error_all = 0;       ///< the same over all pairs
  [[nodiscard]] double mean_error_ties() const noexcept { return ties ? sum_error_ties / static_cast<double>(ties) : 0.0; }
  [[nodiscard]] double mean_error_all() const noexcept { return pairs ? sum_error_all / static_cast<double>(pairs) : 0.0; }
};

struct demo_table {
  std::uint64_t seed = 0;
  std::uint64_t pairs = 0;
  std::uint64_t ties = 0;
  std::array<demo_cell, 18> cells{};  ///< [accum][tail][mode], flattened in that order
};

/// The random bits of pair number `index` (its position in the sweep) under `seed`: a counter-based
/// generator (splitmix64), so every pair's bits are reproducible alone.
[[nodiscard]] demo_randoms demo_random_bits(std::uint64_t seed, std::uint64_t index) noexcept;

/// Runs the sweep over the whole domain. `progress(done, total)` is called after each binade.
[[nodiscard]] demo_table run_tie_demo(std::uint64_t seed,
                                      const std::function<void(std::uint64_t, std::uint64_t)>& progress = {});

}  // namespace tiebreak::host
