// SPDX-License-Identifier: Apache-2.0
/// @file The tensor-core model (emu::mma_dot) compiled for the device equals the host build, bit for bit.
///
/// No tensor core is involved: the same TIEBREAK_HD source runs in a kernel and on the host on the
/// same operands, and every output element (bits and flags) must agree. Three layers, so that a
/// disagreement names its place:
///   1. the tile generator (emu::mma_gen_element) on the device equals the host's;
///   2. the rounding steps the model is made of: round_pack onto the alignment grid (the synthetic
///      format of mma_step) and into the accumulator formats, on random exact values;
///   3. mma_dot itself, the fast path and the general path, per instruction of the table.
/// Skipped without a GPU.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/emu/mma_gen.hpp"
#include "tiebreak/gpu/device.hpp"

#include "../../gpu/gpu_test_util.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

/// Problem sizes scale with TIEBREAK_MMA_GPU_CASES (compute-sanitizer runs set 2^16: the tools slow
/// every kernel and memcpy down 10-100x); default `dflt`.
std::size_t scaled(std::size_t dflt) {
  if (const char* s = std::getenv("TIEBREAK_MMA_GPU_CASES")) {
    const unsigned long long v = std::strtoull(s, nullptr, 10);
    if (v > 0) return std::min<std::size_t>(dflt, static_cast<std::size_t>(v));
  }
  return dflt;
}

using tiebreak::gpu::testing::dev_buf;

// ---- 1. the generator ---------------------------------------------------------------------------

__global__ void gen_kernel(mma_model m, std::uint64_t seed, std::uint64_t tiles, std::uint32_t* a, std::uint32_t* b,
                           std::uint32_t* c) {
  const std::uint64_t ta = static_cast<std::uint64_t>(m.m) * m.k, tb = static_cast<std::uint64_t>(m.k) * m.n,
                      tc = static_cast<std::uint64_t>(m.m) * m.n;
  const std::uint64_t per = ta + tb + tc;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < tiles * per;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t t = i / per, j = i % per;
    if (j < ta) {
      a[t * ta + j] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, t, mma_operand_kind::a, static_cast<int>(j / m.k), static_cast<int>(j % m.k)));
    } else if (j < ta + tb) {
      const std::uint64_t q = j - ta;
      b[t * tb + q] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, t, mma_operand_kind::b, static_cast<int>(q / m.n), static_cast<int>(q % m.n)));
    } else {
      const std::uint64_t q = j - ta - tb;
      c[t * tc + q] = static_cast<std::uint32_t>(
          mma_gen_element(m, seed, t, mma_operand_kind::c, static_cast<int>(q / m.n), static_cast<int>(q % m.n)));
    }
  }
}

/// Operands of `tiles` generated tiles, flattened to one row of A, one column of B and one C per
/// output element (so the element kernels read contiguous k-vectors).
struct elements {
  std::size_t count = 0;
  int k = 0;
  std::vector<std::uint32_t> a, b, c;  // count * k, count * k, count
};

void host_tiles(const mma_model& m, std::uint64_t seed, std::uint64_t tiles, std::vector<std::uint32_t>& A,
                std::vector<std::uint32_t>& B, std::vector<std::uint32_t>& C) {
  const std::size_t ta = static_cast<std::size_t>(m.m) * m.k, tb = static_cast<std::size_t>(m.k) * m.n,
                    tc = static_cast<std::size_t>(m.m) * m.n;
  A.resize(tiles * ta);
  B.resize(tiles * tb);
  C.resize(tiles * tc);
  for (std::uint64_t t = 0; t < tiles; ++t) mma_gen_tile(m, seed, t, &A[t * ta], &B[t * tb], &C[t * tc]);
}

elements flatten(const mma_model& m, std::uint64_t tiles, const std::vector<std::uint32_t>& A,
                 const std::vector<std::uint32_t>& B, const std::vector<std::uint32_t>& C) {
  const std::size_t M = m.m, N = m.n, K = m.k;
  elements e;
  e.k = m.k;
  e.count = tiles * M * N;
  e.a.resize(e.count * K);
  e.b.resize(e.count * K);
  e.c.resize(e.count);
  for (std::uint64_t t = 0; t < tiles; ++t)
    for (std::size_t r = 0; r < M; ++r)
      for (std::size_t col = 0; col < N; ++col) {
        const std::size_t el = (t * M + r) * N + col;
        for (std::size_t i = 0; i < K; ++i) {
          e.a[el * K + i] = A[t * M * K + r * K + i];
          e.b[el * K + i] = B[t * K * N + i * N + col];
        }
        e.c[el] = C[t * M * N + r * N + col];
      }
  return e;
}

class MmaModelGpu : public ::testing::TestWithParam<mma_instr> {};

