// SPDX-License-Identifier: Apache-2.0
/// @file attn::problem: the mask rule on a table of rows, its three forms pinned to each other and
/// to a brute-force oracle, the grouped-query mapping, the bhsd layout and validation.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "tiebreak/attn/problem.hpp"

namespace tiebreak::attn {
namespace {

constexpr shape sq_sk(std::size_t seq_q, std::size_t seq_k) { return shape{1, 1, 1, seq_q, seq_k, 1, 1}; }

// --- compile time: the helpers are constexpr (and, being TIEBREAK_HDC, device code) -------------
static_assert(shape{}.valid() && shape{}.q_size() == 1);
static_assert(shape{2, 4, 2, 5, 6, 3, 7}.validate() == problem_error::ok);
static_assert(shape{2, 4, 3, 5, 6, 3, 7}.validate() == problem_error::kv_heads_not_divisor);
static_assert(shape{2, 4, 0, 5, 6, 3, 7}.validate() == problem_error::zero_size);  // before the division
static_assert(shape{2, 8, 2, 5, 6, 3, 7}.group() == 4 && shape{2, 8, 2, 5, 6, 3, 7}.kv_head(5) == 1);
// Square causal: the lower triangle (row i sees keys 0..i).
static_assert(visible_keys(sq_sk(4, 4), mask_kind::causal, 0) == 1 && visible_keys(sq_sk(4, 4), mask_kind::causal, 3) == 4);
static_assert(visible(sq_sk(4, 4), mask_kind::causal, 1, 1) && !visible(sq_sk(4, 4), mask_kind::causal, 1, 2));
// seq_q > seq_k: the first seq_q − seq_k rows see nothing.
static_assert(visible_keys(sq_sk(6, 2), mask_kind::causal, 3) == 0 && visible_keys(sq_sk(6, 2), mask_kind::causal, 4) == 1);
// seq_q < seq_k: row 0 already sees seq_k − seq_q + 1 keys.
static_assert(visible_keys(sq_sk(2, 6), mask_kind::causal, 0) == 5 && first_visible_row(sq_sk(2, 6), mask_kind::causal, 5) == 1);
static_assert(problem{sq_sk(3, 3), mask_kind::none, 0.5}.visible_keys(0) == 3);
static_assert(error_text(problem_error::ok)[0] == '\0');

// --- the mask on a table of rows ------------------------------------------------------------------
struct mask_row {
  std::size_t seq_q, seq_k, i;
  std::size_t causal_keys;  ///< keys row i sees under the causal mask (a prefix)
  const char* why;
};

constexpr mask_row mask_table[] = {
    {1, 1, 0, 1, "1x1"},
    {4, 4, 0, 1, "square: row 0 sees key 0"},
    {4, 4, 2, 3, "square: diagonal included"},
    {4, 4, 3, 4, "square: last row sees all"},
    {6, 2, 0, 0, "seq_q > seq_k: fully masked row"},
    {6, 2, 3, 0, "seq_q > seq_k: last fully masked row (i = seq_q - seq_k - 1)"},
    {6, 2, 4, 1, "seq_q > seq_k: first row that sees a key"},
    {6, 2, 5, 2, "seq_q > seq_k: last row sees all"},
    {2, 6, 0, 5, "seq_q < seq_k: bottom-right offset seq_k - seq_q"},
    {2, 6, 1, 6, "seq_q < seq_k: last row sees all"},
    {1, 9, 0, 9, "one query row sees every key"},
    {9, 1, 7, 0, "one key: only the last row sees it"},
    {9, 1, 8, 1, "one key: the last row"},
    {130, 77, 52, 0, "gpu test shape sq > sk: fully masked"},
    {130, 77, 53, 1, "gpu test shape sq > sk: first row with a key"},
    {77, 130, 0, 54, "gpu test shape sq < sk"},
};

TEST(attn_problem, mask_table) {
  for (const mask_row& r : mask_table) {
    SCOPED_TRACE(r.why);
    const shape s = sq_sk(r.seq_q, r.seq_k);
    EXPECT_EQ(visible_keys(s, mask_kind::causal, r.i), r.causal_keys);
    EXPECT_EQ(visible_keys(s, mask_kind::none, r.i), r.seq_k);
    for (std::size_t j = 0; j < r.seq_k; ++j) {
      EXPECT_EQ(visible(s, mask_kind::causal, r.i, j), j < r.causal_keys) << "j " << j;
      EXPECT_TRUE(visible(s, mask_kind::none, r.i, j));
    }
  }
}

// The three forms of the rule agree with each other and with an oracle written in signed
// arithmetic from the definition (j <= i + seq_k − seq_q), on every (i, j) of small shapes.
TEST(attn_problem, mask_forms_agree_everywhere) {
  for (std::size_t sq = 1; sq <= 12; ++sq)
    for (std::size_t sk = 1; sk <= 12; ++sk) {
      const problem p{sq_sk(sq, sk), mask_kind::causal, 1.0};
      for (std::size_t j = 0; j < sk; ++j) {
        const std::size_t first = p.first_visible_row(j);
        EXPECT_LT(first, sq) << sq << "x" << sk << " key " << j;
        for (std::size_t i = 0; i < sq; ++i) {
          const bool oracle = static_cast<long>(j) <= static_cast<long>(i) + static_cast<long>(sk) - static_cast<long>(sq);
          EXPECT_EQ(p.visible(i, j), oracle) << sq << "x" << sk << " (" << i << ", " << j << ")";
          EXPECT_EQ(j < p.visible_keys(i), oracle) << sq << "x" << sk << " (" << i << ", " << j << ")";
          EXPECT_EQ(i >= first, oracle) << sq << "x" << sk << " (" << i << ", " << j << ")";
        }
      }
      // Rows see nested prefixes: visible_keys never decreases and ends at seq_k.
      for (std::size_t i = 1; i < sq; ++i) EXPECT_LE(p.visible_keys(i - 1), p.visible_keys(i));
      EXPECT_EQ(p.visible_keys(sq - 1), sk);
      const problem none{sq_sk(sq, sk), mask_kind::none, 1.0};
      for (std::size_t j = 0; j < sk; ++j) EXPECT_EQ(none.first_visible_row(j), 0u);
    }
}

// Sizes near the top of std::size_t's range do not wrap in the rule (i + 1 + seq_k stays exact).
TEST(attn_problem, mask_large_sequences) {
  const std::size_t big = std::size_t{1} << 40;
  const shape s = sq_sk(big, big + 5);
  EXPECT_EQ(visible_keys(s, mask_kind::causal, 0), 6u);
  EXPECT_EQ(visible_keys(s, mask_kind::causal, big - 1), big + 5);
  EXPECT_EQ(first_visible_row(s, mask_kind::causal, big + 4), big - 1);
  const shape t = sq_sk(big + 5, big);
  EXPECT_EQ(visible_keys(t, mask_kind::causal, 4), 0u);
  EXPECT_EQ(visible_keys(t, mask_kind::causal, 5), 1u);
}

// --- grouped-query heads --------------------------------------------------------------------------
TEST(attn_problem, grouped_query_mapping) {
  struct gqa_case {
    std::size_t heads, kv_heads;
    std::vector<std::size_t> kv_of;  ///< kv_head(h) for h = 0, 1, ...
  };
  const gqa_case cases[] = {
      {4, 4, {0, 1, 2, 3}},                 // multi-head
      {4, 1, {0, 0, 0, 0}},                 // multi-query
      {6, 2, {0, 0, 0, 1, 1, 1}},           // contiguous groups, not h % kv_heads
      {8, 4, {0, 0, 1, 1, 2, 2, 3, 3}},
  };
  for (const gqa_case& c : cases) {
    const shape s{1, c.heads, c.kv_heads, 1, 1, 1, 1};
    ASSERT_TRUE(s.valid());
    EXPECT_EQ(s.group(), c.heads / c.kv_heads);
    for (std::size_t h = 0; h < c.heads; ++h) EXPECT_EQ(s.kv_head(h), c.kv_of[h]) << c.heads << "/" << c.kv_heads << " h " << h;
    // q_head enumerates each group exactly once, in head order.
    std::size_t next = 0;
    for (std::size_t g = 0; g < c.kv_heads; ++g)
      for (std::size_t k = 0; k < s.group(); ++k) {
        EXPECT_EQ(s.q_head(g, k), next++);
        EXPECT_EQ(s.kv_head(s.q_head(g, k)), g);
      }
    EXPECT_EQ(next, c.heads);
  }
}

// --- layout ---------------------------------------------------------------------------------------
TEST(attn_problem, bhsd_layout_enumerates_each_tensor_once) {
  const shape s{2, 4, 2, 5, 6, 3, 7};
  std::vector<int> q(s.q_size()), o(s.o_size()), lse(s.lse_size()), k(s.k_size()), v(s.v_size());
  std::size_t expect_row = 0;
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h)
      for (std::size_t i = 0; i < s.seq_q; ++i) {
        EXPECT_EQ(s.q_row(b, h, i), expect_row++);  // row-major: b, then h, then i
        ++lse.at(s.q_row(b, h, i));
        for (std::size_t c = 0; c < s.dim; ++c) ++q.at(s.q_offset(b, h, i) + c);
        for (std::size_t c = 0; c < s.dim_v; ++c) ++o.at(s.o_offset(b, h, i) + c);
      }
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t g = 0; g < s.kv_heads; ++g)
      for (std::size_t j = 0; j < s.seq_k; ++j) {
        for (std::size_t c = 0; c < s.dim; ++c) ++k.at(s.k_offset(b, g, j) + c);
        for (std::size_t c = 0; c < s.dim_v; ++c) ++v.at(s.v_offset(b, g, j) + c);
      }
  for (const auto* t : {&q, &o, &lse, &k, &v})
    for (int n : *t) ASSERT_EQ(n, 1);
  EXPECT_EQ(s.q_offset(1, 2, 3), (((1 * 4 + 2) * 5) + 3) * 3u);
  EXPECT_EQ(s.v_offset(1, 1, 4), (((1 * 2 + 1) * 6) + 4) * 7u);
}

