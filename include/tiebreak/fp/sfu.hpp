// SPDX-License-Identifier: Apache-2.0
/// @file The SFU's exponential, `ex2.approx.ftz.f32` (SASS MUFU.EX2) and `ex2.approx.f32`, as a
/// modelled instruction: the rule below, applied to a table of the unit's outputs on [0, 1), and
/// that table on sm_90 as the unit's interpolator computes it.
///
/// What was measured on the H200 (sm_90; tools: cuda/sfu/ex2_probe.cu, docs/attention.md "The SFU's
/// exponential"), over all 2^32 inputs:
///   - the input is turned into sign and magnitude, and the magnitude into fixed point with 23
///     fraction bits by truncation (toward zero): q = trunc(|x| 2^23), I = q >> 23, F = q mod 2^23;
///   - x >= 0 (and every x with F = 0): the result is T[F] 2^(±I), T[F] = ex2(F 2^-23) in [1, 2), the
///     unit's table of 2^23 values (its interpolator's output; 64 segments of 2^17 inputs);
///   - x < 0 with F > 0: T[2^23 - 1 - F] 2^(-I-1): the fraction's ones' complement (not 1 - F), the
///     same table;
///   - results below 2^-126 are +0 (ftz), above the range +Inf; NaN gives the canonical NaN
///     0x7fffffff.
/// `ex2.approx.f32` (no .ftz) is, as nvcc 13 compiles it for sm_90, MUFU.EX2 of x/2 squared by an IEEE
/// multiplication when x < -126 (FSETP.GEU, FMUL 0.5, MUFU.EX2, FMUL): so its subnormal results.
/// The rule takes the table as `table(F)` -> the bits of T[F]. sm_90's T is computed here by the
/// unit's interpolator, recovered from the captured table (ex2_sm90_entry: 64 segments of three
/// integers, a truncated squarer, one floor); it gives all 2^23 entries of the table captured on the
/// H200, which the host library keeps embedded as the independent oracle (tiebreak/host/sfu.hpp,
/// tests/host/fp/sfu_test.cpp).
#pragma once

#include <cstdint>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/f32_math.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::sfu {

inline constexpr int ex2_frac_bits = 23;                              ///< F's bits
inline constexpr std::uint32_t ex2_table_size = 1u << ex2_frac_bits;  ///< T's entries
inline constexpr std::uint32_t ex2_nan = 0x7fffffffu;                 ///< the canonical NaN

/// ex2.approx.ftz.f32 as bits, from the bits of x. `table(F)` returns T[F]'s bits, in
/// [0x3f800000, 0x3fffffff]; in device code its call operator must be __host__ __device__ (nvcc
/// rejects a __device__-only callable in a constexpr __host__ __device__ function), and in a constant
/// expression constexpr (tests/host/fp/sfu_test.cpp has a table of them with a made-up table).
template <class Table>
TIEBREAK_HDI std::uint32_t ex2_approx_ftz_bits(std::uint32_t u, const Table& table) noexcept {
  const std::uint32_t a = u & 0x7fffffffu;
  const bool neg = (u >> 31) != 0;
  if (a > 0x7f800000u) return ex2_nan;
  if (a >= 0x43000000u) return neg ? 0u : 0x7f800000u;  // |x| >= 128 (Inf included): 2^-128 < 2^-126 flushes
  // q = trunc(|x| 2^23) < 2^30, by shifting the significand: |x| = m 2^(e - 150), m < 2^24.
  const int e = static_cast<int>(a >> 23);
  std::uint32_t q = 0;
  if (e != 0) {  // subnormal inputs (|x| < 2^-126): q = 0
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const int sh = e - 127;  // q = m 2^(e - 127) truncated
    q = sh >= 0 ? m << sh : (sh > -24 ? m >> -sh : 0u);
  }
  const int i = static_cast<int>(q >> ex2_frac_bits);
  const std::uint32_t f = q & (ex2_table_size - 1u);
  std::uint32_t t;
  int n;
  if (!neg || f == 0) {
    t = table(f);
    n = neg ? -i : i;
  } else {
    t = table(ex2_table_size - 1u - f);
    n = -i - 1;
  }
  const int be = 127 + n;  // T in [1, 2): biased exponent 127
  if (be >= 255) return 0x7f800000u;
  if (be <= 0) return 0u;
  return (t & 0x7fffffu) | (static_cast<std::uint32_t>(be) << 23);
}

