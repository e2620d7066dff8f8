// Thread placement: core lists from cpu_set_t, and pinning with the failed call named.
#include "pipeline/thread_cores.hpp"

#include <cerrno>
#include <stdexcept>

#include "pipeline/errno_message.hpp"

namespace sluice {

std::vector<int> cores_in(const cpu_set_t& set) {
  std::vector<int> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(static_cast<std::size_t>(cpu), &set)) cores.push_back(cpu);
  }
  return cores;
}

std::vector<int> allowed_cores(pid_t task) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(task, sizeof(set), &set) != 0) throw std::runtime_error(errno_message("sched_getaffinity"));
  return cores_in(set);
}

void pin_thread(pthread_t thread, const std::vector<int>& cores, const std::string& which) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cores) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(static_cast<std::size_t>(cpu), &set);
  }
  if (int error = pthread_setaffinity_np(thread, sizeof(set), &set); error != 0) {
    throw std::runtime_error(
        errno_message(which.empty() ? "pthread_setaffinity_np" : "pthread_setaffinity_np (" + which + ")", error));
  }
}

}  // namespace sluice
