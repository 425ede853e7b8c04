// SPDX-License-Identifier: Apache-2.0
/// @file Whether a GPU that runs tiebreak's kernels is present (plain C++, no CUDA headers needed).
#pragma once

#include <string>

namespace tiebreak::gpu {

/// True when the CUDA runtime finds a device that can run this library's kernels (they are built
/// for sm_90 / sm_90a only). False, without throwing or crashing, when there is no driver, no GPU,
/// or only GPUs of another architecture. The first call initialises the CUDA runtime.
bool device_available() noexcept;

/// "NVIDIA H200 (sm_90, 132 SMs, driver 13.0, runtime 13.0)", or the reason there is none.
std::string device_description();

}  // namespace tiebreak::gpu