/// ex2.approx.ftz.f32.
template <class Table>
TIEBREAK_HDI float ex2_approx_ftz(float x, const Table& table) noexcept {
  return bits_to_f32(ex2_approx_ftz_bits(f32_to_bits(x), table));
}

/// ex2.approx.f32 (subnormal results kept): below -126, MUFU.EX2 of x 0.5 (exact: x is a normal
/// number there), then y y rounded to nearest-even with subnormals kept. NaN takes MUFU.EX2 directly,
/// as the hardware's test (FSETP.GEU: x >= -126 or unordered) sends it.
template <class Table>
TIEBREAK_FORCEINLINE TIEBREAK_HD float ex2_approx(float x, const Table& table) noexcept {
  if (!(x < -126.0f)) return ex2_approx_ftz(x, table);
  const float y = ex2_approx_ftz(f32::mul_rn(x, 0.5f), table);  // exact: |x| > 126
  return f32::mul_rn(y, y);
}

// --- sm_90's table: the interpolator ------------------------------------------------------------------

inline constexpr std::uint32_t ex2_sm90_segments = 64;  ///< segments of T, indexed by F's top 6 bits
inline constexpr int ex2_sm90_offset_bits = 17;        ///< xl: F's low 17 bits, the offset in a segment

/// One segment's integers: T[F] = 0x3f800000 + floor((c1 xl 2^17 + c2 sq(xl) + c0 2^32 + 3057 2^20) / 2^34).
struct ex2_sm90_coefficients {
  std::uint32_t c1;  ///< linear: 90 852 ... 179 744 (18 bits)
  std::uint32_t c2;  ///< quadratic: 494 ... 980 (10 bits)
  std::uint32_t c0;  ///< constant, in quarters of T's ulp: 3 ... 32 831 540 (25 bits)
};

/// c1 2^35 + c2 2^25 + c0: a segment's coefficients in one word (53 bits).
TIEBREAK_HDC std::uint64_t ex2_sm90_pack(std::uint64_t c1, std::uint64_t c2, std::uint64_t c0) noexcept {
  return c1 << 35 | c2 << 25 | c0;
}

