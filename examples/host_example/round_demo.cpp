// SPDX-License-Identifier: Apache-2.0
/// @file Consumer of the header-only core: how the bf16 tie 1 + 2^-8 rounds in each mode.
#include <cstdio>

#include <tiebreak/tiebreak.hpp>

int main() {
  using namespace tiebreak;
  const exact_value tie = unpack(formats::f64, f64_to_bits(1.00390625));  // 1 + 2^-8
  std::printf("bf16(1.00390625)");
  for (round_mode m : deterministic_round_modes) {
    const round_result r = round_pack(formats::bf16, tie, rounding{m, 0});
    std::printf(" %s=0x%04x", to_string(m).data(), static_cast<unsigned>(r.bits));
  }
  std::printf("\n");
  return 0;
}
