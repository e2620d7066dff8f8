// A stage's own CUDA stream and the events that order GPU work between stages: a producer hands
// a chunk on with an event, and its consumer's stream waits for that event, so no stage's thread
// waits for another stage's GPU work and no stream is shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/memory.hpp"

namespace sluice {

// One stage's stream (made in start() on the stage's device) and a fixed set of events made with
// it. Every call after construction is noexcept and allocation-free; the first failed call is
// kept for error() and makes later calls no-ops.
class GpuStream {
 public:
  GpuStream() = default;  // none: the stage does no GPU work
  // Throws naming cudaStreamCreateWithFlags or cudaEventCreateWithFlags. `events` is how many
  // fences and hand-offs stay distinct; an event recorded again only makes a wait on it later,
  // never early, so a small set is safe and one per chunk of the stage's pool is plenty.
  GpuStream(int device, std::size_t events);
  GpuStream(GpuStream&& other) noexcept;
  GpuStream& operator=(GpuStream&& other) noexcept;
  GpuStream(const GpuStream&) = delete;
  GpuStream& operator=(const GpuStream&) = delete;
  ~GpuStream();  // waits for the stream's own work, then destroys its events and the stream

  explicit operator bool() const noexcept { return stream_.get() != nullptr; }
  [[nodiscard]] void* get() const noexcept { return stream_.get(); }
  [[nodiscard]] int device() const noexcept { return device_; }

  // Device side: work enqueued from now on runs after the producer's work on `chunk` (nothing
  // when the chunk carries no event). The host does not wait.
  bool wait_for(const Chunk& chunk) noexcept;
  // Enqueues a copy between any two kinds of memory (cudaMemcpyAsync); the host does not wait.
  bool copy(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept;
  // Records a fence of everything enqueued so far and attaches it to `chunk` (Chunk::ready_event):
  // the chunk may go downstream now. Returns that fence (0 after a failure).
  std::uint64_t hand_off(Chunk& chunk) noexcept;

  // Host side, for this stream's own work: a fence covers everything enqueued before it.
  std::uint64_t fence() noexcept;
  [[nodiscard]] bool reached(std::uint64_t fence) noexcept;  // never waits
  void wait(std::uint64_t fence) noexcept;
  // Waits for everything enqueued so far.
  bool finish() noexcept;

  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  bool ok(std::string failure) noexcept;
  void release() noexcept;

  CudaStream stream_;  // before the events: they are destroyed first
  int device_ = 0;
  std::vector<void*> events_;
  std::uint64_t fences_ = 0;     // the last fence handed out
  std::uint64_t completed_ = 0;  // every fence up to this one has been reached
  std::string error_;
};

// For a consumer without a stream of its own that reads a device chunk from the host side (a
// test sink, a NIC): whether the producer's GPU work on it has finished (never waits), and a
// wait for it. Both report a failed CUDA call in `error` / the return value.
[[nodiscard]] bool chunk_written(const Chunk& chunk, std::string& error) noexcept;
std::string wait_until_written(const Chunk& chunk) noexcept;

// Chunks held until a fence of their stage's GPU work is reached: an input chunk until the work
// that reads it has finished, an output chunk until the work that writes it has. Fixed capacity
// (reserve() at start), so the hot path never allocates.
class FenceRing {
 public:
  void reserve(std::size_t capacity) { slots_.resize(capacity); }
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] bool full() const noexcept { return count_ == slots_.size(); }
  [[nodiscard]] std::uint64_t front_fence() const noexcept { return slots_[head_].fence; }
  void push(ChunkPtr chunk, std::uint64_t fence) noexcept;
  ChunkPtr pop() noexcept;

 private:
  struct Slot {
    ChunkPtr chunk;
    std::uint64_t fence = 0;
  };
  std::vector<Slot> slots_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace sluice
