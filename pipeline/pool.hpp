// A pool: every chunk a producing stage will ever hand out, carved from one slab that is
// allocated, touched and (by later stages) registered once at start. An empty pool is
// backpressure: acquire() waits, it never allocates.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/memory.hpp"

namespace sluice {

struct PoolSpec {
  std::size_t chunk_bytes = 4 << 20;
  std::size_t chunk_count = 32;
  MemoryKind memory = MemoryKind::host;
  int cuda_device = 0;
};

// One registration of a pool's slab with a subsystem that addresses chunks by key or
// index: a verbs MR (keys), an io_uring fixed-buffer table (chunk i is buffer
// first_buffer_index + i). The registering stage owns the handle and records it here, so
// any stage downstream that holds a chunk of this pool can address it.
struct PoolRegistration {
  std::string owner;                     // who registered and owns the handle: "verbs:rxe0", "io_uring:record"
  std::uint32_t local_key = 0;           // verbs lkey (0 when not verbs)
  std::uint32_t remote_key = 0;          // verbs rkey (0 when not verbs)
  std::int64_t first_buffer_index = -1;  // io_uring fixed-buffer index of chunk 0 (-1 when not io_uring)
};

// Where a released chunk goes instead of the free list: a link receiver holds every slot
// of its landing ring and turns each released chunk into a credit for the sender. Runs on
// the releasing thread under the pool's lock: it must be short and must not call the pool.
using PoolReleaseHook = std::function<void(Chunk&)>;

class Pool {
 public:
  // Throws on allocation failure (the MemoryRegion error names the call).
  Pool(std::string name, const PoolSpec& spec);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool();

  // A free chunk, stamped with created_ns, or null after `timeout` with none free.
  ChunkPtr acquire(std::chrono::microseconds timeout) noexcept;
  ChunkPtr try_acquire() noexcept { return acquire(std::chrono::microseconds(0)); }

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const MemoryRegion& region() const { return region_; }  // for verbs / io_uring registration
  [[nodiscard]] std::size_t chunk_bytes() const { return chunk_bytes_; }
  [[nodiscard]] std::size_t chunk_count() const { return chunks_.size(); }
  [[nodiscard]] MemoryKind memory() const { return region_.kind(); }
  [[nodiscard]] Chunk& chunk(std::size_t index) { return chunks_[index]; }
  [[nodiscard]] std::size_t available() const;

  // Setup only. Records a registration (throws when `owner` already has one); the owner
  // removes it before it closes the handle.
  void add_registration(PoolRegistration registration);
  void remove_registration(std::string_view owner) noexcept;
  // The registration `owner` made, or null.
  [[nodiscard]] const PoolRegistration* registration(std::string_view owner) const;
  [[nodiscard]] const std::vector<PoolRegistration>& registrations() const { return registrations_; }

  // From now on a released chunk (metadata reset) goes to `hook` instead of the free list,
  // until the hook is cleared with an empty function. Chunks the hook's owner holds go back
  // to the free list with return_to_free_list() (at teardown).
  void set_release_hook(PoolReleaseHook hook) noexcept;
  void return_to_free_list(Chunk& chunk) noexcept;

 private:
  friend struct ChunkReleaser;
  void release(Chunk* chunk) noexcept;

  std::string name_;
  std::size_t chunk_bytes_;
  MemoryRegion region_;
  std::vector<Chunk> chunks_;
  // Chunk rates are thousands per second, so a mutex-guarded free stack costs nothing
  // measurable and lets any thread release (sinks, drop paths) and the producer wait.
  mutable std::mutex mutex_;
  std::condition_variable available_cv_;
  std::vector<Chunk*> free_;
  PoolReleaseHook release_hook_;  // guarded by mutex_
  std::vector<PoolRegistration> registrations_;
};

}  // namespace sluice
