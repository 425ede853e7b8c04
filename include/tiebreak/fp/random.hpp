// SPDX-License-Identifier: Apache-2.0
/// @file Reproducible random bits: splitmix64 and the counter-based Philox4x32-10, host and device.
///
/// Two generators, each a pure function of its inputs, identical under g++, nvcc host and nvcc
/// device code and in constant expressions:
///   - splitmix64 (Steele, Lea, Flood 2014): a 64-bit mix, for test generation and seeded samples.
///   - Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3",
///     SC11): a keyed bijection of 128-bit counters, the generator of Random123 and of cuRAND's
///     curandStatePhilox4_32_10_t. Stochastic rounding draws its words from it, one word per
///     (seed, stream, step), so every rounding of every element at every step has fresh bits that
///     any other thread, kernel or host twin can recompute without shared state.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/policy.hpp"

namespace tiebreak {

// ---- splitmix64 ---------------------------------------------------------------------------------

/// The splitmix64 output for state `x`: mix(x + golden gamma). As a counter-based hash,
/// splitmix64(i) for i = 0, 1, 2, ... is the sequence of splitmix64_generator(0).
TIEBREAK_HDC std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The sequential splitmix64 generator: each draw returns splitmix64(state) and advances the state
/// by the golden gamma. A UniformRandomBitGenerator (usable with <random> where needed; the
/// library's own streams never go through std:: distributions, which differ between platforms).
class splitmix64_generator {
 public:
  using result_type = std::uint64_t;
  TIEBREAK_HDC explicit splitmix64_generator(std::uint64_t seed) noexcept : state_(seed) {}
  TIEBREAK_HDC std::uint64_t next() noexcept {
    const std::uint64_t r = splitmix64(state_);
    state_ += 0x9e3779b97f4a7c15ull;
    return r;
  }
  TIEBREAK_HDC std::uint64_t operator()() noexcept { return next(); }
  static TIEBREAK_HDC std::uint64_t min() noexcept { return 0; }
  static TIEBREAK_HDC std::uint64_t max() noexcept { return ~std::uint64_t{0}; }
  TIEBREAK_HDC std::uint64_t state() const noexcept { return state_; }

