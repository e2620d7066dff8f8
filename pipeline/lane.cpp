// LaneResources: pools in creation order, the first failure.
#include "pipeline/lane.hpp"

namespace sluice {

std::vector<Pool*> LaneResources::pools() const {
  std::vector<Pool*> pools;
  for (const auto& pool : pools_) pools.push_back(pool.get());
  return pools;
}

void LaneResources::note_failure(std::string what) {
  std::lock_guard lock(failure_mutex_);
  if (failure_.empty()) failure_ = std::move(what);
}

std::string LaneResources::failure() const {
  std::lock_guard lock(failure_mutex_);
  return failure_;
}

}  // namespace sluice
