// GpuStream: a stage's stream and its events through cuda_glue, so that CPU-only builds compile it.
#include "pipeline/gpu_stream.hpp"

#include <algorithm>
#include <utility>

#include "pipeline/cuda_glue.hpp"
#include "pipeline/log.hpp"

namespace sluice {

GpuStream::GpuStream(int device, std::size_t events) : stream_(device), device_(device) {
  events_.reserve(events == 0 ? 1 : events);
  try {
    while (events_.size() < events_.capacity()) events_.push_back(cuda_glue::create_event(device));
  } catch (...) {
    release();  // no destructor runs for a half-built object
    throw;
  }
}

GpuStream::GpuStream(GpuStream&& other) noexcept
    : stream_(std::move(other.stream_)),
      device_(other.device_),
      events_(std::move(other.events_)),
      fences_(std::exchange(other.fences_, 0)),
      completed_(std::exchange(other.completed_, 0)),
      error_(std::move(other.error_)) {}

GpuStream& GpuStream::operator=(GpuStream&& other) noexcept {
  if (this != &other) {
    release();
    stream_ = std::move(other.stream_);
    device_ = other.device_;
    events_ = std::move(other.events_);
    fences_ = std::exchange(other.fences_, 0);
    completed_ = std::exchange(other.completed_, 0);
    error_ = std::move(other.error_);
  }
  return *this;
}

GpuStream::~GpuStream() { release(); }

void GpuStream::release() noexcept {
  if (stream_.get() != nullptr) {
    // Nothing of this stage's may still run on memory that is freed after it.
    if (std::string failure = cuda_glue::synchronize_stream(stream_.get()); !failure.empty()) log::warn("{}", failure);
  }
  for (void* event : events_) cuda_glue::destroy_event(event);
  events_.clear();
  stream_ = CudaStream();
}

bool GpuStream::ok(std::string failure) noexcept {
  if (failure.empty()) return true;
  if (error_.empty()) error_ = std::move(failure);
  return false;
}

bool GpuStream::wait_for(const Chunk& chunk) noexcept {
  if (!error_.empty()) return false;
  if (chunk.ready_event == nullptr) return true;
  return ok(cuda_glue::stream_wait_event(stream_.get(), chunk.ready_event));
}

bool GpuStream::copy(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept {
  if (!error_.empty()) return false;
  return bytes == 0 || ok(cuda_glue::copy_async(destination, source, bytes, stream_.get()));
}

std::uint64_t GpuStream::hand_off(Chunk& chunk) noexcept {
  const std::uint64_t mark = fence();
  if (!error_.empty()) return 0;
  chunk.ready_event = events_[mark % events_.size()];
  return mark;
}

std::uint64_t GpuStream::fence() noexcept {
  if (!error_.empty()) return fences_;
  const std::uint64_t mark = fences_ + 1;
  if (!ok(cuda_glue::record_event(events_[mark % events_.size()], stream_.get()))) return fences_;
  fences_ = mark;
  return mark;
}

bool GpuStream::reached(std::uint64_t fence) noexcept {
  if (fence <= completed_ || !error_.empty()) return true;
  bool done = false;
  if (!ok(cuda_glue::query_event(events_[fence % events_.size()], done))) return true;
  // Recorded again since, the event stands for later work: done then means this fence is too.
  if (done) completed_ = std::max(completed_, fence);
  return done;
}

void GpuStream::wait(std::uint64_t fence) noexcept {
  if (fence <= completed_ || !error_.empty()) return;
  if (ok(cuda_glue::synchronize_event(events_[fence % events_.size()]))) completed_ = std::max(completed_, fence);
}

bool GpuStream::finish() noexcept {
  if (!error_.empty()) return false;
  if (!ok(cuda_glue::synchronize_stream(stream_.get()))) return false;
  completed_ = fences_;
  return true;
}

bool chunk_written(const Chunk& chunk, std::string& error) noexcept {
  if (chunk.ready_event == nullptr) return true;
  bool done = false;
  error = cuda_glue::query_event(chunk.ready_event, done);
  return done || !error.empty();
}

std::string wait_until_written(const Chunk& chunk) noexcept {
  return chunk.ready_event == nullptr ? std::string() : cuda_glue::synchronize_event(chunk.ready_event);
}

void FenceRing::push(ChunkPtr chunk, std::uint64_t fence) noexcept {
  Slot& slot = slots_[(head_ + count_) % slots_.size()];
  slot.chunk = std::move(chunk);
  slot.fence = fence;
  ++count_;
}

ChunkPtr FenceRing::pop() noexcept {
  ChunkPtr chunk = std::move(slots_[head_].chunk);
  head_ = (head_ + 1) % slots_.size();
  --count_;
  return chunk;
}

}  // namespace sluice
