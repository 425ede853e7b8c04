// SPDX-License-Identifier: Apache-2.0
/// @file Random and adversarial MMA tiles, a pure function of (seed, tile, slot): host and device.
///
/// The validation kernel (cuda/mma) and the host tests draw the same tiles from the same counter-
/// based generator, so any mismatch the device reports can be regenerated and replayed on the host.
/// Each tile picks one scenario (mma_scenario) aimed at one part of the datapath.
#pragma once

#include <cstdint>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/random.hpp"

namespace tiebreak::emu {

/// What a generated tile stresses.
enum class mma_scenario : std::uint8_t {
  typical,      ///< exponents within +-3 of 1, random significands (ordinary dot products)
  wide,         ///< exponents over a quarter of the format's range: deep alignment losses
  cancel,       ///< products in cancelling pairs (a[2i+1] ~ -a[2i], a few ulps apart)
  ties,         ///< powers of two and 1.5 * powers of two, C = +-1: exact ties at every rounding
  raw,          ///< any encoding (subnormals, Inf, NaN) at a rate of 1/16, typical otherwise
  subnormal,    ///< exponents at the bottom of the format's range
  big_c,        ///< |C| 2^8 .. 2^30 times the products: C's low bits at the alignment cut
  tiny_c,       ///< |C| far below the products
};
inline constexpr int mma_scenario_count = 8;

/// Which operand a slot belongs to.
enum class mma_operand_kind : std::uint8_t { a, b, c };

namespace detail {

/// A finite encoding of `f` with sign and fraction from `r` and unbiased exponent e (clamped to the
/// normal range; below it a subnormal with random fraction).
TIEBREAK_HDC std::uint64_t mma_gen_finite(const format_desc& f, std::uint64_t r, int e) noexcept {
  const bool sign = (r >> 63) != 0;
  std::uint64_t frac = (r >> 7) & f.frac_mask();
  if (e > f.emax()) e = f.emax();
  if (e < f.emin()) return f.pack(sign, 0, frac == 0 ? 1 : frac);
  if (e == f.emax() && frac > f.max_frac()) frac = f.max_frac();
  return f.pack(sign, static_cast<std::uint64_t>(e + f.bias), frac);
}

/// An exponent uniform in [lo, hi] from r.
TIEBREAK_HDC int mma_gen_exp(std::uint64_t r, int lo, int hi) noexcept {
  return lo + static_cast<int>((r >> 32) % static_cast<std::uint64_t>(hi - lo + 1));
}

}  // namespace detail

/// The scenario of tile `tile`.
TIEBREAK_HDC mma_scenario mma_tile_scenario(std::uint64_t seed, std::uint64_t tile) noexcept {
  return static_cast<mma_scenario>(splitmix64(seed ^ splitmix64(tile * 2 + 1)) % mma_scenario_count);
}

/// Element (row, col) of operand `kind` of tile `tile`: A is m x k, B is k x n, C is m x n.
/// Returns an encoding of the model's a_fmt, b_fmt or c_fmt. Pure function of its arguments.
TIEBREAK_HDC std::uint64_t mma_gen_element(const mma_model& m, std::uint64_t seed, std::uint64_t tile,
                                           mma_operand_kind kind, int row, int col) noexcept {
  const mma_scenario sc = mma_tile_scenario(seed, tile);
  const format_desc f = kind == mma_operand_kind::a ? m.a_fmt : kind == mma_operand_kind::b ? m.b_fmt : m.c_fmt;
  const std::uint64_t slot = (static_cast<std::uint64_t>(kind) << 40) | (static_cast<std::uint64_t>(row) << 20) |
                             static_cast<std::uint64_t>(col);
  const std::uint64_t r = splitmix64(splitmix64(seed + tile * 0x100000001b3ull) ^ slot);
  const std::uint64_t r2 = splitmix64(r);
  const int span = (f.emax() - f.emin()) / 4;
  const bool is_c = kind == mma_operand_kind::c;
  // Products of two inputs near 2^0 are near 2^0: C is drawn on the same scale unless the scenario
  // says otherwise. The inputs of narrow formats stay inside their range.
  switch (sc) {
    case mma_scenario::wide:
      return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, -span, span));
    case mma_scenario::cancel: {
      if (is_c) return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, -6, 2));
      // Pairs along k: element 2i+1 is the negation of element 2i with its low fraction bits redrawn.
      const int k_index = kind == mma_operand_kind::a ? col : row;
      const int other = kind == mma_operand_kind::a ? row : col;
      const std::uint64_t base_slot = (static_cast<std::uint64_t>(kind) << 40) |
                                      (static_cast<std::uint64_t>(kind == mma_operand_kind::a ? other : k_index & ~1) << 20) |
                                      static_cast<std::uint64_t>(kind == mma_operand_kind::a ? (k_index & ~1) : other);
      const std::uint64_t rb = splitmix64(splitmix64(seed + tile * 0x100000001b3ull) ^ base_slot);
      const int e = detail::mma_gen_exp(splitmix64(rb), -2, 2);
      std::uint64_t bits = detail::mma_gen_finite(f, rb, e);
      if ((k_index & 1) != 0) {
        if (kind == mma_operand_kind::a) bits ^= f.sign_mask();  // only A flips: the product flips
        const std::uint64_t low = (r2 >> 5) & 3u;
        bits = (bits & ~(std::uint64_t{3} << f.pad)) | (low << f.pad);
      }
      return bits;
    }
    case mma_scenario::ties: {
      const int j = static_cast<int>((r2 >> 20) % 12);
      const bool sign = (r >> 62) & 1;
      if (is_c) {  // +-1 or +-(1 + one fraction bit)
        const std::uint64_t frac = ((r2 >> 3) & 1) ? std::uint64_t{1} << ((r2 >> 8) % static_cast<std::uint64_t>(f.man_bits)) : 0;
        return f.pack(sign, static_cast<std::uint64_t>(f.bias), frac);
      }
      const int e = -j > f.emin() ? -j : f.emin();
      const std::uint64_t frac = ((r2 >> 1) & 1) ? std::uint64_t{1} << (f.man_bits - 1) : 0;  // 1 or 1.5
      return f.pack(sign, static_cast<std::uint64_t>(e + f.bias), frac);
    }
    case mma_scenario::raw:
      if ((r2 & 15) == 0) return r & f.encoding_mask() & ~((std::uint64_t{1} << f.pad) - 1);
      return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, -3, 3));
    case mma_scenario::subnormal:
      return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, f.emin() - f.man_bits, f.emin() + 3));
    case mma_scenario::big_c:
      if (is_c) return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, 8, 30));
      return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, -3, 3));
    case mma_scenario::tiny_c:
      if (is_c) return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, -40, -12));
      return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, -3, 3));
    case mma_scenario::typical:
    default:
      return detail::mma_gen_finite(f, r, detail::mma_gen_exp(r2, -3, 3));
  }
}

