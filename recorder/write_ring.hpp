// One volume's writes: an io_uring with the lane's chunks registered as fixed buffers and a
// ring of slots, each one chunk in flight. Completions come in any order; chunks leave in
// the order they were submitted, once their bytes are in the file.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/pool.hpp"
#include "recorder/file_set.hpp"
#include "recorder/uring.hpp"

namespace sluice::recorder {

// The first failure of a recording and what failed after it. Not thread-safe: the record
// thread's alone.
class RecorderError {
 public:
  // Keeps the first cause: a later one is ignored.
  void set(int code, const std::string& message) noexcept;
  // Like set, but a message after the first is added to it (what finishing failed at).
  void add(int code, const std::string& message) noexcept;
  void append(const std::string& text) noexcept;  // more about the first cause
  [[nodiscard]] bool failed() const noexcept { return code_ != 0; }
  [[nodiscard]] int code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  int code_ = 0;
  std::string message_;
};

class WriteRing {
 public:
  // The chunk at the head, written and ready to be journaled.
  struct Written {
    const Chunk& chunk;
    FileSet& file;
    std::uint64_t offset;
    std::uint64_t bytes;
  };

  explicit WriteRing(RecorderError& error) : error_(&error) {}
  // Makes the io_uring for `depth` chunks' writes in the kernel at once, holds up to `capacity`
  // chunks (those written wait for the lane's older chunks on other volumes), and registers
  // `pools`. Returns a note when fixed buffers are off, else "". Throws naming the failed call.
  std::string open(unsigned depth, unsigned capacity, const std::vector<Pool*>& pools);

  // Whether another chunk may start now: a slot is free and fewer than `depth` are writing.
  [[nodiscard]] bool has_room() const noexcept { return in_flight_ < slots_.size() && writes_in_kernel() < depth_; }
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }
  // Queues the chunk's bytes (from `bounce` when given) at the end of `file`, O_DIRECT where
  // `direct` and aligned, and advances the file's end. False when it failed. Hot path.
  bool submit(ChunkPtr chunk, ChunkPtr bounce, FileSet& file, bool direct) noexcept;
  // Reaps completions, waiting up to `timeout` for one when `wait` and none is ready;
  // requeues short writes and EAGAIN. Hot path.
  void poll(std::chrono::microseconds timeout, bool wait) noexcept;
  // Whether a write is still in the kernel.
  [[nodiscard]] bool pending() const noexcept { return writes_in_kernel() > 0; }
  // Chunks with a write still in the kernel (the rest of those held are written, or failed).
  [[nodiscard]] std::size_t writes_in_kernel() const noexcept;
  // The oldest chunk when all of its bytes are written, else nothing.
  [[nodiscard]] const Written* written_head() noexcept;
  // The written head leaves the ring (its bounce is released); returns its chunk.
  ChunkPtr pop_head() noexcept;
  // The head cannot be kept (its journal record failed): nothing after it leaves.
  void fail_head() noexcept;
  // Releases every chunk still held. Returns how many.
  std::size_t abandon() noexcept;

 private:
  struct Operation {
    std::uint64_t offset = 0;  // in the file
    const std::byte* data = nullptr;
    std::uint64_t length = 0;
    std::uint64_t done = 0;
    bool direct = false;
    bool pending = false;
    bool retried = false;  // once after a full disk, when the volume gave back what it could
  };
  struct Slot {
    ChunkPtr chunk;
    ChunkPtr bounce;
    FileSet* file = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    int buffer_index = -1;
    std::array<Operation, 2> operations{};
    bool failed = false;
  };

  bool queue(std::size_t slot_index, std::size_t operation_index) noexcept;
  void complete(std::uint64_t user_data, int result) noexcept;
  void fail_write(Slot& slot, const Operation& operation, int result) noexcept;

  RecorderError* error_;
  Uring ring_;
  std::vector<Slot> slots_;
  std::size_t depth_ = 0;  // chunks writing in the kernel at most
  std::size_t head_ = 0;   // oldest slot in flight
  std::size_t in_flight_ = 0;
  std::optional<Written> written_;  // what written_head() points at
};

}  // namespace sluice::recorder
