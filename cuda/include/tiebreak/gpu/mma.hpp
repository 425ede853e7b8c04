// SPDX-License-Identifier: Apache-2.0
/// @file Launchers of the tensor-core identification experiments, the model validation and the MMA GEMM (plain C++).
///
/// Every encoding crosses this interface in a std::uint32_t container whatever its format (bf16,
/// f16, e4m3, e5m2 in the low bits; tf32 and f32 as the f32 bit pattern). Matrices are row-major.
/// The kernels are built for sm_90a (wgmma) and sm_90 (mma.sync); see docs/tensor-cores.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tiebreak/emu/mma.hpp"

namespace tiebreak::gpu {

/// True when a GPU is present that runs instruction `i` (sm_90 for mma.sync, an sm_90a kernel image
/// for wgmma). Never throws; false without a driver or GPU.
bool mma_available(emu::mma_instr i) noexcept;

/// "NVIDIA H200 (sm_90)" or the reason no GPU can run the experiments.
std::string mma_device_description();

/// How the wgmma shared-memory descriptors name the two core-matrix strides (the probe's layout
/// self-test picks the one whose results are right): 0 = LBO is the K-direction stride and SBO the
/// M/N-direction stride; 1 = the other way round. Default 0.
void mma_set_wgmma_desc_variant(int variant);
int mma_wgmma_desc_variant();

/// Executes `count` independent instructions `i`. Tile t reads A[t] (m x k), B[t] (k x n), C[t]
/// (m x n) and writes D[t] (m x n); shapes are those of emu::mma_entry(i).model.
/// Throws std::runtime_error on a CUDA error.
void mma_run_tiles(emu::mma_instr i, std::size_t count, const std::uint32_t* A, const std::uint32_t* B,
                   const std::uint32_t* C, std::uint32_t* D);

/// One disagreement between the hardware and a model.
struct mma_mismatch {
  std::uint64_t tile = 0;
  int row = 0, col = 0;
  int model = 0;                 ///< index into the models passed to mma_validate
  std::uint32_t hw = 0, predicted = 0;
};

/// Outcome of a validation run.
struct mma_validation {
  std::uint64_t cases = 0;               ///< output elements compared (per model)
  std::uint64_t tiles = 0;
  std::vector<std::uint64_t> mismatches; ///< per model
  std::vector<mma_mismatch> first;       ///< the first mismatches (at most 64)
  double seconds = 0;
};

/// Runs instruction `i` on tiles drawn by emu::mma_gen_element(models[0], seed, tile, ...) for
/// tiles 0, 1, 2, ... and compares every output element with each of `models` (at most 4, all of
/// instruction `i`'s shape and formats), evaluated on the device. Stops after at least `min_cases`
/// elements, or earlier once `max_seconds` have passed (cases then says how many ran).
mma_validation mma_validate(emu::mma_instr i, const std::vector<emu::mma_model>& models, std::uint64_t min_cases,
                            std::uint64_t seed, double max_seconds);

/// D = A * B + C by a kernel made of instruction `i`: one warp (mma.sync) or warpgroup (wgmma) per
/// m x 8 output tile, the k loop over chunks of the instruction's k in increasing order, each
/// instruction's D the next one's C: the tile order of emu::gemm. Preconditions: M % m == 0,
/// N % 8 == 0, K % k == 0. A is M x K, B is K x N, C and D are M x N.
void mma_gemm(emu::mma_instr i, int M, int N, int K, const std::uint32_t* A, const std::uint32_t* B,
              const std::uint32_t* C, std::uint32_t* D);

}  // namespace tiebreak::gpu
