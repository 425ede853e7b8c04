// SPDX-License-Identifier: Apache-2.0
/// @file Sweep kernels: the core's model and the hardware instruction, side by side, counted on the device.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/hw.cuh"
#include "tiebreak/emu/instr_table.hpp"
#include "tiebreak/gpu/sweep.hpp"

namespace tiebreak::gpu::detail {

/// The sweep launchers' CUDA error check ("tiebreak::gpu: <what>: <CUDA's error string>").
inline constexpr cuda_check check{"tiebreak::gpu"};

/// Device-side tallies of one sweep (zeroed by the host before the first chunk).
struct sweep_state {
  unsigned long long covered;
  unsigned long long mismatches;
  unsigned long long bins[instr_bin_count];
  unsigned int recorded;  ///< number of mismatches that asked for a slot (may exceed max_recorded)
  mismatch first[max_recorded];
};

/// Where the sweep's inputs come from.
struct sweep_source {
  std::uint64_t begin;  ///< first index
  std::uint64_t count;  ///< indices [begin, begin + count)
  int fma_kind;         ///< -1: the index is the input; else an fma_sample
  std::uint64_t param;  ///< fma_input's parameter
};

template <instr_op Op>
__device__ __forceinline__ std::uint64_t input_at(const sweep_source& s, std::uint64_t index) {
  if (s.fma_kind < 0) return index;
  constexpr format_desc f = desc_of(instr_desc_of(Op).from);
  return fma_input(f, static_cast<fma_sample>(s.fma_kind), index, s.param);
}

/// Grid-stride sweep. Coverage is counted per thread and reduced per warp: the host checks that it
/// equals the number of inputs asked for, so a launch that skipped work cannot pass.
template <instr_op Op>
__global__ void __launch_bounds__(256) sweep_kernel(sweep_source src, sweep_state* st) {
  constexpr instr_desc d = instr_desc_of(Op);
  __shared__ unsigned int bins[instr_bin_count];
  for (int i = threadIdx.x; i < instr_bin_count; i += blockDim.x) bins[i] = 0;
  __syncthreads();

  unsigned long long covered = 0, mism = 0;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < src.count; i += stride) {
    const std::uint64_t in = input_at<Op>(src, src.begin + i);
    const std::uint32_t core = instr_model(d, in);
    const std::uint32_t hwr = hw::result<Op>(in);
    ++covered;
    if (core != hwr) {
      ++mism;
      atomicAdd(&bins[instr_bin(d, in)], 1u);
      if (*static_cast<volatile unsigned int*>(&st->recorded) < static_cast<unsigned int>(max_recorded)) {
        const unsigned int slot = atomicAdd(&st->recorded, 1u);
        if (slot < static_cast<unsigned int>(max_recorded)) st->first[slot] = mismatch{in, core, hwr};
      }
    }
  }
  // Warp reduction, then one atomic per warp.
  for (int off = 16; off > 0; off >>= 1) {
    covered += __shfl_down_sync(0xffffffffu, covered, off);
    mism += __shfl_down_sync(0xffffffffu, mism, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&st->covered, covered);
    if (mism) atomicAdd(&st->mismatches, mism);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < instr_bin_count; i += blockDim.x) {
    if (bins[i]) atomicAdd(&st->bins[i], static_cast<unsigned long long>(bins[i]));
  }
}

template <instr_op Op, bool Hardware>
__global__ void __launch_bounds__(256) apply_kernel(const std::uint64_t* in, std::uint32_t* out, std::size_t n) {
  constexpr instr_desc d = instr_desc_of(Op);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if constexpr (Hardware) out[i] = hw::result<Op>(in[i]);
    else out[i] = instr_model(d, in[i]);
  }
}

/// Type-erased entry points of one instruction.
struct op_entry {
  void (*sweep)(const sweep_source&, sweep_state*) = nullptr;
  void (*apply)(bool hardware, const std::uint64_t*, std::uint32_t*, std::size_t) = nullptr;
};

template <class Kernel>
inline unsigned int grid_for(Kernel k) {
  int dev = 0, sms = 0, per_sm = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 256, 0), "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return static_cast<unsigned int>(sms * (per_sm > 0 ? per_sm : 1));
}

template <instr_op Op>
void launch_sweep(const sweep_source& src, sweep_state* st) {
  static const unsigned int grid = grid_for(sweep_kernel<Op>);
  sweep_kernel<Op><<<grid, 256>>>(src, st);
  check(cudaGetLastError(), "sweep_kernel launch");
}

template <instr_op Op>
void launch_apply(bool hardware, const std::uint64_t* in, std::uint32_t* out, std::size_t n) {
  const unsigned int grid = static_cast<unsigned int>(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
  if (hardware) apply_kernel<Op, true><<<grid, 256>>>(in, out, n);
  else apply_kernel<Op, false><<<grid, 256>>>(in, out, n);
  check(cudaGetLastError(), "apply_kernel launch");
}

/// Which translation unit instantiates an instruction's kernels. ptxas spends minutes on the inlined core
/// per kernel; eight files let a parallel build use eight cores.
enum class op_group { bf16_cvt, f16_cvt, tf32_cvt, fp8_cvt, bf16_arith, f16_arith, bf16_fma, f16_fma };
constexpr op_group group_of(instr_op op) noexcept {
  const instr_desc d = instr_desc_of(op);
  switch (d.kind) {
    case instr_kind::convert:
    case instr_kind::convert_x2:
      switch (d.to) {
        case format_id::bf16: return op_group::bf16_cvt;
        case format_id::f16: return op_group::f16_cvt;
        case format_id::tf32: return op_group::tf32_cvt;
        default: return op_group::fp8_cvt;
      }
    case instr_kind::add:
    case instr_kind::mul: return d.from == format_id::bf16 ? op_group::bf16_arith : op_group::f16_arith;
    default: return d.from == format_id::bf16 ? op_group::bf16_fma : op_group::f16_fma;
  }
}

template <instr_op Op, op_group G>
void fill_entry(op_entry* table) {
  if constexpr (group_of(Op) == G) {
    table[static_cast<int>(Op)] = op_entry{&launch_sweep<Op>, &launch_apply<Op>};
  }
}

/// Each instantiating .cu file (sweep_<group>.cu) defines one of these; it fills its group's entries.
#define TIEBREAK_GPU_GROUPS_(X) X(bf16_cvt) X(f16_cvt) X(tf32_cvt) X(fp8_cvt) X(bf16_arith) X(f16_arith) X(bf16_fma) X(f16_fma)
#define TIEBREAK_GPU_DECLARE_FILL_(G) void fill_##G##_entries(op_entry* table);
TIEBREAK_GPU_GROUPS_(TIEBREAK_GPU_DECLARE_FILL_)
#undef TIEBREAK_GPU_DECLARE_FILL_

#define TIEBREAK_GPU_FILL_GROUP_(G)                                           \
  namespace tiebreak::gpu::detail {                                           \
  void fill_##G##_entries(op_entry* table) {                                  \
    TIEBREAK_GPU_INSTR_OPS(TIEBREAK_GPU_FILL_ONE_##G##_)                      \
  }                                                                           \
  }

}  // namespace tiebreak::gpu::detail
