// SPDX-License-Identifier: Apache-2.0
/// @file audit-gemm: the exact GEMM reference (fixed-point slices), statistics, scheme identification.
#include <tiebreak/audit/gemm.hpp>

#include "reference/parallel.hpp"

#include <tiebreak/emu/ops.hpp>
#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>
#include <tiebreak/host/emu_gemm.hpp>
#include <tiebreak/io/json.hpp>

#include <boost/multiprecision/cpp_int.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <set>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tiebreak::audit {
using emu::same_format;
namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr int slice_bits = 20;                       ///< W: bits per fixed-point slice
constexpr std::size_t k_chunk = std::size_t{1} << 13; ///< K·(2^20)^2 <= 2^53: f64 lanes stay exact
constexpr std::size_t nr = 8;                         ///< columns per packed B panel
constexpr std::size_t mr = 4;                         ///< rows per micro-kernel
constexpr std::size_t row_block = 64;                 ///< rows per task
constexpr std::size_t kc = 256;                       ///< K per cache block

using emu::detail::mma_operand;

/// Bits of |v| = sig·2^e in slice s below `top` (|v| < 2^top): an integer < 2^W, weight 2^(top - W(s+1)).
inline std::uint32_t slice_piece(std::uint32_t sig, int e, int top, int s) {
  const int lo = top - slice_bits * (s + 1);
  constexpr std::uint64_t mask = (std::uint64_t{1} << slice_bits) - 1;
  if (e >= lo) {
    const int sh = e - lo;
    return sh >= slice_bits ? 0u : static_cast<std::uint32_t>((std::uint64_t{sig} << sh) & mask);
  }
  const int sh = lo - e;
  return sh >= 32 ? 0u : static_cast<std::uint32_t>((std::uint64_t{sig} >> sh) & mask);
}
/// Index of the slice that holds the lsb of sig·2^e.
inline int last_slice(int e, int top) { return (top - 1 - e) / slice_bits; }

/// Decoded operands and the top exponent (|v| < 2^top) of each row (A) or column (B).
struct decoded {
  std::vector<mma_operand> v;
  std::vector<int> top;       ///< per row of A / column of B; INT_MIN when all zero
  std::vector<char> special;  ///< per row / column: a NaN or Inf
};

inline int top_of(const mma_operand& x) {
  return x.exp + static_cast<int>(std::bit_width(x.sig()));
}

/// Round-to-nearest-even of a wide integer times 2^e into f64 (the one rounding of the reference).
double wide_to_double(const boost::multiprecision::cpp_int& x, int e) {
  using boost::multiprecision::cpp_int;
  if (x == 0) return 0.0;
  const bool neg = x < 0;
  const cpp_int m = neg ? cpp_int(-x) : x;
  const int msb = static_cast<int>(boost::multiprecision::msb(m));
  if (msb < 64) {
    const auto u = m.convert_to<std::uint64_t>();
    const double d = tiebreak::detail::u128_to_double(u);  // the core's RNE conversion
    return tiebreak::detail::ldexp_exact(neg ? -d : d, e);
  }
  const int sh = msb - 63;
  std::uint64_t top = static_cast<cpp_int>(m >> sh).convert_to<std::uint64_t>();
  if (boost::multiprecision::lsb(m) < static_cast<unsigned>(sh)) top |= 1;  // sticky below the 64 kept bits
  const double d = tiebreak::detail::u128_to_double(top);  // RNE; the sticky bit sits below the rounding point
  return tiebreak::detail::ldexp_exact(neg ? -d : d, e + sh);
}

/// A 128-bit integer as a cpp_int.
boost::multiprecision::cpp_int i128_to_cpp(__int128 v) {
  const bool neg = v < 0;
  const unsigned __int128 m = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  boost::multiprecision::cpp_int X = static_cast<std::uint64_t>(m >> 64);
  X <<= 64;
  X += static_cast<std::uint64_t>(m);
  return neg ? boost::multiprecision::cpp_int(-X) : X;
}

/// X·2^e + c, exactly (c aligned to the lower exponent), rounded once to f64 (RNE).
double add_c_and_round(boost::multiprecision::cpp_int X, int e, const mma_operand& c) {
  using boost::multiprecision::cpp_int;
  if (c.ssig != 0) {
    if (X == 0) {
      X = c.ssig;
      e = c.exp;
    } else if (c.exp >= e) {
      cpp_int cc = c.ssig;
      cc <<= (c.exp - e);
      X += cc;
    } else {
      X <<= (e - c.exp);
      X += c.ssig;
      e = c.exp;
    }
  }
  return wide_to_double(X, e);
}

/// The same for a 128-bit integer.
double i128_to_double(__int128 x, int e) {
  const bool neg = x < 0;
  const unsigned __int128 m = neg ? -static_cast<unsigned __int128>(x) : static_cast<unsigned __int128>(x);
  const double d = tiebreak::detail::u128_to_double(m);  // the core's correctly rounded (RNE) conversion
  return tiebreak::detail::ldexp_exact(neg ? -d : d, e);
}

// ---- The dense product of the leading slices -------------------------------------------------
// P[r][j] += Σ_k A0[r][k] B0[k][j] over one K block. Every value is an integer: |A0|, |B0| < 2^20,
// products < 2^40, at most 2^13 of them per P (the caller flushes P to int64 every k_chunk), so
// every partial sum is an integer below 2^53 and every f64 (and FMA) operation is exact.

template <bool Abs>
void dense_generic(const double* A, std::size_t lda, std::size_t rows, const double* Bp, std::size_t K,
                   std::size_t npad, std::size_t k0, std::size_t k1, double* P) {
  for (std::size_t jb = 0; jb < npad / nr; ++jb) {
    const double* bp = Bp + jb * K * nr;
    for (std::size_t r = 0; r < rows; ++r) {
      double acc[nr];
      for (std::size_t c = 0; c < nr; ++c) acc[c] = P[r * npad + jb * nr + c];
      for (std::size_t k = k0; k < k1; ++k) {
        const double a = Abs ? std::abs(A[r * lda + k]) : A[r * lda + k];
        for (std::size_t c = 0; c < nr; ++c) {
          const double b = Abs ? std::abs(bp[k * nr + c]) : bp[k * nr + c];
          acc[c] = acc[c] + a * b;
        }
      }
      for (std::size_t c = 0; c < nr; ++c) P[r * npad + jb * nr + c] = acc[c];
    }
  }
}

#if defined(__x86_64__)
// AVX2 + FMA: the FMA here is exact (integer operands, integer sums below 2^53; see above).
template <bool Abs>
__attribute__((target("avx2,fma"))) void dense_avx2(const double* A, std::size_t lda, std::size_t rows,
                                                     const double* Bp, std::size_t K, std::size_t npad,
                                                     std::size_t k0, std::size_t k1, double* P) {
  const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  for (std::size_t jb = 0; jb < npad / nr; ++jb) {
    const double* bp = Bp + jb * K * nr;
    for (std::size_t r = 0; r < rows; r += mr) {
      double* p = P + r * npad + jb * nr;
      __m256d c00 = _mm256_loadu_pd(p), c01 = _mm256_loadu_pd(p + 4);
      __m256d c10 = _mm256_loadu_pd(p + npad), c11 = _mm256_loadu_pd(p + npad + 4);
      __m256d c20 = _mm256_loadu_pd(p + 2 * npad), c21 = _mm256_loadu_pd(p + 2 * npad + 4);
      __m256d c30 = _mm256_loadu_pd(p + 3 * npad), c31 = _mm256_loadu_pd(p + 3 * npad + 4);
      const double* a0 = A + r * lda;
      for (std::size_t k = k0; k < k1; ++k) {
        __m256d b0 = _mm256_loadu_pd(bp + k * nr), b1 = _mm256_loadu_pd(bp + k * nr + 4);
        __m256d x0 = _mm256_broadcast_sd(a0 + k), x1 = _mm256_broadcast_sd(a0 + lda + k);
        __m256d x2 = _mm256_broadcast_sd(a0 + 2 * lda + k), x3 = _mm256_broadcast_sd(a0 + 3 * lda + k);
        if constexpr (Abs) {
          b0 = _mm256_and_pd(b0, absmask);
          b1 = _mm256_and_pd(b1, absmask);
          x0 = _mm256_and_pd(x0, absmask);
          x1 = _mm256_and_pd(x1, absmask);
          x2 = _mm256_and_pd(x2, absmask);
          x3 = _mm256_and_pd(x3, absmask);
        }
        c00 = _mm256_fmadd_pd(x0, b0, c00);
        c01 = _mm256_fmadd_pd(x0, b1, c01);
        c10 = _mm256_fmadd_pd(x1, b0, c10);
        c11 = _mm256_fmadd_pd(x1, b1, c11);
        c20 = _mm256_fmadd_pd(x2, b0, c20);
        c21 = _mm256_fmadd_pd(x2, b1, c21);
        c30 = _mm256_fmadd_pd(x3, b0, c30);
        c31 = _mm256_fmadd_pd(x3, b1, c31);
      }
      _mm256_storeu_pd(p, c00);
      _mm256_storeu_pd(p + 4, c01);
      _mm256_storeu_pd(p + npad, c10);
      _mm256_storeu_pd(p + npad + 4, c11);
      _mm256_storeu_pd(p + 2 * npad, c20);
      _mm256_storeu_pd(p + 2 * npad + 4, c21);
      _mm256_storeu_pd(p + 3 * npad, c30);
      _mm256_storeu_pd(p + 3 * npad + 4, c31);
    }
  }
}
bool have_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#else
bool have_avx2_fma() { return false; }
#endif

