// Debug: round_pack on the device vs host, printing every field.
#include <cstdio>
#include <cstdint>
#include "tiebreak/fp/round.hpp"
#include "tiebreak/emu/mma.hpp"
using namespace tiebreak;

struct rp_case { std::uint64_t sig; int exp; int g; bool sign; bool grid; round_mode mode; };
struct rp_out { std::uint64_t bits; std::uint8_t flags; std::int64_t step; int cls; int lsb; unsigned long long sig_lo, sig_hi; int xexp; };

__host__ __device__ rp_out eval_rp(const rp_case& c, const format_desc& acc) {
  const format_desc grid{8, 52, 1 - (c.g + 52), special_style::ieee, 0, literal("grid")};
  const exact_value x = make_exact(c.sign, c.sig, c.exp);
  const round_result r = round_pack(c.grid ? grid : acc, x, rounding{c.mode, 0});
  return rp_out{r.bits, r.flags, r.step, (int)x.cls, r.lsb_exp, (unsigned long long)x.sig, (unsigned long long)(x.sig >> 64), x.exp};
}
__global__ void k_param(const rp_case* cs, int n, format_desc acc, rp_out* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = eval_rp(cs[i], acc);
}
__global__ void k_local(const rp_case* cs, int n, rp_out* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; constexpr format_desc acc = formats::f32;
  if (i < n) out[i] = eval_rp(cs[i], acc);
}
__global__ void k_sizes(int* s) {
  s[0] = sizeof(exact_value); s[1] = alignof(exact_value); s[2] = sizeof(round_result); s[3] = alignof(u128);
  s[4] = sizeof(format_desc); s[5] = sizeof(rp_case); s[6] = sizeof(emu::mma_model); s[7] = alignof(round_result);
}
int main() {
  rp_case cs[] = {{0x105, -133, 0, true, false, round_mode::rd}, {0x2c8f412c, 21, 0, true, false, round_mode::rne},
                  {0xae3024108513bull, 12, 49, true, true, round_mode::rd}, {0x2c8f412c, -54, -60, true, true, round_mode::rne},
                  {0x1, 0, 0, false, false, round_mode::rz}, {0x800000, -23, 0, false, false, round_mode::rne}};
  const int n = sizeof(cs) / sizeof(cs[0]);
  rp_case* dcs; rp_out* dout; int* ds;
  cudaMalloc(&dcs, sizeof cs); cudaMalloc(&dout, n * sizeof(rp_out)); cudaMalloc(&ds, 8 * sizeof(int));
  cudaMemcpy(dcs, cs, sizeof cs, cudaMemcpyHostToDevice);
  int hs[8]; k_sizes<<<1, 1>>>(ds); cudaMemcpy(hs, ds, sizeof hs, cudaMemcpyDeviceToHost);
  std::printf("device sizes: exact_value %d/%d round_result %d/%d u128 align %d format_desc %d rp_case %d mma_model %d\n", hs[0], hs[1], hs[2], hs[7], hs[3], hs[4], hs[5], hs[6]);
  std::printf("host   sizes: exact_value %zu/%zu round_result %zu/%zu u128 align %zu format_desc %zu rp_case %zu mma_model %zu\n", sizeof(exact_value), alignof(exact_value), sizeof(round_result), alignof(round_result), alignof(u128), sizeof(format_desc), sizeof(rp_case), sizeof(emu::mma_model));
  rp_out h[16], d1[16], d2[16];
  cudaMemset(dout, 0xab, n * sizeof(rp_out));
  k_param<<<1, 32>>>(dcs, n, formats::f32, dout); std::printf("k_param: %s / %s\n", cudaGetErrorString(cudaGetLastError()), cudaGetErrorString(cudaDeviceSynchronize()));
  cudaMemcpy(d1, dout, n * sizeof(rp_out), cudaMemcpyDeviceToHost);
  cudaMemset(dout, 0xab, n * sizeof(rp_out));
  k_local<<<1, 32>>>(dcs, n, dout); std::printf("k_local: %s / %s\n", cudaGetErrorString(cudaGetLastError()), cudaGetErrorString(cudaDeviceSynchronize()));
  cudaMemcpy(d2, dout, n * sizeof(rp_out), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    h[i] = eval_rp(cs[i], formats::f32);
    auto pr = [](const char* w, const rp_out& o) { std::printf("  %-6s bits %#llx flags %d step %lld cls %d lsb %d xsig %#llx:%#llx xexp %d\n", w, (unsigned long long)o.bits, o.flags, (long long)o.step, o.cls, o.lsb, o.sig_hi, o.sig_lo, o.xexp); };
    std::printf("case %d\n", i); pr("host", h[i]); pr("param", d1[i]); pr("local", d2[i]);
  }
  return 0;
}
