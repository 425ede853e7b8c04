// SPDX-License-Identifier: Apache-2.0
/// @file bf16/f16 __hadd, __hmul (every operand pair) and __hfma (sampled) on the H200 against tiebreak::emu.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "../sweep_util.hpp"

namespace tiebreak::gpu {
namespace {

using testing::report;

bool is_pair_instr(const instr_desc& d) { return d.kind == instr_kind::add || d.kind == instr_kind::mul; }
bool is_fma_instr(const instr_desc& d) { return d.kind == instr_kind::fma; }

class pair_instr : public ::testing::TestWithParam<instr_op> {};

TEST_P(pair_instr, hardware_equals_core_on_every_operand_pair) {
  TIEBREAK_REQUIRE_GPU();
  const instr_desc d = instr_desc_of(GetParam());
  const sweep_result r = testing::sweep_space(GetParam());
  report(std::string(d.name), r);
  EXPECT_EQ(r.covered, testing::sweep_size()) << d.instruction;
  EXPECT_EQ(r.mismatches, 0u) << d.instruction;
}

INSTANTIATE_TEST_SUITE_P(h200, pair_instr, ::testing::ValuesIn(testing::instrs_where(is_pair_instr)), testing::instr_name);

/// FMA: 2^48 operand triples do not fit a sweep. Three samples, each of sweep_size() triples:
/// uniform over all encodings, adversarial (ties and near-ties, cancellation, the subnormal and
/// overflow edges, specials; see fma_input), and b fixed with (a, c) exhaustive for a few b.
class fma_instr : public ::testing::TestWithParam<instr_op> {};

constexpr std::uint64_t fma_seed = 0x746965627265616bull;  // fixed: every run draws the same triples

void check_fma(instr_op op, fma_sample kind, std::uint64_t param, const char* what) {
  const instr_desc d = instr_desc_of(op);
  const std::uint64_t n = testing::sweep_size();
  const sweep_result r = sweep_fma(op, kind, n, param);
  report(std::string(d.name) + "/" + what, r);
  EXPECT_EQ(r.covered, n) << d.instruction << " " << what;
  EXPECT_EQ(r.mismatches, 0u) << d.instruction << " " << what;
}

TEST_P(fma_instr, uniform_triples) {
  TIEBREAK_REQUIRE_GPU();
  check_fma(GetParam(), fma_sample::uniform, fma_seed, "uniform");
}

TEST_P(fma_instr, adversarial_triples) {
  TIEBREAK_REQUIRE_GPU();
  check_fma(GetParam(), fma_sample::adversarial, fma_seed, "adversarial");
}

TEST_P(fma_instr, fixed_b_exhaustive_a_c) {
  TIEBREAK_REQUIRE_GPU();
  const format_desc f = desc_of(instr_desc_of(GetParam()).from);
  const std::uint64_t one = f.pack(false, static_cast<std::uint64_t>(f.bias), 0);
  // b = 1 + ulp: a*b has one bit more than a, so a*b + c is a tie whenever c cancels the rest.
  check_fma(GetParam(), fma_sample::fixed_b, one + 1, "b=1+ulp");
  // b = -(2 - ulp): all-ones significand, long negative products; a*b + c cancels for c near 2a.
  check_fma(GetParam(), fma_sample::fixed_b, f.pack(true, static_cast<std::uint64_t>(f.bias), f.frac_mask()), "b=-(2-ulp)");
  // b = max subnormal: products in the subnormal range and below it.
  check_fma(GetParam(), fma_sample::fixed_b, f.pack(false, 0, f.frac_mask()), "b=max_subnormal");
}

TEST_P(fma_instr, core_in_kernel_equals_core_on_host) {
  TIEBREAK_REQUIRE_GPU();
  const instr_desc d = instr_desc_of(GetParam());
  const format_desc f = desc_of(d.from);
  std::vector<std::uint64_t> in;
  for (std::uint64_t i = 0; i < (std::uint64_t{1} << 16); ++i) {
    in.push_back(fma_input(f, fma_sample::uniform, i, fma_seed));
    in.push_back(fma_input(f, fma_sample::adversarial, i, fma_seed));
  }
  const std::vector<std::uint32_t> dev = apply_core(GetParam(), in);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint32_t host = instr_model(d, in[i]);
    if (dev[i] != host && bad++ < 8) ADD_FAILURE() << d.name << " input 0x" << std::hex << in[i] << ": device 0x" << dev[i] << " host 0x" << host;
  }
  EXPECT_EQ(bad, 0u);
}

INSTANTIATE_TEST_SUITE_P(h200, fma_instr, ::testing::ValuesIn(testing::instrs_where(is_fma_instr)), testing::instr_name);

TEST_P(pair_instr, core_in_kernel_equals_core_on_host) {
  TIEBREAK_REQUIRE_GPU();
  const instr_desc d = instr_desc_of(GetParam());
  const std::vector<std::uint64_t> in = testing::spread_inputs(std::size_t{1} << 18);
  const std::vector<std::uint32_t> dev = apply_core(GetParam(), in);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint32_t host = instr_model(d, in[i]);
    if (dev[i] != host && bad++ < 8) ADD_FAILURE() << d.name << " input 0x" << std::hex << in[i] << ": device 0x" << dev[i] << " host 0x" << host;
  }
  EXPECT_EQ(bad, 0u);
}