template <bool Abs>
void dense(bool avx2, const double* A, std::size_t lda, std::size_t rows, const double* Bp, std::size_t K,
           std::size_t npad, std::size_t k0, std::size_t k1, double* P) {
#if defined(__x86_64__)
  if (avx2) return dense_avx2<Abs>(A, lda, rows, Bp, K, npad, k0, k1, P);
#endif
  (void)avx2;
  dense_generic<Abs>(A, lda, rows, Bp, K, npad, k0, k1, P);
}

struct sparse_entry {
  std::uint32_t index;  ///< k (A) or j (B)
  std::int32_t piece;   ///< signed slice integer
  int slice;
};

std::uint32_t f32_add(std::uint32_t x, std::uint32_t y) {
  return static_cast<std::uint32_t>(emu::add(formats::f32, x, y, rounding{round_mode::rne, 0}).round.bits);
}
std::uint32_t f32_mul(std::uint32_t x, std::uint32_t y) {
  return static_cast<std::uint32_t>(emu::mul(formats::f32, x, y, rounding{round_mode::rne, 0}).round.bits);
}

}  // namespace

gemm_exact gemm_reference(const gemm_dump& d, unsigned threads) {
  const std::size_t M = d.M, N = d.N, K = d.K;
  gemm_exact out;
  out.x.assign(M * N, nan_v);
  out.abs_sum.assign(M * N, nan_v);
  if (M == 0 || N == 0) return out;

  // Decode every operand once (the core's unpack); tops and specials per row of A / column of B.
  std::vector<mma_operand> av(M * K), bv(K * N);
  std::vector<int> atop(M, std::numeric_limits<int>::min()), btop(N, std::numeric_limits<int>::min());
  std::vector<char> abad(M, 0), bbad(N, 0);
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t k = 0; k < K; ++k) {
      const mma_operand x = emu::mma_decode(d.a_fmt, d.a[i * K + k], false);
      av[i * K + k] = x;
      if (x.special()) abad[i] = 1;
      else if (x.ssig != 0) atop[i] = std::max(atop[i], top_of(x));
    }
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t j = 0; j < N; ++j) {
      const mma_operand x = emu::mma_decode(d.b_fmt, d.b[k * N + j], false);
      bv[k * N + j] = x;
      if (x.special()) bbad[j] = 1;
      else if (x.ssig != 0) btop[j] = std::max(btop[j], top_of(x));
    }

  // B: the leading slice packed in panels of 8 columns, the rest as sparse rows.
  const std::size_t npad = (N + nr - 1) / nr * nr;
  std::vector<double> bp(npad * K, 0.0);
  std::vector<std::vector<sparse_entry>> bsparse(K);
  int tmax = 0;
  std::vector<int> tmaxc(N, 0);  // per column: its deepest slice
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t j = 0; j < N; ++j) {
      const mma_operand& x = bv[k * N + j];
      if (x.special() || x.ssig == 0) continue;
      const int top = btop[j], last = last_slice(x.exp, top);
      const int sgn = x.ssig < 0 ? -1 : 1;
      bp[(j / nr) * K * nr + k * nr + j % nr] = sgn * static_cast<double>(slice_piece(x.sig(), x.exp, top, 0));
      for (int t = 1; t <= last; ++t) {
        const std::uint32_t p = slice_piece(x.sig(), x.exp, top, t);
        if (p) bsparse[k].push_back({static_cast<std::uint32_t>(j), sgn * static_cast<std::int32_t>(p), t});
        tmax = std::max(tmax, t);
        tmaxc[j] = std::max(tmaxc[j], t);
      }
    }
  std::size_t sparse_b = 0;
  for (const auto& r : bsparse) sparse_b += r.size();

  // Scales and C enter the wide path: x = Σ_kb sa(i, kb) sb(kb, j) (Σ_{k in kb} a_ik b_kj) + C.
  // Scales decoded once (f32: 24-bit significands); a NaN or Inf scale makes its row (column) NaN.
  const bool have_c = !d.c.empty();
  const bool scaled = d.scaled();
  const bool along = d.scaled_along_k();
  const std::size_t Bs = d.scale_block, nkb = along ? (K + Bs - 1) / Bs : 1;
  const gemm_scale one_scale{};
  const gemm_scale& gsa = d.scale_a.present() ? d.scale_a : one_scale;
  const gemm_scale& gsb = d.scale_b.present() ? d.scale_b : one_scale;
  const auto sa_index = [&](std::size_t i, std::size_t kb) {
    return (gsa.outer == 1 ? 0 : i) * gsa.kblocks + (gsa.kblocks == 1 ? 0 : kb);
  };
  const auto sb_index = [&](std::size_t kb, std::size_t j) {
    return (gsb.outer == 1 ? 0 : j) * gsb.kblocks + (gsb.kblocks == 1 ? 0 : kb);
  };
  std::vector<mma_operand> sad(std::max<std::size_t>(1, gsa.v.size())), sbd(std::max<std::size_t>(1, gsb.v.size()));
  for (std::size_t q = 0; q < sad.size(); ++q) sad[q] = emu::mma_decode(formats::f32, gsa.at(q / gsa.kblocks, q % gsa.kblocks), false);
  for (std::size_t q = 0; q < sbd.size(); ++q) sbd[q] = emu::mma_decode(formats::f32, gsb.at(q / gsb.kblocks, q % gsb.kblocks), false);
  std::vector<double> sav(sad.size()), sbv(sbd.size());  // the scales' values (f32, exact in f64)
  for (std::size_t q = 0; q < sav.size(); ++q) sav[q] = bits_to_f32(gsa.at(q / gsa.kblocks, q % gsa.kblocks));
  for (std::size_t q = 0; q < sbv.size(); ++q) sbv[q] = bits_to_f32(gsb.at(q / gsb.kblocks, q % gsb.kblocks));
  // Per row (column): the smallest and largest exponent of its non-zero scales (the along-K path's
  // fixed point; INT_MAX / INT_MIN when all are zero).
  std::vector<int> sa_emin(M, std::numeric_limits<int>::max()), sa_emax(M, std::numeric_limits<int>::min());
  std::vector<int> sb_emin(N, std::numeric_limits<int>::max()), sb_emax(N, std::numeric_limits<int>::min());
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t kb = 0; kb < nkb; ++kb) {
      const mma_operand& x = sad[sa_index(i, kb)];
      if (x.special()) abad[i] = 1;
      else if (x.ssig != 0) sa_emin[i] = std::min(sa_emin[i], x.exp), sa_emax[i] = std::max(sa_emax[i], x.exp);
    }
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t kb = 0; kb < nkb; ++kb) {
      const mma_operand& x = sbd[sb_index(kb, j)];
      if (x.special()) bbad[j] = 1;
      else if (x.ssig != 0) sb_emin[j] = std::min(sb_emin[j], x.exp), sb_emax[j] = std::max(sb_emax[j], x.exp);
    }

  const bool avx2 = have_avx2_fma();
  const std::size_t blocks = (M + row_block - 1) / row_block;
  std::mutex mu;
  std::size_t sparse_a = 0;
  reference::detail::parallel_for(blocks, threads, [&](std::size_t blk) {
    const std::size_t i0 = blk * row_block, rows = std::min(row_block, M - i0);
    const std::size_t rpad = (rows + mr - 1) / mr * mr;
    std::vector<double> a0(rpad * K, 0.0);
    std::vector<std::vector<sparse_entry>> asparse(rows);
    std::vector<int> smax(rows, 0);
    std::size_t my_sparse = 0;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t k = 0; k < K; ++k) {
        const mma_operand& x = av[(i0 + r) * K + k];
        if (x.special() || x.ssig == 0) continue;
        const int top = atop[i0 + r], last = last_slice(x.exp, top);
        const int sgn = x.ssig < 0 ? -1 : 1;
        a0[r * K + k] = sgn * static_cast<double>(slice_piece(x.sig(), x.exp, top, 0));
        for (int s = 1; s <= last; ++s) {
          const std::uint32_t p = slice_piece(x.sig(), x.exp, top, s);
          if (p) asparse[r].push_back({static_cast<std::uint32_t>(k), sgn * static_cast<std::int32_t>(p), s});
          smax[r] = std::max(smax[r], s);
        }
        my_sparse += last > 0;
      }
    if (along) {
      // Block scales: the dense level 0 is flushed every scale block (Bs <= 2^13: its sums stay
      // below 2^53, exact) and each block sum S enters x scaled: S·sig(i,b,j)·2^(exp(i,b,j)) with
      // sig = sa.ssig·sb.ssig < 2^48. Per element, the fixed point is E + emin (emin: the row's
      // plus the column's smallest scale exponent). When the element has no lower slices and the
      // scales' exponent spread is small enough, an __int128 holds the sum exactly:
      // |Σ_b S·sig·2^sh| < nkb·Bs·2^40·2^48·2^spread <= 2^126. Else a cpp_int (the lower slices
      // add their products at 2^-(W l) below level 0, scaled by their block's scale).
      using boost::multiprecision::cpp_int;
      const int kbits = static_cast<int>(std::bit_width(nkb * Bs));
      std::vector<__int128> acc(rows * N, 0);
      std::vector<cpp_int> wide(rows * N);
      std::vector<char> use_wide(rows * N, 0);
      std::vector<int> base(rows * N, 0), lev(rows * N, 0);
      std::vector<double> absacc(rows * N, 0.0);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < N; ++j) {
          const std::size_t i = i0 + r, q = r * N + j;
          if (sa_emin[i] == std::numeric_limits<int>::max() || sb_emin[j] == std::numeric_limits<int>::max()) continue;
          base[q] = sa_emin[i] + sb_emin[j];
          lev[q] = smax[r] + tmaxc[j];
          const int spread = sa_emax[i] - sa_emin[i] + sb_emax[j] - sb_emin[j];
          use_wide[q] = lev[q] > 0 || kbits + 88 + spread > 126;
        }
      std::vector<double> p(rpad * npad), pabs(rpad * npad);
      for (std::size_t b = 0; b < nkb; ++b) {
        const std::size_t c0 = b * Bs, c1 = std::min(K, c0 + Bs);
        std::fill(p.begin(), p.end(), 0.0);
        std::fill(pabs.begin(), pabs.end(), 0.0);
        for (std::size_t k0 = c0; k0 < c1; k0 += kc) {
          const std::size_t k1 = std::min(c1, k0 + kc);
          dense<false>(avx2, a0.data(), K, rpad, bp.data(), K, npad, k0, k1, p.data());
          dense<true>(avx2, a0.data(), K, rpad, bp.data(), K, npad, k0, k1, pabs.data());
        }
        for (std::size_t r = 0; r < rows; ++r) {
          const mma_operand& si = sad[sa_index(i0 + r, b)];
          if (si.ssig == 0 || si.special()) continue;
          const double sia = std::abs(sav[sa_index(i0 + r, b)]);
          for (std::size_t j = 0; j < N; ++j) {
            const std::size_t q = r * N + j;
            const mma_operand& sj = sbd[sb_index(b, j)];
            if (sj.ssig == 0 || sj.special()) continue;
            absacc[q] += sia * std::abs(sbv[sb_index(b, j)]) * pabs[r * npad + j];  // a scale: rounding allowed
            const auto S = static_cast<std::int64_t>(p[r * npad + j]);
            if (S == 0) continue;
            const std::int64_t sig = static_cast<std::int64_t>(si.ssig) * sj.ssig;
            const int sh = si.exp + sj.exp - base[q];
            if (!use_wide[q]) acc[q] += (static_cast<__int128>(S) * sig) << sh;
            else wide[q] += (cpp_int(S) * sig) << (sh + slice_bits * lev[q]);
          }
        }
      }
      // Lower slices (rows with A pieces below slice 0, columns with B pieces below it: use_wide).
      const auto add_piece = [&](std::size_t r, std::size_t j, std::size_t k, std::int64_t prod, int level) {
        const std::size_t q = r * N + j, b = k / Bs;
        const mma_operand& si = sad[sa_index(i0 + r, b)];
        const mma_operand& sj = sbd[sb_index(b, j)];
        const std::int64_t sig = static_cast<std::int64_t>(si.ssig) * sj.ssig;
        if (sig == 0 || si.special() || sj.special() || prod == 0) return;
        const int sh = si.exp + sj.exp - base[q];
        wide[q] += (cpp_int(prod) * sig) << (sh + slice_bits * (lev[q] - level));
        absacc[q] += std::abs(sav[sa_index(i0 + r, b)] * sbv[sb_index(b, j)]) *
                     std::ldexp(std::abs(static_cast<double>(prod)), -slice_bits * level);
      };
      for (std::size_t r = 0; r < rows; ++r) {
        for (const sparse_entry& ea : asparse[r]) {
          for (std::size_t j = 0; j < N; ++j)
            add_piece(r, j, ea.index, ea.piece * static_cast<std::int64_t>(bp[(j / nr) * K * nr + ea.index * nr + j % nr]), ea.slice);
          for (const sparse_entry& eb : bsparse[ea.index])
            add_piece(r, eb.index, ea.index, static_cast<std::int64_t>(ea.piece) * eb.piece, ea.slice + eb.slice);
        }
        if (sparse_b)
          for (std::size_t k = 0; k < K; ++k)
            for (const sparse_entry& eb : bsparse[k])
              add_piece(r, eb.index, k, static_cast<std::int64_t>(a0[r * K + k]) * eb.piece, eb.slice);
      }
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < N; ++j) {
          const std::size_t i = i0 + r, o = i * N + j, q = r * N + j;
          if (abad[i] || bbad[j]) continue;  // NaN (element excluded)
          const bool zero = atop[i] == std::numeric_limits<int>::min() || btop[j] == std::numeric_limits<int>::min();
          const int E = zero ? 0 : atop[i] + btop[j] - 2 * slice_bits;
          out.abs_sum[o] = zero ? 0.0 : std::ldexp(absacc[q], E);
          mma_operand c{0, 0};
          if (have_c) {
            c = emu::mma_decode(d.c_fmt, d.c[o], false);
            if (c.special()) continue;
          }
          if (!use_wide[q] && c.ssig == 0) {
            out.x[o] = i128_to_double(acc[q], E + base[q]);
            continue;
          }
          if (use_wide[q]) {
            out.x[o] = add_c_and_round(std::move(wide[q]), E + base[q] - slice_bits * lev[q], c);
          } else {
            out.x[o] = add_c_and_round(i128_to_cpp(acc[q]), E + base[q], c);
          }
        }
      std::lock_guard lock(mu);
      sparse_a += my_sparse;
      return;
    }
    // Dense level 0 (signed and absolute), flushed to int64 every k_chunk.
    std::vector<double> p(rpad * npad, 0.0), pabs(rpad * npad, 0.0);
    std::vector<std::int64_t> p64;
    const bool chunked = K > k_chunk;
    if (chunked) p64.assign(rows * npad, 0);
    for (std::size_t c0 = 0; c0 < K; c0 += k_chunk) {
      const std::size_t c1 = std::min(K, c0 + k_chunk);
      for (std::size_t k0 = c0; k0 < c1; k0 += kc) {
        const std::size_t k1 = std::min(c1, k0 + kc);
        dense<false>(avx2, a0.data(), K, rpad, bp.data(), K, npad, k0, k1, p.data());
        dense<true>(avx2, a0.data(), K, rpad, bp.data(), K, npad, k0, k1, pabs.data());
      }
      if (chunked) {
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t j = 0; j < npad; ++j) p64[r * npad + j] += static_cast<std::int64_t>(p[r * npad + j]);
        std::fill(p.begin(), p.end(), 0.0);
      }
    }
    // Lower slices: int64 bins per level l = s + t (products < 2^40; see gemm_max_k).
    std::vector<std::int64_t> bins;
    std::vector<double> absx(N);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t i = i0 + r;
      const int levels = smax[r] + tmax;  // highest level index
      bins.assign(static_cast<std::size_t>(levels + 1) * N, 0);
      std::fill(absx.begin(), absx.end(), 0.0);
      for (const sparse_entry& ea : asparse[r]) {  // A slices >= 1 times every slice of B
        const std::int64_t pa = ea.piece;
        const double wa = std::ldexp(std::abs(static_cast<double>(pa)), -slice_bits * ea.slice);
        std::int64_t* bl = bins.data() + static_cast<std::size_t>(ea.slice) * N;
        for (std::size_t j = 0; j < N; ++j) {
          const double b0 = bp[(j / nr) * K * nr + ea.index * nr + j % nr];
          bl[j] += pa * static_cast<std::int64_t>(b0);
          absx[j] += wa * std::abs(b0);
        }
        for (const sparse_entry& eb : bsparse[ea.index]) {
          bins[static_cast<std::size_t>(ea.slice + eb.slice) * N + eb.index] += pa * eb.piece;
          absx[eb.index] += std::ldexp(std::abs(static_cast<double>(pa) * eb.piece), -slice_bits * (ea.slice + eb.slice));
        }
      }
      if (sparse_b)
        for (std::size_t k = 0; k < K; ++k) {  // A's leading slice times B slices >= 1
          if (bsparse[k].empty()) continue;
          const double a = a0[r * K + k];
          if (a == 0) continue;
          const auto pa = static_cast<std::int64_t>(a);
          for (const sparse_entry& eb : bsparse[k]) {
            bins[static_cast<std::size_t>(eb.slice) * N + eb.index] += pa * eb.piece;
            absx[eb.index] += std::ldexp(std::abs(a * eb.piece), -slice_bits * eb.slice);
          }
        }
      // Combine: x = Σ_l bins_l 2^(E - W l) with level 0 the dense product, E = T_i + U_j - 2W.
      for (std::size_t j = 0; j < N; ++j) {
        const std::size_t o = i * N + j;
        if (abad[i] || bbad[j]) continue;  // NaN (element excluded)
        const bool zero_row = atop[i] == std::numeric_limits<int>::min(), zero_col = btop[j] == std::numeric_limits<int>::min();
        const int E = zero_row || zero_col ? 0 : atop[i] + btop[j] - 2 * slice_bits;
        const std::int64_t lvl0 = chunked ? p64[r * npad + j] : static_cast<std::int64_t>(p[r * npad + j]);
        out.abs_sum[o] = zero_row || zero_col ? 0.0 : std::ldexp(pabs[r * npad + j] + absx[j], E);
        if (scaled)  // |sa sb| Σ|ab|: the product of two f32 values is exact in f64
          out.abs_sum[o] *= std::abs(static_cast<double>(bits_to_f32(gsa.at(i, 0))) * bits_to_f32(gsb.at(0, j)));
        mma_operand c{0, 0};
        if (have_c) {
          c = emu::mma_decode(d.c_fmt, d.c[o], false);
          if (c.special()) continue;
        }
        if (!have_c && !scaled && levels <= 3) {
          __int128 X = static_cast<__int128>(lvl0) << (slice_bits * levels);
          for (int l = 1; l <= levels; ++l)
            X += static_cast<__int128>(bins[static_cast<std::size_t>(l) * N + j]) << (slice_bits * (levels - l));
          out.x[o] = i128_to_double(X, E - slice_bits * levels);
          continue;
        }
        using boost::multiprecision::cpp_int;
        cpp_int X = lvl0;  // Horner over the levels: X = (...(L0 2^W + L1) 2^W + ...) + L_levels
        for (int l = 1; l <= levels; ++l) {
          X <<= slice_bits;
          X += bins[static_cast<std::size_t>(l) * N + j];
        }
        int e = E - slice_bits * levels;
        if (scaled) {
          const mma_operand& si = sad[sa_index(i, 0)];
          const mma_operand& sj = sbd[sb_index(0, j)];
          X *= si.ssig;
          X *= sj.ssig;
          e += si.exp + sj.exp;
        }
        out.x[o] = add_c_and_round(std::move(X), e, c);
      }
    }
    std::lock_guard lock(mu);
    sparse_a += my_sparse;
  });
  out.sparse_terms = sparse_a;
  {
    std::size_t nb = 0;  // elements of B reaching below their leading slice
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t j = 0; j < N; ++j) {
        const mma_operand& x = bv[k * N + j];
        if (!x.special() && x.ssig != 0 && last_slice(x.exp, btop[j]) > 0) ++nb;
      }
    out.sparse_terms += nb;
  }
  return out;
}

