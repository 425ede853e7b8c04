// SPDX-License-Identifier: Apache-2.0
// The table of ex2.approx on sm_90 as captured on the H200, embedded as the oracle of the core's
// interpolator (src/host/data/ex2_approx_sm90.bin, 2 MiB: the 2^23 steps T[k] - T[k-1], each in
// 0..3, two bits each; tools/ex2-pack.py writes and reads it), and the modelled instructions.
#include "tiebreak/host/sfu.hpp"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

#ifndef TIEBREAK_EX2_TABLE_FILE
#error "TIEBREAK_EX2_TABLE_FILE: the build names the table's file (src/host/CMakeLists.txt)"
#endif

// The file's bytes between two symbols, by the assembler (no 10 MB initializer for the compiler).
asm(".pushsection .rodata.tiebreak_ex2_sm90,\"a\",@progbits\n"
    ".balign 16\n"
    ".globl tiebreak_ex2_sm90_steps\n"
    "tiebreak_ex2_sm90_steps:\n"
    ".incbin \"" TIEBREAK_EX2_TABLE_FILE "\"\n"
    ".globl tiebreak_ex2_sm90_steps_end\n"
    "tiebreak_ex2_sm90_steps_end:\n"
    ".popsection\n");
extern "C" const unsigned char tiebreak_ex2_sm90_steps[];
extern "C" const unsigned char tiebreak_ex2_sm90_steps_end[];

namespace tiebreak::host {
namespace {

std::vector<std::uint32_t> decode() {
  const std::size_t n = static_cast<std::size_t>(tiebreak_ex2_sm90_steps_end - tiebreak_ex2_sm90_steps);
  if (n != sfu::ex2_table_size / 4) {
    std::fprintf(stderr, "tiebreak: the embedded ex2 table has %zu bytes, not %u (a broken build)\n", n,
                 sfu::ex2_table_size / 4);
    std::abort();
  }
  std::vector<std::uint32_t> t(sfu::ex2_table_size);
  std::uint32_t v = 0x3f800000u;
  for (std::uint32_t k = 0; k < sfu::ex2_table_size; ++k) {
    v += (tiebreak_ex2_sm90_steps[k >> 2] >> (2 * (k & 3))) & 3u;  // slot 0 holds 0
    t[k] = v;
  }
  return t;
}

}  // namespace

std::span<const std::uint32_t> ex2_approx_sm90_table() {
  static const std::vector<std::uint32_t> t = decode();
  return t;
}

// The core's interpolator (fp/sfu.hpp), the one source of T; the embedded table is only its oracle.
float ex2_approx_ftz_sm90(float x) { return sfu::ex2_approx_ftz_sm90(x); }
float ex2_approx_sm90(float x) { return sfu::ex2_approx_sm90(x); }

}  // namespace tiebreak::host
