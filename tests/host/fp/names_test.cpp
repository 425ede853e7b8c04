// SPDX-License-Identifier: Apache-2.0
/// @file Name lists (fp/names.hpp) against the tables they are built from: every entry once, in
/// table order, and every listed name parses back to its entry.
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/fp/names.hpp"

namespace tiebreak::test {
namespace {

std::vector<std::string> words(std::string_view list) {
  std::vector<std::string> out;
  std::istringstream in{std::string(list)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The lists are usable in constant expressions (help texts may be built at compile time).
static_assert(format_names.view().size() > 0 && format_names.c_str()[format_names.view().size()] == '\0');
static_assert(round_mode_names.view().substr(0, 4) == "rne ");

TEST(names, format_names_are_the_format_table) {
  const auto listed = words(format_names.view());
  ASSERT_EQ(listed.size(), std::size(all_format_ids));
  // Single spaces only: the list is exactly the names joined by " ".
  std::string joined;
  for (format_id id : all_format_ids) {
    if (!joined.empty()) joined += ' ';
    joined += desc_of(id).name;
  }
  EXPECT_EQ(format_names.view(), joined);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    EXPECT_TRUE(seen.insert(listed[i]).second) << "duplicate name " << listed[i];
    format_id id{};
    ASSERT_TRUE(parse_format(listed[i], id)) << listed[i];
    EXPECT_EQ(id, all_format_ids[i]);
    EXPECT_EQ(desc_of(id).name, listed[i]);
  }
  format_id unused{};
  EXPECT_FALSE(parse_format("BF16", unused));  // names are case-sensitive
  EXPECT_FALSE(parse_format("custom", unused));  // the name of an unnamed descriptor is no format
}

TEST(names, round_mode_names_are_the_mode_table) {
  const auto listed = words(round_mode_names.view());
  ASSERT_EQ(listed.size(), std::size(all_round_modes));
  std::set<std::string> seen;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    EXPECT_TRUE(seen.insert(listed[i]).second) << "duplicate name " << listed[i];
    round_mode m{};
    ASSERT_TRUE(parse_round_mode(listed[i], m)) << listed[i];
    EXPECT_EQ(m, all_round_modes[i]);
    EXPECT_EQ(to_string(m), listed[i]);
  }
  // Every deterministic mode is one of the modes.
  for (round_mode m : deterministic_round_modes) EXPECT_TRUE(seen.count(std::string(to_string(m)))) << to_string(m);
}

TEST(names, joined_names_of_any_table) {
  const auto& instrs = joined_names<emu::all_mma_instrs, emu::mma_instr_name>;
  const auto listed = words(instrs.view());
  ASSERT_EQ(listed.size(), std::size(emu::all_mma_instrs));
  for (std::size_t i = 0; i < listed.size(); ++i) {
    emu::mma_instr id{};
    ASSERT_TRUE(emu::parse_mma_instr(listed[i], id)) << listed[i];
    EXPECT_EQ(id, emu::all_mma_instrs[i]);
  }
}

}  // namespace
}  // namespace tiebreak::test