TEST_P(MmaModelGpu, GeneratorOnDeviceEqualsHost) {
  TIEBREAK_REQUIRE_GPU();
  const mma_model& m = mma_entry(GetParam()).model;
  const std::uint64_t tiles = std::max<std::size_t>(1, scaled(4096 * 128) / 128), seed = 42;
  std::vector<std::uint32_t> A, B, C;
  host_tiles(m, seed, tiles, A, B, C);
  dev_buf<std::uint32_t> da(A.size()), db(B.size()), dc(C.size());
  ASSERT_TRUE(da.p && db.p && dc.p);
  gen_kernel<<<1024, 256>>>(m, seed, tiles, da.p, db.p, dc.p);
  TIEBREAK_CUDA_OK(cudaGetLastError());
  TIEBREAK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> gA, gB, gC;
  TIEBREAK_CUDA_OK(da.get(gA));
  TIEBREAK_CUDA_OK(db.get(gB));
  TIEBREAK_CUDA_OK(dc.get(gC));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < A.size(); ++i) bad += A[i] != gA[i];
  for (std::size_t i = 0; i < B.size(); ++i) bad += B[i] != gB[i];
  for (std::size_t i = 0; i < C.size(); ++i) bad += C[i] != gC[i];
  EXPECT_EQ(bad, 0u) << mma_instr_name(GetParam());
}

// ---- 2. the rounding steps ----------------------------------------------------------------------

/// One round_pack case: an exact value (sign, 64-bit significand, exponent) into the grid format of
/// mma_step (grid 2^g) or into an accumulator format.
struct rp_case {
  std::uint64_t sig;
  int exp;
  int g;        ///< grid exponent (grid cases)
  bool sign;
  bool grid;    ///< true: the alignment grid; false: `acc` below
  round_mode mode;
};
struct rp_out {
  std::uint64_t bits;
  std::uint8_t flags;
  std::int64_t step;
};

__host__ __device__ rp_out eval_rp(const rp_case& c, const format_desc& acc) {
  const format_desc grid{8, 52, 1 - (c.g + 52), special_style::ieee, 0, literal("grid")};
  const round_result r =
      round_pack(c.grid ? grid : acc, make_exact(c.sign, c.sig, c.exp), rounding{c.mode, 0});
  return rp_out{r.bits, r.flags, r.step};
}

__global__ void rp_kernel(const rp_case* cs, std::size_t n, format_desc acc, rp_out* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = eval_rp(cs[i], acc);
}

std::vector<rp_case> rp_cases(bool grid, std::size_t n) {
  std::vector<rp_case> v(n);
  const round_mode modes[] = {round_mode::rz, round_mode::rne, round_mode::rd, round_mode::ru, round_mode::rna};
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = splitmix64(0x5eed0000 + i), h2 = splitmix64(h), h3 = splitmix64(h2);
    rp_case& c = v[i];
    c.grid = grid;
    c.sign = (h3 & 1) != 0;
    c.mode = modes[(h3 >> 1) % 5];
    const int bits = 1 + static_cast<int>((h3 >> 8) % 62);  // significand width 1..62
    c.sig = (h2 >> (64 - bits)) | (std::uint64_t{1} << (bits - 1));
    if (grid) {
      // As in mma_step: an addend below 2^(g + 52) with bits below the grid 2^g.
      c.g = static_cast<int>((h >> 16) % 500) - 250;
      const int lead_max = c.g + 50;                     // leading bit at most 2^(g+50)
      const int lead = lead_max - static_cast<int>((h >> 32) % 80);
      c.exp = lead - (bits - 1);
    } else {
      c.g = 0;
      c.exp = static_cast<int>((h >> 16) % 340) - 200 - (bits - 1);
    }
  }
  return v;
}

void check_round_pack(bool grid, const format_desc& acc, const char* what) {
  const std::size_t n = scaled(std::size_t{1} << 22);
  const std::vector<rp_case> cs = rp_cases(grid, n);
  dev_buf<rp_case> dcs(n);
  dev_buf<rp_out> dout(n);
  ASSERT_TRUE(dcs.p && dout.p);
  TIEBREAK_CUDA_OK(dcs.put(cs));
  rp_kernel<<<1024, 256>>>(dcs.p, n, acc, dout.p);
  TIEBREAK_CUDA_OK(cudaGetLastError());
  TIEBREAK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<rp_out> got;
  TIEBREAK_CUDA_OK(dout.get(got));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const rp_out h = eval_rp(cs[i], acc);
    if (h.bits == got[i].bits && h.flags == got[i].flags && h.step == got[i].step) continue;
    if (++bad <= 8)
      ADD_FAILURE() << what << ": sign " << cs[i].sign << " sig 0x" << std::hex << cs[i].sig << std::dec << " exp "
                    << cs[i].exp << " g " << cs[i].g << " mode " << to_string(cs[i].mode) << ": host bits 0x"
                    << std::hex << h.bits << " flags " << int{h.flags} << " step " << std::dec << h.step
                    << ", device bits 0x" << std::hex << got[i].bits << " flags " << int{got[i].flags} << " step "
                    << std::dec << got[i].step;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << n << " cases differ";
}

