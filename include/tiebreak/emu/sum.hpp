// SPDX-License-Identifier: Apache-2.0
/// @file Sums of sequences in a chosen order and accumulator format, with every step's error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tiebreak/emu/ops.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak::emu {

/// Order of the additions.
enum class sum_order : std::uint8_t {
  sequential,  ///< ((x0 + x1) + x2) + ...
  pairwise,    ///< recursive halving: sum(x[0, n/2)) + sum(x[n/2, n))
  blocked,     ///< each block of `block` elements sequentially, then the block sums sequentially
};

/// What to sum in which formats. Inputs are encodings of `input`; each is first narrowed to `accum`
/// (exact when accum is at least as wide, a recorded step otherwise), the additions are rounded to
/// `accum` under `accum_rounding`, and the total is narrowed to `output` under `output_rounding`.
///
/// Stochastic rounding (either rounding in mode sr) takes its random words from `random`. The
/// default (`sr_source{}`, fixed) uses the word each `rounding` carries at every step, so all steps
/// of a sum share one word. `sr_source::philox(seed, stream)` draws a fresh word per step,
/// philox_word(seed, stream, k), with the steps of a sum of n inputs numbered by what they round:
/// the load of x[i] is step i, addition number j (0-based, in evaluation order) is step n + j, the
/// final narrowing is step 2n - 1. The same (seed, stream, inputs, order) gives the same bits on
/// the host and the device.
struct sum_config {
  format_desc input = formats::bf16;
  format_desc accum = formats::f32;
  format_desc output = formats::bf16;
  rounding accum_rounding{};
  rounding output_rounding{};
  convert_options options{};
  sum_order order = sum_order::sequential;
  std::size_t block = 64;
  sr_source random{};
};

/// One recorded step.
enum class step_kind : std::uint8_t { load, add, output };
struct sum_step {
  step_kind kind = step_kind::add;
  std::size_t index = 0;    ///< add: number of the addition (0-based); load: input index
  op_result op;             ///< add: the addition in accum; load/output: op.round is the narrowing
};

struct sum_result {
  std::uint64_t accum_bits = 0;   ///< the sum in the accumulator format
  std::uint64_t bits = 0;         ///< the sum narrowed to the output format
  round_result output;            ///< the final narrowing
  std::size_t additions = 0;
};

namespace detail {

template <class Sink>
TIEBREAK_HDC std::uint64_t load(const sum_config& c, std::uint64_t x, std::size_t i, Sink& sink) noexcept {
  sum_step st;
  st.kind = step_kind::load;
  st.index = i;
  st.op.round = convert(c.accum, c.input, x, c.random.at(c.accum_rounding, i), c.options);
  st.op.a = x;
  sink(st);
  return st.op.round.bits;
}

template <class Sink>
TIEBREAK_HDC std::uint64_t add_step(const sum_config& c, std::size_t inputs, std::uint64_t acc, std::uint64_t x,
                                    std::size_t& n, Sink& sink) noexcept {
  sum_step st;
  st.kind = step_kind::add;
  st.index = n++;
  st.op = add(c.accum, acc, x, c.random.at(c.accum_rounding, inputs + st.index), c.options);
  sink(st);
  return st.op.round.bits;
}

template <class Sink>
TIEBREAK_HDC std::uint64_t sequential(const sum_config& c, std::size_t inputs, const std::uint64_t* xs, std::size_t lo,
                                      std::size_t hi, std::size_t& n, Sink& sink) noexcept {
  std::uint64_t acc = load(c, xs[lo], lo, sink);
  for (std::size_t i = lo + 1; i < hi; ++i) acc = add_step(c, inputs, acc, load(c, xs[i], i, sink), n, sink);
  return acc;
}

template <class Sink>
TIEBREAK_HDC std::uint64_t pairwise(const sum_config& c, std::size_t inputs, const std::uint64_t* xs, std::size_t lo,
                                    std::size_t hi, std::size_t& n, Sink& sink) noexcept {
  if (hi - lo == 1) return load(c, xs[lo], lo, sink);
  const std::size_t mid = lo + (hi - lo) / 2;
  const std::uint64_t l = pairwise(c, inputs, xs, lo, mid, n, sink);
  const std::uint64_t r = pairwise(c, inputs, xs, mid, hi, n, sink);
  return add_step(c, inputs, l, r, n, sink);
}

}  // namespace detail

/// Sums `n` encodings of `cfg.input`. `sink(const sum_step&)` is called for every load, addition and
/// the final narrowing, in evaluation order (pass a no-op to skip recording).
/// Precondition: n >= 1 (an empty sum is +0 in the output format, reported without steps).
template <class Sink>
TIEBREAK_HDC sum_result sum(const sum_config& cfg, const std::uint64_t* xs, std::size_t n, Sink&& sink) noexcept {
  sum_result res;
  std::uint64_t acc;
  std::size_t adds = 0;
  if (n == 0) {
    acc = cfg.accum.pack(false, 0, 0);
  } else if (cfg.order == sum_order::pairwise) {
    acc = detail::pairwise(cfg, n, xs, 0, n, adds, sink);
  } else if (cfg.order == sum_order::blocked && cfg.block > 0 && cfg.block < n) {
    acc = detail::sequential(cfg, n, xs, 0, cfg.block, adds, sink);
    for (std::size_t lo = cfg.block; lo < n; lo += cfg.block) {
      const std::size_t hi = lo + cfg.block < n ? lo + cfg.block : n;
      acc = detail::add_step(cfg, n, acc, detail::sequential(cfg, n, xs, lo, hi, adds, sink), adds, sink);
    }
  } else {
    acc = detail::sequential(cfg, n, xs, 0, n, adds, sink);
  }
  res.accum_bits = acc;
  res.additions = adds;
  // Step 2n - 1 (n >= 1); an empty sum's narrowing of +0 is exact, whatever the word.
  const std::size_t out_step = n == 0 ? 0 : 2 * n - 1;
  res.output = convert(cfg.output, cfg.accum, acc, cfg.random.at(cfg.output_rounding, out_step), cfg.options);
  res.bits = res.output.bits;
  sum_step st;
  st.kind = step_kind::output;
  st.index = 0;
  st.op.round = res.output;
  st.op.a = acc;
  sink(st);
  return res;
}

/// A sink that records nothing.
struct no_steps {
  TIEBREAK_HDC void operator()(const sum_step&) const noexcept {}
};

}  // namespace tiebreak::emu
