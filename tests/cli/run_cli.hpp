// SPDX-License-Identifier: Apache-2.0
/// @file Runs the built `tiebreak` binary (TIEBREAK_CLI_PATH) and captures stdout, stderr, exit code.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tiebreak::test {

struct cli_result {
  int exit_code = -1;  ///< the exit status, or -1 when the process did not exit normally
  std::string out;
  std::string err;
};

/// Runs TIEBREAK_CLI_PATH with `args` (no shell), waits for it and returns what it printed.
cli_result run_cli(const std::vector<std::string>& args);

/// The lines of `text` (without their '\n').
std::vector<std::string> lines_of(const std::string& text);

/// Each stdout line parsed as JSON.
std::vector<nlohmann::json> json_lines(const std::string& text);

}  // namespace tiebreak::test