/// Segment s's coefficients packed (ex2_sm90_pack), s < 64 (recovered from the H200's table,
/// 2026-12-05); 0 for s >= 64. A switch, not an array: nvcc reads no namespace-scope constexpr
/// array at run time in device code, and a function's local array is built on each thread's stack
/// (768 bytes as three words a segment, 512 packed; nvcc 13, sm_90). nvcc compiles the switch to a
/// branch tree over immediates (no stack; uniform across a warp whose lanes share a segment), g++ to
/// a lookup table of the packed words (a struct per case would be a jump table: 2x slower on random
/// segments).
TIEBREAK_HDC std::uint64_t ex2_sm90_segment_bits(std::uint32_t s) noexcept {
  switch (s) {
    case 0: return ex2_sm90_pack(90852, 494, 3);
    case 1: return ex2_sm90_pack(91840, 501, 365386);
    case 2: return ex2_sm90_pack(92840, 506, 734750);
    case 3: return ex2_sm90_pack(93852, 511, 1108133);
    case 4: return ex2_sm90_pack(94872, 518, 1485586);
    case 5: return ex2_sm90_pack(95908, 521, 1867145);
    case 6: return ex2_sm90_pack(96952, 527, 2252860);
    case 7: return ex2_sm90_pack(98008, 532, 2642777);
    case 8: return ex2_sm90_pack(99072, 541, 3036940);
    case 9: return ex2_sm90_pack(100152, 546, 3435393);
    case 10: return ex2_sm90_pack(101244, 551, 3838184);
    case 11: return ex2_sm90_pack(102344, 559, 4245365);
    case 12: return ex2_sm90_pack(103460, 564, 4656977);
    case 13: return ex2_sm90_pack(104588, 568, 5073072);
    case 14: return ex2_sm90_pack(105724, 577, 5493699);
    case 15: return ex2_sm90_pack(106876, 583, 5918905);
    case 16: return ex2_sm90_pack(108040, 589, 6348741);
    case 17: return ex2_sm90_pack(109216, 596, 6783258);
    case 18: return ex2_sm90_pack(110408, 600, 7222505);
    case 19: return ex2_sm90_pack(111608, 609, 7666538);
    case 20: return ex2_sm90_pack(112824, 615, 8115404);
    case 21: return ex2_sm90_pack(114052, 622, 8569160);
    case 22: return ex2_sm90_pack(115296, 627, 9027854);
    case 23: return ex2_sm90_pack(116552, 633, 9491545);
    case 24: return ex2_sm90_pack(117820, 641, 9960285);
    case 25: return ex2_sm90_pack(119104, 647, 10434129);
    case 26: return ex2_sm90_pack(120400, 655, 10913133);
    case 27: return ex2_sm90_pack(121712, 661, 11397354);
    case 28: return ex2_sm90_pack(123036, 670, 11886846);
    case 29: return ex2_sm90_pack(124376, 677, 12381669);
    case 30: return ex2_sm90_pack(125728, 686, 12881882);
    case 31: return ex2_sm90_pack(127100, 691, 13387539);
    case 32: return ex2_sm90_pack(128484, 699, 13898703);
    case 33: return ex2_sm90_pack(129884, 705, 14415435);
    case 34: return ex2_sm90_pack(131296, 715, 14937793);
    case 35: return ex2_sm90_pack(132728, 721, 15465837);
    case 36: return ex2_sm90_pack(134172, 730, 15999633);
    case 37: return ex2_sm90_pack(135632, 739, 16539242);
    case 38: return ex2_sm90_pack(137108, 748, 17084727);
    case 39: return ex2_sm90_pack(138604, 753, 17636150);
    case 40: return ex2_sm90_pack(140112, 763, 18193579);
    case 41: return ex2_sm90_pack(141636, 773, 18757078);
    case 42: return ex2_sm90_pack(143180, 779, 19326714);
    case 43: return ex2_sm90_pack(144740, 787, 19902551);
    case 44: return ex2_sm90_pack(146316, 796, 20484659);
    case 45: return ex2_sm90_pack(147908, 806, 21073106);
    case 46: return ex2_sm90_pack(149520, 813, 21667961);
    case 47: return ex2_sm90_pack(151148, 822, 22269293);
    case 48: return ex2_sm90_pack(152792, 833, 22877175);
    case 49: return ex2_sm90_pack(154456, 842, 23491674);
    case 50: return ex2_sm90_pack(156140, 849, 24112865);
    case 51: return ex2_sm90_pack(157840, 858, 24740822);
    case 52: return ex2_sm90_pack(159556, 870, 25375616);
    case 53: return ex2_sm90_pack(161296, 877, 26017322);
    case 54: return ex2_sm90_pack(163052, 887, 26666015);
    case 55: return ex2_sm90_pack(164828, 896, 27321773);
    case 56: return ex2_sm90_pack(166620, 909, 27984672);
    case 57: return ex2_sm90_pack(168436, 917, 28654788);
    case 58: return ex2_sm90_pack(170272, 925, 29332202);
    case 59: return ex2_sm90_pack(172124, 938, 30016992);
    case 60: return ex2_sm90_pack(174000, 946, 30709240);
    case 61: return ex2_sm90_pack(175892, 959, 31409026);
    case 62: return ex2_sm90_pack(177808, 969, 32116431);
    case 63: return ex2_sm90_pack(179744, 980, 32831540);
    default: return 0;
  }
}

