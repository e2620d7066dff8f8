// The stage contract: settings read and validated in the constructor (nothing opened yet), open
// and register in start(), move chunks in process() (never throws, never allocates), flush in
// stop(). The runtime gives each stage its own thread, its ports and a StageContext.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/metrics.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/settings.hpp"
#include "pipeline/spsc_queue.hpp"

namespace sluice {

enum class StageStatus : std::uint8_t {
  ok,             // did work; call again
  idle,           // nothing to do right now (already waited briefly); call again
  end_of_stream,  // finished: sources after a stop request or the end of their input, others once drained
  error,          // failed: the reason was given to StageContext::fail()
};

// Where a stage may sit in a lane.
enum class StageRole : std::uint8_t {
  source,     // first: no input
  transform,  // middle: input and output
  sink,       // last: no output
  tap,        // anywhere after the source: passes chunks on when something follows, else ends them
};

// What the source says about the samples flowing in a lane; each stage may refine it for
// the stages after it (an FFT turns samples into spectra). Read downstream at start().
struct StreamInfo {
  double sample_rate = 0;  // samples (or spectra rows × fft_size) per second; 0 = unknown
  SampleFormat format = SampleFormat::ci16;
  double center_frequency = 0;  // Hz
  // From a VITA-49 IF Context packet, when the sender sent one before the first sample.
  std::optional<double> bandwidth;  // Hz
  std::optional<double> reference_level_dbm;
  std::optional<double> gain_db;  // stage 1 + stage 2
  std::string description;        // "generator tone", "VITA-49 stream 0x1 on 127.0.0.1:50000"
  std::size_t fft_size = 0;       // non-zero for spectra
  std::string window;             // FFT window name
  std::size_t averaging = 0;      // spectra averaged per output row
  Timestamp start_time;           // of the first sample, when the source knows it at start
};

struct PipelineSettings;

class InputPort {
 public:
  InputPort(SpscQueue<Chunk*>& queue, StageMetrics& metrics) : queue_(&queue), metrics_(&metrics) {}
  // The next chunk, or null after waiting up to `timeout` (also null once finished()).
  ChunkPtr pop(std::chrono::microseconds timeout) noexcept;
  // Upstream closed and everything it sent has been popped.
  [[nodiscard]] bool finished() const noexcept { return queue_->finished(); }
  [[nodiscard]] std::size_t queued() const noexcept { return queue_->size(); }

 private:
  SpscQueue<Chunk*>* queue_;
  StageMetrics* metrics_;
};

enum class OverflowPolicy : std::uint8_t { block, drop };

class OutputPort {
 public:
  OutputPort(SpscQueue<Chunk*>& queue, StageMetrics& metrics, OverflowPolicy policy, NamedCounter& drops)
      : queue_(&queue), metrics_(&metrics), policy_(policy), drops_(&drops) {}
  // Hands the chunk downstream. `block` waits for room (downstream always drains, even
  // after failing); `drop` releases the chunk and counts it as dropped "queue_full". A
  // dropped chunk is a loss like any other: its stream range becomes a gap ahead of the
  // next chunk pushed (or of a chunk of its own when that one's gap table is full, or at
  // close()), so every stage after this port sees the hole with its exact sample count.
  bool push(ChunkPtr chunk) noexcept;
  // Hands on a pending gap (waiting for room), then ends the stream.
  void close() noexcept;

 private:
  // Folds a dropped chunk's range into the pending gap, which `chunk` then carries.
  void remember_dropped(ChunkPtr chunk) noexcept;
  // Queues the chunk and counts it; false when the queue is full.
  bool try_hand_off(Chunk* chunk) noexcept;

