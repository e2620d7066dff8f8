// Child processes for tests: fork (and exec) with pipes, poll-driven reads, bounded waits.
#include "tests/support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace sluice::testing {

bool Process::start() {
  std::array<int, 2> out{};
  std::array<int, 2> err{};
  if (pipe2(out.data(), O_CLOEXEC) != 0 || pipe2(err.data(), O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    return true;
  }
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  return false;
}

Process::Process(const std::vector<std::string>& argv) {
  if (!start()) return;
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());  // a bare name (python3) is looked up on PATH
  _exit(127);
}

Process::Process(const std::function<int()>& body) {
  if (!start()) return;
  int code = 126;
  try {
    code = body();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "child: %s\n", error.what());
  } catch (...) {
    std::fprintf(stderr, "child: unknown exception\n");
  }
  std::fflush(nullptr);
  _exit(code);  // not exit(): the test framework's handlers belong to the parent
}

Process::~Process() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void Process::pump(std::chrono::milliseconds timeout) {
  std::array<pollfd, 2> fds{pollfd{out_fd_, POLLIN, 0}, pollfd{err_fd_, POLLIN, 0}};
  if (poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0) return;
  std::array<char, 65536> buffer{};
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP)) == 0 || fds[i].fd < 0) continue;
    const ssize_t got = read(fds[i].fd, buffer.data(), buffer.size());
    if (got > 0) {
      (i == 0 ? result_.out : result_.err).append(buffer.data(), static_cast<std::size_t>(got));
    } else if (got == 0) {
      close(fds[i].fd);
      (i == 0 ? out_fd_ : err_fd_) = -1;
    }
  }
}

bool Process::wait_for_stderr(const std::string& needle, std::chrono::milliseconds timeout) {
  return wait_for(result_.err, needle, timeout);
}

bool Process::wait_for_stdout(const std::string& needle, std::chrono::milliseconds timeout) {
  return wait_for(result_.out, needle, timeout);
}

bool Process::wait_for(const std::string& text, const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (text.find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline || (out_fd_ < 0 && err_fd_ < 0)) return false;
    pump(std::chrono::milliseconds(50));
  }
  return true;
}

void Process::send_signal(int signal) { kill(pid_, signal); }

ProcessResult Process::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out_fd_ >= 0 || err_fd_ >= 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      break;
    }
    pump(std::chrono::milliseconds(50));
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result_.signal = WTERMSIG(status);
  return result_;
}

std::string path_from_env(const char* variable, const char* built_in) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : built_in;
}

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  Process process(argv);
  return process.wait(timeout);
}

}  // namespace sluice::testing
