// The runtime: builds each lane's queues and contexts, starts every stage (upstream
// first), runs one thread per stage, and stops by draining so no accepted chunk is lost.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/config.hpp"
#include "pipeline/lane.hpp"
#include "pipeline/memory.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/stage.hpp"
#include "pipeline/unpinned_cores.hpp"

namespace sluice {

// Thrown when start fails; names the lane, the stage and the cause.
class PipelineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Load time: a line for each core that a busy thread (Stage::busy_threads) that always runs
// shares with another, each pinned to it alone, naming them; empty when none does. Standby
// threads alone may share a core: they sleep until their stages fall behind.
std::vector<std::string> shared_busy_cores(const PipelineDefinition& definition);

struct StageFailure {
  std::string lane;
  std::string stage;
  std::string type;
  std::string message;
};

class Pipeline {
 public:
  explicit Pipeline(PipelineDefinition definition);
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  ~Pipeline();

  // Starts every stage; on any failure stops the ones already started (in reverse) and
  // throws PipelineError "lane L, stage S (type): cause".
  void start();
  // Runs the stage threads until every lane has drained (end of stream, request_stop() or
  // the configured duration). `tick` runs on the calling thread about every 50 ms.
  void run(const std::function<void()>& tick = {});
  // Asks every source to end its stream; downstream stages drain what is queued. Safe from any thread.
  void request_stop() noexcept { stop_.store(true, std::memory_order_release); }
  [[nodiscard]] bool stop_requested() const noexcept { return stop_.load(std::memory_order_acquire); }

  [[nodiscard]] const PipelineDefinition& definition() const { return definition_; }
  [[nodiscard]] const std::vector<StageFailure>& failures() const { return failures_; }
  // Every stage's metrics, lane by lane in data-flow order.
  [[nodiscard]] std::vector<const StageMetrics*> metrics() const;
  [[nodiscard]] std::vector<std::vector<const StageMetrics*>> metrics_by_lane() const;
  [[nodiscard]] double elapsed_seconds() const;
  // Samples queue occupancy into each stage's metrics (the runtime does this every tick).
  void sample_queues();
  // Every stage thread's wait for a core, about once a CoreWait window; a thread's first
  // noticeable wait is logged as it happens.
  void sample_core_waits();
  // The other threads of this pipeline pinned to any of `wait`'s cores ("lane a stage fft",
  // "lane b stage source receive 2"); empty when it is not pinned or shares with none.
  [[nodiscard]] std::vector<std::string> core_sharers(const CoreWait& wait) const;

  // Rates over time, sampled by the monitoring thread about four times a second.
  struct TimelinePoint {
    double seconds = 0;
    std::vector<std::uint64_t> source_bytes;  // per lane: what the first stage has handed on
    std::vector<std::uint64_t> sink_bytes;    // per lane: what the last stage has taken in
    std::vector<std::uint64_t> drops;         // per lane: all drops so far
    std::vector<std::uint64_t> lost_samples;  // per lane: samples never received so far (lost_samples counters)
  };
  [[nodiscard]] const std::vector<TimelinePoint>& timeline() const { return timeline_; }

 private:
  struct Slot {
    StageDefinition* definition = nullptr;
    std::unique_ptr<StageMetrics> metrics;
    std::unique_ptr<SpscQueue<Chunk*>> input_queue;  // null for the first stage
    std::unique_ptr<InputPort> input;
    std::unique_ptr<OutputPort> output;
    std::unique_ptr<StageContext> context;
    bool started = false;
    std::thread thread;
  };
  struct Lane {
    std::unique_ptr<LaneResources> resources;
    std::vector<Slot> slots;
  };

  void keep_off_pinned_cores();
  void run_stage(Lane& lane, std::size_t index) noexcept;
  void record_failure(const Slot& slot, const std::string& lane, std::string message);

  PipelineDefinition definition_;
  std::atomic<bool> stop_{false};
  std::deque<Lane> lanes_;
  std::mutex failures_mutex_;
  std::vector<StageFailure> failures_;
  std::uint64_t started_ns_ = 0;
  std::uint64_t core_waits_sampled_ns_ = 0;  // the run thread's
  std::atomic<std::uint64_t> finished_ns_{0};
  std::vector<TimelinePoint> timeline_;
  // From start() until run() has made the stage threads: the starting thread kept off the cores
  // that cpu: settings take, so that the threads it makes inherit that.
  std::unique_ptr<UnpinnedCores> unpinned_;
  void sample_timeline();
};

}  // namespace sluice
