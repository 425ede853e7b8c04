// SPDX-License-Identifier: Apache-2.0
// The table of ex2.approx on sm_90, embedded (src/host/data/ex2_approx_sm90.bin, 2 MiB: the 2^23
// steps T[k] - T[k-1], each in 0..3, two bits each; tools/ex2-pack.py writes and reads it).
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

namespace {
struct ex2_segment {
  std::uint64_t c1, c2, c0;
};
// Recovered from the H200's table: per segment the linear and quadratic coefficients and the
// constant (in quarters), docs/attention.md "The SFU's exponential".
constexpr ex2_segment ex2_sm90_segments[64] = {
    {90852, 494, 3}, {91840, 501, 365386}, {92840, 506, 734750}, {93852, 511, 1108133},
    {94872, 518, 1485586}, {95908, 521, 1867145}, {96952, 527, 2252860}, {98008, 532, 2642777},
    {99072, 541, 3036940}, {100152, 546, 3435393}, {101244, 551, 3838184}, {102344, 559, 4245365},
    {103460, 564, 4656977}, {104588, 568, 5073072}, {105724, 577, 5493699}, {106876, 583, 5918905},
    {108040, 589, 6348741}, {109216, 596, 6783258}, {110408, 600, 7222505}, {111608, 609, 7666538},
    {112824, 615, 8115404}, {114052, 622, 8569160}, {115296, 627, 9027854}, {116552, 633, 9491545},
    {117820, 641, 9960285}, {119104, 647, 10434129}, {120400, 655, 10913133}, {121712, 661, 11397354},
    {123036, 670, 11886846}, {124376, 677, 12381669}, {125728, 686, 12881882}, {127100, 691, 13387539},
    {128484, 699, 13898703}, {129884, 705, 14415435}, {131296, 715, 14937793}, {132728, 721, 15465837},
    {134172, 730, 15999633}, {135632, 739, 16539242}, {137108, 748, 17084727}, {138604, 753, 17636150},
    {140112, 763, 18193579}, {141636, 773, 18757078}, {143180, 779, 19326714}, {144740, 787, 19902551},
    {146316, 796, 20484659}, {147908, 806, 21073106}, {149520, 813, 21667961}, {151148, 822, 22269293},
    {152792, 833, 22877175}, {154456, 842, 23491674}, {156140, 849, 24112865}, {157840, 858, 24740822},
    {159556, 870, 25375616}, {161296, 877, 26017322}, {163052, 887, 26666015}, {164828, 896, 27321773},
    {166620, 909, 27984672}, {168436, 917, 28654788}, {170272, 925, 29332202}, {172124, 938, 30016992},
    {174000, 946, 30709240}, {175892, 959, 31409026}, {177808, 969, 32116431}, {179744, 980, 32831540},
};

/// xl^2 (xl < 2^17) keeping only the partial-product bits at 2^19 and above.
std::uint64_t truncated_square(std::uint64_t xl) {
  std::uint64_t s = 0;
  for (int i = 0; i < 17; ++i) {
    if (((xl >> i) & 1u) == 0) continue;
    if (2 * i >= 19) s += std::uint64_t{1} << (2 * i);
    for (int j = i + 1; j < 17; ++j)
      if (((xl >> j) & 1u) != 0 && i + j + 1 >= 19) s += std::uint64_t{1} << (i + j + 1);
  }
  return s;
}
}  // namespace

std::uint32_t ex2_sm90_interpolated(std::uint32_t f) {
  const ex2_segment& g = ex2_sm90_segments[(f >> 17) & 63u];
  const std::uint64_t xl = f & ((1u << 17) - 1u);
  const std::uint64_t z = (g.c1 * xl << 17) + g.c2 * truncated_square(xl) + (g.c0 << 32) + (std::uint64_t{3057} << 20);
  return 0x3f800000u + static_cast<std::uint32_t>(z >> 34);
}

float ex2_approx_ftz_sm90(float x) { return sfu::ex2_approx_ftz(x, ex2_table_view{ex2_approx_sm90_table().data()}); }
float ex2_approx_sm90(float x) { return sfu::ex2_approx(x, ex2_table_view{ex2_approx_sm90_table().data()}); }

}  // namespace tiebreak::host
