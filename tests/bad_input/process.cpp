// SPDX-License-Identifier: Apache-2.0
/// @file fork/exec + polled waitpid with a deadline; output captured through temporary files.
#include "process.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tiebreak::test {
namespace {

std::string temp_file() {
  char name[] = "/tmp/tiebreak_bad_input_XXXXXX";
  const int fd = ::mkstemp(name);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  return name;
}

std::string slurp_and_remove(const std::string& path) {
  std::string s;
  {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream o;
    o << in.rdbuf();
    s = o.str();
  }
  std::remove(path.c_str());
  return s;
}

}  // namespace

process_result run_tiebreak(const std::vector<std::string>& args, std::chrono::milliseconds limit, bool as_nobody) {
  const std::string out_path = temp_file(), err_path = temp_file();
  std::vector<std::string> argv_s{TIEBREAK_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const bool drop = as_nobody && ::geteuid() == 0;
  if (drop) {  // the child (as nobody) writes the capture files
    ::chmod(out_path.c_str(), 0666);
    ::chmod(err_path.c_str(), 0666);
  }

  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_TRUNC);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_TRUNC);
    if (in < 0 || out < 0 || err < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
    if (drop && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }

  process_result r;
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() - t0 > limit) {
      ::kill(pid, SIGKILL);  // the child we started, by its id
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = slurp_and_remove(out_path);
  r.err = slurp_and_remove(err_path);
  return r;
}

std::string describe(const process_result& r) {
  std::ostringstream s;
  if (r.timed_out) s << "timeout (killed after " << r.seconds << " s)";
  else if (r.signal) s << "signal " << r.signal;
  else s << "exit " << r.exit_code;
  s << "; stderr: " << r.err.substr(0, 600);
  return s.str();
}

}  // namespace tiebreak::test