struct pin {
  instr_op op;
  std::uint64_t input;  // a << 16 | b, or a << 32 | b << 16 | c
  std::uint32_t expected;
  const char* why;
};

// clang-format off
const pin ops_pins[] = {
  {instr_op::bf16_add, 0x7fc1ffc0, 0x7fff, "NaN + NaN -> canonical NaN, payload dropped"},
  {instr_op::bf16_add, 0x7f80ff80, 0x7fff, "Inf - Inf -> canonical NaN"},
  {instr_op::f16_add, 0xfe017c00, 0x7fff, "-NaN + Inf -> canonical NaN"},
  {instr_op::bf16_add, 0x80008000, 0x8000, "-0 + -0 = -0"},
  {instr_op::bf16_add, 0x3f80bf80, 0x0000, "1 + -1 = +0 (rn)"},
  {instr_op::f16_add, 0x00010001, 0x0002, "subnormal + subnormal, no flush"},
  {instr_op::bf16_add, 0x3f803b80, 0x3f80, "1 + 2^-8: tie, even below -> 1"},
  {instr_op::bf16_mul, 0x00013f80, 0x0001, "min subnormal * 1, no flush"},
  {instr_op::bf16_mul, 0x7f800000, 0x7fff, "Inf * 0 -> canonical NaN"},
  {instr_op::f16_mul, 0x7bff4000, 0x7c00, "65504 * 2 -> Inf"},
  {instr_op::bf16_fma, 0x3f813f81bf80ull, 0x3c80, "(1+2^-7)^2 - 1 = 2^-6 + 2^-14: a tie, even below -> 2^-6"},
  {instr_op::f16_fma, 0x7c0000007e00ull, 0x7fff, "Inf * 0 + NaN -> canonical NaN"},
};
// clang-format on

TEST(ops_gpu, hardware_pins) {
  TIEBREAK_REQUIRE_GPU();
  for (const pin& p : ops_pins) {
    const std::uint64_t in[] = {p.input};
    EXPECT_EQ(apply_hw(p.op, in)[0], p.expected) << instr_desc_of(p.op).name << " 0x" << std::hex << p.input << ": " << p.why;
    EXPECT_EQ(instr_model(instr_desc_of(p.op), p.input), p.expected) << instr_desc_of(p.op).name << ": " << p.why;
  }
}

}  // namespace
}  // namespace tiebreak::gpu
