// SPDX-License-Identifier: Apache-2.0
/// @file The `tiebreak` command line: subcommands round, add, demo (and analyze when built).

#include <exception>
#include <stdexcept>
#include <iostream>
#include <cctype>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"

#ifndef TIEBREAK_VERSION
#define TIEBREAK_VERSION "unknown"
#endif

namespace {

/// One line: CLI11 messages may contain newlines; the CLI promises one-line errors.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

/// CLI11 reads "-inf" and "-nan" as unknown short options. A leading space makes them positional;
/// restore_negative_specials() in the subcommands removes it again.
bool is_negative_special(const char* arg) {
  std::string s(arg);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "-inf" || s == "-infinity" || s == "-nan";
}

}  // namespace

int main(int argc, char** argv) {
  tiebreak::cli::set_command_line(argc, argv);
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (is_negative_special(a.c_str())) a.insert(a.begin(), ' ');
  }
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  argv = argp.data();

  CLI::App app{"tiebreak: finds, measures and explains biased rounding in low-precision arithmetic", "tiebreak"};
  app.set_version_flag("--version", std::string("tiebreak ") + TIEBREAK_VERSION);
  app.require_subcommand(1);
  tiebreak::cli::register_round(app);
  tiebreak::cli::register_add(app);
  tiebreak::cli::register_demo(app);
  tiebreak::cli::register_mma(app);
  tiebreak::cli::register_report(app);
#ifdef TIEBREAK_HAVE_ANALYSIS
  tiebreak::cli::register_analyze(app);
  tiebreak::cli::register_audit(app);
  tiebreak::cli::register_attention(app);
  tiebreak::cli::register_audit_gemm(app);
#endif
#ifdef TIEBREAK_HAVE_EXPERIMENT
  tiebreak::cli::register_experiment(app);
#endif
  try {
    // CLI11 reports a mistyped subcommand, or an option before any, only as "A subcommand is
    // required": name it, at the top level and one level down (`analyze fourier`).
    const auto check_subcommand = [](const CLI::App& parent, const std::string& arg, const std::string& prefix) {
      std::string names;
      bool known = false;
      for (const CLI::App* sub : const_cast<CLI::App&>(parent).get_subcommands({})) {
        names += " " + sub->get_name();
        known = known || sub->get_name() == arg;
      }
      if (!known)
        throw std::invalid_argument(prefix + "unknown subcommand '" + arg + "' (expected one of" + names + ")");
    };
    if (argc > 1) {
      const std::string first = argv[1];
      if (first[0] != '-') {
        check_subcommand(app, first, "");
        const CLI::App* sub = app.get_subcommand(first);
        if (argc > 2 && argv[2][0] != '-' && !const_cast<CLI::App*>(sub)->get_subcommands({}).empty())
          check_subcommand(*sub, argv[2], first + ": ");
      } else if (first != "--help" && first != "-h" && first != "--version") {
        throw std::invalid_argument("unknown option '" + first + "' (a command comes first: tiebreak <command> ...)");
      }
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" with exit code 0; every real usage error exits 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cout.flush();
    std::cerr << "tiebreak: error: " << one_line(e.what()) << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "tiebreak: error: " << one_line(e.what()) << std::endl;
    return 2;
  }
  return 0;
}