// ---- Scheme identification ---------------------------------------------------------------------

std::string_view gemm_scale_kind_name(gemm_scale_kind k) noexcept {
  switch (k) {
    case gemm_scale_kind::none: return "none";
    case gemm_scale_kind::tensor: return "tensor";
    case gemm_scale_kind::outer: return "outer";
    case gemm_scale_kind::block: return "block";
  }
  return "?";
}

std::string gemm_scheme::name() const {
  std::string s = fma_f32 ? std::string("fma.f32 sequential") : std::string(emu::mma_instr_name(instr));
  if (!fma_f32) s += promote ? fmt::format(", promote every {}", promote) : ", no promotion";
  if (split_k > 1) s += fmt::format(", split-K {} ({})", split_k, tree ? "pairwise" : "in order");
  if (block_scales) s += scale_fma ? ", block scales by FMA" : ", block scales by mul+add";
  if (c_in_epilogue) s += ", C in the epilogue";
  return s;
}

namespace {

/// f32 encoding of an encoding of `f` (exact for every input format).
std::uint32_t to_f32_bits(const format_desc& f, std::uint32_t bits) {
  return static_cast<std::uint32_t>(convert(formats::f32, f, bits, rounding{round_mode::rne, 0}).bits);
}

bool same_bits(const format_desc& f, std::uint32_t x, std::uint32_t y) {
  if (x == y) return true;
  return std::isnan(to_double(f, x)) && std::isnan(to_double(f, y));
}

}  // namespace

