// A chunk becomes one O_DIRECT write from its registered buffer, plus one buffered write for a
// tail that is not a whole block; once a file has an unaligned end, later chunks of it are
// written buffered, so the data file always holds exactly the recorded bytes.
#include "recorder/write_ring.hpp"

#include <algorithm>
#include <cstring>

#include "pipeline/errno_message.hpp"
#include "recorder/disk_space.hpp"
#include "recorder/sigmf.hpp"

namespace sluice::recorder {
namespace {

bool aligned(std::uint64_t value) { return value % kBlock == 0; }

}  // namespace

void RecorderError::set(int code, const std::string& message) noexcept {
  if (code_ != 0) return;  // the first cause is the one to report
  code_ = code;
  try {
    message_ = message;
  } catch (...) {
  }
}

void RecorderError::add(int code, const std::string& message) noexcept {
  if (code_ == 0) {
    set(code, message);
    return;
  }
  append("then " + message);
}

void RecorderError::append(const std::string& text) noexcept {
  try {
    message_ += "; " + text;
  } catch (...) {
  }
}

std::string WriteRing::open(unsigned depth, unsigned capacity, const std::vector<Pool*>& pools) {
  ring_ = Uring(depth * 2);  // a chunk is up to two writes
  depth_ = depth;
  slots_.resize(std::max(depth, capacity));
  if (std::string why = ring_.register_pools(pools); !why.empty())
    return "fixed buffers off (" + why + "): plain io_uring writes";
  return {};
}

bool WriteRing::submit(ChunkPtr chunk, ChunkPtr bounce, FileSet& file, bool direct) noexcept {
  const std::uint64_t size = chunk->size;
  const std::size_t index = (head_ + in_flight_) % slots_.size();
  Slot& slot = slots_[index];
  const Chunk& source = bounce ? *bounce : *chunk;
  slot.file = &file;
  slot.offset = file.next_offset;
  slot.bytes = size;
  slot.failed = false;
  slot.buffer_index = ring_.buffer_index(source);
  const std::uint64_t direct_part =
      (!direct || file.unaligned || !aligned(file.next_offset)) ? 0 : size / kBlock * kBlock;
  slot.operations[0] = Operation{file.next_offset, source.data, direct_part, 0, true, false, false};
  slot.operations[1] =
      Operation{file.next_offset + direct_part, source.data + direct_part, size - direct_part, 0, false, false, false};
  if (direct_part != size) file.unaligned = true;
  slot.chunk = std::move(chunk);
  slot.bounce = std::move(bounce);
  file.next_offset += size;
  ++file.outstanding;
  ++in_flight_;
  for (std::size_t op = 0; op < 2; ++op) {
    if (slot.operations[op].length > 0 && !queue(index, op)) return false;
  }
  if (const int result = io_uring_submit(ring_.get()); result < 0) {
    error_->set(-result, errno_message("io_uring_submit", -result));
    return false;
  }
  return true;
}

bool WriteRing::queue(std::size_t slot_index, std::size_t operation_index) noexcept {
  Slot& slot = slots_[slot_index];
  Operation& operation = slot.operations[operation_index];
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) {
    io_uring_submit(ring_.get());
    sqe = io_uring_get_sqe(ring_.get());
    if (sqe == nullptr) {
      error_->set(EBUSY, "io_uring submission queue full");
      return false;
    }
  }
  const std::uint64_t offset = operation.offset + operation.done;
  const std::uint64_t remaining = operation.length - operation.done;
  // A short O_DIRECT write may leave an unaligned rest: that rest goes through the page cache.
  const bool direct = operation.direct && aligned(offset) && aligned(remaining);
  const int fd = direct ? slot.file->direct_fd.get() : slot.file->buffered_fd.get();
  const std::byte* data = operation.data + operation.done;
  if (slot.buffer_index >= 0) {
    io_uring_prep_write_fixed(sqe, fd, data, static_cast<unsigned>(remaining), offset, slot.buffer_index);
  } else {
    io_uring_prep_write(sqe, fd, data, static_cast<unsigned>(remaining), offset);
  }
  io_uring_sqe_set_data64(sqe, slot_index * 2 + operation_index);
  operation.pending = true;
  return true;
}

