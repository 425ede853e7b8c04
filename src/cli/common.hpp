// SPDX-License-Identifier: Apache-2.0
/// @file Helpers shared by the CLI subcommands: names, value parsing, exact text, JSON numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/names.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/host/exact.hpp"
#include "tiebreak/io/json.hpp"

namespace tiebreak::cli {

/// The format named `name` ("bf16", ...). Throws std::invalid_argument naming the option and the
/// accepted names for an unknown one (the CLI turns it into exit code 2).
[[nodiscard]] format_desc format_by_name(std::string_view option, std::string_view name);

/// The rounding mode named `name` ("rne", ...); throws std::invalid_argument like format_by_name.
[[nodiscard]] round_mode mode_by_name(std::string_view option, std::string_view name);

/// A VALUE argument: `bits:<hex or decimal encoding of from>`, a decimal, a C99 hex float, nan or inf,
/// read exactly. Throws host::parse_error (one line naming the text) when unparsable.
[[nodiscard]] host::exact_number parse_value(std::string_view text, const format_desc& from);

/// For numeric options (CLI11 validators): empty when `text` is a finite decimal number, else the
/// problem ("'nan' is not a finite number"). CLI11's Range lets NaN through (every comparison
/// with NaN is false), so options whose NaN or Inf would poison a result check this first.
[[nodiscard]] std::string finite_number_error(const std::string& text);

/// For unsigned integer options (seeds, counts): empty when `text` is a decimal or 0x-hex integer
/// in [0, 2^64), else the problem. CLI11 reads "-1" into an unsigned as 2^64 - 1 and lets
/// 18446744073709551616 through without a word.
[[nodiscard]] std::string unsigned_number_error(const std::string& text);

/// The arguments main() received (argv[0] first), as set_command_line (commands.hpp) stored them:
/// for reports that record how they were made.
[[nodiscard]] const std::vector<std::string>& command_line();

/// Undoes main()'s protection of "-inf" / "-nan" arguments (a leading space) in a value list.
void restore_negative_specials(std::vector<std::string>& values);
void restore_negative_special(std::string& value);

/// Random bits for stochastic rounding: rounding number k (in the order the roundings happen) of
/// stream `stream` takes philox_word(seed, stream, k), the word cuRAND's Philox4_32_10 gives after
/// curand_init(seed, stream, k); 0 for the deterministic modes (unused by them).
class random_source {
 public:
  random_source(round_mode mode, std::uint64_t seed, std::uint64_t stream = 0) : mode_(mode), words_{seed, stream} {}
  [[nodiscard]] rounding next() {
    return rounding{mode_, mode_ == round_mode::sr ? words_(step_++) : 0u};
  }

 private:
  round_mode mode_;
  random_stream words_;
  std::uint64_t step_ = 0;
};

/// Names of the set flags, in the order inexact, underflow, overflow, invalid.
[[nodiscard]] std::vector<std::string> flag_names(std::uint8_t flags);
/// The flag names joined by spaces, or "none".
[[nodiscard]] std::string flags_text(std::uint8_t flags);

/// A double as JSON: a number when finite, else the string "inf", "-inf" or "nan" (the one
/// convention of every JSON writer, tiebreak/io/json.hpp and docs/json.md).
using io::json_number;

/// Text of an encoding's value: exact decimal, "nan", "inf", "-inf", "-0".
[[nodiscard]] std::string value_text(const format_desc& f, std::uint64_t bits);
/// The same with the hex float appended for finite non-zero values: "1.00390625 (0x1.01p+0)".
[[nodiscard]] std::string value_text_with_hex(const format_desc& f, std::uint64_t bits);

/// The outcome of comparing a result with the exact value it stands for.
struct error_report {
  bool known = false;       ///< false for NaN results or NaN inputs: no error is defined
  bool infinite = false;    ///< the result is infinite and the input finite (error +-inf)
  host::rational error = 0; ///< result - exact (finite case)
  host::rational ulps = 0;  ///< error / ulp of the result grid (finite case)
  int sign = 0;             ///< sign of the error
  std::string direction;    ///< "exact", "away" (from zero) or "toward" (zero); empty when unknown
};

/// Error of rounding `exact` into `f` with result `r` (the result of round_pack or an emulated op).
[[nodiscard]] error_report compare(const format_desc& f, const round_result& r, const host::exact_number& exact);

/// JSON fields "error", "error_ulps", "error_ulps_exact", "direction" of a report.
void put_error(nlohmann::json& j, const error_report& e);
/// "error -0.00390625 = -0.5 ulp (toward zero)" or "error none (NaN)".
[[nodiscard]] std::string error_text(const error_report& e);

/// Runs a subcommand's body from its CLI11 callback: CLI11's own errors pass through (usage, exit
/// code from CLI11); any other exception has stdout flushed and becomes a std::runtime_error with
/// its message on one line (newlines become spaces), which main() prints and answers with exit
/// code 2.
void run_command(const std::function<void()>& body);

}  // namespace tiebreak::cli
