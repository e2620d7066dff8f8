// A thread that wants one core all the time: pinned to it and spinning from construction until
// destruction, for tests of threads kept off their cores.
#pragma once

#include <pthread.h>

#include <atomic>
#include <thread>

#include "pipeline/thread_cores.hpp"

namespace sluice::test {

class CoreRival {
 public:
  // Returns once the rival runs on `core`.
  explicit CoreRival(int core) {
    thread_ = std::thread([this, core] {
      pin_thread(pthread_self(), {core});
      pinned_ = true;
      while (!done_.load(std::memory_order_relaxed)) {
      }
    });
    while (!pinned_.load()) std::this_thread::yield();
  }
  CoreRival(const CoreRival&) = delete;
  CoreRival& operator=(const CoreRival&) = delete;
  ~CoreRival() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> pinned_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace sluice::test
