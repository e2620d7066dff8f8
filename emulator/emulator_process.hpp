// sluice-emulator as a child process: found beside the running program (or SLUICE_EMULATOR),
// its stderr (progress and the final report) captured, stopped with SIGTERM and reaped by
// its owner. Used by `sluice run --emulator` and `sluice bench`.
#pragma once

#include <sys/types.h>

#include <string>
#include <thread>
#include <vector>

namespace sluice::emulator {

// SLUICE_EMULATOR when set, else sluice-emulator beside this program or in ../emulator/ (the
// build tree's layout); throws naming the paths tried.
std::string locate_emulator_program();

class EmulatorProcess {
 public:
  // posix_spawn(program, args); throws naming the call and errno.
  EmulatorProcess(const std::string& program, const std::vector<std::string>& args);
  EmulatorProcess(const EmulatorProcess&) = delete;
  EmulatorProcess& operator=(const EmulatorProcess&) = delete;
  ~EmulatorProcess();  // stop(), errors only logged

  [[nodiscard]] pid_t pid() const { return pid_; }
  // True until the process has exited (reaps it when it has).
  bool running();
  // SIGTERM when still running, then waits. Returns the exit status (128 + signal when killed).
  int stop();
  // What the process wrote to stderr; complete once stop() (or running() == false) returned.
  [[nodiscard]] std::string output();
  // The last line of output that starts with "emulator:" (its report), or empty.
  [[nodiscard]] std::string report_line();

 private:
  void reap(int status);
  pid_t pid_ = -1;
  int exit_status_ = -1;
  int read_fd_ = -1;
  std::string output_;
  std::thread reader_;  // drains stderr so a chatty child never blocks on a full pipe
};

}  // namespace sluice::emulator