namespace {

/// Evaluates scheme `s` for element (i, j) and returns D's encoding. With `trace`, calls
/// trace(k_end, part_start, acc) with the running accumulator (encoding of the instruction's C
/// format) at every position k_end of the part that is a multiple of `kb` or the part's end; kb is
/// a multiple of the scheme's step (its promotion interval, else the instruction's k; 1 for FMA).
template <class Trace>
std::uint32_t eval_scheme(const gemm_dump& d, const gemm_scheme& s, std::size_t i, std::size_t j, std::size_t kb,
                          Trace&& trace) {
  const std::size_t K = d.K, N = d.N;
  const std::uint32_t c32 = d.c.empty() ? 0u : to_f32_bits(d.c_fmt, d.c[i * N + j]);
  const bool c_first = !d.c.empty() && !s.c_in_epilogue;
  const bool block = d.scaled_along_k();
  const auto at_mark = [&](std::size_t pos, std::size_t end) { return pos == end || pos % kb == 0; };
  std::uint32_t r = 0;
  if (s.fma_f32) {
    std::uint32_t acc = c_first ? c32 : 0u;
    for (std::size_t k = 0; k < K; ++k) {
      acc = static_cast<std::uint32_t>(emu::fma(formats::f32, to_f32_bits(d.a_fmt, d.a[i * K + k]),
                                                to_f32_bits(d.b_fmt, d.b[k * N + j]), acc, rounding{round_mode::rne, 0})
                                           .round.bits);
      if (kb && at_mark(k + 1, K)) trace(k + 1, std::size_t{0}, acc);
    }
    r = acc;
  } else {
    emu::mma_model m = emu::mma_entry(s.instr).model;
    m.a_fmt = d.a_fmt;
    m.b_fmt = d.b_fmt;
    const std::size_t ks = K / static_cast<std::size_t>(s.split_k);
    std::vector<std::uint32_t> parts(static_cast<std::size_t>(s.split_k));
    for (int p = 0; p < s.split_k; ++p) {
      const std::size_t start = static_cast<std::size_t>(p) * ks, end = start + ks;
      const std::uint32_t c0 = p == 0 && c_first ? c32 : 0u;
      std::uint32_t acc = c0;
      if (s.promote == 0) {
        // One instruction accumulator over the part, cut at the trace marks (the same operations).
        for (std::size_t q = start; q < end;) {
          const std::size_t q1 = kb ? std::min(end, (q / kb + 1) * kb) : end;
          acc = static_cast<std::uint32_t>(emu::dot(m, acc, d.a.data() + i * K + q, 1, d.b.data() + q * N + j,
                                                    static_cast<std::ptrdiff_t>(N), static_cast<int>(q1 - q)));
          if (kb) trace(q1, start, acc);
          q = q1;
        }
      } else {
        for (std::size_t q = start; q < end; q += static_cast<std::size_t>(s.promote)) {
          const auto part = static_cast<std::uint32_t>(emu::dot(m, 0u, d.a.data() + i * K + q, 1, d.b.data() + q * N + j,
                                                                static_cast<std::ptrdiff_t>(N), s.promote));
          if (block) {  // the chunk lies in one scale block (promote divides the block)
            const std::size_t b = q / d.scale_block;
            const std::uint32_t sc = f32_mul(d.scale_a.at(i, b), d.scale_b.at(j, b));
            acc = s.scale_fma ? static_cast<std::uint32_t>(emu::fma(formats::f32, sc, part, acc, rounding{round_mode::rne, 0}).round.bits)
                              : f32_add(acc, f32_mul(sc, part));
          } else {
            acc = f32_add(acc, part);
          }
          const std::size_t q1 = q + static_cast<std::size_t>(s.promote);
          if (kb && at_mark(q1, end)) trace(q1, start, acc);
        }
      }
      parts[static_cast<std::size_t>(p)] = acc;
    }
    if (s.tree) {
      for (std::size_t w = 1; w < parts.size(); w *= 2)
        for (std::size_t q = 0; q + w < parts.size(); q += 2 * w) parts[q] = f32_add(parts[q], parts[q + w]);
      r = parts[0];
    } else {
      r = parts[0];
      for (std::size_t q = 1; q < parts.size(); ++q) r = f32_add(r, parts[q]);
    }
    if (same_format(m.c_fmt, formats::f16)) {  // f16-output instruction: D is its own format
      return r;
    }
  }
  // Epilogue: K-independent scales as r·RNE(sa·sb) (RNE), then C (RNE), then the narrowing (RNE).
  if (d.scaled() && !block) r = f32_mul(r, f32_mul(d.scale_a.at(i, 0), d.scale_b.at(j, 0)));
  if (!d.c.empty() && s.c_in_epilogue) r = f32_add(r, c32);
  if (same_format(d.d_fmt, formats::f32)) return r;
  return static_cast<std::uint32_t>(f32_bits_to(d.d_fmt, r, rounding{round_mode::rne, 0}).bits);
}

}  // namespace

