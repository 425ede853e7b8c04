// SPDX-License-Identifier: Apache-2.0
/// @file The one compiled instance of emu::gemm on 32-bit encodings, which
/// tiebreak/host/emu_gemm.hpp declares extern: every user of the header links it instead of
/// instantiating the eight inlined table models itself.
#include "tiebreak/host/emu_gemm.hpp"

namespace tiebreak::emu {

template void gemm<std::uint32_t, std::uint32_t, std::uint32_t>(const mma_model&, int, int, int, const std::uint32_t*,
                                                                const std::uint32_t*, const std::uint32_t*,
                                                                std::uint32_t*, gemm_kernel);

}  // namespace tiebreak::emu
