#include "pipeline/unpinned_cores.hpp"

#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/gpu_placement.hpp"

namespace sluice {

UnpinnedCores::UnpinnedCores(const std::vector<int>& pinned) {
  CPU_ZERO(&before_);
  if (int error = pthread_getaffinity_np(pthread_self(), sizeof(before_), &before_); error != 0)
    throw std::runtime_error(errno_message("pthread_getaffinity_np", error));
  cpu_set_t rest = before_;
  for (int cpu : pinned) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_CLR(static_cast<std::size_t>(cpu), &rest);
  }
  if (CPU_COUNT(&rest) == 0 || CPU_EQUAL(&rest, &before_)) return;
  if (int error = pthread_setaffinity_np(pthread_self(), sizeof(rest), &rest); error != 0)
    throw std::runtime_error(errno_message("pthread_setaffinity_np", error));
  narrowed_ = true;
  thread_ = pthread_self();
  std::vector<int> list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(static_cast<std::size_t>(cpu), &rest)) list.push_back(cpu);
  }
  cores_ = format_core_list(list);
}

void UnpinnedCores::release() noexcept {
  if (!narrowed_ || pthread_equal(thread_, pthread_self()) == 0) return;
  narrowed_ = false;
  pthread_setaffinity_np(pthread_self(), sizeof(before_), &before_);
}

}  // namespace sluice
