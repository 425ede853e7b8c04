// SPDX-License-Identifier: Apache-2.0
/// @file The one JSON convention for numbers: non-finite doubles as the strings "inf", "-inf", "nan".
///
/// JSON has no NaN or infinity. Every JSON file tiebreak writes (the CLI's --json output, `analyze`,
/// the audit report) writes a double through json_number, and every reader of those files in
/// tiebreak reads one back through number_from_json (docs/json.md). The strings keep the sign of an
/// infinity and tell NaN from infinity, which `null` cannot; Python's float() and numpy's
/// astype(float) read all three. `null` is kept for "no value" (an undefined direction, no alarm).
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace tiebreak::io {

/// A double as JSON: the number when finite, else the string "inf", "-inf" or "nan" (any NaN,
/// whatever its sign or payload).
[[nodiscard]] inline nlohmann::json json_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

/// Reads back what json_number wrote: a JSON number, or one of the strings "inf", "-inf", "nan".
/// Throws std::invalid_argument for anything else (null included: it is not a number here).
[[nodiscard]] inline double number_from_json(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  throw std::invalid_argument("not a number in tiebreak's JSON convention: " + j.dump());
}

}  // namespace tiebreak::io
