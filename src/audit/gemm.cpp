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
      }
    }
  std::size_t sparse_b = 0;
  for (const auto& r : bsparse) sparse_b += r.size();

  // Scales and C enter the wide path: x = sa·sb·(A·B) + C.
  const bool have_c = !d.c.empty();
  const bool scaled = d.scale_a || d.scale_b;
  const mma_operand sa = emu::mma_decode(formats::f32, d.scale_a.value_or(0x3f800000u), false);
  const mma_operand sb = emu::mma_decode(formats::f32, d.scale_b.value_or(0x3f800000u), false);
  const bool scale_bad = sa.special() || sb.special();

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
        if (abad[i] || bbad[j] || scale_bad) continue;  // NaN (element excluded)
        const bool zero_row = atop[i] == std::numeric_limits<int>::min(), zero_col = btop[j] == std::numeric_limits<int>::min();
        const int E = zero_row || zero_col ? 0 : atop[i] + btop[j] - 2 * slice_bits;
        const std::int64_t lvl0 = chunked ? p64[r * npad + j] : static_cast<std::int64_t>(p[r * npad + j]);
        out.abs_sum[o] = zero_row || zero_col ? 0.0 : std::ldexp(pabs[r * npad + j] + absx[j], E);
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
          X *= sa.ssig;
          X *= sb.ssig;
          e += sa.exp + sb.exp;
        }
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
        out.x[o] = wide_to_double(X, e);
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

