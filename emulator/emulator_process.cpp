// sluice-emulator as a child process (see emulator_process.hpp).
#include "emulator/emulator_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

extern char** environ;

namespace sluice::emulator {
namespace fs = std::filesystem;

std::string locate_emulator_program() {
  if (const char* configured = std::getenv("SLUICE_EMULATOR"); configured != nullptr && *configured != '\0') {
    if (::access(configured, X_OK) != 0) {
      throw std::runtime_error(std::string("SLUICE_EMULATOR=") + configured + ": not an executable file");
    }
    return configured;
  }
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) throw std::runtime_error("readlink(/proc/self/exe): " + error.message() + "; set SLUICE_EMULATOR");
  const fs::path candidates[] = {self.parent_path() / "sluice-emulator",
                                 self.parent_path().parent_path() / "emulator" / "sluice-emulator"};
  for (const auto& candidate : candidates) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error("sluice-emulator not found at " + candidates[0].string() + " or " + candidates[1].string() +
                           "; build it (ninja sluice-emulator) or set SLUICE_EMULATOR");
}

EmulatorProcess::EmulatorProcess(const std::string& program, const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(errno_message("pipe2", errno));
  read_fd_ = fds[0];
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);  // dup2 clears O_CLOEXEC on fd 2
  std::vector<std::string> words{program};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const int spawned = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(read_fd_);
    read_fd_ = -1;
    pid_ = -1;
    throw std::runtime_error(errno_message("posix_spawn(" + program + ")", spawned));
  }
  reader_ = std::thread([this] {
    char buffer[4096];
    for (;;) {
      const ssize_t got = ::read(read_fd_, buffer, sizeof(buffer));
      if (got > 0) {
        output_.append(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        break;
      }
    }
  });
}

EmulatorProcess::~EmulatorProcess() {
  try {
    stop();
  } catch (const std::exception& error) {
    log::warn("stopping sluice-emulator: {}", error.what());
  }
}

void EmulatorProcess::reap(int status) {
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
  // The child's end of the pipe closed with it: the reader ends at EOF.
  if (reader_.joinable()) reader_.join();
  if (read_fd_ >= 0) ::close(read_fd_);
  read_fd_ = -1;
}

bool EmulatorProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    reap(status);
    return false;
  }
  return true;
}

int EmulatorProcess::stop() {
  if (pid_ > 0) {
    if (running()) ::kill(pid_, SIGTERM);
    if (pid_ > 0) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0) {
        if (errno != EINTR) throw std::runtime_error(errno_message("waitpid(sluice-emulator)", errno));
      }
      reap(status);
    }
  }
  return exit_status_;
}

std::string EmulatorProcess::output() { return pid_ > 0 ? std::string() : output_; }

std::string EmulatorProcess::report_line() {
  std::istringstream lines(output());
  std::string line;
  std::string report;
  while (std::getline(lines, line)) {
    if (line.rfind("emulator:", 0) == 0) report = line;
  }
  return report;
}

}  // namespace sluice::emulator
