// SPDX-License-Identifier: Apache-2.0
/// @file tiebreak_ex2_probe: the SFU's ex2.approx{.ftz,}.f32 (MUFU.EX2), tabulated and checked against
/// structural hypotheses on all 2^32 inputs (issue 18: a modelled exponential; include/tiebreak/fp/sfu.hpp).
///
///   tiebreak_ex2_probe [--check] [OUTDIR]
/// writes OUTDIR (default .) /ex2_pos.u32 (x = k 2^-23, k < 2^23), ex2_neg.u32 (x = -k 2^-23) and
/// ex2_half.u32 (x = 0.5 + k 2^-24), 32 MiB each (tools/ex2-pack.py packs them; its `table` command
/// makes the host library's src/host/data/ex2_approx_*.bin from ex2_pos.u32), then sweeps every input
/// and prints, per category of x, how many inputs each hypothesis mispredicts (the first few
/// mismatches below each row). Every hypothesis predicts the canonical NaN 0x7fffffff for NaN.
/// --check also compares the embedded table (tiebreak/host/sfu.hpp, sm_90) with ex2_pos.u32 and runs
/// fp/sfu.hpp's model with it on the device against both instructions; the exit status is then 1 on
/// any difference. The tables and the hypotheses use only ex2.approx.ftz.f32: run the probe on
/// another architecture to capture its table.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "tiebreak/fp/sfu.hpp"
#include "tiebreak/host/sfu.hpp"

