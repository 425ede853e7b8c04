// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak report`: one self-contained HTML page from tiebreak's JSON, drawn by the Python
/// renderer `python3 -m tiebreak.report` (python/tiebreak/report, docs/report.md) run as a child process.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"

extern char** environ;

#ifndef TIEBREAK_VERSION
#define TIEBREAK_VERSION "unknown"
#endif
#ifndef TIEBREAK_PYTHON_SOURCE_DIR
#define TIEBREAK_PYTHON_SOURCE_DIR ""
#endif

namespace tiebreak::cli {

namespace {

struct report_options {
  std::vector<std::string> inputs;
  std::string output;
};

/// The folder that holds the package `tiebreak/report`: $TIEBREAK_PYTHON_DIR, else the source tree's
/// python/ (a compile definition); empty when neither has it (then an installed package may).
std::string python_package_dir() {
  const char* env = std::getenv("TIEBREAK_PYTHON_DIR");
  const std::string dir = (env && *env) ? env : TIEBREAK_PYTHON_SOURCE_DIR;
  if (dir.empty()) return {};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(dir) / "tiebreak" / "report" / "__main__.py", ec)) {
    if (env && *env)
      throw std::runtime_error("report: TIEBREAK_PYTHON_DIR=" + dir + " has no tiebreak/report/__main__.py");
    return {};
  }
  return dir;
}

/// Checks what the renderer would report less clearly: a missing, unreadable or non-regular input,
/// an output folder that does not exist.
void check_paths(const report_options& o) {
  for (const std::string& p : o.inputs) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) throw std::runtime_error(p + ": " + (errno == ENOENT ? "no such file" : std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw std::runtime_error(p + ": is a directory (expected a JSON file)");
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(p + ": not a regular file (expected a JSON file)");
    if (::access(p.c_str(), R_OK) != 0) throw std::runtime_error(p + ": cannot read: " + std::strerror(errno));
  }
  const std::filesystem::path out = std::filesystem::absolute(o.output);
  std::error_code ec;
  if (!std::filesystem::is_directory(out.parent_path(), ec))
    throw std::runtime_error("-o " + o.output + ": no such directory '" + out.parent_path().string() + "'");
}

/// The last non-empty line of `text`.
std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return {};
  const std::size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

/// Runs `argv` with `env`, stdout inherited, stderr collected; returns the wait status.
int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string& err,
              int& spawn_errno) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("report: pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  std::fflush(stdout);
  std::cout.flush();
  spawn_errno = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawn_errno != 0) {
    ::close(fds[0]);
    return -1;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      err.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("report: waitpid: ") + std::strerror(errno));
  }
  return status;
}

void run_report(const report_options& o) {
  check_paths(o);
  const char* py_env = std::getenv("TIEBREAK_PYTHON");
  const std::string python = (py_env && *py_env) ? py_env : "python3";
  const std::string dir = python_package_dir();

  std::vector<std::string> env;
  std::string pythonpath = dir;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("PYTHONPATH=", 0) == 0) {
      const std::string old = kv.substr(11);
      if (!old.empty()) pythonpath = pythonpath.empty() ? old : pythonpath + ":" + old;
    } else if (kv.rfind("MPLBACKEND=", 0) != 0 && kv.rfind("PYTHONDONTWRITEBYTECODE=", 0) != 0) {
      env.push_back(kv);
    }
  }
  if (!pythonpath.empty()) env.push_back("PYTHONPATH=" + pythonpath);
  env.push_back("MPLBACKEND=Agg");                // no display, whatever the user's matplotlibrc says
  env.push_back("PYTHONDONTWRITEBYTECODE=1");     // leave no __pycache__ in the source tree

  std::vector<std::string> argv{python, "-m", "tiebreak.report", "--tool-version", TIEBREAK_VERSION,
                                "--invoked-as", nlohmann::json(command_line()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  argv.push_back("--output=" + o.output);  // '=' and '--': names that start with '-' stay names
  argv.push_back("--");
  argv.insert(argv.end(), o.inputs.begin(), o.inputs.end());

  std::string err;
  int spawn_errno = 0;
  const int status = run_child(argv, env, err, spawn_errno);
  if (spawn_errno != 0) {
    throw std::runtime_error("report: cannot run '" + python + "' (" + std::strerror(spawn_errno) +
                             "): the report needs Python 3 with matplotlib (install python3, then pip install "
                             "matplotlib; TIEBREAK_PYTHON names another interpreter)");
  }
  const std::string last = last_line(err);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    std::cerr << err;  // warnings of the renderer (none when all is well)
    return;
  }
  const std::string prefix = "tiebreak: error: ";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2 && last.rfind(prefix, 0) == 0) throw std::runtime_error(last.substr(prefix.size()));
  if (err.find("No module named 'tiebreak") != std::string::npos) {
    throw std::runtime_error("report: " + python + " finds no package tiebreak.report (" +
                             (dir.empty() ? std::string("no python/ folder of the sources known to this build") : "looked in " + dir) +
                             "; set TIEBREAK_PYTHON_DIR to the folder that holds tiebreak/report)");
  }
  const std::string how = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                            : "signal " + std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  throw std::runtime_error("report: the Python renderer failed (" + how + ")" + (last.empty() ? "" : ": " + last));
}

}  // namespace

void render_html_report(const std::vector<std::string>& inputs, const std::string& output) {
  run_report(report_options{inputs, output});
}

void register_report(CLI::App& app) {
  auto opts = std::make_shared<report_options>();
  CLI::App* cmd = app.add_subcommand(
      "report", "One self-contained HTML report (figures embedded) from the JSON of audit, attention, audit-gemm, "
                "demo --json, analyze --json (needs Python 3 with matplotlib; docs/report.md)");
  cmd->add_option("inputs", opts->inputs, "JSON files written by tiebreak")->required();
  cmd->add_option("-o,--output", opts->output, "the HTML file to write")->required();
  cmd->callback([opts] { run_command([&] { run_report(*opts); }); });
}

}  // namespace tiebreak::cli