std::uint32_t gemm_scheme_element(const gemm_dump& d, const gemm_scheme& s, std::size_t i, std::size_t j) {
  return eval_scheme(d, s, i, j, 0, [](std::size_t, std::size_t, std::uint32_t) {});
}

std::vector<gemm_scheme> gemm_candidates(const gemm_dump& d, std::vector<std::string>* notes) {
  std::vector<std::string> scratch;
  std::vector<std::string>& skipped = notes ? *notes : scratch;
  const std::size_t K = d.K;
  const bool block = d.scaled_along_k();
  // Candidate instructions: those whose operand formats are the dump's (FP8: either FP8 format,
  // mixed e4m3 x e5m2 included); one per distinct arithmetic (the shape m does not change an element).
  const auto fp8 = [](const format_desc& f) { return same_format(f, formats::e4m3) || same_format(f, formats::e5m2); };
  std::vector<emu::mma_instr> instrs;
  std::vector<emu::mma_model> seen;
  for (emu::mma_instr ins : emu::all_mma_instrs) {
    emu::mma_model m = emu::mma_entry(ins).model;
    const bool ok = (same_format(m.a_fmt, d.a_fmt) || (fp8(m.a_fmt) && fp8(d.a_fmt))) &&
                    (same_format(m.b_fmt, d.b_fmt) || (fp8(m.b_fmt) && fp8(d.b_fmt)));
    if (!ok) continue;
    if (same_format(m.c_fmt, formats::f16) && !same_format(d.d_fmt, formats::f16)) continue;
    m.a_fmt = d.a_fmt;
    m.b_fmt = d.b_fmt;
    m.m = 16;
    m.n = 8;
    bool dup = false;
    for (std::size_t q = 0; q < seen.size(); ++q) {
      if (seen[q] == m) {
        skipped.push_back(std::string(emu::mma_instr_name(ins)) + ": the same arithmetic per element as " +
                          std::string(emu::mma_instr_name(instrs[q])) + " (not distinguishable from D)");
        dup = true;
      }
    }
    if (dup) continue;
    seen.push_back(m);
    instrs.push_back(ins);
  }
  if (instrs.empty())
    skipped.push_back(fmt::format("no tensor-core model takes {} x {} operands", d.a_fmt.name, d.b_fmt.name));
  if (block)
    skipped.push_back(fmt::format("block scales: only schemes that promote every k·2^i dividing the scale block ({}), "
                                  "with split-K parts of whole blocks, are tried (fma.f32 and no promotion cannot scale per block)",
                                  d.scale_block));
  if (d.scaled() && !block && !d.c.empty())
    skipped.push_back("scales with C: C as the first accumulator is not tried (D = s (A B) + C adds C after scaling)");

  std::vector<gemm_scheme> cands;
  const bool c_first_ok = d.c.empty() || !d.scaled() || block;
  if (!block && c_first_ok) {
    gemm_scheme f;
    f.fma_f32 = true;
    cands.push_back(f);
  }
  const int splits[] = {1, 2, 3, 4, 8, 16};
  const int promotes[] = {0, 32, 64, 128, 256, 512, 1024};
  for (emu::mma_instr ins : instrs) {
    const emu::mma_model& m = emu::mma_entry(ins).model;
    const bool f16out = same_format(m.c_fmt, formats::f16);
    if (f16out && d.scaled()) continue;
    for (int sk : splits) {
      if (K % static_cast<std::size_t>(sk) != 0 || (K / static_cast<std::size_t>(sk)) % static_cast<std::size_t>(m.k) != 0) continue;
      if (f16out && sk > 1) continue;
      const std::size_t ks = K / static_cast<std::size_t>(sk);
      if (block && ks % d.scale_block != 0) continue;
      // Block scales: every promotion interval k·2^i that divides the scale block (the partial of one
      // promotion must lie in one block); else the table's intervals below the part's length.
      std::vector<int> prs;
      if (block) {
        for (std::size_t pr = static_cast<std::size_t>(m.k); pr <= d.scale_block && pr <= ks; pr *= 2)
          if (d.scale_block % pr == 0) prs.push_back(static_cast<int>(pr));
      } else {
        prs.assign(std::begin(promotes), std::end(promotes));
      }
      for (int pr : prs) {
        if (!block && pr != 0 && (f16out || pr % m.k != 0 || static_cast<std::size_t>(pr) >= ks || ks % static_cast<std::size_t>(pr) != 0)) continue;
        for (int tree = 0; tree < (sk >= 4 && std::has_single_bit(static_cast<unsigned>(sk)) ? 2 : 1); ++tree)
          for (int ce = c_first_ok ? 0 : 1; ce < (d.c.empty() ? 1 : 2); ++ce)
            for (int sf = 0; sf < (block ? 2 : 1); ++sf) {
              gemm_scheme s;
              s.instr = ins;
              s.promote = pr;
              s.split_k = sk;
              s.tree = tree != 0;
              s.c_in_epilogue = ce != 0;
              s.block_scales = block;
              s.scale_fma = sf == 0;
              cands.push_back(s);
            }
      }
    }
    if (K % static_cast<std::size_t>(m.k) != 0)
      skipped.push_back(fmt::format("{}: K = {} is not a multiple of its k = {}", emu::mma_instr_name(ins), K, m.k));
  }
  if (!block && !d.c.empty()) {  // the FMA candidate with C in the epilogue too
    gemm_scheme f;
    f.fma_f32 = true;
    f.c_in_epilogue = true;
    cands.push_back(f);
  }
  return cands;
}

namespace {

/// Sampled output tiles of 16 x 8 (fewer when D is smaller): their origins, sorted.
std::vector<std::pair<std::size_t, std::size_t>> sample_tiles(const gemm_dump& d, std::size_t tiles, std::uint64_t seed) {
  // The first and the last tile, the others at seeded random tile positions. Tile rows start at
  // 0, 16, 32, ... and the last at M - 16 (columns likewise), so a dimension that is not a multiple
  // of the tile still has every element in some tile.
  const std::size_t th = std::min<std::size_t>(16, d.M), tw = std::min<std::size_t>(8, d.N);
  const std::size_t nr_t = (d.M + th - 1) / th, nc_t = (d.N + tw - 1) / tw;
  const auto row_at = [&](std::size_t t) { return std::min(t * th, d.M - th); };
  const auto col_at = [&](std::size_t t) { return std::min(t * tw, d.N - tw); };
  const std::size_t total = nr_t * nc_t;
  const std::size_t want = std::min(tiles, total);
  std::mt19937_64 rng(seed);
  std::set<std::pair<std::size_t, std::size_t>> origins;
  if (want > 0) origins.insert({0, 0});
  if (want > 1) origins.insert({d.M - th, d.N - tw});
  if (want * 2 >= total) {  // dense sample: take tiles in a seeded random order
    std::vector<std::size_t> order(total);
    for (std::size_t q = 0; q < total; ++q) order[q] = q;
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t q = 0; q < total && origins.size() < want; ++q) origins.insert({row_at(order[q] / nc_t), col_at(order[q] % nc_t)});
  } else {  // sparse sample: rejection (at most half the positions are taken, so it ends quickly)
    while (origins.size() < want) {
      const std::size_t r = std::uniform_int_distribution<std::size_t>(0, nr_t - 1)(rng);
      const std::size_t c = std::uniform_int_distribution<std::size_t>(0, nc_t - 1)(rng);
      origins.insert({row_at(r), col_at(c)});
    }
  }
  return {origins.begin(), origins.end()};
}

constexpr std::size_t tile_rows = 16, tile_cols = 8;

}  // namespace

gemm_identification identify_gemm(const gemm_dump& d, const gemm_identify_options& o) {
  gemm_identification id;
  const std::vector<gemm_scheme> cands = gemm_candidates(d, &id.skipped);
  id.tile_origins = sample_tiles(d, o.tiles, o.seed);
  id.tiles = id.tile_origins.size();
  const std::size_t th = std::min(tile_rows, d.M), tw = std::min(tile_cols, d.N);
  std::vector<std::pair<std::size_t, std::size_t>> elems;
  for (const auto& [r, c] : id.tile_origins)
    for (std::size_t i = 0; i < th; ++i)
      for (std::size_t j = 0; j < tw; ++j) elems.push_back({r + i, c + j});
  id.elements = elems.size();

  std::vector<std::size_t> mism(cands.size(), 0);
  reference::detail::parallel_for(cands.size(), o.threads, [&](std::size_t q) {
    std::size_t n = 0;
    for (const auto& [i, j] : elems)
      n += !same_bits(d.d_fmt, gemm_scheme_element(d, cands[q], i, j), d.d[i * d.N + j]);
    mism[q] = n;
  });
  for (std::size_t q = 0; q < cands.size(); ++q) id.candidates.push_back({cands[q], mism[q]});
  std::stable_sort(id.candidates.begin(), id.candidates.end(),
                   [](const gemm_scheme_result& x, const gemm_scheme_result& y) { return x.mismatches < y.mismatches; });
  return id;
}

