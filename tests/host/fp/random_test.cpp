// SPDX-License-Identifier: Apache-2.0
/// @file splitmix64 and Philox4x32-10: published known answers, the cuRAND (seed, subsequence,
/// offset) mapping replayed step by step, and the per-step stochastic-rounding source.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>

#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"

namespace tiebreak {
namespace {

// Random123 1.14, tests/kat_vectors, the three "philox4x32 10" lines (columns: counter w[0..3],
// key k0 k1, expected w[0..3]); the same lines are quoted by several independent ports:
//   philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd
//   philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1
// (the last: the hexadecimal digits of pi as counter and key).
struct philox_kat {
  philox_block counter;
  std::uint32_t k0, k1;
  philox_block expected;
};
constexpr philox_kat random123_kats[] = {
    {{{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}}, 0x00000000u, 0x00000000u,
     {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
    {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
     {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
    {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
     {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
};
static_assert(philox4x32_10(random123_kats[0].counter, random123_kats[0].k0, random123_kats[0].k1) ==
              random123_kats[0].expected);
static_assert(philox4x32_10(random123_kats[1].counter, random123_kats[1].k0, random123_kats[1].k1) ==
              random123_kats[1].expected);
static_assert(philox4x32_10(random123_kats[2].counter, random123_kats[2].k0, random123_kats[2].k1) ==
              random123_kats[2].expected);
// The seeded form: key words are (low, high) halves of the seed.
static_assert(philox{0x299f31d0a4093822ull}(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u) ==
              random123_kats[2].expected);
static_assert(philox{~0ull}(~0u, ~0u, ~0u, ~0u) == random123_kats[1].expected);
// The precomputed key schedule: the same blocks (Random123's vectors).
static_assert(philox_keyed::of(0x299f31d0a4093822ull)(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u) ==
              random123_kats[2].expected);
static_assert(philox_keyed::of(~0ull)(~0u, ~0u, ~0u, ~0u) == random123_kats[1].expected);
static_assert(philox_keyed::of(0)(0) == random123_kats[0].expected);
// philox_word: stream 0, steps 0..3 are the four words of counter 0.
static_assert(philox_word(0, 0, 0) == 0x6627e8d5u && philox_word(0, 0, 3) == 0x9b00dbd8u);

// splitmix64 seeded with 0: the first outputs of Vigna's reference splitmix64.c.
static_assert(splitmix64(0) == 0xe220a8397b1dcdafull);
static_assert(splitmix64(0x9e3779b97f4a7c15ull) == 0x6e789e6aa1b965f4ull);
static_assert(splitmix64(2 * 0x9e3779b97f4a7c15ull) == 0x06c45d188009454full);

TEST(random, philox_known_answers) {
  for (const philox_kat& k : random123_kats) {
    const philox_block r = philox4x32_10(k.counter, k.k0, k.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.w[i], k.expected.w[i]) << i;
  }
}

TEST(random, philox_keyed_equals_philox_for_every_seed_and_counter_drawn) {
  // Seeds and counters from splitmix64, the key words' carries included (seeds near 2^32 - 1 in
  // either half wrap when the Weyl increments are added).
  splitmix64_generator g{2026};
  const std::uint64_t edge_seeds[] = {0, ~0ull, 0xffffffffull, 0xffffffff00000000ull, 0x61c88647ffffffffull};
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t seed = i < 5 ? edge_seeds[i] : g.next();
    const philox_keyed keyed = philox_keyed::of(seed);
    const philox ref{seed};
    for (int j = 0; j < 4; ++j) {
      const std::uint64_t x = g.next(), y = g.next();
      const auto c0 = static_cast<std::uint32_t>(x), c1 = static_cast<std::uint32_t>(x >> 32),
                 c2 = static_cast<std::uint32_t>(y), c3 = static_cast<std::uint32_t>(y >> 32);
      ASSERT_EQ(keyed(c0, c1, c2, c3), ref(c0, c1, c2, c3)) << std::hex << seed << " " << x << " " << y;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 80000);
}

TEST(random, splitmix64_generator_is_the_hash_of_successive_states) {
  splitmix64_generator g(12345);
  for (std::uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(g.next(), splitmix64(12345 + i * 0x9e3779b97f4a7c15ull)) << i;
  }
  EXPECT_EQ(g.state(), 12345 + 1000 * 0x9e3779b97f4a7c15ull);
  splitmix64_generator a(7), b(7);
  EXPECT_EQ(a(), b.next());
  EXPECT_EQ(splitmix64_generator::max(), ~std::uint64_t{0});
}

/// cuRAND's Philox state machine as its header writes it (curand_init = skipahead_sequence then
/// skipahead; curand returns output[STATE++] and moves to the next counter after the fourth word),
/// replayed with integer steps: checks philox_word's formula against the documented semantics,
/// independently of that formula. (The GPU test compares with cuRAND itself.)
struct curand_philox_model {
  philox_block ctr, output;
  std::uint32_t k0, k1;
  unsigned state = 0;
  void incr(std::uint64_t n) {  // Philox_State_Incr(s, n): 128-bit add of n
    const auto nlo = static_cast<std::uint32_t>(n);
    auto nhi = static_cast<std::uint32_t>(n >> 32);
    ctr.w[0] += nlo;
    if (ctr.w[0] < nlo) ++nhi;
    ctr.w[1] += nhi;
    if (nhi <= ctr.w[1]) return;
    if (++ctr.w[2] != 0) return;
    ++ctr.w[3];
  }
  curand_philox_model(std::uint64_t seed, std::uint64_t subsequence, std::uint64_t offset)
      : k0(static_cast<std::uint32_t>(seed)), k1(static_cast<std::uint32_t>(seed >> 32)) {
    // skipahead_sequence: 64-bit add into (w2, w3)
    const auto slo = static_cast<std::uint32_t>(subsequence);
    auto shi = static_cast<std::uint32_t>(subsequence >> 32);
    ctr.w[2] += slo;
    if (ctr.w[2] < slo) ++shi;
    ctr.w[3] += shi;
    // skipahead(offset)
    state += offset & 3;
    std::uint64_t n = offset / 4;
    if (state > 3) {
      n += 1;
      state -= 4;
    }
    incr(n);
    output = philox4x32_10(ctr, k0, k1);
  }
  std::uint32_t next() {
    const std::uint32_t r = output.w[state++];
    if (state == 4) {
      incr(1);
      output = philox4x32_10(ctr, k0, k1);
      state = 0;
    }
    return r;
  }
};

TEST(random, philox_word_is_curand_init_seed_stream_step_then_curand) {
  splitmix64_generator g(2026);
  const std::uint64_t edges[] = {0, 1, 3, 4, 5, (std::uint64_t{1} << 34) - 1, std::uint64_t{1} << 34,
                                 ~std::uint64_t{0} - 8};
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t seed = g(), stream = i % 3 == 0 ? (i % 2) : g();
    const std::uint64_t step = i < 8 ? edges[i] : g() >> (i % 60);
    curand_philox_model m(seed, stream, step);
    for (std::uint64_t k = 0; k < 9 && step + k >= step; ++k) {
      ASSERT_EQ(philox_word(seed, stream, step + k), m.next()) << seed << " " << stream << " " << step + k;
    }
  }
}

TEST(random, distinct_streams_and_steps_get_distinct_words) {
  // 64 streams x 256 steps = 16384 words; all distinct would be expected with probability
  // exp(-16384^2 / 2^33) = 0.969: require at most 2 repeats instead (false-failure rate < 1e-4,
  // Poisson with mean 0.031), and that neighbouring steps and streams differ.
  std::set<std::uint32_t> seen;
  std::size_t repeats = 0;
  for (std::uint64_t s = 0; s < 64; ++s) {
    for (std::uint64_t k = 0; k < 256; ++k) {
      if (!seen.insert(philox_word(42, s, k)).second) ++repeats;
    }
  }
  EXPECT_LE(repeats, 2u);
  EXPECT_NE(philox_word(42, 0, 0), philox_word(42, 0, 1));
  EXPECT_NE(philox_word(42, 0, 0), philox_word(42, 1, 0));
  EXPECT_NE(philox_word(42, 0, 0), philox_word(43, 0, 0));
  EXPECT_EQ(philox_word(42, 5, 77), (random_stream{42, 5}(77)));
}

TEST(random, sr_source_replaces_the_word_of_sr_only) {
  const sr_source fixed{};
  EXPECT_EQ(fixed.at(sr_t{123}, 9).random, 123u);
  const sr_source fresh = sr_source::philox(7, 3);
  EXPECT_EQ(fresh.at(sr_t{123}, 9).random, philox_word(7, 3, 9));
  EXPECT_EQ(fresh.at(sr_t{123}, 9).mode, round_mode::sr);
  const rounding rz = fresh.at(rz_t{}, 9);
  EXPECT_EQ(rz.mode, round_mode::rz);
  EXPECT_EQ(rz.random, 0u);
  // The stream's sr_t rounds like any sr_t with that word.
  const round_result a = f32_bits_to(formats::bf16, 0x3f808000u, random_stream{7, 3}.sr(9));
  const round_result b = f32_bits_to(formats::bf16, 0x3f808000u, sr_t{philox_word(7, 3, 9)});
  EXPECT_EQ(a.bits, b.bits);
}

// irwin_hall4_unit against an integer oracle: the four 24-bit draws summed as integers (exact), then
// scaled, centred and multiplied by √3 in double. Also in constant expressions.
double irwin_hall4_oracle(splitmix64_generator& g) {
  std::uint64_t s = 0;
  for (int i = 0; i < 4; ++i) s += g.next() >> 40;
  return (static_cast<double>(s) * 0x1p-24 - 2.0) * 1.7320508075688772;
}
constexpr double first_irwin_hall4(std::uint64_t seed) {
  splitmix64_generator g(seed);
  return irwin_hall4_unit(g);
}
static_assert(first_irwin_hall4(1) >= -3.4641016151377544 && first_irwin_hall4(1) <= 3.4641016151377544);

TEST(random, irwin_hall4_unit_matches_an_integer_oracle_and_has_unit_moments) {
  splitmix64_generator g(2026), o(2026);
  constexpr int n = 1 << 16;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double x = irwin_hall4_unit(g);
    ASSERT_EQ(x, irwin_hall4_oracle(o)) << i;
    ASSERT_LE(std::abs(x), 2 * 1.7320508075688772) << i;
    sum += x;
    sum_sq += x * x;
  }
  EXPECT_EQ(g.state(), o.state());  // four draws per value
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_LT(std::abs(mean), 4.0 / std::sqrt(double{n}));  // 4 sigma of the sample mean
  EXPECT_NEAR(var, 1.0, 0.03);  // the sample variance's sd is about sqrt(0.8 / n) = 0.0035
  splitmix64_generator h(1);
  EXPECT_EQ(irwin_hall4_unit(h), first_irwin_hall4(1));
}

TEST(random, uniform_below_stays_below_and_reaches_every_value) {
  splitmix64_generator g(7);
  int hits[7] = {};
  for (int i = 0; i < 7000; ++i) {
    const std::uint64_t v = uniform_below(g, 7);
    ASSERT_LT(v, 7u);
    ++hits[v];
  }
  for (int v = 0; v < 7; ++v) {  // expected 1000 each, sd about 29
    EXPECT_GT(hits[v], 850) << v;
    EXPECT_LT(hits[v], 1150) << v;
  }
  splitmix64_generator a(3), b(3);
  EXPECT_EQ(uniform_below(a, 1), 0u);
  EXPECT_EQ(uniform_below(b, 1000003), splitmix64(3) % 1000003);  // the first draw of seed 3 is splitmix64(3)
}

}  // namespace
}  // namespace tiebreak