 private:
  std::uint64_t state_;
};

/// A uniform index below n (n > 0): one draw modulo n, whose bias is below n / 2^64 (2^-32 for
/// n < 2^32). For seeded sampling (token streams, planted positions), not for cryptography.
TIEBREAK_HDC std::uint64_t uniform_below(splitmix64_generator& g, std::uint64_t n) noexcept { return g.next() % n; }

/// A zero-mean, unit-variance draw: four 24-bit uniforms summed (exact in double: 26 significant
/// bits), centred, times √3 (rounded to double once, as the product is). The Irwin–Hall shape of a
/// normal with its tails cut at ±2√3; no libm, so the same values under every compiler and platform
/// (the CLI's attention inputs and the causal experiment's initial weights are drawn with it).
TIEBREAK_HDC double irwin_hall4_unit(splitmix64_generator& g) noexcept {
  double s = 0;
  for (int i = 0; i < 4; ++i) s += static_cast<double>(g.next() >> 40) * 0x1p-24;
  return (s - 2.0) * 1.7320508075688772;  // the sum's variance is 4/12
}

// ---- Philox4x32-10 ------------------------------------------------------------------------------

/// Four 32-bit words: a Philox counter or output block (w[0] is Random123's ctr.v[0], cuRAND's .x).
struct philox_block {
  std::uint32_t w[4] = {0, 0, 0, 0};
  friend TIEBREAK_HDC bool operator==(const philox_block& a, const philox_block& b) noexcept {
    return a.w[0] == b.w[0] && a.w[1] == b.w[1] && a.w[2] == b.w[2] && a.w[3] == b.w[3];
  }
};

namespace detail {
inline constexpr std::uint32_t philox_m0 = 0xD2511F53u, philox_m1 = 0xCD9E8D57u;  // round multipliers
inline constexpr std::uint32_t philox_w0 = 0x9E3779B9u, philox_w1 = 0xBB67AE85u;  // key increments (Weyl)

/// The high 32 bits of the 64-bit product a · b. On the device __umulhi, which ptxas pairs with the
/// low product a · b into one IMAD.WIDE.U32; the shift of a 64-bit product (the host's form, the same
/// value) left one more integer add per product in sm_90a code, 40 per Philox block.
TIEBREAK_HDI std::uint32_t mul_hi32(std::uint32_t a, std::uint32_t b) noexcept {
#if defined(__CUDA_ARCH__)
  if (!std::is_constant_evaluated()) return __umulhi(a, b);
#endif
  return static_cast<std::uint32_t>((std::uint64_t{a} * b) >> 32);
}

/// One round: (hi, lo) = M * x for x = c0 and c2; the high halves are XORed with the other words
/// and the key, the words permuted (Salmon et al. 2011, Fig. 2).
TIEBREAK_HDI philox_block philox_round(const philox_block& c, std::uint32_t k0, std::uint32_t k1) noexcept {
  philox_block r;
  r.w[0] = mul_hi32(philox_m1, c.w[2]) ^ c.w[1] ^ k0;
  r.w[1] = philox_m1 * c.w[2];
  r.w[2] = mul_hi32(philox_m0, c.w[0]) ^ c.w[3] ^ k1;
  r.w[3] = philox_m0 * c.w[0];
  return r;
}
}  // namespace detail

/// Philox4x32-10 of `counter` under the key (k0, k1): ten rounds, the key bumped by the Weyl
/// constants between rounds. Equal to Random123's philox4x32(ctr, key) and to cuRAND's
/// curand_Philox4x32_10(ctr, key) word for word (tests: Random123's known-answer vectors here,
/// cuRAND in tests/gpu/fp/random_gpu_test.cu).
TIEBREAK_HDI philox_block philox4x32_10(philox_block counter, std::uint32_t k0, std::uint32_t k1) noexcept {
  counter = detail::philox_round(counter, k0, k1);
  for (int i = 1; i < 10; ++i) {
    k0 += detail::philox_w0;
    k1 += detail::philox_w1;
    counter = detail::philox_round(counter, k0, k1);
  }
  return counter;
}

/// Philox4x32-10 keyed by a 64-bit seed (key words: low half, high half, as cuRAND's curand_init).
/// `operator()(c0, c1, c2, c3)` returns the four words of counter (c0, c1, c2, c3): use the counter
/// words as coordinates (element, step, ...) and every coordinate tuple gets its own independent
/// block.
struct philox {
  std::uint64_t seed = 0;
  TIEBREAK_HDC philox_block operator()(std::uint32_t c0, std::uint32_t c1 = 0, std::uint32_t c2 = 0,
                                       std::uint32_t c3 = 0) const noexcept {
    return philox4x32_10(philox_block{{c0, c1, c2, c3}}, static_cast<std::uint32_t>(seed),
                         static_cast<std::uint32_t>(seed >> 32));
  }
};

/// Philox4x32-10 with its key schedule computed once: the ten rounds' key words of a 64-bit seed
/// (as `philox`'s), so that a kernel holding them in its launch constants (attn::flash_consts) XORs
/// each round's key in from the constant bank instead of adding the Weyl increments again for every
/// block (18 integer adds per block; docs/attention-bench.md, "The stochastic epilogue's key
/// schedule"). `operator()` equals `philox{seed}` word for word (tests/fp/random_test.cpp).
struct philox_keyed {
  std::uint32_t k0[10] = {}, k1[10] = {};
  static TIEBREAK_HDC philox_keyed of(std::uint64_t seed) noexcept {
    philox_keyed s;
    s.k0[0] = static_cast<std::uint32_t>(seed);
    s.k1[0] = static_cast<std::uint32_t>(seed >> 32);
    for (int i = 1; i < 10; ++i) {
      s.k0[i] = s.k0[i - 1] + detail::philox_w0;  // mod 2^32, as philox4x32_10's bumps
      s.k1[i] = s.k1[i - 1] + detail::philox_w1;
    }
    return s;
  }
  TIEBREAK_HDC philox_block operator()(std::uint32_t c0, std::uint32_t c1 = 0, std::uint32_t c2 = 0,
                                       std::uint32_t c3 = 0) const noexcept {
    philox_block c{{c0, c1, c2, c3}};
    for (int i = 0; i < 10; ++i) c = detail::philox_round(c, k0[i], k1[i]);
    return c;
  }
};

/// Word `step` of stream `stream` under `seed`: the block of counter (step / 4 as 64 bits, stream as
/// 64 bits), word step % 4. This is exactly cuRAND's
///   curandStatePhilox4_32_10_t s; curand_init(seed, stream, step, &s); curand(&s)
/// (subsequence = stream, offset = step), so a kernel may use either and the host twin this.
/// Distinct (stream, step) pairs under one seed give distinct counter words: no two roundings share
/// bits. A stream is a 64-bit coordinate: pick one per element, e.g. its linear index in the
/// output tensor ((batch * heads + head) * rows + row) * cols + col, which is unique by construction.
TIEBREAK_HDC std::uint32_t philox_word(std::uint64_t seed, std::uint64_t stream, std::uint64_t step) noexcept {
  const std::uint64_t block = step >> 2;
  const philox_block r = philox{seed}(static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                                      static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32));
  return r.w[step & 3];
}

/// A reproducible stream of random words for stochastic rounding: word k is
/// philox_word(seed, stream, k).
struct random_stream {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  TIEBREAK_HDC std::uint32_t operator()(std::uint64_t step) const noexcept { return philox_word(seed, stream, step); }
  /// Stochastic rounding with the word of `step`.
  TIEBREAK_HDC sr_t sr(std::uint64_t step) const noexcept { return sr_t{philox_word(seed, stream, step)}; }
};

/// Where stochastic rounding takes its random word. `fixed` (the default): the word the `rounding`
/// carries (sr_t{w}; every step of a multi-step emulator then uses the same w). `per_step`: the
/// word of step k is `stream(k)`, fresh at every step and reproducible from (seed, stream).
/// Deterministic modes ignore it.
struct sr_source {
  bool per_step = false;
  random_stream stream{};
  /// The source of fresh words: step k draws philox_word(seed, stream_id, k).
  static TIEBREAK_HDC sr_source philox(std::uint64_t seed, std::uint64_t stream_id = 0) noexcept {
    return sr_source{true, random_stream{seed, stream_id}};
  }
  /// `r` with its random word replaced by step `step`'s when this source is per_step and r is sr.
  TIEBREAK_HDC rounding at(rounding r, std::uint64_t step) const noexcept {
    if (per_step && r.mode == round_mode::sr) r.random = stream(step);
    return r;
  }
};

}  // namespace tiebreak
