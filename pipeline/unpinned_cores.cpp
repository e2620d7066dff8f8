#include "pipeline/unpinned_cores.hpp"

#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/thread_cores.hpp"

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
  const std::vector<int> cores = cores_in(rest);
  pin_thread(pthread_self(), cores);
  narrowed_ = true;
  thread_ = pthread_self();
  cores_ = format_core_list(cores);
}

void UnpinnedCores::release() noexcept {
  if (!narrowed_ || pthread_equal(thread_, pthread_self()) == 0) return;
  narrowed_ = false;
  pthread_setaffinity_np(pthread_self(), sizeof(before_), &before_);
}

}  // namespace sluice
