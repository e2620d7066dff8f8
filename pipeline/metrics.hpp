// Per-stage counters, written by the stage's own thread with relaxed atomics and read by
// the progress line, the summary, the JSON report, /metrics and the dashboard.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/clock.hpp"
#include "pipeline/core_wait.hpp"
#include "pipeline/memory.hpp"

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
  [[nodiscard]] std::uint64_t sum() const noexcept { return sum_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t bucket_count(std::size_t bucket) const noexcept {
    return buckets_[bucket].load(std::memory_order_relaxed);
  }

  static std::size_t bucket_of(std::uint64_t nanoseconds) noexcept;
  static std::uint64_t bucket_upper_bound(std::size_t bucket) noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> max_{0};
  std::atomic<std::uint64_t> sum_{0};  // for Prometheus' _sum (mean latency)
};

// What an fft stage's rows hold, so the dashboard can draw them in dB.
enum class SpectrumScale { decibels, linear_power, complex_bins };

// The latest spectrum row of an fft stage, for the dashboard. The stage offers each output
// chunk's rows; about ten times a second a chunk's last row is copied in, under a try_lock so
// the stage never waits for a reader. The HTTP server copies it out under the same lock.
class SpectrumSnapshot {
 public:
  static constexpr std::uint64_t kIntervalNs = 100'000'000;

  // Setup only (allocates): rows of `bins` values, DC at bins/2.
  void configure(std::size_t bins, SpectrumScale scale, double sample_rate, double center_frequency,
                 std::size_t averaging);
  // Called by the fft stage for each finished chunk of `count` rows of `row_bytes` (host or
  // device memory); copies the last row when kIntervalNs have passed since the last copy.
  // Never allocates, never blocks.
  void offer(const std::byte* rows, std::size_t count, std::size_t row_bytes, MemoryKind memory,
             void* cuda_stream) noexcept;

  struct Copy {
    std::vector<float> decibels;  // fftshifted, DC at size/2
    double sample_rate = 0;
    double center_frequency = 0;
    std::size_t averaging = 1;
    std::uint64_t sequence = 0;  // rows published so far
    std::uint64_t row = 0;       // index of the published row in the stage's output
  };
  // The latest row, or nothing before the first one (or when no fft stage configured it).
  [[nodiscard]] std::optional<Copy> read() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::byte> staging_;  // raw row, written by the stage
  std::size_t bins_ = 0;
  SpectrumScale scale_ = SpectrumScale::decibels;
  double sample_rate_ = 0;
  double center_frequency_ = 0;
  std::size_t averaging_ = 1;
  std::uint64_t sequence_ = 0;
  std::uint64_t row_ = 0;
  // Touched by the stage's thread only.
  std::uint64_t rows_offered_ = 0;
  std::uint64_t next_due_ns_ = 0;
};

// A named counter a stage registers at start (e.g. drops "truncated", or "lost_samples").
struct NamedCounter {
  std::string name;
  std::atomic<std::uint64_t> value{0};
  void add(std::uint64_t amount = 1) noexcept { value.fetch_add(amount, std::memory_order_relaxed); }
  // A gauge rather than a count (the stage's own thread is its one writer).
  void set(std::uint64_t latest) noexcept { value.store(latest, std::memory_order_relaxed); }
  void keep_max(std::uint64_t seen) noexcept {
    if (seen > get()) set(seen);
  }
  [[nodiscard]] std::uint64_t get() const noexcept { return value.load(std::memory_order_relaxed); }
};

// The span the work on a flow took, in ns: from its first chunk to its last, widened by one
// chunk's share, since the first chunk's work came before its stamp; 0 with fewer than two chunks.
[[nodiscard]] inline double flow_work_span_ns(std::uint64_t chunks, std::uint64_t first_ns,
                                              std::uint64_t last_ns) noexcept {
  if (chunks < 2 || last_ns <= first_ns) return 0;
  return static_cast<double>(last_ns - first_ns) * static_cast<double>(chunks) / static_cast<double>(chunks - 1);
}

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