// --- validation -----------------------------------------------------------------------------------
TEST(attn_problem, validation_errors) {
  struct val_case {
    shape s;
    problem_error want;
  };
  const val_case cases[] = {
      {shape{}, problem_error::ok},
      {shape{0, 1, 1, 1, 1, 1, 1}, problem_error::zero_size},
      {shape{1, 0, 1, 1, 1, 1, 1}, problem_error::zero_size},
      {shape{1, 1, 0, 1, 1, 1, 1}, problem_error::zero_size},
      {shape{1, 1, 1, 0, 1, 1, 1}, problem_error::zero_size},
      {shape{1, 1, 1, 1, 0, 1, 1}, problem_error::zero_size},
      {shape{1, 1, 1, 1, 1, 0, 1}, problem_error::zero_size},
      {shape{1, 1, 1, 1, 1, 1, 0}, problem_error::zero_size},
      {shape{1, 4, 3, 1, 1, 1, 1}, problem_error::kv_heads_not_divisor},
      {shape{1, 2, 4, 1, 1, 1, 1}, problem_error::kv_heads_not_divisor},  // more kv heads than heads
      {shape{1, 6, 3, 1, 1, 1, 1}, problem_error::ok},
  };
  for (const val_case& c : cases) {
    EXPECT_EQ(c.s.validate(), c.want) << error_text(c.s.validate());
    EXPECT_EQ(c.s.valid(), c.want == problem_error::ok);
    EXPECT_EQ((problem{c.s, mask_kind::causal, 2.0}.validate()), c.want);
  }
  EXPECT_EQ(std::string(error_text(problem_error::zero_size)), "every size must be positive");
  EXPECT_EQ(std::string(error_text(problem_error::kv_heads_not_divisor)), "kv_heads must divide heads");
  EXPECT_EQ(std::string(error_text(static_cast<problem_error>(9))), "unknown attention problem error");
}

}  // namespace
}  // namespace tiebreak::attn
