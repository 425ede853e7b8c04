// SPDX-License-Identifier: Apache-2.0
/// @file Probe events: the empty probe is empty and does nothing; a counting probe fed a table of
/// events gives the counters worked out by hand; merging partial counters is associative.
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <variant>
#include <vector>

#include "tiebreak/probe/probe.hpp"

namespace tiebreak::probe {
namespace {

static_assert(std::is_empty_v<no_probe>);
static_assert(!no_probe::enabled && counting_probe::enabled);
static_assert(std::is_trivially_copyable_v<head_counters> && std::is_standard_layout_v<head_counters>);

/// A kernel-shaped user of a probe: what it computes for the probe is skipped when disabled.
template <probe_type Probe>
constexpr int instrumented_step(Probe& p, int& work) {
  if constexpr (Probe::enabled) {
    ++work;
    p.on_p_one(p_one_event{{0, 0, 0}, 3});
  }
  return 42;
}

constexpr bool empty_probe_compiles_away() {
  no_probe p;
  int work = 0;
  const int r = instrumented_step(p, work);
  p.on_repeated_max(repeated_max_event{});
  p.on_output_error(output_error_event{});
  p.on_delta_error(delta_error_event{});
  return r == 42 && work == 0;
}
static_assert(empty_probe_compiles_away());

using event = std::variant<repeated_max_event, p_one_event, output_error_event, delta_error_event>;

// Two batches, two heads. Errors are dyadic (k * 2^-4 ulps, deltas k * 2^-8): every sum below is
// exact in double, so the counters are compared exactly.
const std::vector<event> table = {
    repeated_max_event{{0, 0, 5}, 0, 3.0f, 1e-3f, 2, 2},   // exact repeat
    repeated_max_event{{0, 0, 6}, 1, 3.0f, 1e-3f, 1, 3},   // near repeat only
    repeated_max_event{{0, 1, 0}, 0, -1.0f, 1e-3f, 4, 4},  // exact repeat, head 1
    repeated_max_event{{1, 0, 2}, 0, 2.0f, 1e-3f, 1, 1},   // no repeat: counts nothing
    p_one_event{{0, 0, 5}, 7},
    p_one_event{{0, 0, 5}, 9},
    p_one_event{{1, 1, 3}, 0},
    output_error_event{{0, 0, 5}, 0, 0.5f},
    output_error_event{{0, 0, 5}, 1, 0.25f},
    output_error_event{{0, 0, 6}, 0, -0.0625f},
    output_error_event{{0, 0, 6}, 1, 0.0f},
    output_error_event{{1, 1, 0}, 0, -0.5f},
    delta_error_event{{0, 0, 5}, 1.00390625f, 1.0f},   // +2^-8
    delta_error_event{{0, 0, 6}, 0.5f, 0.5078125f},     // -2^-7
    delta_error_event{{1, 0, 1}, -2.0f, -2.0f},         // 0
};

head_counters count(std::size_t lo, std::size_t hi) {
  std::vector<head_counters> t(4);
  counting_probe p{t.data(), 2};
  for (std::size_t i = lo; i < hi; ++i) {
    std::visit(
        [&](const auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, repeated_max_event>) p.on_repeated_max(e);
          else if constexpr (std::is_same_v<E, p_one_event>) p.on_p_one(e);
          else if constexpr (std::is_same_v<E, output_error_event>) p.on_output_error(e);
          else p.on_delta_error(e);
        },
        table[i]);
  }
  // Fold the per-head table into one record per call, after checking the per-head split below.
  head_counters all;
  for (const head_counters& h : t) all.merge(h);
  return all;
}

TEST(probe, counting_probe_counts_a_table_of_events_per_head) {
  std::vector<head_counters> t(4);
  counting_probe p{t.data(), 2};
  for (const event& ev : table) {
    std::visit(
        [&](const auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, repeated_max_event>) p.on_repeated_max(e);
          else if constexpr (std::is_same_v<E, p_one_event>) p.on_p_one(e);
          else if constexpr (std::is_same_v<E, output_error_event>) p.on_output_error(e);
          else p.on_delta_error(e);
        },
        ev);
  }
  const head_counters& b0h0 = t[0];
  EXPECT_EQ(b0h0.repeated_max_exact, 1u);
  EXPECT_EQ(b0h0.repeated_max_near, 2u);
  EXPECT_EQ(b0h0.p_one, 2u);
  EXPECT_EQ(b0h0.output_error.count, 4u);
  EXPECT_EQ(b0h0.output_error.positive, 2u);
  EXPECT_EQ(b0h0.output_error.negative, 1u);
  EXPECT_EQ(b0h0.output_error.sum, 0.6875);                       // 0.5 + 0.25 - 0.0625
  EXPECT_EQ(b0h0.output_error.sum_sq, 0.25 + 0.0625 + 0.00390625);
  EXPECT_EQ(b0h0.delta_error.count, 2u);
  EXPECT_EQ(b0h0.delta_error.positive, 1u);
  EXPECT_EQ(b0h0.delta_error.negative, 1u);
  EXPECT_EQ(b0h0.delta_error.sum, 0.00390625 - 0.0078125);
  const head_counters& b0h1 = t[1];
  EXPECT_EQ(b0h1.repeated_max_exact, 1u);
  EXPECT_EQ(b0h1.repeated_max_near, 1u);
  EXPECT_EQ(b0h1.p_one, 0u);
  const head_counters& b1h0 = t[2];
  EXPECT_EQ(b1h0.repeated_max_exact + b1h0.repeated_max_near + b1h0.p_one, 0u);
  EXPECT_EQ(b1h0.delta_error.count, 1u);  // an error of 0: counted, neither sign
  EXPECT_EQ(b1h0.delta_error.positive + b1h0.delta_error.negative, 0u);
  const head_counters& b1h1 = t[3];
  EXPECT_EQ(b1h1.p_one, 1u);
  EXPECT_EQ(b1h1.output_error.count, 1u);
  EXPECT_EQ(b1h1.output_error.negative, 1u);
  EXPECT_EQ(b1h1.output_error.sum, -0.5);
}

TEST(probe, merge_of_partial_counters_is_associative_and_equals_one_pass) {
  const std::size_t n = table.size();
  const head_counters whole = count(0, n);
  for (std::size_t i = 0; i <= n; ++i) {
    for (std::size_t j = i; j <= n; ++j) {
      const head_counters a = count(0, i), b = count(i, j), c = count(j, n);
      head_counters left = a;  // (a + b) + c
      left.merge(b);
      left.merge(c);
      head_counters bc = b;  // a + (b + c)
      bc.merge(c);
      head_counters right = a;
      right.merge(bc);
      ASSERT_EQ(left, right) << i << " " << j;
      ASSERT_EQ(left, whole) << i << " " << j;
    }
  }
  EXPECT_EQ(whole.p_one, 3u);
  EXPECT_EQ(whole.output_error.count, 5u);
  EXPECT_EQ(whole.repeated_max_exact, 2u);
  EXPECT_EQ(whole.repeated_max_near, 3u);
  head_counters zero;
  head_counters w = whole;
  w.merge(zero);
  EXPECT_EQ(w, whole);  // the empty record is the identity
}

}  // namespace
}  // namespace tiebreak::probe