class StageMetrics;

// Counts the time from its construction to the end of its scope as the stage's wait: blocked
// on a queue, a pool, a socket or the GPU, time its busy share must not include. A wait for the
// stage's own pool (Kind::pool) is also counted among its pool waits.
class WaitTimer {
 public:
  enum class Kind { other, pool };
  explicit WaitTimer(StageMetrics& metrics, Kind kind = Kind::other) noexcept
      : metrics_(metrics), kind_(kind), begin_(monotonic_ns()) {}
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;
  ~WaitTimer();

 private:
  StageMetrics& metrics_;
  Kind kind_;
  std::uint64_t begin_;
};

class StageMetrics {
 public:
  StageMetrics(std::string lane, std::string stage, std::string type);

  // Setup only (allocates): the returned reference stays valid for the metrics' lifetime.
  NamedCounter& drop_counter(const std::string& reason);
  NamedCounter& counter(const std::string& name);
  // Setup only (allocates): the wait for a core of a thread the stage runs besides its own
  // (its "stage" thread, which the runtime runs, is there from construction).
  CoreWait& thread(const std::string& name);
  [[nodiscard]] CoreWait& stage_thread() { return threads_.front(); }
  [[nodiscard]] const std::deque<CoreWait>& threads() const { return threads_; }
  [[nodiscard]] std::deque<CoreWait>& threads() { return threads_; }

  FlowCounters in;   // chunks taken from the input queue
  FlowCounters out;  // chunks handed to the output queue (or consumed, for sinks)
  std::atomic<std::uint64_t> packets{0};
  std::atomic<std::uint64_t> busy_ns{0};  // inside process(), minus waits
  std::atomic<std::uint64_t> wait_ns{0};  // blocked on an input, output, pool, socket or the GPU (WaitTimer)
  // Backpressure: each time the stage found its own pool empty and waited for a chunk to come
  // back (a source that waits stops reading its socket, so a long wait shows where a loss began).
  std::atomic<std::uint64_t> pool_waits{0};
  std::atomic<std::uint64_t> pool_wait_ns{0};
  std::atomic<std::uint64_t> pool_wait_max_ns{0};
  void add_pool_wait(std::uint64_t ns) noexcept;
  std::atomic<std::uint64_t> started_ns{0};
  std::atomic<std::uint64_t> stopped_ns{0};
  LatencyHistogram latency;   // chunk creation at the source → done in this stage
  SpectrumSnapshot spectrum;  // fft stages only: the latest row, for the dashboard

  [[nodiscard]] const std::string& lane() const { return lane_; }
  [[nodiscard]] const std::string& stage() const { return stage_; }
  [[nodiscard]] const std::string& type() const { return type_; }
  [[nodiscard]] std::uint64_t total_drops() const;
  // The "lost_samples" counter (samples a source never received), 0 where the stage has none.
  [[nodiscard]] std::uint64_t lost_samples() const;
  // The counter named `name`, or null where the stage has none.
  [[nodiscard]] const NamedCounter* find_counter(std::string_view name) const;
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
  std::deque<NamedCounter> drops_;  // deque: stable addresses for the hot path
  std::deque<NamedCounter> counters_;
  std::deque<CoreWait> threads_;  // deque: stable addresses, elements never move
};

inline void StageMetrics::add_pool_wait(std::uint64_t ns) noexcept {
  pool_waits.fetch_add(1, std::memory_order_relaxed);
  pool_wait_ns.fetch_add(ns, std::memory_order_relaxed);
  if (ns > pool_wait_max_ns.load(std::memory_order_relaxed))
    pool_wait_max_ns.store(ns, std::memory_order_relaxed);  // one writer
}

inline WaitTimer::~WaitTimer() {
  const std::uint64_t waited = monotonic_ns() - begin_;
  metrics_.wait_ns.fetch_add(waited, std::memory_order_relaxed);
  if (kind_ == Kind::pool) metrics_.add_pool_wait(waited);
}

}  // namespace sluice
