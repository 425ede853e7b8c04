// SPDX-License-Identifier: Apache-2.0
/// @file Launchers of the hardware-vs-core sweeps: the public GPU API (plain C++, no nvcc needed).
///
/// Each sweep runs, inside one kernel, the core's model of an instruction (tiebreak::convert, round_pack,
/// emu::add/mul/fma with the entry's rounding and options; see tiebreak/emu/instr_table.hpp) and the hardware
/// instruction on the same inputs, and counts the inputs whose result bits differ. Counting and
/// coverage happen on the device. Every function throws std::runtime_error on a CUDA error;
/// precondition for all of them: device_available().
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "tiebreak/gpu/device.hpp"
#include "tiebreak/emu/instr_table.hpp"

namespace tiebreak::gpu {

/// One input whose hardware and core results differ.
struct mismatch {
  std::uint64_t input = 0;     ///< the instruction's input (layout: instr_kind)
  std::uint32_t core_bits = 0; ///< the core's result
  std::uint32_t hw_bits = 0;   ///< the instruction's result
};

struct sweep_result {
  std::uint64_t covered = 0;     ///< inputs evaluated, counted on the device
  std::uint64_t mismatches = 0;  ///< inputs whose core and hardware bits differ
  std::vector<mismatch> first;   ///< up to max_recorded of them (the first to be found, in no set order)
  std::array<std::uint64_t, instr_bin_count> by_bin{};  ///< mismatches per input class (instr_bin)
  double seconds = 0;            ///< device time of the sweep (CUDA events)
};

inline constexpr int max_recorded = 32;

/// Inputs per kernel launch: the space is chunked so that no launch runs for long.
inline constexpr std::uint64_t sweep_chunk = std::uint64_t{1} << 28;

/// Sweeps the inputs [begin, end) of a convert/convert_x2/add/mul instruction (end <= 2^32).
sweep_result sweep(instr_op op, std::uint64_t begin = 0, std::uint64_t end = std::uint64_t{1} << 32);

/// Sweeps `count` FMA samples (fma_input(kind, i, param) for i in [0, count)) of an fma instruction.
/// fixed_b: count <= 2^32 and param is b's encoding.
sweep_result sweep_fma(instr_op op, fma_sample kind, std::uint64_t count, std::uint64_t param);

/// The instruction's result for each input (hardware only), for bit-table tests.
std::vector<std::uint32_t> apply_hw(instr_op op, std::span<const std::uint64_t> inputs);

/// The core model's result for each input, computed inside a kernel: tests compare it with the
/// same model on the host.
std::vector<std::uint32_t> apply_core(instr_op op, std::span<const std::uint64_t> inputs);

}  // namespace tiebreak::gpu
