// SPDX-License-Identifier: Apache-2.0
/// @file Inputs whose rows repeat their maximum in each way the forward's repeat count tells apart
/// (attn/flash.hpp: debias counts a row's scores equal to its running maximum per thread, sums them
/// over the quad, and restarts at a new maximum): within a lane, across lanes, in a later tile. Used
/// by the twin's test (tests/host/attn/flash_twin_test.cpp) and the device's
/// (tests/gpu/attn/flash_gpu_test.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "attn_inputs.hpp"
#include "tiebreak/attn/problem.hpp"
#include "tiebreak/fp/random.hpp"

namespace tiebreak::test {

/// Where head h of debias_patterns places its planted key (lane t of a quad holds keys 8 nb + 2 t + e
/// of a 64-key tile):
///   0: once in tile 0, again in tile 2 (a later tile repeats a settled maximum)
///   1: twice in one lane (keys 80, 81 of tile 1)
///   2: once in each of two lanes of tile 0 (keys 3, 12)
///   3: a smaller key twice in tile 0 (keys 1, 40), then the planted one once in tile 1 (a new
///      maximum restarts the count: no repeat)
///   4: once (key 150)
///   5: twice in one lane of tile 0, again in tile 3 (keys 2, 3, 195)
/// Heads 0, 1, 2 and 5 repeat their maximum in every row that sees all keys; 3 and 4 do not.
inline const std::vector<std::vector<std::size_t>> debias_pattern_keys = {{5, 137}, {80, 81}, {3, 12}, {70}, {150}, {2, 3, 195}};
inline constexpr std::size_t debias_pattern_heads = 6, debias_pattern_min_keys = 196;

/// Overwrites q and k of a problem with debias_pattern_heads heads, each its own kv head, and at least
/// debias_pattern_min_keys keys: every query row is (1 + u) in its odd columns and u in its even ones
/// (u uniform in [-1/4, 1/4), from `seed`), so it aligns with the planted key (2 in the odd columns,
/// 0 in the even) far above the other keys (entries of at most 1/4 in magnitude, as the caller made
/// them); head 3's smaller key is 1.5 where the planted one is 2. Every batch alike.
inline void plant_debias_patterns(const attn::shape& s, std::vector<std::uint16_t>& q, std::vector<std::uint16_t>& k,
                                  std::uint64_t seed) {
  if (s.heads != debias_pattern_heads || s.kv_heads != s.heads || s.seq_k < debias_pattern_min_keys)
    throw std::invalid_argument("plant_debias_patterns: 6 heads, each its own kv head, and at least 196 keys");
  splitmix64_generator g{seed};
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < debias_pattern_heads; ++h) {
      for (std::size_t i = 0; i < s.seq_q; ++i)
        for (std::size_t c = 0; c < s.dim; ++c)
          q[s.q_offset(b, h, i) + c] = bf16_of((c % 2 ? 1.0 : 0.0) + 0.25 * uniform_pm1(g));
      auto plant = [&](std::size_t j, double v) {
        for (std::size_t c = 0; c < s.dim; ++c) k[s.k_offset(b, h, j) + c] = bf16_of(c % 2 ? v : 0.0);
      };
      for (std::size_t j : debias_pattern_keys[h]) plant(j, 2.0);
      if (h == 3) {
        plant(1, 1.5);
        plant(40, 1.5);
      }
    }
}

}  // namespace tiebreak::test
