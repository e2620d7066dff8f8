// Socket test helpers: the shared `capture` sink in a registry, counters, and a walk over the
// captured stream that checks sample contents, positions and gap records.
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
#include "tests/support/test_stages.hpp"

namespace sluice::test_support {

inline const StageRegistry& test_registry() {
  static const StageRegistry registry = [] {
    StageRegistry built = StageRegistry::builtin();
    built.add(capture_sink_type());
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

// The counters both socket sources keep, read after a run.
struct SourceCounts {
  std::uint64_t lost_samples = 0;
  std::uint64_t lost_packets = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t reordered = 0;
  std::uint64_t samples_out = 0;
  std::uint64_t resyncs = 0;
  std::uint64_t resync_samples = 0;
  void read_counts(const StageMetrics& metrics) {
    lost_samples = counter(metrics, "lost_samples");
    lost_packets = counter(metrics, "lost_packets");
    duplicates = counter(metrics, "duplicates");
    reordered = counter(metrics, "reordered");
    samples_out = metrics.out.samples.load();
    resyncs = counter(metrics, "resyncs");
    resync_samples = counter(metrics, "resync_samples");
  }
};

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