/// Segment s's coefficients, s < 64.
TIEBREAK_HDI ex2_sm90_coefficients ex2_sm90_segment(std::uint32_t s) noexcept {
  const std::uint64_t k = ex2_sm90_segment_bits(s);
  return {static_cast<std::uint32_t>(k >> 35), static_cast<std::uint32_t>(k >> 25) & 0x3ffu,
          static_cast<std::uint32_t>(k) & 0x1ffffffu};
}

/// The unit's squarer: xl^2 (xl < 2^17) keeping only the partial-product bits at 2^19 and above: of
/// the squares b_i 2^(2i) those with i >= 10, of the pair products b_i b_j 2^(i+j+1) (i < j) those
/// with i + j >= 18. Exact, no branch. With xl = A 2^9 + B (A the bits 9..16, B the bits 0..8):
///   terms                        columns     kept
///   pairs within A               >= 20       all
///   squares of A                 >= 18       all but b_9's, 2^18
///   pairs and squares within B   <= 16       none
///   b_i of B with b_j of A       i + j + 1   j >= 18 - i (none for i = 0, 1): for i in 2..8,
///                                            b_i 2^(i+1) (xl without its bits below 18 - i)
///                                            = b_i 2^19 (A >> (9 - i))
/// so sq = 2^18 (A^2 - b_9 + 2 sum_{i=2..8} b_i (A >> (9 - i))), A^2 2^18 being A's pairs and squares.
/// tests/host/fp/sfu_test.cpp checks it against the partial products one by one on all 2^17 xl.
TIEBREAK_HDI std::uint64_t ex2_sm90_square(std::uint32_t xl) noexcept {
  const std::uint32_t a = (xl >> 9) & 0xffu;
  std::uint32_t cross = 0;
  for (int i = 2; i <= 8; ++i) cross += (a >> (9 - i)) & (0u - ((xl >> i) & 1u));  // masked by b_i
  return static_cast<std::uint64_t>(a * a - (a & 1u) + 2u * cross) << 18;
}

/// T[F] of sm_90 (F < 2^23; higher bits ignored), bit for bit: segment s = F >> 17, xl = F mod 2^17,
///   T[F] = 0x3f800000 + floor((c1 xl 2^17 + c2 sq(xl) + c0 2^32 + 3057 2^20) / 2^34)
/// with ex2_sm90_segment(s) and ex2_sm90_square (in 64 bits: the sum stays below 2^58). Equal to the
/// table captured on the H200 on all 2^23 entries (sfu_table.InterpolatorGivesEveryEntry), and so to
/// the unit on all 2^32 inputs through the rule (tests/gpu/fp/sfu_gpu_test.cu).
TIEBREAK_HDI std::uint32_t ex2_sm90_entry(std::uint32_t f) noexcept {
  const ex2_sm90_coefficients g = ex2_sm90_segment((f >> ex2_sm90_offset_bits) & (ex2_sm90_segments - 1u));
  const std::uint32_t xl = f & ((1u << ex2_sm90_offset_bits) - 1u);
  const std::uint64_t z = (std::uint64_t{g.c1} * xl << 17) + g.c2 * ex2_sm90_square(xl) +
                          (std::uint64_t{g.c0} << 32) + (std::uint64_t{3057} << 20);
  return 0x3f800000u + static_cast<std::uint32_t>(z >> 34);
}

/// sm_90's table as the rule's `table(F)`: ex2_sm90_entry (no data; host, device, constant expressions).
struct ex2_sm90_interpolator {
  TIEBREAK_HDI std::uint32_t operator()(std::uint32_t f) const noexcept { return ex2_sm90_entry(f); }
};

/// ex2.approx.ftz.f32 of sm_90, bit for bit (the rule with ex2_sm90_interpolator).
TIEBREAK_HDI float ex2_approx_ftz_sm90(float x) noexcept { return ex2_approx_ftz(x, ex2_sm90_interpolator{}); }

/// ex2.approx.f32 of sm_90 (subnormal results kept), bit for bit.
TIEBREAK_FORCEINLINE TIEBREAK_HD float ex2_approx_sm90(float x) noexcept {
  return ex2_approx(x, ex2_sm90_interpolator{});
}

}  // namespace tiebreak::sfu
