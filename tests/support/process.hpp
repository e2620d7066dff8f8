// Runs a program as a child process with captured output, for end-to-end tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace sluice::testing {

struct ProcessResult {
  int exit_code = -1;      // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

// A running child whose stdout and stderr are read into strings.
class Process {
 public:
  explicit Process(const std::vector<std::string>& argv);
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();
  // Reads output until `needle` appears on stderr or `timeout` passes; true if it appeared.
  bool wait_for_stderr(const std::string& needle, std::chrono::milliseconds timeout);
  // What the child wrote to stderr so far (as read by wait_for_stderr).
  [[nodiscard]] const std::string& stderr_so_far() const { return result_.err; }
  void send_signal(int signal);
  // Waits for exit (killing the child after `timeout`) and returns everything it printed.
  ProcessResult wait(std::chrono::milliseconds timeout);
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  void pump(std::chrono::milliseconds timeout);
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  ProcessResult result_;
};

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = std::chrono::seconds(120));

// A path built into the test, unless the environment names another (tests run from a
// packed tree on the lent GPU machine set SLUICE_BINARY, SLUICE_EMULATOR, SLUICE_SOURCE_DIR).
std::string path_from_env(const char* variable, const char* built_in);

}  // namespace sluice::testing