// ---- Along K -----------------------------------------------------------------------------------

namespace {

/// X·2^e += T·2^eT, exactly (the lower exponent becomes the sum's).
void add_aligned(boost::multiprecision::cpp_int& X, int& e, boost::multiprecision::cpp_int T, int eT) {
  if (T == 0) return;
  if (X == 0) {
    X = std::move(T);
    e = eT;
  } else if (eT >= e) {
    X += T << (eT - e);
  } else {
    X <<= (e - eT);
    X += T;
    e = eT;
  }
}

}  // namespace

gemm_along_k gemm_along_k_stats(const gemm_dump& d, const gemm_scheme& s, const gemm_along_k_options& o) {
  using boost::multiprecision::cpp_int;
  gemm_along_k out;
  out.scheme = s;
  const std::size_t K = d.K, N = d.N;
  const emu::mma_model& model = emu::mma_entry(s.instr).model;
  const std::size_t step = s.fma_f32 ? 1 : static_cast<std::size_t>(s.promote ? s.promote : model.k);
  const std::size_t kb = (std::max<std::size_t>(1, o.k_block) + step - 1) / step * step;
  out.k_block = kb;
  out.unit_fmt = !s.fma_f32 && same_format(model.c_fmt, formats::f16) ? formats::f16 : formats::f32;
  const std::size_t split = s.fma_f32 ? 1 : static_cast<std::size_t>(s.split_k), ks = K / split;
  // The marks: multiples of kb and the end of every part, in increasing order (the order in which
  // eval_scheme reports them).
  std::vector<std::size_t> marks;
  for (std::size_t p = 0; p < split; ++p) {
    for (std::size_t q = (p * ks / kb + 1) * kb; q < (p + 1) * ks; q += kb) marks.push_back(q);
    marks.push_back((p + 1) * ks);
  }
  const std::size_t nm = marks.size();
  const bool block = d.scaled_along_k();
  const bool c_first = !d.c.empty() && !s.c_in_epilogue;

  const auto origins = sample_tiles(d, o.tiles, o.seed);
  const std::size_t th = std::min(tile_rows, d.M), tw = std::min(tile_cols, d.N);
  const std::size_t nrows = origins.size() * th;
  // Per sample row and mark: sums over the row's columns.
  struct cell {
    double e = 0, dir = 0, rel = 0, inc = 0, max_abs = 0;
    std::size_t n = 0, nrel = 0;
  };
  std::vector<cell> cells(nrows * nm);
  std::vector<double> row_max_abs(nrows, 0.0);
  std::vector<std::size_t> mism(nrows, 0), excl(nrows, 0);
  reference::detail::parallel_for(nrows, o.threads, [&](std::size_t sr) {
    const std::size_t i = origins[sr / th].first + sr % th, c0 = origins[sr / th].second;
    std::vector<std::vector<double>> v(tw, std::vector<double>(nm)), y(tw, std::vector<double>(nm)), w(tw, std::vector<double>(nm));
    std::vector<double> yfull(tw, 0.0);
    std::vector<char> ok(tw, 1);
    for (std::size_t c = 0; c < tw; ++c) {
      const std::size_t j = c0 + c;
      std::size_t at = 0;
      const std::uint32_t dbits = eval_scheme(d, s, i, j, kb, [&](std::size_t, std::size_t, std::uint32_t acc) {
        if (at < nm) v[c][at++] = to_double(out.unit_fmt, acc);
      });
      mism[sr] += !same_bits(d.d_fmt, dbits, d.d[i * N + j]);
      // The exact sums: unscaled segments (between marks and scale-block boundaries) in cpp_int at
      // the terms' lowest exponent, each scaled by its block's sa·sb and added to the part's sum.
      bool finite = true;
      int e0 = std::numeric_limits<int>::max(), top = std::numeric_limits<int>::min();
      for (std::size_t k = 0; k < K && finite; ++k) {
        const mma_operand a = emu::mma_decode(d.a_fmt, d.a[i * K + k], false), b = emu::mma_decode(d.b_fmt, d.b[k * N + j], false);
        finite = !a.special() && !b.special();
        if (finite && a.ssig && b.ssig) {
          e0 = std::min(e0, a.exp + b.exp);
          top = std::max(top, a.exp + b.exp + static_cast<int>(std::bit_width(static_cast<std::uint64_t>(a.sig()) * b.sig())));
        }
        if (block && k % d.scale_block == 0) {
          const mma_operand sa = emu::mma_decode(formats::f32, d.scale_a.at(i, k / d.scale_block), false);
          const mma_operand sb = emu::mma_decode(formats::f32, d.scale_b.at(j, k / d.scale_block), false);
          finite = finite && !sa.special() && !sb.special();
        }
      }
      mma_operand cc{0, 0};
      if (c_first) {
        cc = emu::mma_decode(d.c_fmt, d.c[i * N + j], false);
        finite = finite && !cc.special();
      }
      if (!finite) {
        ok[c] = 0;
        continue;
      }
      // A segment of at most K terms below 2^(top - e0) (relative to 2^e0) fits an __int128 when
      // top - e0 + bit_width(K) <= 126; else it is a cpp_int.
      const bool narrow = e0 == std::numeric_limits<int>::max() ||
                          top - e0 + static_cast<int>(std::bit_width(K)) <= 126;
      __int128 seg128 = 0;
      cpp_int part_x = 0, full_x = 0, seg = 0;
      int part_e = 0, full_e = 0;
      double part_w = 0, full_w = 0, seg_w = 0;
      std::size_t m = 0;
      const auto flush = [&](std::size_t k_end) {  // the segment ends before k_end
        int es = 0;
        cpp_int sig = 1;
        double sv = 1;
        if (block) {
          const std::size_t b = (k_end - 1) / d.scale_block;
          const mma_operand sa = emu::mma_decode(formats::f32, d.scale_a.at(i, b), false);
          const mma_operand sb = emu::mma_decode(formats::f32, d.scale_b.at(j, b), false);
          sig = cpp_int(sa.ssig) * sb.ssig;
          es = sa.exp + sb.exp;
          sv = std::abs(static_cast<double>(bits_to_f32(d.scale_a.at(i, b))) * bits_to_f32(d.scale_b.at(j, b)));
        }
        if (narrow) seg = i128_to_cpp(seg128);
        seg128 = 0;
        if (seg != 0) {
          add_aligned(part_x, part_e, seg * sig, e0 + es);
          add_aligned(full_x, full_e, seg * sig, e0 + es);
        }
        part_w += sv * seg_w;
        full_w += sv * seg_w;
        seg = 0;
        seg_w = 0;
      };
      if (c_first && cc.ssig) {
        add_aligned(part_x, part_e, cpp_int(cc.ssig), cc.exp);
        add_aligned(full_x, full_e, cpp_int(cc.ssig), cc.exp);
      }
      for (std::size_t k = 0; k < K; ++k) {
        const mma_operand a = emu::mma_decode(d.a_fmt, d.a[i * K + k], false), b = emu::mma_decode(d.b_fmt, d.b[k * N + j], false);
        if (a.ssig && b.ssig) {
          const std::int64_t prod = static_cast<std::int64_t>(a.ssig) * b.ssig;  // < 2^48
          if (narrow) seg128 += static_cast<__int128>(prod) << (a.exp + b.exp - e0);
          else seg += cpp_int(prod) << (a.exp + b.exp - e0);
          seg_w += std::abs(std::ldexp(static_cast<double>(prod), a.exp + b.exp));
        }
        const std::size_t k1 = k + 1;
        const bool at_mark = m < nm && marks[m] == k1;
        if (at_mark || (block && k1 % d.scale_block == 0)) flush(k1);
        if (at_mark) {
          y[c][m] = wide_to_double(part_x, part_e);
          w[c][m] = part_w;
          ++m;
          if (k1 % ks == 0) {  // the next part starts from zero
            part_x = 0;
            part_e = 0;
            part_w = 0;
          }
        }
      }
      yfull[c] = wide_to_double(full_x, full_e);
      row_max_abs[sr] = std::max(row_max_abs[sr], std::abs(yfull[c]));
    }
    const double u = row_ulp(out.unit_fmt, row_max_abs[sr]);
    for (std::size_t c = 0; c < tw; ++c) {
      if (!ok[c]) {
        ++excl[sr];
        continue;
      }
      double prev = 0;
      for (std::size_t m = 0; m < nm; ++m) {
        if (!std::isfinite(v[c][m]) || !std::isfinite(y[c][m])) continue;
        const double diff = v[c][m] - y[c][m], e = diff / u;
        cell& x = cells[sr * nm + m];
        x.e += e;
        x.dir += y[c][m] > 0 ? e : (y[c][m] < 0 ? -e : 0.0);
        const bool first_of_part = m == 0 || marks[m - 1] % ks == 0;
        x.inc += e - (first_of_part ? 0.0 : prev);
        ++x.n;
        if (w[c][m] > 0) {
          x.rel += diff / w[c][m];
          ++x.nrel;
        }
        x.max_abs = std::max(x.max_abs, std::abs(e));
        prev = e;
      }
    }
  });
  out.elements = nrows * tw;
  for (std::size_t sr = 0; sr < nrows; ++sr) {
    out.mismatches += mism[sr];
    out.excluded += excl[sr];
    out.rows += excl[sr] < tw;
  }
  out.reproduces = out.mismatches == 0;
  for (std::size_t m = 0; m < nm; ++m) {
    analysis::running_moments ms, md, mr, mi;
    double mx = 0;
    for (std::size_t sr = 0; sr < nrows; ++sr) {
      const cell& x = cells[sr * nm + m];
      if (x.n) {
        const double n = static_cast<double>(x.n);
        ms.push(x.e / n);
        md.push(x.dir / n);
        mi.push(x.inc / n);
      }
      if (x.nrel) mr.push(x.rel / static_cast<double>(x.nrel));
      mx = std::max(mx, x.max_abs);
    }
    gemm_along_k_block b;
    b.k_end = marks[m];
    b.part_start = (marks[m] - 1) / ks * ks;
    b.signed_ulps = make_error_test(ms, o.alpha, o.min_effect_ulps);
    b.directed_ulps = make_error_test(md, o.alpha, o.min_effect_ulps);
    b.relative = make_error_test(mr, o.alpha, 0.0);
    b.increment_ulps = make_error_test(mi, o.alpha, o.min_effect_ulps);
    b.max_abs_ulps = mx;
    out.blocks.push_back(b);
  }
  return out;
}