TEST(MmaRoundPackGpu, AlignmentGridOnDeviceEqualsHost) {
  TIEBREAK_REQUIRE_GPU();
  check_round_pack(true, formats::f32, "grid");
}

TEST(MmaRoundPackGpu, AccumulatorFormatsOnDeviceEqualHost) {
  TIEBREAK_REQUIRE_GPU();
  check_round_pack(false, formats::f32, "f32");
  check_round_pack(false, formats::f16, "f16");
  check_round_pack(false, mma_acc_format(13), "e8m13");
}

// ---- 3. mma_dot ---------------------------------------------------------------------------------

struct dot_out {
  std::uint32_t bits;
  std::uint8_t flags;
  bool align_inexact;
};

template <bool Fast>
__host__ __device__ dot_out eval_dot(const mma_model& m, const std::uint32_t* a, const std::uint32_t* b,
                                     std::uint32_t c) {
  const mma_result r = mma_dot_with<Fast>(m, c, emu::detail::mma_raw_ops<std::uint32_t, std::uint32_t>{m, a, 1, b, 1});
  return dot_out{static_cast<std::uint32_t>(r.bits), r.flags, r.align_inexact};
}

template <bool Fast>
__global__ void dot_kernel(mma_model m, std::size_t n, const std::uint32_t* a, const std::uint32_t* b,
                           const std::uint32_t* c, dot_out* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = eval_dot<Fast>(m, a + i * m.k, b + i * m.k, c[i]);
}

std::string hexs(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

template <bool Fast>
void check_dot(const mma_model& m, const elements& e, const char* what) {
  dev_buf<std::uint32_t> da(e.a.size()), db(e.b.size()), dc(e.c.size());
  dev_buf<dot_out> dout(e.count);
  ASSERT_TRUE(da.p && db.p && dc.p && dout.p);
  TIEBREAK_CUDA_OK(da.put(e.a));
  TIEBREAK_CUDA_OK(db.put(e.b));
  TIEBREAK_CUDA_OK(dc.put(e.c));
  dot_kernel<Fast><<<1024, 128>>>(m, e.count, da.p, db.p, dc.p, dout.p);
  TIEBREAK_CUDA_OK(cudaGetLastError());
  TIEBREAK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<dot_out> got;
  TIEBREAK_CUDA_OK(dout.get(got));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < e.count; ++i) {
    const dot_out h = eval_dot<Fast>(m, &e.a[i * e.k], &e.b[i * e.k], e.c[i]);
    if (h.bits == got[i].bits && h.flags == got[i].flags && h.align_inexact == got[i].align_inexact) continue;
    if (++bad <= 4) {
      std::string ops = "c=" + hexs(e.c[i]) + " a=";
      for (int j = 0; j < e.k; ++j) ops += hexs(e.a[i * e.k + j]) + ",";
      ops += " b=";
      for (int j = 0; j < e.k; ++j) ops += hexs(e.b[i * e.k + j]) + ",";
      ADD_FAILURE() << what << " element " << i << ": host " << hexs(h.bits) << " flags " << int{h.flags}
                    << " lost " << h.align_inexact << ", device " << hexs(got[i].bits) << " flags "
                    << int{got[i].flags} << " lost " << got[i].align_inexact << "; " << ops;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << e.count << " elements differ";
}

TEST_P(MmaModelGpu, ModelOnDeviceEqualsHost) {
  TIEBREAK_REQUIRE_GPU();
  const mma_model& m = mma_entry(GetParam()).model;
  const std::uint64_t tiles = std::max<std::size_t>(1, scaled(2048 * 128) / 128);
  std::vector<std::uint32_t> A, B, C;
  host_tiles(m, 42, tiles, A, B, C);
  const elements e = flatten(m, tiles, A, B, C);
  const std::string name(mma_instr_name(GetParam()));
  check_dot<true>(m, e, (name + " fast path").c_str());
  check_dot<false>(m, e, (name + " general path").c_str());
}

INSTANTIATE_TEST_SUITE_P(AllInstructions, MmaModelGpu, ::testing::ValuesIn(all_mma_instrs),
                         [](const ::testing::TestParamInfo<mma_instr>& i) {
                           std::string s(mma_instr_name(i.param));
                           for (char& ch : s)
                             if (ch == '.') ch = '_';
                           return s;
                         });

}  // namespace
