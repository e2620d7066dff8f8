// Ports, the stage context and the stage registry.
#include "pipeline/stage.hpp"

#include <algorithm>
#include <thread>

#include "pipeline/clock.hpp"
#include "pipeline/lane.hpp"
#include "pipeline/log.hpp"
#include "pipeline/pipeline_settings.hpp"

namespace sluice {
namespace {

// Spin briefly (a hand-off is usually nanoseconds away), then yield, then sleep in short
// steps so an idle stage costs little CPU while adding at most ~50 µs of latency.
class Backoff {
 public:
  void wait(std::uint64_t remaining_ns) noexcept {
    if (spinning()) {
      step();
    } else {
      const std::uint64_t sleep_ns = remaining_ns < 50'000 ? remaining_ns : 50'000;
      std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
    }
  }
  // The spin and yield steps; false once they are used up.
  [[nodiscard]] bool spinning() const noexcept { return step_ < 24; }
  void step() noexcept {
    if (step_ < 16) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
    ++step_;
  }

 private:
  unsigned step_ = 0;
};

}  // namespace

ChunkPtr InputPort::pop(std::chrono::microseconds timeout) noexcept {
  if (auto chunk = queue_->try_pop()) {
    metrics_->in.add(**chunk);
    return ChunkPtr(*chunk);
  }
  if (timeout.count() <= 0) return nullptr;
  const std::uint64_t begin = monotonic_ns();
  const std::uint64_t deadline = begin + static_cast<std::uint64_t>(timeout.count()) * 1000;
  Backoff backoff;
  ChunkPtr result;
  for (;;) {
    const bool closed = queue_->closed();  // read before the pop: a push before close is then seen
    if (auto chunk = queue_->try_pop()) {
      metrics_->in.add(**chunk);
      result.reset(*chunk);
      break;
    }
    const std::uint64_t now = monotonic_ns();
    if (closed || now >= deadline) break;
    // Past the spin, sleep until the producer pushes: a polling consumer would wake every
    // few µs and take the CPU from the threads and kernel workers that produce its input.
    if (backoff.spinning()) {
      backoff.step();
    } else {
      queue_->wait_for_push(std::chrono::nanoseconds(deadline - now));
    }
  }
  metrics_->wait_ns.fetch_add(monotonic_ns() - begin, std::memory_order_relaxed);
  return result;
}

bool OutputPort::try_hand_off(Chunk* chunk) noexcept {
  // Read what we count before the hand-off: once queued, the consumer owns the chunk.
  const std::uint64_t bytes = chunk->size;
  const std::uint64_t samples = chunk->sample_count;
  const std::uint64_t created = chunk->created_ns;
  if (!queue_->try_push(chunk)) return false;
  metrics_->out.add(bytes, samples);
  metrics_->latency.record(monotonic_ns() - created);
  return true;
}

void OutputPort::remember_dropped(ChunkPtr chunk) noexcept {
  // Every stream index the chunk covered or reported lost; nothing between the pending gap
  // and it got through, so the two make one range.
  std::uint64_t first = chunk->first_sample;
  std::uint64_t end = chunk->end_sample();
  for (std::uint32_t i = 0; i < chunk->gap_count; ++i) {
    const Gap& gap = chunk->gaps[i];
    if (gap.in_data || gap.length == 0) continue;
    first = std::min(first, gap.first_sample);
    end = std::max(end, gap.first_sample + gap.length);
  }
  if (carrier_ && carrier_->gap_count > 0) {
    first = std::min(first, carrier_->gaps[0].first_sample);
    end = std::max(end, carrier_->gaps[0].first_sample + carrier_->gaps[0].length);
  }
  // The dropped chunk itself becomes the carrier: no allocation, and at most one chunk held.
  const std::uint64_t sequence = chunk->sequence;
  const std::uint32_t lane = chunk->lane;
  const SampleFormat format = chunk->format;
  chunk->reset_metadata();
  chunk->sequence = sequence;
  chunk->lane = lane;
  chunk->format = format;
  chunk->first_sample = end;
  chunk->created_ns = monotonic_ns();
  if (end > first) chunk->add_gap(first, end - first);
  carrier_ = std::move(chunk);
}

bool OutputPort::push(ChunkPtr chunk) noexcept {
  // Only `drop` leaves a carrier: the samples dropped since the last chunk that got through.
  if (carrier_) {
    const Gap pending = carrier_->gap_count > 0 ? carrier_->gaps[0] : Gap{};
    if (pending.length == 0 || chunk->add_gap(pending.first_sample, pending.length)) {
      carrier_.reset();
    } else if (try_hand_off(carrier_.get())) {
      // This chunk's gap table is full: the gap goes downstream on a chunk of its own first.
      static_cast<void>(carrier_.release());
    } else {
      drops_->add();
      remember_dropped(std::move(chunk));
      return false;
    }
  }
  Chunk* raw = chunk.get();
  if (!try_hand_off(raw)) {
    if (policy_ == OverflowPolicy::drop) {
      drops_->add();
      remember_dropped(std::move(chunk));
      return false;  // its samples are a gap on the next chunk
    }
    const WaitTimer waiting(*metrics_);
    Backoff backoff;
    while (!try_hand_off(raw)) backoff.wait(1'000'000);
  }
  chunk.release();
  return true;
}

void OutputPort::close() noexcept {
  if (carrier_) {
    // A loss at the very end of the stream still reaches downstream (which always drains).
    Backoff backoff;
    while (!try_hand_off(carrier_.get())) backoff.wait(1'000'000);
    static_cast<void>(carrier_.release());
  }
  queue_->close();
}

StageContext::StageContext(LaneResources& lane, StageMetrics& metrics, const PipelineSettings& pipeline,
                           std::string stage_name, int cpu, int cuda_device)
    : lane_(&lane),
      metrics_(&metrics),
      pipeline_(&pipeline),
      stage_name_(std::move(stage_name)),
      cpu_(cpu),
      cuda_device_(cuda_device) {}

int StageContext::cuda_device() const { return cuda_device_ >= 0 ? cuda_device_ : lane_->cuda_device(); }

const std::string& StageContext::lane_name() const { return lane_->name(); }
std::uint32_t StageContext::lane_index() const { return lane_->index(); }
bool StageContext::stop_requested() const noexcept { return lane_->stop_requested(); }
std::string StageContext::lane_failure() const { return lane_->failure(); }
void StageContext::fail(std::string message) { failure_ = std::move(message); }
std::vector<Pool*> StageContext::lane_pools() const { return lane_->pools(); }

Pool& StageContext::create_pool(const std::string& name, PoolSpec spec) {
  const MemoryKind wanted = spec.memory;
  if (wanted != MemoryKind::host && !cuda_available()) {
    spec.memory = MemoryKind::host;
    const std::string note = "memory " + std::string(to_string(wanted)) + " → host: " + cuda_unavailable_reason();
    log::info("lane {} stage {}: {}", lane_name(), stage_name_, note);
    metrics_->notes.push_back(note);
  }
  const std::string full_name = lane_name() + "." + stage_name_ + "." + name;
  return lane_->add_pool(std::make_unique<Pool>(full_name, spec));
}

ChunkPtr StageContext::acquire(Pool& pool, std::chrono::microseconds timeout) noexcept {
  ChunkPtr chunk = pool.try_acquire();
  if (!chunk && timeout.count() > 0) {
    const WaitTimer waiting(*metrics_, WaitTimer::Kind::pool);
    chunk = pool.acquire(timeout);
  }
  if (chunk) chunk->lane = lane_index();
  return chunk;
}

bool StageContext::emit(ChunkPtr chunk) noexcept {
  if (output_ != nullptr) return output_->push(std::move(chunk));
  metrics_->out.add(*chunk);
  metrics_->latency.record(monotonic_ns() - chunk->created_ns);
  return true;  // released to its pool as `chunk` goes out of scope
}

PoolSettings read_pool_settings(SettingsReader& reader, const PipelineSettings& pipeline, PoolWriter writer) {
  PoolSettings settings;
  settings.chunk_bytes =
      reader.bytes("chunk", pipeline.chunk_bytes, "chunk size of this stage's pool", 4096, 1ULL << 30);
  settings.chunk_count = static_cast<std::uint64_t>(reader.integer(
      "chunks", static_cast<std::int64_t>(pipeline.chunk_count), "chunks in this stage's pool", 2, 65536));
  const bool host_writes = writer == PoolWriter::host_writes;
  settings.memory = reader.choice(
      "memory", MemoryKind::host,
      host_writes ? "where this stage's chunks live: host or host_pinned (pinned falls back to host "
                    "without a GPU)"
                  : "where this stage's chunks live: host, host_pinned or device (falls back to "
                    "host without a GPU)",
      {{"host", MemoryKind::host}, {"host_pinned", MemoryKind::host_pinned}, {"device", MemoryKind::device}});
  if (host_writes && settings.memory == MemoryKind::device) {
    reader.error("memory", "this stage writes its chunks from the CPU or the kernel, which cannot write GPU memory",
                 "use host or host_pinned here and put a link with memory: device after it");
  }
  if (reader.has("chunk") && settings.chunk_bytes % 4096 != 0) {  // the pipeline default is checked once, there
    reader.error("chunk", "chunk size " + std::to_string(settings.chunk_bytes) + " is not a multiple of 4096",
                 "O_DIRECT recording and RDMA registration need page-sized chunks");
  }
  return settings;
}

void StageRegistry::add(StageType type) {
  const std::string name = type.name;
  types_.insert_or_assign(name, std::move(type));
}

const StageType* StageRegistry::find(const std::string& name) const {
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : &it->second;
}

std::vector<std::string> StageRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& [name, type] : types_) names.push_back(name);
  return names;
}

std::string_view to_string(StageRole role) {
  switch (role) {
    case StageRole::source:
      return "source";
    case StageRole::transform:
      return "transform";
    case StageRole::sink:
      return "sink";
    case StageRole::tap:
      return "tap";
  }
  return "?";
}

}  // namespace sluice
