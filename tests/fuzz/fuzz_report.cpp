// SPDX-License-Identifier: Apache-2.0
/// @file libFuzzer target: tiebreak::fuzz::report_one_input (see entry.hpp).
#include "entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tiebreak::fuzz::report_one_input(data, size);
  return 0;
}
