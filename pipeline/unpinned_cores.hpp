// The cores for threads that no cpu: setting places: a stage's helper threads and the stages
// without cpu:. They keep off every core a cpu: setting takes, so a pinned stage has its core.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <string>
#include <vector>

namespace sluice {

// Narrows the calling thread to its cores less `pinned` (threads inherit their creator's cores)
// and gives the thread its cores back when released or destroyed on that thread. Does nothing
// when `pinned` takes none of its cores or every one of them.
class UnpinnedCores {
 public:
  explicit UnpinnedCores(const std::vector<int>& pinned);
  ~UnpinnedCores() { release(); }
  UnpinnedCores(const UnpinnedCores&) = delete;
  UnpinnedCores& operator=(const UnpinnedCores&) = delete;

  // The cores the thread was narrowed to ("0,1,6-15"), or empty when it was left as it was.
  [[nodiscard]] const std::string& cores() const { return cores_; }
  void release() noexcept;

 private:
  cpu_set_t before_{};
  pthread_t thread_{};
  bool narrowed_ = false;
  std::string cores_;
};

}  // namespace sluice
