// Pool: one slab carved into equal chunks; a free stack with a condition variable for waiters.
#include "pipeline/pool.hpp"

#include <algorithm>
#include <stdexcept>

#include "pipeline/clock.hpp"

namespace sluice {

Pool::Pool(std::string name, const PoolSpec& spec)
    : name_(std::move(name)),
      chunk_bytes_(spec.chunk_bytes),
      region_(spec.memory, spec.chunk_bytes * spec.chunk_count, spec.cuda_device) {
  if (spec.chunk_bytes == 0 || spec.chunk_count == 0) throw std::runtime_error("pool " + name_ + ": empty pool");
  chunks_.resize(spec.chunk_count);
  free_.reserve(spec.chunk_count);
  for (std::size_t index = 0; index < spec.chunk_count; ++index) {
    Chunk& chunk = chunks_[index];
    chunk.data = region_.data() + index * spec.chunk_bytes;
    chunk.capacity = spec.chunk_bytes;
    chunk.memory = region_.kind();
    chunk.pool = this;
    chunk.index = static_cast<std::uint32_t>(index);
  }
  // Hand out low indices first (stack order), which keeps a small working set warm.
  for (std::size_t index = spec.chunk_count; index-- > 0;) free_.push_back(&chunks_[index]);
}

Pool::~Pool() = default;

ChunkPtr Pool::acquire(std::chrono::microseconds timeout) noexcept {
  std::unique_lock lock(mutex_);
  if (free_.empty()) {
    if (timeout.count() <= 0) return nullptr;
    if (!available_cv_.wait_for(lock, timeout, [this] { return !free_.empty(); })) return nullptr;
  }
  Chunk* chunk = free_.back();
  free_.pop_back();
  lock.unlock();
  chunk->created_ns = monotonic_ns();
  return ChunkPtr(chunk);
}

// ChunkPtr's deleter (chunk.hpp) lives beside the pool it returns chunks to.
void ChunkReleaser::operator()(Chunk* chunk) const noexcept {
  if (chunk != nullptr && chunk->pool != nullptr) chunk->pool->release(chunk);
}

void Pool::release(Chunk* chunk) noexcept {
  chunk->reset_metadata();
  {
    std::lock_guard lock(mutex_);
    if (release_hook_) {
      release_hook_(*chunk);
      return;
    }
    free_.push_back(chunk);
  }
  available_cv_.notify_one();
}

void Pool::return_to_free_list(Chunk& chunk) noexcept {
  chunk.reset_metadata();
  {
    std::lock_guard lock(mutex_);
    free_.push_back(&chunk);
  }
  available_cv_.notify_one();
}

void Pool::set_release_hook(PoolReleaseHook hook) noexcept {
  std::lock_guard lock(mutex_);
  release_hook_ = std::move(hook);
}

void Pool::add_registration(PoolRegistration registration) {
  if (this->registration(registration.owner) != nullptr) {
    throw std::runtime_error("pool " + name_ + ": already registered by " + registration.owner);
  }
  registrations_.push_back(std::move(registration));
}

void Pool::remove_registration(std::string_view owner) noexcept {
  std::erase_if(registrations_, [owner](const PoolRegistration& entry) { return entry.owner == owner; });
}

const PoolRegistration* Pool::registration(std::string_view owner) const {
  auto it = std::find_if(registrations_.begin(), registrations_.end(),
                         [owner](const PoolRegistration& entry) { return entry.owner == owner; });
  return it == registrations_.end() ? nullptr : &*it;
}

std::size_t Pool::available() const {
  std::lock_guard lock(mutex_);
  return free_.size();
}

}  // namespace sluice
