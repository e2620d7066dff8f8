// pipeline/thread_cores: the cores a thread may use and pinning, checked against what the kernel
// shows in /proc (Cpus_allowed_list), not against the library's own reading.
#include "pipeline/thread_cores.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

#include "pipeline/gpu_placement.hpp"
#include "tests/support/proc_tasks.hpp"

namespace sluice {
namespace {

// The calling thread's Cpus_allowed_list, as /proc/self/task/TID/status shows it.
std::vector<int> kernel_cores_of_this_thread() {
  return parse_core_list(test::status_field(test::this_task(), "Cpus_allowed_list")).value_or(std::vector<int>{});
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