// ---- Statistics ----------------------------------------------------------------------------------

gemm_report run_gemm_audit(const gemm_dump& d, const gemm_audit_options& o) {
  using clock = std::chrono::steady_clock;
  gemm_report r;
  r.M = d.M;
  r.N = d.N;
  r.K = d.K;
  r.options = o;
  r.source = d.source;
  r.container = d.container;
  r.a_layout = d.a_layout;
  r.b_layout = d.b_layout;
  r.tensors = d.tensors;
  r.scale_a = d.scale_a.kind;
  r.scale_b = d.scale_b.kind;
  r.scale_block = d.scale_block;
  const auto t0 = clock::now();
  const gemm_exact ex = gemm_reference(d, o.threads);
  const auto t1 = clock::now();
  r.sparse_terms = ex.sparse_terms;
  const std::size_t M = d.M, N = d.N;
  r.elements = M * N;
  std::vector<double> kd(M * N);
  for (std::size_t q = 0; q < M * N; ++q) kd[q] = to_double(d.d_fmt, d.d[q]);

  // Row scale u_i (the attention audit's rule): ulp in D's format of the row's largest |x|.
  analysis::running_moments rs, rd, rrel;
  std::vector<double> col_sum(N, 0.0);
  std::vector<std::size_t> col_n(N, 0);
  const std::size_t bs = std::max<std::size_t>(1, o.block);
  const std::size_t bm = (M + bs - 1) / bs, bn = (N + bs - 1) / bs;
  r.blocks.resize(bm * bn);
  std::vector<std::size_t> bpos(bm * bn, 0), bneg(bm * bn, 0);
  for (std::size_t bi = 0; bi < bm; ++bi)
    for (std::size_t bj = 0; bj < bn; ++bj) {
      gemm_block& b = r.blocks[bi * bn + bj];
      b.row = bi * bs;
      b.col = bj * bs;
      b.rows = std::min(bs, M - b.row);
      b.cols = std::min(bs, N - b.col);
    }
  for (std::size_t i = 0; i < M; ++i) {
    double max_abs = 0;
    std::size_t valid = 0;
    for (std::size_t j = 0; j < N; ++j) {
      const double x = ex.x[i * N + j], k = kd[i * N + j];
      if (std::isfinite(x) && std::isfinite(k)) {
        max_abs = std::max(max_abs, std::abs(x));
        ++valid;
      }
    }
    r.excluded += N - valid;
    if (!valid) continue;
    const double u = row_ulp(d.d_fmt, max_abs);
    double ss = 0, sd = 0, srel = 0;
    std::size_t nrel = 0;
    for (std::size_t j = 0; j < N; ++j) {
      const double x = ex.x[i * N + j], k = kd[i * N + j];
      if (!(std::isfinite(x) && std::isfinite(k))) continue;
      const double diff = k - x;
      const double e = diff / u;
      ss += e;
      sd += x > 0 ? e : (x < 0 ? -e : 0.0);
      r.positive += diff > 0;
      r.negative += diff < 0;
      r.exact += diff == 0;
      r.max_abs_error_ulps = std::max(r.max_abs_error_ulps, std::abs(e));
      const double w = ex.abs_sum[i * N + j];
      if (w > 0) {
        const double rel = diff / w;
        srel += rel;
        ++nrel;
        r.max_abs_rel_error = std::max(r.max_abs_rel_error, std::abs(rel));
      }
      col_sum[j] += e;
      ++col_n[j];
      const std::size_t b = (i / bs) * bn + j / bs;
      r.blocks[b].signed_ulps.push(e);
      bpos[b] += diff > 0;
      bneg[b] += diff < 0;
    }
    rs.push(ss / static_cast<double>(valid));
    rd.push(sd / static_cast<double>(valid));
    if (nrel) rrel.push(srel / static_cast<double>(nrel));
  }
  analysis::running_moments cs;
  for (std::size_t j = 0; j < N; ++j)
    if (col_n[j]) cs.push(col_sum[j] / static_cast<double>(col_n[j]));
  for (std::size_t b = 0; b < r.blocks.size(); ++b) {
    const double n = static_cast<double>(r.blocks[b].signed_ulps.n);
    if (n > 0) {
      r.blocks[b].share_positive = static_cast<double>(bpos[b]) / n;
      r.blocks[b].share_negative = static_cast<double>(bneg[b]) / n;
    }
  }
  r.row_signed = make_error_test(rs, o.alpha, o.min_effect_ulps);
  r.row_directed = make_error_test(rd, o.alpha, o.min_effect_ulps);
  r.col_signed = make_error_test(cs, o.alpha, o.min_effect_ulps);
  // The relative error has no ulp unit: its test is reported, its effect size not applied.
  r.rel_signed = make_error_test(rrel, o.alpha, 0.0);
  r.biased = r.row_signed.biased || r.row_directed.biased;
  const auto t2 = clock::now();
  r.seconds_reference = std::chrono::duration<double>(t1 - t0).count();
  r.seconds_statistics = std::chrono::duration<double>(t2 - t1).count();
  return r;
}

// ---- Reports -------------------------------------------------------------------------------------

namespace {

nlohmann::json test_json(const error_test& e) {
  using io::json_number;
  nlohmann::json j;
  j["n"] = e.moments.n;
  j["mean"] = json_number(e.t.mean);
  j["sd"] = json_number(e.t.sd);
  j["t"] = json_number(e.t.t);
  j["p"] = json_number(e.t.p_value);
  j["ci95"] = {json_number(e.t.ci_low), json_number(e.t.ci_high)};
  j["sign_positive"] = e.sign.positive;
  j["sign_negative"] = e.sign.negative;
  j["sign_p"] = json_number(e.sign.p_value);
  j["significant"] = e.significant;
  j["biased"] = e.biased;
  return j;
}

}  // namespace

