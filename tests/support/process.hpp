// Runs a program as a child process with captured output, for end-to-end tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace sluice::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

// A running child whose stdout and stderr are read into strings: a program (argv, looked up
// on PATH when bare), or `body` run in a forked copy of this process, its return value the
// exit code (for code that must not share the test's process: resource limits, SIGKILL).
class Process {
 public:
  explicit Process(const std::vector<std::string>& argv);
  explicit Process(const std::function<int()>& body);
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();
  // Reads output until `needle` appears on stderr (stdout) or `timeout` passes; true if it appeared.
  bool wait_for_stderr(const std::string& needle, std::chrono::milliseconds timeout);
  bool wait_for_stdout(const std::string& needle, std::chrono::milliseconds timeout);
  // What the child wrote so far (as read by the waits above).
  [[nodiscard]] const std::string& stderr_so_far() const { return result_.err; }
  [[nodiscard]] const std::string& stdout_so_far() const { return result_.out; }
  void send_signal(int signal);
  // Waits for exit (killing the child after `timeout`) and returns everything it printed.
  ProcessResult wait(std::chrono::milliseconds timeout);
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  // Pipes for stdout and stderr, then fork; in the child, redirects both and returns true.
  bool start();
  bool wait_for(const std::string& text, const std::string& needle, std::chrono::milliseconds timeout);
  void pump(std::chrono::milliseconds timeout);
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  ProcessResult result_;
};

ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(120));

// A path built into the test, unless the environment names another (tests run from a
// packed tree on a GPU machine set SLUICE_BINARY, SLUICE_EMULATOR, SLUICE_SOURCE_DIR).
std::string path_from_env(const char* variable, const char* built_in);

}  // namespace sluice::testing
