// This process's threads as the kernel shows them under /proc/self/task: found by name, and one
// field of a thread's status (Cpus_allowed_list, State), for tests that check where threads run.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sluice::test {

// The /proc/self/task entries of the threads named `name` (pthread_setname_np).
inline std::vector<std::string> tasks_named(const std::string& name) {
  std::vector<std::string> tasks;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string text;
    if (std::getline(comm, text) && text == name) tasks.push_back(entry.path());
  }
  return tasks;
}

// The calling thread's /proc/self/task entry.
inline std::string this_task() { return "/proc/self/task/" + std::to_string(::syscall(SYS_gettid)); }

// `field` of a task's status ("Cpus_allowed_list", "State"), its value without the padding; ""
// when the task has none.
inline std::string status_field(const std::string& task, const std::string& field) {
  std::ifstream status(task + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) {
      const std::size_t value = line.find_first_not_of(" \t", field.size() + 1);
      return value == std::string::npos ? std::string() : line.substr(value);
    }
  }
  return {};
}

}  // namespace sluice::test