  SpscQueue<Chunk*>* queue_;
  StageMetrics* metrics_;
  OverflowPolicy policy_;
  NamedCounter* drops_;
  // The last dropped chunk, emptied: it holds the one gap (every sample dropped since the
  // last chunk that got through) until that gap can go downstream.
  ChunkPtr carrier_;
};

class LaneResources;

class StageContext {
 public:
  // `cuda_device` -1: the lane's.
  StageContext(LaneResources& lane, StageMetrics& metrics, const PipelineSettings& pipeline, std::string stage_name,
               int cpu = -1, int cuda_device = -1);
  StageContext(const StageContext&) = delete;
  StageContext& operator=(const StageContext&) = delete;

  [[nodiscard]] const std::string& lane_name() const;
  [[nodiscard]] std::uint32_t lane_index() const;
  [[nodiscard]] const std::string& stage_name() const { return stage_name_; }
  [[nodiscard]] StageMetrics& metrics() { return *metrics_; }
  [[nodiscard]] const PipelineSettings& pipeline() const { return *pipeline_; }
  // The core the runtime pins this stage's thread to (its `cpu` setting), or -1: helper threads a
  // stage starts in start() (which runs on another thread) keep off it.
  [[nodiscard]] int cpu() const { return cpu_; }
  // The CUDA device of this stage (its `gpu:`, else its lane's): its pools, its stream
  // (GpuStream, made in start()), its GPU work.
  [[nodiscard]] int cuda_device() const;

  [[nodiscard]] bool has_input() const { return input_ != nullptr; }
  [[nodiscard]] bool has_output() const { return output_ != nullptr; }
  [[nodiscard]] InputPort& input() { return *input_; }
  [[nodiscard]] OutputPort& output() { return *output_; }

  // Setup only. A pool owned by the lane; where `spec.memory` cannot be had here (no GPU),
  // the next best kind is taken, logged in one line and noted in this stage's summary.
  Pool& create_pool(const std::string& name, PoolSpec spec);
  // Every pool created so far in this lane, upstream stages' first: what a downstream stage
  // registers with verbs or io_uring so that it can read any chunk that reaches it.
  [[nodiscard]] std::vector<Pool*> lane_pools() const;
  // A free chunk from `pool`, or null after `timeout`; the wait counts as backpressure.
  ChunkPtr acquire(Pool& pool, std::chrono::microseconds timeout) noexcept;
  // The stage is done with `chunk`: hand it downstream, or end it here when nothing follows
  // (a sink, or a tap at the end of its lane). Counts it and its latency. False if dropped.
  bool emit(ChunkPtr chunk) noexcept;

  // Sources end their stream (return end_of_stream) once this is true.
  [[nodiscard]] bool stop_requested() const noexcept;
  // Records why process() is about to return StageStatus::error (hot path may allocate here:
  // the stage is failing anyway).
  void fail(std::string message);
  [[nodiscard]] const std::string& failure() const { return failure_; }
  // Why the first stage of this lane (on this node) to fail failed ("name (type): reason"), or
  // empty. Once input().finished(), a failure upstream is visible here: a failing stage is
  // noted before its output closes.
  [[nodiscard]] std::string lane_failure() const;
  [[nodiscard]] LaneResources& lane_resources() { return *lane_; }

  // What flows into this stage (from upstream) and out of it (downstream sees this).
  StreamInfo stream;

  // Wiring, set by the runtime.
  void attach(InputPort* input, OutputPort* output) {
    input_ = input;
    output_ = output;
  }

