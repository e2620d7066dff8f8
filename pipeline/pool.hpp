// A pool: every chunk a producing stage will ever hand out, carved from one slab that is
// allocated, touched and (by later stages) registered once at start. An empty pool is
// backpressure: acquire() waits, it never allocates.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <condition_variable>
#include <string>
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
};

}  // namespace sluice
