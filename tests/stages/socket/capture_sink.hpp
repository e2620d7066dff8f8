// Test support: a sink that keeps every chunk's metadata and bytes so tests can check
// sample contents, first-sample indices, timestamps and gap records; and pipeline helpers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"

namespace sluice::test_support {

struct CapturedChunk {
  std::uint64_t first_sample = 0;
  std::uint64_t sample_count = 0;
  Timestamp timestamp;
  std::vector<Gap> gaps;
  std::vector<std::byte> bytes;
  bool context_change = false;
  StreamContext context{};
};

struct Capture {
  std::mutex mutex;
  StreamInfo stream;  // as the sink saw it at start
  std::vector<CapturedChunk> chunks;
};

inline Capture*& current_capture() {
  static Capture* capture = nullptr;
  return capture;
}

class CaptureSink final : public Stage {
 public:
  void start(StageContext& context) override {
    context_ = &context;
    capture_ = current_capture();
    capture_->stream = context.stream;
  }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    CapturedChunk copy;
    copy.first_sample = chunk->first_sample;
    copy.sample_count = chunk->sample_count;
    copy.timestamp = chunk->timestamp;
    copy.gaps.assign(chunk->gaps.begin(), chunk->gaps.begin() + chunk->gap_count);
    copy.bytes.assign(chunk->data, chunk->data + chunk->size);
    copy.context_change = chunk->context_change;
    copy.context = chunk->context;
    {
      std::lock_guard lock(capture_->mutex);
      capture_->chunks.push_back(std::move(copy));
    }
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
  Capture* capture_ = nullptr;
};

inline const StageRegistry& test_registry() {
  static const StageRegistry registry = [] {
    StageRegistry built = StageRegistry::builtin();
    built.add(StageType{"capture", StageRole::sink, "test capture",
                        [](SettingsReader&, const PipelineSettings&) -> std::unique_ptr<Stage> {
                          return std::make_unique<CaptureSink>();
                        }});
    return built;
  }();
  return registry;
}

inline const StageMetrics& source_metrics(const Pipeline& pipeline) { return *pipeline.metrics().front(); }

inline std::uint64_t counter(const StageMetrics& metrics, const std::string& name) {
  for (const auto& named : metrics.counters()) {
    if (named.name == name) return named.get();
  }
  return 0;
}
inline std::uint64_t drops(const StageMetrics& metrics, const std::string& reason) {
  for (const auto& named : metrics.drops()) {
    if (named.name == reason) return named.get();
  }
  return 0;
}

// Walks the captured chunks as a stream: each chunk's samples are contiguous received
// samples from first_sample on, interrupted only where one of its gaps says; a gap may also
// precede the chunk's first sample. Checks that samples and gaps tile the stream from 0
// without overlap, compares every received run with `expected(first, count)` and returns
// the gaps in order and the end of the stream.
template <typename Expected>
std::vector<Gap> walk_stream(const Capture& capture, std::size_t sample_bytes, Expected expected, std::uint64_t& end) {
  std::vector<Gap> gaps;
  std::uint64_t next = 0;
  auto check_run = [&](const CapturedChunk& chunk, std::uint64_t first, std::uint64_t offset, std::uint64_t count) {
    EXPECT_EQ(first, next) << "samples out of place";
    if (count == 0) return;
    const std::vector<std::byte> want = expected(first, count);
    const auto begin = chunk.bytes.begin() + static_cast<std::ptrdiff_t>(offset * sample_bytes);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), begin)) << "samples differ at " << first;
    next = first + count;
  };
  for (const auto& chunk : capture.chunks) {
    std::uint64_t position = chunk.first_sample;
    std::uint64_t offset = 0;
    for (const Gap& gap : chunk.gaps) {
      gaps.push_back(gap);
      if (gap.first_sample < position || offset == chunk.sample_count) {
        EXPECT_EQ(gap.first_sample, next) << "gap out of place";
        next = gap.first_sample + gap.length;
        continue;
      }
      const std::uint64_t count = gap.first_sample - position;
      check_run(chunk, position, offset, count);
      offset += count;
      EXPECT_EQ(gap.first_sample, next) << "gap out of place";
      next = gap.first_sample + gap.length;
      position = next;
    }
    if (chunk.sample_count > offset) check_run(chunk, position, offset, chunk.sample_count - offset);
  }
  end = next;
  return gaps;
}

// Polls `condition` until true or `timeout`; true if it became true.
template <typename Condition>
bool wait_for(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace sluice::test_support
