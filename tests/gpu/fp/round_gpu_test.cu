// SPDX-License-Identifier: Apache-2.0
/// @file Narrowings (f32 -> bf16/f16/tf32/e4m3/e5m2, f16 -> fp8) on the H200 against the core, bit for bit.
///
/// Each instruction is swept over all 2^32 inputs: the core's convert/round_pack runs inside the same kernel
/// as the instruction (tiebreak/emu/instr_table.hpp), the device counts coverage and mismatches. The pins
/// below fix the NaN/Inf/subnormal behaviour the hardware showed (docs/hardware.md).
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "../sweep_util.hpp"

namespace tiebreak::gpu {
namespace {

using testing::report;
using testing::sweep_size;
using testing::sweep_space;

bool is_round_instr(const instr_desc& d) {
  return (d.kind == instr_kind::convert || d.kind == instr_kind::convert_x2) && !d.fast;
}

class round_instr : public ::testing::TestWithParam<instr_op> {};

TEST_P(round_instr, hardware_equals_core_on_every_input) {
  TIEBREAK_REQUIRE_GPU();
  const instr_desc d = instr_desc_of(GetParam());
  const sweep_result r = sweep_space(GetParam());
  report(std::string(d.name), r);
  EXPECT_EQ(r.covered, sweep_size()) << d.instruction;
  EXPECT_EQ(r.mismatches, 0u) << d.instruction;
}

TEST_P(round_instr, core_in_kernel_equals_core_on_host) {
  TIEBREAK_REQUIRE_GPU();
  const instr_desc d = instr_desc_of(GetParam());
  std::vector<std::uint64_t> in = testing::spread_inputs(std::size_t{1} << 18);
  for (std::uint64_t e : {0x00000000ull, 0x80000000ull, 0x7f800000ull, 0xff800000ull, 0x7fc00000ull, 0xffc00001ull,
                          0x7f800001ull, 0x00000001ull, 0x807fffffull, 0x7f7fffffull, 0xff7fffffull, 0x3f808000ull})
    in.push_back(e);
  const std::vector<std::uint32_t> dev = apply_core(GetParam(), in);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint32_t host = instr_model(d, in[i]);
    if (dev[i] != host && bad++ < 8) ADD_FAILURE() << d.name << " input 0x" << std::hex << in[i] << ": device 0x" << dev[i] << " host 0x" << host;
  }
  EXPECT_EQ(bad, 0u);
}

INSTANTIATE_TEST_SUITE_P(h200, round_instr, ::testing::ValuesIn(testing::instrs_where(is_round_instr)), testing::instr_name);

/// One pinned hardware fact: instruction, input, the bits it returns, and why.
struct pin {
  instr_op op;
  std::uint64_t input;
  std::uint32_t expected;
  const char* why;
};

// clang-format off
const pin round_pins[] = {
  // NaN: every f32 narrowing returns the canonical NaN (positive, all-ones fraction): sign and payload dropped.
  {instr_op::f32_to_bf16_rn, 0xffc00001, 0x7fff, "-qNaN with payload -> canonical bf16 NaN"},
  {instr_op::f32_to_bf16_rz, 0x7f800001, 0x7fff, "sNaN -> canonical, never truncated to Inf"},
  {instr_op::f32_to_f16_rn, 0xffc00001, 0x7fff, "-qNaN -> canonical f16 NaN"},
  {instr_op::f32_to_tf32_rn, 0xffc00001, 0x7fffe000, "-qNaN -> canonical tf32 NaN (tf32 fraction all ones, pad zero)"},
  {instr_op::f32_to_e4m3_sat, 0xffc00001, 0x7f, "-qNaN -> e4m3 NaN 0x7f"},
  {instr_op::f32_to_e5m2_sat, 0xffc00001, 0x7f, "-qNaN -> e5m2 NaN 0x7f"},
  // Overflow follows IEEE 754 7.4 per mode; .satfinite clamps, Inf included.
  {instr_op::f32_to_bf16_rn, 0x7f7fffff, 0x7f80, "max f32 rounds up to bf16 Inf"},
  {instr_op::f32_to_bf16_rz, 0xff7fffff, 0xff7f, "rz: -max f32 -> -max bf16"},
  {instr_op::f32_to_bf16_rn_satfinite, 0xff800000, 0xff7f, "satfinite: -Inf -> -max bf16"},
  {instr_op::f32_to_f16_rn, 0x477ff000, 0x7c00, "65520 (max + half ulp, a tie) -> Inf: even is upward"},
  {instr_op::f32_to_f16_rn, 0x477fefff, 0x7bff, "just below the tie -> 65504"},
  {instr_op::f32_to_f16_rn_satfinite, 0x7f800000, 0x7bff, "satfinite: Inf -> 65504"},
  {instr_op::f32_to_f16_rd, 0x477ff000, 0x7bff, "rd: positive overflow -> max finite"},
  {instr_op::f32_to_e4m3_sat, 0x7f800000, 0x7e, "satfinite: Inf -> 448"},
  {instr_op::f32_to_e4m3_sat, 0x43e80000, 0x7e, "464 = 448 + half ulp, a tie -> 448 (even)"},
  {instr_op::f32_to_e5m2_sat, 0xff800000, 0xfb, "satfinite: -Inf -> -57344"},
  {instr_op::f32_to_e5m2_nosat, 0x47700000, 0x7c, "no saturation: 61440 (tie above 57344) -> Inf"},
  // __NV_NOSAT e4m3 (software in cuda_fp8.hpp): overflow and Inf give NaN with the value's sign,
  // NaN inputs the positive 0x7f: nan_policy::canonical_signed_overflow.
  {instr_op::f32_to_e4m3_nosat, 0xc3fa0000, 0xff, "-500 overflows -> -NaN 0xff"},
  {instr_op::f32_to_e4m3_nosat, 0xff800000, 0xff, "-Inf -> -NaN 0xff"},
  {instr_op::f32_to_e4m3_nosat, 0x43e80001, 0x7f, "just above 464 -> +NaN 0x7f"},
  {instr_op::f32_to_e4m3_nosat, 0xffc00001, 0x7f, "-qNaN input -> +NaN 0x7f (canonicalised first)"},
  {instr_op::f32_to_e4m3_nosat, 0xc3e80000, 0xfe, "-464, the tie -> -448"},
  // Subnormals are kept, never flushed, and round like any other value.
  {instr_op::f32_to_bf16_rn, 0x00010000, 0x0001, "min bf16 subnormal stays"},
  {instr_op::f32_to_bf16_rn, 0x00008000, 0x0000, "half of it: a tie -> +0 (even)"},
  {instr_op::f32_to_bf16_ru, 0x00000001, 0x0001, "ru: min f32 subnormal -> min bf16 subnormal"},
  {instr_op::f32_to_f16_rn, 0x33800000, 0x0001, "2^-24 -> min f16 subnormal"},
  {instr_op::f32_to_f16_rn, 0x33000000, 0x0000, "2^-25, a tie -> +0"},
  {instr_op::f32_to_f16_rn, 0xb3000001, 0x8001, "just above the tie, negative -> -min subnormal"},
  {instr_op::f32_to_e4m3_sat, 0x3b000000, 0x01, "2^-9: min e4m3 subnormal"},
  // Ties per mode.
  {instr_op::f32_to_bf16_rn, 0x3f808000, 0x3f80, "1 + 2^-8: tie, even below"},
  {instr_op::f32_to_bf16_rn, 0x3f818000, 0x3f82, "tie, odd below -> up"},
  {instr_op::f32_to_tf32_rna, 0x3f801000, 0x3f802000, "rna: 1 + 2^-11 tie -> away"},
  {instr_op::f32_to_tf32_rn, 0x3f801000, 0x3f800000, "rn: the same tie -> even"},
  {instr_op::f32_to_tf32_rz, 0xbf801fff, 0xbf800000, "rz truncates; tf32 low 13 bits zero"},
  // cvt.rna.tf32.f32 is integer code on sm_90 (ptxas): NaN truncated, nan_policy::truncate.
  {instr_op::f32_to_tf32_rna, 0xffc00001, 0xffc00000, "-qNaN: sign and top payload kept, low 13 bits dropped"},
  {instr_op::f32_to_tf32_rna, 0x7f800001, 0x7f800000, "sNaN with payload only in the dropped bits -> +Inf"},
  {instr_op::f32_to_tf32_rna, 0x7f801000, 0x7f800000, "NaNs are truncated, never rounded (finite values are)"},
  {instr_op::f32_to_tf32_rna, 0x7fa02000, 0x7fa02000, "sNaN stays signalling: no quiet bit is set"},
  {instr_op::f32_to_tf32_rna, 0x7f7ff000, 0x7f800000, "max f32 region: the tie rounds away to Inf"},
  // ... and .satfinite steps every non-finite result one encoding down.
  {instr_op::f32_to_tf32_rna_satfinite, 0x7f7ff000, 0x7f7fe000, "overflow -> max finite"},
  {instr_op::f32_to_tf32_rna_satfinite, 0xff800000, 0xff7fe000, "-Inf -> -max finite"},
  {instr_op::f32_to_tf32_rna_satfinite, 0x7f800001, 0x7f7fe000, "a NaN becomes max finite"},
  {instr_op::f32_to_tf32_rna_satfinite, 0x7f802000, 0x7f800000, "a NaN becomes +Inf under satfinite"},
  {instr_op::f32_to_tf32_rna_satfinite, 0xffc00001, 0xffbfe000, "-qNaN: payload decremented by one unit"},
  // .relu: negative results -> +0, -0 included.
  {instr_op::f32_to_bf16_rn_relu, 0xbf800000, 0x0000, "relu(-1) = +0"},
  {instr_op::f32_to_bf16_rn_relu, 0x80000000, 0x0000, "relu(-0) = +0"},
  {instr_op::f32_to_tf32_rz_relu, 0xffc00001, 0x7fffe000, "relu keeps NaN, canonical"},
  {instr_op::f32x2_to_e4m3x2_sat_relu, 0xbf800000, 0x0000, "relu(-1) in both fp8 lanes"},
  {instr_op::f32_to_f16_rn_relu, 0x3f800000, 0x3c00, "relu(1) = 1"},
};
// clang-format on

TEST(round_gpu, hardware_pins) {
  TIEBREAK_REQUIRE_GPU();
  for (const pin& p : round_pins) {
    const std::uint64_t in[] = {p.input};
    const std::uint32_t hw = apply_hw(p.op, in)[0];
    EXPECT_EQ(hw, p.expected) << instr_desc_of(p.op).name << " input 0x" << std::hex << p.input << ": " << p.why;
    // The core's model must give the same bits (the sweep says so for all inputs; this names the case).
    EXPECT_EQ(instr_model(instr_desc_of(p.op), p.input), p.expected) << instr_desc_of(p.op).name << ": " << p.why;
  }
}

}  // namespace
}  // namespace tiebreak::gpu