namespace {

using namespace tiebreak;

#define CK(x)                                                                                \
  do {                                                                                       \
    const cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "tiebreak_ex2_probe: %s: %s\n", #x, cudaGetErrorString(e_));     \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

constexpr std::uint32_t n_table = sfu::ex2_table_size;

__device__ __forceinline__ float ex2f(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float ex2nf(float x) {
  float y;
  asm volatile("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__global__ void tables(std::uint32_t* pos, std::uint32_t* neg, std::uint32_t* half) {
  const std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n_table) return;
  const float f = static_cast<float>(k) * 0x1p-23f;  // exact
  pos[k] = __float_as_uint(ex2f(f));
  neg[k] = __float_as_uint(ex2f(-f));
  half[k] = __float_as_uint(ex2f(0.5f + static_cast<float>(k) * 0x1p-24f));
}

constexpr int n_hyp = 6;   // hypotheses
constexpr int n_cat = 9;   // categories of x (category())
constexpr int n_keep = 8;  // first mismatches kept per hypothesis / per model variant
constexpr int cat_nan = 8;

struct stats {
  unsigned long long miss[n_hyp][n_cat];
  unsigned long long count[n_cat];
  unsigned long long nonftz_diff[n_cat];
  unsigned int nkeep[n_hyp];
  std::uint32_t keep[n_hyp][n_keep][3];  // x, hardware, prediction
  // --check: fp/sfu.hpp with the embedded table; [0] ex2.approx.ftz.f32, [1] ex2.approx.f32.
  unsigned long long model_miss[2][n_cat];
  unsigned int model_nkeep[2];
  std::uint32_t model_keep[2][n_keep][3];
};

// A table value t in [0.5, 2) scaled by 2^i with ftz: exponent field add, 0 below the normal range.
__device__ std::uint32_t scale(std::uint32_t t, int i) {
  const int e = static_cast<int>((t >> 23) & 0xff) + i;
  if (e <= 0) return 0;
  if (e >= 255) return 0x7f800000u;
  return (t & 0x807fffffu) | (static_cast<std::uint32_t>(e) << 23);
}

// 0..3: x >= 0 with |x| < 2^-23, < 1, < 126, >= 126 (Inf included); 4..7: the same for x < 0
// (-0 in 4, x <= -126 and -Inf in 7; the names' intervals are of |x|); 8: NaN.
__device__ int category(std::uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return cat_nan;
  const float a = fabsf(__uint_as_float(u));
  const int s = (u >> 31) ? 4 : 0;
  if (a < 0x1p-23f) return s + 0;
  if (a < 1.0f) return s + 1;
  if (a < 126.0f) return s + 2;
  return s + 3;
}

/// sfu::ex2_approx*'s `table(F)` on the device (__host__ __device__: nvcc rejects a __device__-only
/// callable in the model's constexpr __host__ __device__ functions).
struct global_table {
  const std::uint32_t* t;
  __host__ __device__ std::uint32_t operator()(std::uint32_t f) const noexcept { return t[f]; }
};

__device__ void keep_mismatch(unsigned int* nkeep, std::uint32_t (*keep)[3], std::uint32_t u, std::uint32_t got,
                              std::uint32_t pred) {
  const unsigned int n = atomicAdd(nkeep, 1u);
  if (n < n_keep) {
    keep[n][0] = u;
    keep[n][1] = got;
    keep[n][2] = pred;
  }
}

__global__ void sweep(std::uint32_t base, const std::uint32_t* pos, const std::uint32_t* neg, const std::uint32_t* model_table,
                      stats* st) {
  const std::uint32_t u = base + blockIdx.x * blockDim.x + threadIdx.x;
  const float x = __uint_as_float(u);
  const std::uint32_t got = __float_as_uint(ex2f(x));
  const std::uint32_t got_n = __float_as_uint(ex2nf(x));
  const int cat = category(u);
  atomicAdd(&st->count[cat], 1ull);
  if (got_n != got) atomicAdd(&st->nonftz_diff[cat], 1ull);
  if (model_table != nullptr) {
    const global_table tab{model_table};
    const std::uint32_t m[2] = {sfu::ex2_approx_ftz_bits(u, tab), __float_as_uint(sfu::ex2_approx(x, tab))};
    const std::uint32_t g[2] = {got, got_n};
    for (int v = 0; v < 2; ++v)
      if (m[v] != g[v]) {
        atomicAdd(&st->model_miss[v][cat], 1ull);
        keep_mismatch(&st->model_nkeep[v], st->model_keep[v], u, g[v], m[v]);
      }
  }
  long long q[n_hyp] = {};
  if (cat != cat_nan) {
    double xd = static_cast<double>(x) * 8388608.0;  // x 2^23, exact in double
    if (xd > 2e9) xd = 2e9;                          // |x| >= 238: far out of range either way
    if (xd < -2e9) xd = -2e9;
    q[0] = static_cast<long long>(trunc(xd));        // toward zero, two's complement fraction
    q[1] = static_cast<long long>(floor(xd));        // toward -inf
    q[2] = static_cast<long long>(rint(xd));         // nearest even
    q[3] = static_cast<long long>(trunc(fabs(xd)));  // sign-magnitude, magnitude truncated
    q[4] = static_cast<long long>(rint(fabs(xd)));   // sign-magnitude, magnitude rounded
    q[5] = static_cast<long long>(ceil(xd));         // toward +inf
  }
  const bool negx = (u >> 31) != 0;
  for (int h = 0; h < n_hyp; ++h) {
    std::uint32_t pred;
    const long long m = q[h];
    const int i = static_cast<int>(m >> 23);  // floor division (arithmetic shift)
    const std::uint32_t f = static_cast<std::uint32_t>(m & 0x7fffff);
    if (cat == cat_nan)
      pred = sfu::ex2_nan;
    else if (h == 3 || h == 4)
      pred = negx ? scale(neg[f], -i) : scale(pos[f], i);
    else
      pred = scale(pos[f], i);
    if (pred != got) {
      atomicAdd(&st->miss[h][cat], 1ull);
      keep_mismatch(&st->nkeep[h], st->keep[h], u, got, pred);
    }
  }
}

void print_kept(unsigned int n, const std::uint32_t (*keep)[3]) {
  for (unsigned int k = 0; k < n && k < n_keep; ++k)
    std::printf("    x = 0x%08x (%a): hardware 0x%08x, predicted 0x%08x\n", keep[k][0],
                static_cast<double>(bits_to_f32(keep[k][0])), keep[k][1], keep[k][2]);
}

void write_file(const std::string& path, const std::vector<std::uint32_t>& h) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(h.data(), 4, h.size(), f) != h.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "tiebreak_ex2_probe: cannot write %s\n", path.c_str());
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = ".";
  bool check = false;
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], "--check") == 0) {
      check = true;
    } else if (std::strcmp(argv[a], "--help") == 0 || std::strcmp(argv[a], "-h") == 0 || argv[a][0] == '-') {
      std::fprintf(stderr, "usage: tiebreak_ex2_probe [--check] [OUTDIR]\n");
      return std::strcmp(argv[a], "--help") == 0 || std::strcmp(argv[a], "-h") == 0 ? 0 : 2;
    } else {
      out = argv[a];
    }
  }
  int dev = 0;
  cudaDeviceProp prop{};
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

  const std::size_t n = n_table;
  std::uint32_t *pos, *neg, *half;
  CK(cudaMalloc(&pos, n * 4));
  CK(cudaMalloc(&neg, n * 4));
  CK(cudaMalloc(&half, n * 4));
  tables<<<n / 256, 256>>>(pos, neg, half);
  CK(cudaGetLastError());
  std::vector<std::uint32_t> h(n), captured;
  const char* names[3] = {"ex2_pos.u32", "ex2_neg.u32", "ex2_half.u32"};
  std::uint32_t* d[3] = {pos, neg, half};
  for (int t = 0; t < 3; ++t) {
    CK(cudaMemcpy(h.data(), d[t], n * 4, cudaMemcpyDeviceToHost));
    write_file(out + "/" + names[t], h);
    if (t == 0) captured = h;
  }
  std::printf("tables: %s/{ex2_pos,ex2_neg,ex2_half}.u32 (2^23 words each)\n", out.c_str());

  bool differs = false;
  std::uint32_t* model_table = nullptr;
  if (check) {
    const auto e = host::ex2_approx_sm90_table();
    std::uint64_t diff = 0;
    for (std::size_t k = 0; k < n; ++k)
      if (e[k] != captured[k] && ++diff <= 8)
        std::printf("    T[%zu]: embedded 0x%08x, this device 0x%08x\n", k, e[k], captured[k]);
    std::printf("embedded sm_90 table vs this device's ex2_pos: %llu of %zu entries differ\n",
                static_cast<unsigned long long>(diff), n);
    differs = diff != 0;
    CK(cudaMalloc(&model_table, n * 4));
    CK(cudaMemcpy(model_table, e.data(), n * 4, cudaMemcpyHostToDevice));
  }

  stats* st;
  CK(cudaMallocManaged(&st, sizeof(stats)));
  CK(cudaMemset(st, 0, sizeof(stats)));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a));
  const std::uint32_t chunk = 1u << 28;
  for (std::uint64_t base = 0; base < (std::uint64_t{1} << 32); base += chunk) {
    sweep<<<chunk / 256, 256>>>(static_cast<std::uint32_t>(base), pos, neg, model_table, st);
    CK(cudaGetLastError());
  }
  CK(cudaEventRecord(b));
  CK(cudaDeviceSynchronize());
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  std::printf("sweep of 2^32 inputs: %.1f ms\n\n", static_cast<double>(ms));

  const char* cn[n_cat] = {"+|x|<2^-23", "+[2^-23,1)", "+[1,126)", "+>=126", "-|x|<2^-23", "-[2^-23,1)", "-[1,126)", "->=126", "NaN"};
  const char* hn[n_hyp] = {"trunc two's", "floor", "rne two's", "trunc sign-mag", "rne sign-mag", "ceil"};
  auto row = [&](const char* name, const unsigned long long* v) {
    std::printf("%-16s", name);
    for (int c = 0; c < n_cat; ++c) std::printf(" %11llu", v[c]);
    std::printf("\n");
  };
  std::printf("%-16s", "category");
  for (int c = 0; c < n_cat; ++c) std::printf(" %11s", cn[c]);
  std::printf("\n");
  row("inputs", st->count);
  row("non-ftz differs", st->nonftz_diff);
  std::printf("mispredicted by hypothesis (ex2.approx.ftz.f32; NaN: 0x%08x):\n", sfu::ex2_nan);
  for (int hh = 0; hh < n_hyp; ++hh) {
    row(hn[hh], st->miss[hh]);
    print_kept(st->nkeep[hh], st->keep[hh]);
  }
  if (check) {
    std::printf("fp/sfu.hpp with the embedded sm_90 table, mismatches:\n");
    const char* vn[2] = {"ex2.approx.ftz", "ex2.approx"};
    for (int v = 0; v < 2; ++v) {
      row(vn[v], st->model_miss[v]);
      print_kept(st->model_nkeep[v], st->model_keep[v]);
      differs = differs || st->model_nkeep[v] != 0;
    }
    std::printf("check: %s\n", differs ? "FAILED (the model or its table differs from this device)"
                                       : "the model matches this device on all 2^32 inputs, both variants");
  }
  return differs ? 1 : 0;
}
