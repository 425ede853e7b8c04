// SPDX-License-Identifier: Apache-2.0
/// @file Instrumentation of attention kernels: POD event records, the empty probe, per-head counters.
///
/// A kernel (and its host twin) takes a `Probe` template parameter and calls its hooks where the
/// tie-breaking bias of flash attention (docs/audit.md) can be observed: rows with a repeated score
/// maximum, P-bar == 1, the signed rounding error of O, the error of delta = rowsum(dO * O). With
/// `no_probe` every hook is an empty inline function and `enabled` is false, so the uninstrumented
/// kernel is the instrumented source with the instrumentation compiled away (house style,
/// principle 5). Events are plain structs of fixed-width fields: the same bytes on host and device.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "tiebreak/fp/config.hpp"

namespace tiebreak::probe {

/// Where a row of one attention problem lives. `row` is the query index.
struct row_coord {
  std::uint32_t batch = 0;
  std::uint32_t head = 0;
  std::uint32_t row = 0;
};

/// A row (or, in a tiled kernel, one key tile of a row: `tile`) whose score maximum repeats.
/// `exact` counts the scores equal to the maximum, `near` those within `tolerance` of it (so
/// near >= exact >= 1). A kernel reports a row when near > 1; the paper's remedy triggers on
/// exact repeats, its code on repeats within 1e-3.
struct repeated_max_event {
  row_coord at;
  std::uint32_t tile = 0;
  float max = 0;        ///< the row (tile) maximum, in the kernel's score precision
  float tolerance = 0;  ///< absolute tolerance of `near`
  std::uint32_t exact = 1;
  std::uint32_t near = 1;
};

/// An unnormalised probability P-bar = exp(s - m) that came out exactly 1 (key `col` of the row):
/// its product with V is then an exact low-precision value, the start of the tie mechanism.
struct p_one_event {
  row_coord at;
  std::uint32_t col = 0;
};

/// The rounding of one output element O[row, col] from its f32 accumulator to the output format:
/// `error_ulps` = (rounded - accumulator) / ulp of the output format at the rounded value, signed
/// (+ = the rounded value is larger). Exact in a float for outputs of 8 to 11 significant bits.
/// `error_units`: for a bf16 output, the same error as the integer error_ulps · 2^17 (exact: the error
/// of a bf16 rounding of an f32 is a multiple of 2^-17 ulp of at most one ulp), so that a probe can sum
/// it exactly in integers; 0 for an f32 output (error 0).
struct output_error_event {
  row_coord at;
  std::uint32_t col = 0;
  float error_ulps = 0;
  std::int32_t error_units = 0;
};

/// delta[row] = rowsum(dO * O) of the backward pass, computed from the low-precision O (`delta`)
/// and from the f32 O before rounding (`delta_f32_o`), both as the kernel computed them.
struct delta_error_event {
  row_coord at;
  float delta = 0;
  float delta_f32_o = 0;
  /// delta - delta_f32_o, rounded once to double (exact when the two exponents differ by at most 29).
  TIEBREAK_HDC double error() const noexcept {
    return static_cast<double>(delta) - static_cast<double>(delta_f32_o);
  }
};

/// The probe that observes nothing: hooks are empty, `enabled` lets a kernel skip computing what
/// only a probe would read (`if constexpr (Probe::enabled)`). An empty type: it costs no registers
/// and no parameter space.
struct no_probe {
  static constexpr bool enabled = false;
  TIEBREAK_HDC void on_repeated_max(const repeated_max_event&) const noexcept {}
  TIEBREAK_HDC void on_p_one(const p_one_event&) const noexcept {}
  TIEBREAK_HDC void on_output_error(const output_error_event&) const noexcept {}
  TIEBREAK_HDC void on_delta_error(const delta_error_event&) const noexcept {}
};

/// What a kernel may call on its `Probe`.
template <class P>
concept probe_type = requires(P& p, const repeated_max_event& a, const p_one_event& b, const output_error_event& c,
                              const delta_error_event& d) {
  { P::enabled } -> std::convertible_to<bool>;
  p.on_repeated_max(a);
  p.on_p_one(b);
  p.on_output_error(c);
  p.on_delta_error(d);
};

/// Count, sum and sum of squares of a signed quantity, with the counts of each sign.
struct signed_moments {
  std::uint64_t count = 0;
  std::uint64_t positive = 0;
  std::uint64_t negative = 0;
  double sum = 0;
  double sum_sq = 0;
  TIEBREAK_HDC void add(double x) noexcept {
    ++count;
    positive += x > 0 ? 1 : 0;
    negative += x < 0 ? 1 : 0;
    sum += x;
    sum_sq += x * x;
  }
  /// Adds another set of moments. Counts merge exactly and associatively; the double sums do when
  /// they are exact (e.g. dyadic errors of bounded width), otherwise up to their rounding.
  TIEBREAK_HDC void merge(const signed_moments& o) noexcept {
    count += o.count;
    positive += o.positive;
    negative += o.negative;
    sum += o.sum;
    sum_sq += o.sum_sq;
  }
  friend constexpr bool operator==(const signed_moments&, const signed_moments&) = default;
};

/// Counters of one (batch, head): what the paper's evidence is reduced to per head.
struct head_counters {
  std::uint64_t repeated_max_exact = 0;  ///< rows (tiles) whose maximum repeats exactly (exact > 1)
  std::uint64_t repeated_max_near = 0;   ///< rows (tiles) whose maximum repeats within the tolerance (near > 1)
  std::uint64_t p_one = 0;               ///< P-bar == 1 events
  signed_moments output_error;           ///< output_error_event::error_ulps
  signed_moments delta_error;            ///< delta_error_event::error()
  TIEBREAK_HDC void merge(const head_counters& o) noexcept {
    repeated_max_exact += o.repeated_max_exact;
    repeated_max_near += o.repeated_max_near;
    p_one += o.p_one;
    output_error.merge(o.output_error);
    delta_error.merge(o.delta_error);
  }
  friend constexpr bool operator==(const head_counters&, const head_counters&) = default;
};

/// A probe that accumulates every event into the counters of its (batch, head): `table` holds
/// batches * heads entries, (b, h) at b * heads + h. Plain (non-atomic) updates: for one thread
/// on the host, or one table per thread merged afterwards with head_counters::merge.
/// Precondition: every event's batch < batches and head < heads.
struct counting_probe {
  static constexpr bool enabled = true;
  head_counters* table = nullptr;
  std::uint32_t heads = 1;
  TIEBREAK_HDC head_counters& at(const row_coord& c) const noexcept {
    return table[static_cast<std::uint64_t>(c.batch) * heads + c.head];
  }
  TIEBREAK_HDC void on_repeated_max(const repeated_max_event& e) const noexcept {
    head_counters& h = at(e.at);
    h.repeated_max_exact += e.exact > 1 ? 1 : 0;
    h.repeated_max_near += e.near > 1 ? 1 : 0;
  }
  TIEBREAK_HDC void on_p_one(const p_one_event& e) const noexcept { ++at(e.at).p_one; }
  TIEBREAK_HDC void on_output_error(const output_error_event& e) const noexcept {
    at(e.at).output_error.add(static_cast<double>(e.error_ulps));
  }
  TIEBREAK_HDC void on_delta_error(const delta_error_event& e) const noexcept { at(e.at).delta_error.add(e.error()); }
};

static_assert(std::is_empty_v<no_probe>);
static_assert(probe_type<no_probe> && probe_type<counting_probe>);
static_assert(std::is_trivially_copyable_v<repeated_max_event> && std::is_trivially_copyable_v<p_one_event> &&
              std::is_trivially_copyable_v<output_error_event> && std::is_trivially_copyable_v<delta_error_event> &&
              std::is_trivially_copyable_v<head_counters>);

}  // namespace tiebreak::probe
