// What a lane owns besides its stages (its pools, its first failure), shared
// by the runtime that creates it and the stage contexts that use it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pipeline/memory.hpp"
#include "pipeline/pool.hpp"

namespace sluice {

// What a lane owns besides its stages: pools (in creation order), its first failure.
class LaneResources {
 public:
  LaneResources(std::string name, std::uint32_t index, const std::atomic<bool>& stop, int cuda_device)
      : name_(std::move(name)), index_(index), stop_(&stop), cuda_device_(cuda_device) {}
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] std::uint32_t index() const { return index_; }
  [[nodiscard]] bool stop_requested() const noexcept { return stop_->load(std::memory_order_acquire); }
  Pool& add_pool(std::unique_ptr<Pool> pool) { return *pools_.emplace_back(std::move(pool)); }
  [[nodiscard]] std::vector<Pool*> pools() const;
  [[nodiscard]] int cuda_device() const { return cuda_device_; }
  // The first stage of this lane that failed, and why ("generator (generator): ..."); the
  // runtime notes it before that stage closes its output, so a stage downstream that sees
  // its input finished can tell a failure upstream from a clean end of stream.
  void note_failure(std::string what);
  [[nodiscard]] std::string failure() const;

 private:
  std::string name_;
  std::uint32_t index_;
  const std::atomic<bool>* stop_;
  int cuda_device_;
  mutable std::mutex failure_mutex_;
  std::string failure_;
  std::deque<std::unique_ptr<Pool>> pools_;
};

}  // namespace sluice