nlohmann::json to_json(const gemm_report& r) {
  using io::json_number;
  nlohmann::json j;
  j["schema"] = gemm_report_schema;
  j["source"] = json_safe_text(r.source);
  j["container"] = r.container;
  j["layout"] = {{"a", r.a_layout}, {"b", r.b_layout}};
  j["shape"] = {{"M", r.M}, {"N", r.N}, {"K", r.K}};
  nlohmann::json ts = nlohmann::json::object();
  for (const auto& [name, t] : r.tensors)
    ts[name] = {{"dtype", t.dtype}, {"format", std::string(t.format.name)}, {"shape", t.shape},
                {"elements", t.elements}, {"nonfinite", t.nonfinite}};
  j["tensors"] = ts;
  j["options"] = {{"alpha", json_number(r.options.alpha)}, {"min_effect_ulps", json_number(r.options.min_effect_ulps)},
                  {"block", r.options.block}};
  j["scales"] = {{"a", std::string(gemm_scale_kind_name(r.scale_a))}, {"b", std::string(gemm_scale_kind_name(r.scale_b))},
                 {"block", r.scale_block}};
  j["elements"] = {{"total", r.elements}, {"excluded", r.excluded}, {"above", r.positive}, {"below", r.negative},
                   {"exact", r.exact}, {"sparse_terms", r.sparse_terms}};
  j["error_ulps"] = {{"row_signed", test_json(r.row_signed)}, {"row_directed", test_json(r.row_directed)},
                     {"col_signed", test_json(r.col_signed)}, {"max_abs", json_number(r.max_abs_error_ulps)}};
  j["error_relative"] = {{"row_signed", test_json(r.rel_signed)}, {"max_abs", json_number(r.max_abs_rel_error)}};
  nlohmann::json bl = nlohmann::json::array();
  for (const gemm_block& b : r.blocks) {
    const analysis::t_test_result t = analysis::t_test(b.signed_ulps, 0, 0.95);
    bl.push_back({{"row", b.row}, {"col", b.col}, {"rows", b.rows}, {"cols", b.cols}, {"n", b.signed_ulps.n},
                  {"mean_ulps", json_number(t.mean)}, {"t", json_number(t.t)}, {"share_above", json_number(b.share_positive)},
                  {"share_below", json_number(b.share_negative)}});
  }
  j["blocks"] = bl;
  j["verdict"] = {{"biased", r.biased}};
  if (r.identification) {
    const gemm_identification& id = *r.identification;
    nlohmann::json c = nlohmann::json::array();
    for (const gemm_scheme_result& s : id.candidates)
      c.push_back({{"name", s.scheme.name()},
                   {"instruction", s.scheme.fma_f32 ? std::string("fma.f32") : std::string(emu::mma_instr_name(s.scheme.instr))},
                   {"promote", s.scheme.promote}, {"split_k", s.scheme.split_k},
                   {"reduction", s.scheme.tree ? "pairwise" : "in_order"}, {"c_in_epilogue", s.scheme.c_in_epilogue},
                   {"block_scales", !s.scheme.block_scales ? "none" : (s.scheme.scale_fma ? "fma" : "mul_add")},
                   {"mismatches", s.mismatches}, {"reproduces", s.mismatches == 0}});
    nlohmann::json tiles = nlohmann::json::array();
    for (const auto& [row, col] : id.tile_origins) tiles.push_back({row, col});
    j["identification"] = {{"tiles", id.tiles}, {"tile_origins", tiles}, {"elements", id.elements},
                           {"explained", id.explained()}, {"candidates", c}, {"notes", id.skipped}};
  }
  if (r.along_k) {
    const gemm_along_k& a = *r.along_k;
    nlohmann::json bl2 = nlohmann::json::array();
    auto short_test = [](const error_test& e) {
      using io::json_number;
      return nlohmann::json{{"n", e.moments.n},          {"mean", json_number(e.t.mean)},
                            {"t", json_number(e.t.t)},   {"p", json_number(e.t.p_value)},
                            {"sign_positive", e.sign.positive}, {"sign_negative", e.sign.negative},
                            {"sign_p", json_number(e.sign.p_value)}, {"significant", e.significant}};
    };
    for (const gemm_along_k_block& b : a.blocks)
      bl2.push_back({{"k_end", b.k_end}, {"part_start", b.part_start}, {"signed_ulps", short_test(b.signed_ulps)},
                     {"directed_ulps", short_test(b.directed_ulps)}, {"relative", short_test(b.relative)},
                     {"increment_ulps", short_test(b.increment_ulps)}, {"max_abs_ulps", json_number(b.max_abs_ulps)}});
    j["along_k"] = {{"scheme", a.scheme.name()},
                    {"basis", a.reproduces ? "measured" : "modelled"},
                    {"reproduces", a.reproduces},
                    {"mismatches", a.mismatches},
                    {"k_block", a.k_block},
                    {"unit", std::string(a.unit_fmt.name)},
                    {"elements", a.elements},
                    {"rows", a.rows},
                    {"excluded", a.excluded},
                    {"blocks", bl2}};
  } else if (!r.along_k_note.empty()) {
    j["along_k"] = {{"note", r.along_k_note}};
  }
  j["timing_s"] = {{"reference", r.seconds_reference}, {"statistics", r.seconds_statistics},
                   {"identify", r.seconds_identify}, {"along_k", r.seconds_along_k}};
  return j;
}

std::string markdown_summary(const gemm_report& r) {
  std::string s = fmt::format("# tiebreak audit-gemm: {} x {} x {} ({} · {} -> {})\n\n", r.M, r.N, r.K,
                              r.tensors.count("a") ? std::string(r.tensors.at("a").format.name) : "?",
                              r.tensors.count("b") ? std::string(r.tensors.at("b").format.name) : "?",
                              r.tensors.count("d") ? std::string(r.tensors.at("d").format.name) : "?");
  if (r.scale_a != gemm_scale_kind::none || r.scale_b != gemm_scale_kind::none)
    s += fmt::format("Scales: a {}, b {} (scale block {}).\n\n", gemm_scale_kind_name(r.scale_a), gemm_scale_kind_name(r.scale_b),
                     r.scale_block);
  s += "| statistic | samples | mean | t | p | sign +/- | biased |\n|---|---|---|---|---|---|---|\n";
  auto row = [&](const char* name, const error_test& e) {
    s += fmt::format("| {} | {} | {:.4g} | {:.3g} | {:.3g} | {}/{} | {} |\n", name, e.moments.n, e.t.mean, e.t.t,
                     e.t.p_value, e.sign.positive, e.sign.negative, e.biased ? "yes" : "no");
  };
  row("signed error, ulps (rows)", r.row_signed);
  row("directed error, ulps (rows)", r.row_directed);
  row("signed error, ulps (columns)", r.col_signed);
  row("(d - x) / sum|ab| (rows)", r.rel_signed);
  s += fmt::format("\nElements: {} ({} excluded), above/below/equal the exact product: {}/{}/{}; max |error| {:.3g} ulps, {:.3g} of sum|ab|.\n",
                   r.elements, r.excluded, r.positive, r.negative, r.exact, r.max_abs_error_ulps, r.max_abs_rel_error);
  s += r.biased ? "\n**Verdict: biased** (rows' signed or directed mean error significant and above the minimum effect).\n"
                : "\n**Verdict: no bias detected** at this alpha and minimum effect.\n";
  if (r.identification) {
    const gemm_identification& id = *r.identification;
    s += fmt::format("\n## Identification ({} tiles, {} elements)\n\n", id.tiles, id.elements);
    s += "| scheme | mismatches |\n|---|---|\n";
    std::size_t shown = 0;
    for (const gemm_scheme_result& c : id.candidates) {
      if (shown++ == 12) break;
      s += fmt::format("| {} | {} |\n", c.scheme.name(), c.mismatches);
    }
    if (id.candidates.size() > 12) s += fmt::format("| ({} more) | |\n", id.candidates.size() - 12);
    if (id.explained()) {
      std::size_t n = 0;
      for (const auto& c : id.candidates) n += c.mismatches == 0;
      std::string names;
      for (const auto& c : id.candidates)
        if (c.mismatches == 0) names += (names.empty() ? "" : "; ") + c.scheme.name();
      s += fmt::format("\nD is reproduced bit for bit by {} candidate{}: {}.\n", n, n == 1 ? "" : "s", names);
      if (n > 1) s += "(Candidates that do the same operations, e.g. promotion every K/S and split-K S in order with C = 0, cannot be told apart.)\n";
    } else {
      s += "\n**No candidate reproduces D**: the kernel's accumulation is none of the schemes tried.\n";
    }
    for (const std::string& note : id.skipped) s += "- " + note + "\n";
  }
  if (r.along_k) {
    const gemm_along_k& a = *r.along_k;
    s += fmt::format("\n## Along K: {} ({})\n\n", a.scheme.name(),
                     a.reproduces ? "reproduces D bit for bit: its running sums are the kernel's, measured"
                                  : fmt::format("chosen, does not reproduce D ({} of {} sampled elements differ): modelled",
                                                a.mismatches, a.elements));
    s += fmt::format("Running accumulator minus the exact sum of the same terms, in ulps of {} at the tile row's largest "
                     "exact full sum; {} tile rows, {} elements.\n\n",
                     a.unit_fmt.name, a.rows, a.elements - a.excluded);
    s += "| K | part from | signed mean | t | sign +/- | directed mean | t | increment mean | t | relative mean | max abs |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const gemm_along_k_block& b : a.blocks)
      s += fmt::format("| {} | {} | {:.4g} | {:.3g} | {}/{} | {:.4g} | {:.3g} | {:.4g} | {:.3g} | {:.3g} | {:.3g} |\n", b.k_end,
                       b.part_start, b.signed_ulps.t.mean, b.signed_ulps.t.t, b.signed_ulps.sign.positive,
                       b.signed_ulps.sign.negative, b.directed_ulps.t.mean, b.directed_ulps.t.t, b.increment_ulps.t.mean,
                       b.increment_ulps.t.t, b.relative.t.mean, b.max_abs_ulps);
  } else if (!r.along_k_note.empty()) {
    s += "\nAlong K: " + r.along_k_note + "\n";
  }
  return s;
}

}  // namespace tiebreak::audit
