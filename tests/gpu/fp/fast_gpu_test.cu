// SPDX-License-Identifier: Apache-2.0
/// @file The branch-free fp/fast.hpp bf16 narrowings, run in a kernel, against __float2bfloat16_{rn,rz,rd,ru}.
#include <gtest/gtest.h>

#include "../sweep_util.hpp"

namespace tiebreak::gpu {
namespace {

bool is_fast_instr(const instr_desc& d) { return d.fast; }

class fast_instr : public ::testing::TestWithParam<instr_op> {};

TEST_P(fast_instr, hardware_equals_fast_path_on_every_input) {
  TIEBREAK_REQUIRE_GPU();
  const instr_desc d = instr_desc_of(GetParam());
  const sweep_result r = testing::sweep_space(GetParam());
  testing::report(std::string(d.name), r);
  EXPECT_EQ(r.covered, testing::sweep_size()) << d.instruction;
  EXPECT_EQ(r.mismatches, 0u) << d.instruction;
}

INSTANTIATE_TEST_SUITE_P(h200, fast_instr, ::testing::ValuesIn(testing::instrs_where(is_fast_instr)), testing::instr_name);

}  // namespace
}  // namespace tiebreak::gpu