void WriteRing::complete(std::uint64_t user_data, int result) noexcept {
  const std::size_t index = static_cast<std::size_t>(user_data / 2);
  Slot& slot = slots_[index];
  Operation& operation = slot.operations[user_data % 2];
  operation.pending = false;
  if (result == -EAGAIN || result == -EINTR) {
    queue(index, user_data % 2);  // normal control flow: try again
    return;
  }
  if (result < 0 && is_disk_full(-result) && !operation.retried) {
    // Preallocation on the volume gives back what it holds, then the write tries once more
    // (also when another write's failure took it back first: several fail at once).
    operation.retried = true;
    release_volume(slot.file->device);
    queue(index, user_data % 2);
    return;
  }
  if (result <= 0) {
    fail_write(slot, operation, result);
    return;
  }
  operation.done += static_cast<std::uint64_t>(result);
  if (operation.done < operation.length) queue(index, user_data % 2);  // short write: the rest, now
}

void WriteRing::fail_write(Slot& slot, const Operation& operation, int result) noexcept {
  const int code = result == 0 ? EIO : -result;
  slot.failed = true;
  const std::string where = slot.file->base + std::string(kDataSuffix);
  error_->set(code, (is_disk_full(code) ? "disk full: recording stopped writing " : "write failed: ") + where +
                        " at byte " + std::to_string(operation.offset + operation.done) + ": " +
                        (result == 0 ? std::string("wrote 0 bytes") : std::string(std::strerror(code))));
}

void WriteRing::poll(std::chrono::microseconds timeout, bool wait) noexcept {
  const int submitted = ring_.reap(timeout, wait && in_flight_ > 0,
                                   [this](std::uint64_t user_data, int result) { complete(user_data, result); });
  if (submitted < 0) error_->set(-submitted, errno_message("io_uring_submit", -submitted));
}

std::size_t WriteRing::writes_in_kernel() const noexcept {
  std::size_t writing = 0;
  for (std::size_t i = 0; i < in_flight_; ++i) {
    const Slot& slot = slots_[(head_ + i) % slots_.size()];
    if (slot.operations[0].pending || slot.operations[1].pending) ++writing;
  }
  return writing;
}

const WriteRing::Written* WriteRing::written_head() noexcept {
  if (in_flight_ == 0) return nullptr;
  const Slot& slot = slots_[head_];
  for (const Operation& operation : slot.operations) {
    // Still in the kernel, or a short write being completed.
    if (slot.failed || operation.pending || operation.done < operation.length) return nullptr;
  }
  written_.emplace(Written{*slot.chunk, *slot.file, slot.offset, slot.bytes});
  return &*written_;
}

ChunkPtr WriteRing::pop_head() noexcept {
  Slot& slot = slots_[head_];
  slot.bounce.reset();
  ChunkPtr done = std::move(slot.chunk);
  --slot.file->outstanding;
  slot.file = nullptr;
  head_ = (head_ + 1) % slots_.size();
  --in_flight_;
  written_.reset();
  return done;
}

void WriteRing::fail_head() noexcept {
  if (in_flight_ > 0) slots_[head_].failed = true;
}

std::size_t WriteRing::abandon() noexcept {
  const std::size_t dropped = in_flight_;
  for (std::size_t i = 0; i < in_flight_; ++i) {
    Slot& slot = slots_[(head_ + i) % slots_.size()];
    slot.chunk.reset();
    slot.bounce.reset();
    if (slot.file != nullptr) --slot.file->outstanding;
    slot.file = nullptr;
  }
  in_flight_ = 0;
  written_.reset();
  return dropped;
}

}  // namespace sluice::recorder
