// SPDX-License-Identifier: Apache-2.0
/// @file The shared-memory matrix descriptor of Hopper's wgmma (PTX ISA, "Matrix Descriptor Format"), one
/// encoding for every kernel that issues wgmma: the tensor-core probes (cuda/mma) and the attention
/// forward's warpgroup backend (cuda/attention/flash_device.cuh). Device only.
#pragma once

#include <cstdint>

namespace tiebreak::gpu {

/// The layout field (bits 62-63) of a descriptor: no swizzle, or the 128-byte swizzle.
enum class smem_swizzle : std::uint64_t { none = 0, bytes128 = 1 };

/// The descriptor of an operand at shared address `p`: start address, leading- and stride-dimension
/// byte offsets (each in 16-byte units, 14 bits), base offset 0 (the tiles start on a 1024-byte
/// boundary where swizzled), and the layout. For K-major and MN-major operands alike LBO is the stride
/// between core matrices along K and SBO the one along M or N (no swizzle); swizzled, SBO strides the
/// 8-row groups and LBO the 64-wide blocks of an MN-major operand (unused K-major).
__device__ __forceinline__ std::uint64_t smem_desc(const void* p, std::uint32_t lbo, std::uint32_t sbo,
                                                   smem_swizzle layout = smem_swizzle::none) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  return static_cast<std::uint64_t>((addr & 0x3ffffu) >> 4) | static_cast<std::uint64_t>((lbo & 0x3ffffu) >> 4) << 16 |
         static_cast<std::uint64_t>((sbo & 0x3ffffu) >> 4) << 32 | static_cast<std::uint64_t>(layout) << 62;
}

}  // namespace tiebreak::gpu
