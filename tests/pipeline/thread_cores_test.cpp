// pipeline/thread_cores: the cores a thread may use and pinning, checked against what the kernel
// shows in /proc (Cpus_allowed_list), not against the library's own reading.
#include "pipeline/thread_cores.hpp"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "pipeline/gpu_placement.hpp"

namespace sluice {
namespace {

// The calling thread's Cpus_allowed_list, as /proc/self/task/TID/status shows it.
std::vector<int> kernel_cores_of_this_thread() {
  std::ifstream status("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0)
      return parse_core_list(line.substr(line.find_first_not_of(" \t", 18))).value_or(std::vector<int>{});
  }
  return {};
}

TEST(ThreadCores, AllowedCoresAreTheKernels) { EXPECT_EQ(allowed_cores(), kernel_cores_of_this_thread()); }

TEST(ThreadCores, APinnedThreadRunsOnlyOnItsCores) {
  const std::vector<int> allowed = allowed_cores();
  ASSERT_FALSE(allowed.empty());
  std::vector<int> seen;
  std::thread([&] {
    pin_thread(pthread_self(), {allowed.back()}, "test");
    seen = kernel_cores_of_this_thread();
  }).join();
  EXPECT_EQ(seen, std::vector<int>{allowed.back()});
}

TEST(ThreadCores, ACoreThatIsNotThereIsAnErrorNamingTheCallAndTheThread) {
  std::thread([] {
    try {
      pin_thread(pthread_self(), {CPU_SETSIZE + 5}, "worker 3");
      ADD_FAILURE() << "pinned to a core past CPU_SETSIZE";
    } catch (const std::runtime_error& error) {
      EXPECT_EQ(std::string(error.what()), "pthread_setaffinity_np (worker 3): Invalid argument");
    }
  }).join();
}

}  // namespace
}  // namespace sluice
