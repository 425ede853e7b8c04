// SPDX-License-Identifier: Apache-2.0
/// @file device_available() answers without crashing, with or without a GPU; the instruction table is whole.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tiebreak/gpu/device.hpp"
#include "tiebreak/emu/instr_table.hpp"
#include "tiebreak/gpu/sweep.hpp"

namespace tiebreak::gpu {
namespace {

TEST(device_gpu, availability_is_a_clean_answer) {
  const bool first = device_available();
  EXPECT_EQ(device_available(), first);  // cached, stable
  const std::string why = device_description();
  EXPECT_FALSE(why.empty());
  std::printf("[device] %s\n", why.c_str());
  if (!first) EXPECT_NE(why.find("no usable GPU"), std::string::npos) << why;
}

TEST(device_gpu, instr_table_has_distinct_names_and_instructions) {
  std::set<std::string> names;
  for (instr_op op : all_instr_ops) {
    const instr_desc d = instr_desc_of(op);
    EXPECT_FALSE(d.instruction.empty()) << d.name;
    EXPECT_TRUE(names.insert(std::string(d.name)).second) << "duplicate " << d.name;
  }
  EXPECT_EQ(static_cast<int>(names.size()), instr_op_count);
}

TEST(device_gpu, launchers_reject_bad_arguments) {
  if (!device_available()) GTEST_SKIP() << device_description();
  EXPECT_THROW(sweep(instr_op::bf16_fma), std::invalid_argument);
  EXPECT_THROW(sweep(instr_op::bf16_add, 0, (std::uint64_t{1} << 32) + 1), std::invalid_argument);
  EXPECT_THROW(sweep_fma(instr_op::bf16_add, fma_sample::uniform, 1, 0), std::invalid_argument);
  // An empty range covers nothing and finds nothing.
  const sweep_result r = sweep(instr_op::f32_to_bf16_rn, 5, 5);
  EXPECT_EQ(r.covered, 0u);
  EXPECT_EQ(r.mismatches, 0u);
}

TEST(device_gpu, small_sweep_counts_its_inputs) {
  if (!device_available()) GTEST_SKIP() << device_description();
  // One bf16 binade of f32 inputs: every rounding case of rn once per 2^16 inputs.
  const sweep_result r = sweep(instr_op::f32_to_bf16_rn, 0x3f800000u, 0x3f810000u);
  EXPECT_EQ(r.covered, 0x10000u);
  EXPECT_EQ(r.mismatches, 0u);
  // The instruction's rounding is visible: rn and rz differ above the tie.
  const std::uint64_t in[] = {0x3f80c000u};
  EXPECT_EQ(apply_hw(instr_op::f32_to_bf16_rn, in)[0], 0x3f81u);
  EXPECT_EQ(apply_hw(instr_op::f32_to_bf16_rz, in)[0], 0x3f80u);
}

}  // namespace
}  // namespace tiebreak::gpu
