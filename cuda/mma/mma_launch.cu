// SPDX-License-Identifier: Apache-2.0
/// @file Non-template launchers of the tensor-core identification experiments, validation and GEMM (tiebreak/gpu/mma.hpp).
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "mma_device.cuh"
#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/mma.hpp"

namespace tiebreak::gpu {

namespace {

using namespace mma_detail;
using detail::device_buffer;

int g_desc_variant = 0;

constexpr detail::cuda_check check{"tiebreak::gpu::mma"};

/// Calls f.template operator()<I>() for the runtime instruction i.
template <class F>
decltype(auto) dispatch(emu::mma_instr i, F&& f) {
  switch (i) {
    case mma_instr::mma_m16n8k16_bf16: return f.template operator()<mma_instr::mma_m16n8k16_bf16>();
    case mma_instr::mma_m16n8k16_f16: return f.template operator()<mma_instr::mma_m16n8k16_f16>();
    case mma_instr::mma_m16n8k8_tf32: return f.template operator()<mma_instr::mma_m16n8k8_tf32>();
    case mma_instr::mma_m16n8k16_f16_f16out: return f.template operator()<mma_instr::mma_m16n8k16_f16_f16out>();
    case mma_instr::wgmma_k16_bf16: return f.template operator()<mma_instr::wgmma_k16_bf16>();
    case mma_instr::wgmma_k16_f16: return f.template operator()<mma_instr::wgmma_k16_f16>();
    case mma_instr::wgmma_k32_e4m3: return f.template operator()<mma_instr::wgmma_k32_e4m3>();
    default: return f.template operator()<mma_instr::wgmma_k32_e5m2>();
  }
}

}  // namespace

bool mma_available(emu::mma_instr i) noexcept {
  int n = 0, dev = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { cudaGetLastError(); return false; }
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (p.major != 9 || p.minor != 0) return false;  // built for sm_90a only (wgmma)
  cudaFuncAttributes attr{};
  const cudaError_t e = dispatch(i, [&]<mma_instr I>() { return launch<I>::attributes(&attr); });
  cudaGetLastError();
  return e == cudaSuccess;
}

std::string mma_device_description() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    cudaGetLastError();
    return std::string("no usable GPU: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "no device");
  }
  std::string d = detail::current_device_description();
  return d.empty() ? "no usable GPU" : d;
}

void mma_set_wgmma_desc_variant(int variant) { g_desc_variant = variant == 0 ? 0 : 1; }
int mma_wgmma_desc_variant() { return g_desc_variant; }

void mma_run_tiles(emu::mma_instr i, std::size_t count, const std::uint32_t* A, const std::uint32_t* B,
                   const std::uint32_t* C, std::uint32_t* D) {
  const emu::mma_model& m = emu::mma_entry(i).model;
  const std::size_t na = count * m.m * m.k, nb = count * m.k * m.n, nc = count * m.m * m.n;
  device_buffer<std::uint32_t> da(na, check), db(nb, check), dc(nc, check), dd(nc, check);
  check(cudaMemcpy(da.data(), A, na * 4, cudaMemcpyHostToDevice), "copy A");
  check(cudaMemcpy(db.data(), B, nb * 4, cudaMemcpyHostToDevice), "copy B");
  check(cudaMemcpy(dc.data(), C, nc * 4, cudaMemcpyHostToDevice), "copy C");
  check(dispatch(i, [&]<mma_instr I>() {
          return launch<I>::run_tiles(count, da.data(), db.data(), dc.data(), dd.data(), g_desc_variant);
        }),
        "run_tiles launch");
  check(cudaDeviceSynchronize(), "run_tiles");
  check(cudaMemcpy(D, dd.data(), nc * 4, cudaMemcpyDeviceToHost), "copy D");
}