std::string gemm_scheme::name() const {
  std::string s = fma_f32 ? std::string("fma.f32 sequential") : std::string(emu::mma_instr_name(instr));
  if (!fma_f32) s += promote ? fmt::format(", promote every {}", promote) : ", no promotion";
  if (split_k > 1) s += fmt::format(", split-K {} ({})", split_k, tree ? "pairwise" : "in order");
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

std::uint32_t gemm_scheme_element(const gemm_dump& d, const gemm_scheme& s, std::size_t i, std::size_t j) {
  const std::size_t K = d.K, N = d.N;
  const std::uint32_t c32 = d.c.empty() ? 0u : to_f32_bits(d.c_fmt, d.c[i * N + j]);
  const bool c_first = !d.c.empty() && !s.c_in_epilogue;
  std::uint32_t r = 0;
  if (s.fma_f32) {
    std::uint32_t acc = c_first ? c32 : 0u;
    for (std::size_t k = 0; k < K; ++k)
      acc = static_cast<std::uint32_t>(emu::fma(formats::f32, to_f32_bits(d.a_fmt, d.a[i * K + k]),
                                                to_f32_bits(d.b_fmt, d.b[k * N + j]), acc, rounding{round_mode::rne, 0})
                                           .round.bits);
    r = acc;
  } else {
    emu::mma_model m = emu::mma_entry(s.instr).model;
    m.a_fmt = d.a_fmt;
    m.b_fmt = d.b_fmt;
    const std::size_t ks = K / static_cast<std::size_t>(s.split_k);
    std::vector<std::uint32_t> parts(static_cast<std::size_t>(s.split_k));
    for (int p = 0; p < s.split_k; ++p) {
      const std::uint32_t* a = d.a.data() + i * K + static_cast<std::size_t>(p) * ks;
      const std::uint32_t* b = d.b.data() + static_cast<std::size_t>(p) * ks * N + j;
      const std::uint32_t c0 = p == 0 && c_first ? c32 : 0u;
      if (s.promote == 0) {
        parts[static_cast<std::size_t>(p)] = static_cast<std::uint32_t>(
            emu::dot(m, c0, a, 1, b, static_cast<std::ptrdiff_t>(N), static_cast<int>(ks)));
      } else {
        std::uint32_t acc = c0;
        for (std::size_t q = 0; q < ks; q += static_cast<std::size_t>(s.promote)) {
          const auto part = static_cast<std::uint32_t>(emu::dot(m, 0u, a + q, 1, b + q * N, static_cast<std::ptrdiff_t>(N), s.promote));
          acc = f32_add(acc, part);
        }
        parts[static_cast<std::size_t>(p)] = acc;
      }
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
  if (!d.c.empty() && s.c_in_epilogue) r = f32_add(r, c32);
  if (d.scale_a || d.scale_b) r = f32_mul(r, f32_mul(d.scale_a.value_or(0x3f800000u), d.scale_b.value_or(0x3f800000u)));
  if (same_format(d.d_fmt, formats::f32)) return r;
  return static_cast<std::uint32_t>(f32_bits_to(d.d_fmt, r, rounding{round_mode::rne, 0}).bits);
}

gemm_identification identify_gemm(const gemm_dump& d, const gemm_identify_options& o) {
  gemm_identification id;
  const std::size_t K = d.K;
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
        id.skipped.push_back(std::string(emu::mma_instr_name(ins)) + ": the same arithmetic per element as " +
                             std::string(emu::mma_instr_name(instrs[q])) + " (not distinguishable from D)");
        dup = true;
      }
    }
    if (dup) continue;
    seen.push_back(m);
    instrs.push_back(ins);
  }
  if (instrs.empty())
    id.skipped.push_back(fmt::format("no tensor-core model takes {} x {} operands", d.a_fmt.name, d.b_fmt.name));

  std::vector<gemm_scheme> cands;
  {
    gemm_scheme f;
    f.fma_f32 = true;
    cands.push_back(f);
  }
  const int splits[] = {1, 2, 3, 4, 8, 16};
  const int promotes[] = {0, 32, 64, 128, 256, 512, 1024};
  for (emu::mma_instr ins : instrs) {
    const emu::mma_model& m = emu::mma_entry(ins).model;
    const bool f16out = same_format(m.c_fmt, formats::f16);
    for (int sk : splits) {
      if (K % static_cast<std::size_t>(sk) != 0 || (K / static_cast<std::size_t>(sk)) % static_cast<std::size_t>(m.k) != 0) continue;
      if (f16out && sk > 1) continue;
      const std::size_t ks = K / static_cast<std::size_t>(sk);
      for (int pr : promotes) {
        if (pr != 0 && (f16out || pr % m.k != 0 || static_cast<std::size_t>(pr) >= ks || ks % static_cast<std::size_t>(pr) != 0)) continue;
        for (int tree = 0; tree < (sk >= 4 && std::has_single_bit(static_cast<unsigned>(sk)) ? 2 : 1); ++tree)
          for (int ce = 0; ce < (d.c.empty() ? 1 : 2); ++ce) {
            gemm_scheme s;
            s.instr = ins;
            s.promote = pr;
            s.split_k = sk;
            s.tree = tree != 0;
            s.c_in_epilogue = ce != 0;
            cands.push_back(s);
          }
      }
    }
    if (K % static_cast<std::size_t>(m.k) != 0)
      id.skipped.push_back(fmt::format("{}: K = {} is not a multiple of its k = {}", emu::mma_instr_name(ins), K, m.k));
  }
  if (!d.c.empty()) {  // the FMA candidate with C in the epilogue too
    gemm_scheme f;
    f.fma_f32 = true;
    f.c_in_epilogue = true;
    cands.push_back(f);
  }

  // Sampled output tiles of 16 x 8: the first and the last, the others at seeded random tile
  // positions. Tile rows start at 0, 16, 32, ... and the last at M - 16 (columns likewise), so a
  // dimension that is not a multiple of the tile still has every element in some tile.
  const std::size_t th = std::min<std::size_t>(16, d.M), tw = std::min<std::size_t>(8, d.N);
  const std::size_t nr_t = (d.M + th - 1) / th, nc_t = (d.N + tw - 1) / tw;
  const auto row_at = [&](std::size_t t) { return std::min(t * th, d.M - th); };
  const auto col_at = [&](std::size_t t) { return std::min(t * tw, d.N - tw); };
  const std::size_t total = nr_t * nc_t;
  const std::size_t want = std::min(o.tiles, total);
  std::mt19937_64 rng(o.seed);
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
  id.tile_origins.assign(origins.begin(), origins.end());
  id.tiles = id.tile_origins.size();
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
                   {"mismatches", s.mismatches}, {"reproduces", s.mismatches == 0}});
    nlohmann::json tiles = nlohmann::json::array();
    for (const auto& [row, col] : id.tile_origins) tiles.push_back({row, col});
    j["identification"] = {{"tiles", id.tiles}, {"tile_origins", tiles}, {"elements", id.elements},
                           {"explained", id.explained()}, {"candidates", c}, {"notes", id.skipped}};
  }
  j["timing_s"] = {{"reference", r.seconds_reference}, {"statistics", r.seconds_statistics},
                   {"identify", r.seconds_identify}};
  return j;
}

std::string markdown_summary(const gemm_report& r) {
  std::string s = fmt::format("# tiebreak audit-gemm: {} x {} x {} ({} · {} -> {})\n\n", r.M, r.N, r.K,
                              r.tensors.count("a") ? std::string(r.tensors.at("a").format.name) : "?",
                              r.tensors.count("b") ? std::string(r.tensors.at("b").format.name) : "?",
                              r.tensors.count("d") ? std::string(r.tensors.at("d").format.name) : "?");
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
  return s;
}

}  // namespace tiebreak::audit