 private:
  LaneResources* lane_;
  StageMetrics* metrics_;
  const PipelineSettings* pipeline_;
  std::string stage_name_;
  int cpu_;
  int cuda_device_;
  InputPort* input_ = nullptr;
  OutputPort* output_ = nullptr;
  std::string failure_;
};

class Stage;
// A stage that carries a lane from one node to another, cut in two: the sending half ends
// the lane on the upstream node (a sink), the receiving half starts it on the next (a source).
struct StageHalves {
  std::unique_ptr<Stage> sending;
  std::unique_ptr<Stage> receiving;
};

// A thread a stage runs besides its own that wants its core whenever data flows (a receive
// thread), and the cores it is pinned to (empty: not pinned).
struct BusyThread {
  std::string name;  // "receive thread", "receive thread 2", "standby receive thread"
  std::vector<int> cores;
  bool standby = false;  // asleep until its stage falls behind
};

class Stage {
 public:
  virtual ~Stage() = default;
  // Load time, once: whether this stage sits where its lane moves to another node
  // (pipeline/placement.hpp). Returns why it cannot sit there ("" when it can); a stage
  // that joins nodes fills `halves`. Only the link joins nodes.
  virtual std::string place(bool joins_nodes, StageHalves& /*halves*/) {
    return joins_nodes ? "only a link stage can move a lane to another node" : std::string();
  }
  // Load time: the local address ("host:port") this source receives on, whose NIC decides
  // which GPU its lane is nearest (pipeline/gpu_placement.hpp); empty when it has none.
  [[nodiscard]] virtual std::string receive_address() const { return {}; }
  // Load time: the threads this stage runs besides its own and where ("2 receive threads on
  // cores 2, 3"), for `sluice validate` and the placement log; empty when it runs none.
  [[nodiscard]] virtual std::string threads_placement() const { return {}; }
  // Load time: its threads besides its own that want a core whenever data flows (receive
  // threads), for the check that no two of a pipeline's are pinned to one core alone.
  [[nodiscard]] virtual std::vector<BusyThread> busy_threads() const { return {}; }
  // Open, allocate, register. Throws an error naming the failed call and its cause.
  virtual void start(StageContext& context) = 0;
  // Move chunks. Never throws.
  virtual StageStatus process() = 0;
  // Flush and release what start() took. Called once, on the stage's thread, after the last
  // process(). Must not throw.
  virtual void stop() noexcept = 0;
  // Outputs only this stage may write when it runs in lane `lane` (a record stage: the
  // path prefix of its files). Validation refuses two stages of a pipeline that claim the
  // same one, so that one never replaces or removes what the other writes.
  [[nodiscard]] virtual std::vector<std::string> exclusive_outputs(const std::string& lane) const {
    static_cast<void>(lane);
    return {};
  }
};

// Settings every producing stage shares: how big its chunks are, how many, and where.
struct PoolSettings {
  std::uint64_t chunk_bytes = 0;
  std::uint64_t chunk_count = 0;
  MemoryKind memory = MemoryKind::host;
  [[nodiscard]] PoolSpec spec(int cuda_device) const {
    return PoolSpec{static_cast<std::size_t>(chunk_bytes), static_cast<std::size_t>(chunk_count), memory, cuda_device};
  }
};
// Who writes a stage's chunks. `copy` stages fill them with copy_memory() (memcpy or
// cudaMemcpyAsync), so any kind works; `host_writes` stages fill them from the CPU or the
// kernel (recvmmsg, io_uring reads), which cannot write GPU memory: `memory: device` is a
// configuration error there, and a link with `memory: device` after them lands the chunks.
enum class PoolWriter : std::uint8_t { copy, host_writes };
PoolSettings read_pool_settings(SettingsReader& reader, const PipelineSettings& pipeline,
                                PoolWriter writer = PoolWriter::copy);

// Stage types, created from their YAML `type`.
struct StageType {
  std::string name;
  StageRole role;
  std::string summary;
  // Reads and validates the settings (through the reader, which collects errors); opens nothing.
  std::function<std::unique_ptr<Stage>(SettingsReader&, const PipelineSettings&)> create;
};

class StageRegistry {
 public:
  // The registry with every built-in stage (defined in stages/builtin.cpp: link sluice_stages).
  static const StageRegistry& builtin();
  void add(StageType type);
  [[nodiscard]] const StageType* find(const std::string& name) const;
  [[nodiscard]] std::vector<std::string> names() const;
  [[nodiscard]] const std::map<std::string, StageType>& all() const { return types_; }

 private:
  std::map<std::string, StageType> types_;
};

// Defined in stages/builtin.cpp: one line per stage module.
void register_builtin_stages(StageRegistry& registry);

std::string_view to_string(StageRole role);

}  // namespace sluice
