// Per-stage counters, written by the stage's own thread with relaxed atomics and read by
// the progress line, the summary, the JSON report and (later) /metrics and the dashboard.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/clock.hpp"

namespace sluice {

// Log-linear histogram of nanosecond latencies: 8 sub-buckets per power of two, so any
// percentile is within 12.5% without allocation or locks.
class LatencyHistogram {
 public:
  static constexpr std::size_t kSubBuckets = 8;
  static constexpr std::size_t kBuckets = 64 * kSubBuckets;

  void record(std::uint64_t nanoseconds) noexcept;
  [[nodiscard]] std::uint64_t count() const noexcept;
  // Upper bound of the bucket holding the given quantile (0..1); 0 when empty.
  [[nodiscard]] std::uint64_t percentile(double quantile) const noexcept;
  [[nodiscard]] std::uint64_t max() const noexcept { return max_.load(std::memory_order_relaxed); }

  static std::size_t bucket_of(std::uint64_t nanoseconds) noexcept;
  static std::uint64_t bucket_upper_bound(std::size_t bucket) noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> max_{0};
};

// A named counter a stage registers at start (e.g. drops "truncated", or "lost_samples").
struct NamedCounter {
  std::string name;
  std::atomic<std::uint64_t> value{0};
  void add(std::uint64_t amount = 1) noexcept { value.fetch_add(amount, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t get() const noexcept { return value.load(std::memory_order_relaxed); }
};

struct FlowCounters {
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> chunks{0};
  std::atomic<std::uint64_t> samples{0};
  // When data flowed: the rate a person wants is over these, not over a run that waited for a
  // sender or drained at the end. first_bytes: the first chunk's size, which arrived before first_ns.
  std::atomic<std::uint64_t> first_ns{0};
  std::atomic<std::uint64_t> first_bytes{0};
  std::atomic<std::uint64_t> last_ns{0};
  void add(std::uint64_t chunk_bytes, std::uint64_t chunk_samples) noexcept {
    const std::uint64_t now = monotonic_ns();
    if (chunks.fetch_add(1, std::memory_order_relaxed) == 0) {
      first_bytes.store(chunk_bytes, std::memory_order_relaxed);
      first_ns.store(now, std::memory_order_relaxed);
    }
    bytes.fetch_add(chunk_bytes, std::memory_order_relaxed);
    samples.fetch_add(chunk_samples, std::memory_order_relaxed);
    last_ns.store(now, std::memory_order_relaxed);
  }
  void add(const Chunk& chunk) noexcept { add(chunk.size, chunk.sample_count); }
};

class StageMetrics {
 public:
  StageMetrics(std::string lane, std::string stage, std::string type);

  // Setup only (allocates): the returned reference stays valid for the metrics' lifetime.
  NamedCounter& drop_counter(const std::string& reason);
  NamedCounter& counter(const std::string& name);

  FlowCounters in;    // chunks taken from the input queue
  FlowCounters out;   // chunks handed to the output queue (or consumed, for sinks)
  std::atomic<std::uint64_t> packets{0};
  std::atomic<std::uint64_t> busy_ns{0};   // inside process(), minus waits
  std::atomic<std::uint64_t> wait_ns{0};   // blocked on an empty input, a full output or an empty pool
  std::atomic<std::uint64_t> started_ns{0};
  std::atomic<std::uint64_t> stopped_ns{0};
  LatencyHistogram latency;                // chunk creation at the source → done in this stage

  [[nodiscard]] const std::string& lane() const { return lane_; }
  [[nodiscard]] const std::string& stage() const { return stage_; }
  [[nodiscard]] const std::string& type() const { return type_; }
  [[nodiscard]] std::uint64_t total_drops() const;
  [[nodiscard]] const std::deque<NamedCounter>& drops() const { return drops_; }
  [[nodiscard]] const std::deque<NamedCounter>& counters() const { return counters_; }
  // Queue occupancy of this stage's input, sampled by the runtime (0 for sources).
  std::atomic<std::uint32_t> queue_depth{0};
  std::atomic<std::uint32_t> queue_capacity{0};
  std::atomic<std::uint32_t> queue_high_water{0};
  // Fallbacks chosen at start ("memory device → host: no CUDA device present").
  std::vector<std::string> notes;

 private:
  std::string lane_;
  std::string stage_;
  std::string type_;
  std::deque<NamedCounter> drops_;     // deque: stable addresses for the hot path
  std::deque<NamedCounter> counters_;
};

}  // namespace sluice
