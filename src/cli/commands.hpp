// SPDX-License-Identifier: Apache-2.0
/// @file Registration functions of the CLI subcommands (one per <name>_cmd.cpp).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace tiebreak::cli {

/// Records the process's arguments for common.hpp's command_line() (main() calls it first).
void set_command_line(int argc, const char* const* argv);

/// `tiebreak round`: round values into a format (round_cmd.cpp).
void register_round(CLI::App& app);
/// `tiebreak add`: sum values left to right with every step's exact value and error (add_cmd.cpp).
void register_add(CLI::App& app);
/// `tiebreak demo`: the tie-breaking demonstration table (demo_cmd.cpp).
void register_demo(CLI::App& app);
/// `tiebreak mma`: one output element of a tensor-core instruction, as the hardware computes it.
void register_mma(CLI::App& app);
/// `tiebreak report`: the HTML report of tiebreak's JSON, drawn by python/tiebreak/report (report_cmd.cpp).
void register_report(CLI::App& app);
/// What `tiebreak report INPUTS -o OUTPUT` does, for commands that offer --html (report_cmd.cpp).
void render_html_report(const std::vector<std::string>& inputs, const std::string& output);
#ifdef TIEBREAK_HAVE_ANALYSIS
/// `tiebreak analyze` (analyze_cmd.cpp, built with tiebreak::analysis).
void register_analyze(CLI::App& app);
/// `tiebreak audit` (audit_cmd.cpp, built with tiebreak::analysis and tiebreak::audit).
void register_audit(CLI::App& app);
/// `tiebreak attention`: the instrumented flash attention, forward and backward (attention_cmd.cpp).
void register_attention(CLI::App& app);
/// `tiebreak audit-gemm` (gemm_cmd.cpp, built with tiebreak::audit).
void register_audit_gemm(CLI::App& app);
#endif
#ifdef TIEBREAK_HAVE_EXPERIMENT
/// `tiebreak experiment causal|bisect`: the causal experiment (experiment_cmd.cpp, tiebreak::experiment).
void register_experiment(CLI::App& app);
#endif

}  // namespace tiebreak::cli