/// The operands of tile `tile`, row-major: A (m x k), B (k x n) and C (m x n) of model `m`'s shape,
/// as 32-bit encodings (every format of mma_models fits). Element (row, col) of each is
/// mma_gen_element(m, seed, tile, kind, row, col): the tiles the validation kernel draws.
TIEBREAK_HDC void mma_gen_tile(const mma_model& m, std::uint64_t seed, std::uint64_t tile, std::uint32_t* a,
                               std::uint32_t* b, std::uint32_t* c) noexcept {
  for (int i = 0; i < m.m * m.k; ++i)
    a[i] = static_cast<std::uint32_t>(mma_gen_element(m, seed, tile, mma_operand_kind::a, i / m.k, i % m.k));
  for (int i = 0; i < m.k * m.n; ++i)
    b[i] = static_cast<std::uint32_t>(mma_gen_element(m, seed, tile, mma_operand_kind::b, i / m.n, i % m.n));
  for (int i = 0; i < m.m * m.n; ++i)
    c[i] = static_cast<std::uint32_t>(mma_gen_element(m, seed, tile, mma_operand_kind::c, i / m.n, i % m.n));
}

/// GEMM operands for D = A * B + C with K a multiple of m.k, row-major: A (M x K), B (K x N),
/// C (M x N), 32-bit encodings. The chunk of K that one instruction takes is one generated tile
/// (tile number k / m.k), rows and columns past the tile's shape wrap around it; C is tile 0's.
TIEBREAK_HDC void mma_gen_gemm(const mma_model& m, std::uint64_t seed, int M, int N, int K, std::uint32_t* A,
                               std::uint32_t* B, std::uint32_t* C) noexcept {
  using u64 = std::uint64_t;
  for (int r = 0; r < M; ++r)
    for (int i = 0; i < K; ++i)
      A[static_cast<u64>(r) * static_cast<u64>(K) + static_cast<u64>(i)] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, static_cast<u64>(i / m.k), mma_operand_kind::a, r % m.m, i % m.k));
  for (int i = 0; i < K; ++i)
    for (int c = 0; c < N; ++c)
      B[static_cast<u64>(i) * static_cast<u64>(N) + static_cast<u64>(c)] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, static_cast<u64>(i / m.k), mma_operand_kind::b, i % m.k, c % m.n));
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      C[static_cast<u64>(r) * static_cast<u64>(N) + static_cast<u64>(c)] =
          static_cast<std::uint32_t>(mma_gen_element(m, seed, 0, mma_operand_kind::c, r % m.m, c % m.n));
}

}  // namespace tiebreak::emu