mma_validation mma_validate(emu::mma_instr i, const std::vector<emu::mma_model>& models, std::uint64_t min_cases,
                            std::uint64_t seed, double max_seconds) {
  if (models.empty() || models.size() > static_cast<std::size_t>(max_models))
    throw std::invalid_argument("mma_validate: 1 to 4 models");
  model_set set{};
  set.n = static_cast<int>(models.size());
  for (int j = 0; j < set.n; ++j) set.m[j] = models[static_cast<std::size_t>(j)];
  const emu::mma_model& m = emu::mma_entry(i).model;
  const std::uint64_t per_tile = static_cast<std::uint64_t>(m.m) * m.n;
  const std::uint64_t chunk = (std::uint64_t{1} << 24) / per_tile;  // ~16.7 M cases per launch
  device_buffer<unsigned long long> mm(max_models, check);
  device_buffer<unsigned int> nrec(1, check);
  device_buffer<dev_mismatch> rec(max_records, check);
  check(cudaMemset(mm.data(), 0, sizeof(unsigned long long) * max_models), "memset");
  check(cudaMemset(nrec.data(), 0, sizeof(unsigned int)), "memset");
  mma_validation out;
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t tiles = 0;
  while (tiles * per_tile < min_cases) {
    check(dispatch(i, [&]<mma_instr I>() {
            return launch<I>::validate(set, seed, tiles, chunk, mm.data(), nrec.data(), rec.data(), g_desc_variant);
          }),
          "validate launch");
    check(cudaDeviceSynchronize(), "validate");
    tiles += chunk;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > max_seconds) break;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.tiles = tiles;
  out.cases = tiles * per_tile;
  std::vector<unsigned long long> counts(max_models);
  unsigned int n = 0;
  check(cudaMemcpy(counts.data(), mm.data(), sizeof(unsigned long long) * max_models, cudaMemcpyDeviceToHost), "copy");
  check(cudaMemcpy(&n, nrec.data(), sizeof(unsigned int), cudaMemcpyDeviceToHost), "copy");
  // Only the records the kernel wrote (initcheck: the rest of the buffer is never initialised).
  const unsigned int kept = std::min(n, static_cast<unsigned int>(max_records));
  std::vector<dev_mismatch> recs(kept);
  if (kept != 0)
    check(cudaMemcpy(recs.data(), rec.data(), sizeof(dev_mismatch) * kept, cudaMemcpyDeviceToHost), "copy");
  for (int j = 0; j < set.n; ++j) out.mismatches.push_back(counts[static_cast<std::size_t>(j)]);
  for (unsigned int r = 0; r < kept; ++r)
    out.first.push_back(mma_mismatch{recs[r].tile, recs[r].row, recs[r].col, recs[r].model, recs[r].hw, recs[r].predicted});
  return out;
}

void mma_gemm(emu::mma_instr i, int M, int N, int K, const std::uint32_t* A, const std::uint32_t* B,
              const std::uint32_t* C, std::uint32_t* D) {
  const emu::mma_model& m = emu::mma_entry(i).model;
  if (M % m.m != 0 || N % 8 != 0 || K % m.k != 0) throw std::invalid_argument("mma_gemm: shape not a multiple of the tile");
  const std::size_t na = static_cast<std::size_t>(M) * K, nb = static_cast<std::size_t>(K) * N,
                    nc = static_cast<std::size_t>(M) * N;
  device_buffer<std::uint32_t> da(na, check), db(nb, check), dc(nc, check), dd(nc, check);
  check(cudaMemcpy(da.data(), A, na * 4, cudaMemcpyHostToDevice), "copy A");
  check(cudaMemcpy(db.data(), B, nb * 4, cudaMemcpyHostToDevice), "copy B");
  check(cudaMemcpy(dc.data(), C, nc * 4, cudaMemcpyHostToDevice), "copy C");
  check(dispatch(i, [&]<mma_instr I>() {
          return launch<I>::gemm(M, N, K, da.data(), db.data(), dc.data(), dd.data(), g_desc_variant);
        }),
        "gemm launch");
  check(cudaDeviceSynchronize(), "gemm");
  check(cudaMemcpy(D, dd.data(), nc * 4, cudaMemcpyDeviceToHost), "copy D");
}

}  // namespace tiebreak::gpu
