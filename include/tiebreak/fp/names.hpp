// SPDX-License-Identifier: Apache-2.0
/// @file Name lists built at compile time from the core's tables ("f64 f32 tf32 bf16 f16 e4m3 e5m2").
///
/// Help texts, error messages and test helpers print these instead of typing the names again, so a
/// format added to `all_format_ids` or a mode added to `all_round_modes` shows up everywhere at once.
#pragma once

#include <cstddef>
#include <string_view>

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"

namespace tiebreak {

/// Names joined by single spaces, in a fixed buffer filled at compile time.
template <std::size_t Size>
struct name_list {
  char text[Size + 1] = {};  ///< NUL-terminated
  TIEBREAK_HDC std::string_view view() const noexcept { return std::string_view(text, Size); }
  TIEBREAK_HDC const char* c_str() const noexcept { return text; }
};

namespace detail {

/// Length of the names of `table` joined by single spaces.
template <class Table, class NameOf>
constexpr std::size_t joined_size(const Table& table, NameOf name_of) noexcept {
  std::size_t n = 0;
  for (const auto& item : table) n += (n == 0 ? 0 : 1) + name_of(item).size();
  return n;
}

template <std::size_t Size, class Table, class NameOf>
constexpr name_list<Size> join_names(const Table& table, NameOf name_of) noexcept {
  name_list<Size> out;
  std::size_t pos = 0;
  for (const auto& item : table) {
    if (pos != 0) out.text[pos++] = ' ';
    for (char c : name_of(item)) out.text[pos++] = c;
  }
  return out;
}

constexpr std::string_view format_name_of(format_id id) noexcept { return desc_of(id).name; }
constexpr std::string_view round_mode_name_of(round_mode m) noexcept { return to_string(m); }

}  // namespace detail

/// The names of a table's entries joined by spaces: `Table` is a constexpr array (all_format_ids,
/// all_round_modes, emu::all_mma_instrs), `NameOf` the constexpr function naming an entry.
template <const auto& Table, auto NameOf>
inline constexpr auto joined_names = detail::join_names<detail::joined_size(Table, NameOf)>(Table, NameOf);

/// Every format name, in all_format_ids order: "f64 f32 tf32 bf16 f16 e4m3 e5m2".
inline constexpr const auto& format_names = joined_names<all_format_ids, detail::format_name_of>;
/// Every rounding-mode name, in all_round_modes order: "rne rna rz ru rd rto sr".
inline constexpr const auto& round_mode_names = joined_names<all_round_modes, detail::round_mode_name_of>;

}  // namespace tiebreak
