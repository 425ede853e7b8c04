// SPDX-License-Identifier: Apache-2.0
/// @file Runs the built `tiebreak` binary under a wall-clock limit; reports signals and hangs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tiebreak::test {

/// How one run of the CLI ended.
struct process_result {
  int exit_code = -1;      ///< exit status when the process exited normally, else -1
  int signal = 0;          ///< the signal that ended it (0 when it exited)
  bool timed_out = false;  ///< killed (SIGKILL) after the limit
  double seconds = 0;      ///< wall time
  std::string out, err;    ///< everything it wrote on stdout and stderr
};

/// Runs TIEBREAK_CLI_PATH with `args` (no shell), stdin from /dev/null, and kills it (SIGKILL) when
/// it runs longer than `limit`. With `as_nobody` and a root parent, the child first drops to uid
/// and gid 65534, so that file permissions apply to it (root reads a mode-000 file). Never throws
/// for the child's behaviour; throws std::runtime_error only when the child cannot be started.
process_result run_tiebreak(const std::vector<std::string>& args,
                            std::chrono::milliseconds limit = std::chrono::seconds(20), bool as_nobody = false);

/// "exit 2", "signal 11", "timeout after 20 s": for failure messages.
std::string describe(const process_result& r);

}  // namespace tiebreak::test
