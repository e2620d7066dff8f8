// Pipeline runtime: wiring, start order, one thread per stage, drain-on-stop.
#include "pipeline/runtime.hpp"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <map>
#include <set>

#include "pipeline/clock.hpp"
#include "pipeline/cuda_glue.hpp"
#include "pipeline/log.hpp"
#include "pipeline/thread_cores.hpp"
#include "pipeline/units.hpp"

namespace sluice {

Pipeline::Pipeline(PipelineDefinition definition) : definition_(std::move(definition)) {
  for (auto& lane_definition : definition_.lanes) {
    Lane& lane = lanes_.emplace_back();
    lane.resources = std::make_unique<LaneResources>(lane_definition.name, lane_definition.index, stop_,
                                                     lane_definition.placement.gpu);
    const std::size_t count = lane_definition.stages.size();
    lane.slots.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      Slot& slot = lane.slots[i];
      slot.definition = &lane_definition.stages[i];
      slot.metrics = std::make_unique<StageMetrics>(lane_definition.name, slot.definition->name, slot.definition->type);
      if (i > 0) {
        slot.input_queue = std::make_unique<SpscQueue<Chunk*>>(slot.definition->queue_depth);
        slot.metrics->queue_capacity = static_cast<std::uint32_t>(slot.input_queue->capacity());
        slot.input = std::make_unique<InputPort>(*slot.input_queue, *slot.metrics);
      }
      const std::vector<int>& cpus = slot.definition->cpus;
      slot.context =
          std::make_unique<StageContext>(*lane.resources, *slot.metrics, definition_.settings, slot.definition->name,
                                         cpus.size() == 1 ? cpus.front() : -1, slot.definition->cuda_device);
    }
    for (std::size_t i = 0; i + 1 < count; ++i) {
      Slot& slot = lane.slots[i];
      NamedCounter& queue_full = slot.metrics->drop_counter("queue_full");
      slot.output = std::make_unique<OutputPort>(*lane.slots[i + 1].input_queue, *slot.metrics,
                                                 slot.definition->on_full, queue_full);
    }
    for (auto& slot : lane.slots) {
      slot.metrics->drop_counter("after_stage_end");  // chunks arriving after a stage ended or failed
      slot.context->attach(slot.input.get(), slot.output.get());
    }
  }
}

Pipeline::~Pipeline() {
  request_stop();
  for (auto& lane : lanes_) {
    for (auto& slot : lane.slots) {
      if (slot.thread.joinable()) slot.thread.join();
    }
  }
  // Started but never run: release what start() took, downstream first.
  for (auto lane = lanes_.rbegin(); lane != lanes_.rend(); ++lane) {
    for (auto slot = lane->slots.rbegin(); slot != lane->slots.rend(); ++slot) {
      if (slot->started) slot->definition->stage->stop();
    }
  }
}

namespace {

// What an operator debugging a lost stream needs at debug level: when each stage first saw
// data, when it went quiet and came back, and when its drops rose. The monitor thread checks
// every stage's counters between progress ticks; no stage's hot path logs.
class FlowWatch {
 public:
  static constexpr double kQuietSeconds = 1.0;

  void check(const std::vector<std::vector<const StageMetrics*>>& lanes, std::uint64_t run_started_ns) {
    const std::uint64_t now = monotonic_ns();
    std::size_t index = 0;
    for (const auto& lane : lanes) {
      for (const StageMetrics* stage : lane) {
        if (index >= seen_.size()) seen_.push_back(Seen{0, 0, now, false});
        Seen& seen = seen_[index++];
        const FlowCounters& flow = stage->queue_capacity.load() == 0 ? stage->out : stage->in;
        const std::uint64_t chunks = flow.chunks.load(std::memory_order_relaxed);
        const std::uint64_t bytes = flow.bytes.load(std::memory_order_relaxed);
        const bool ended = stage->stopped_ns.load() != 0;
        const double since_change = static_cast<double>(now - seen.changed_ns) / 1e9;
        if (chunks != seen.chunks) {
          if (seen.chunks == 0) {
            log::debug("{}: first data {:.3f} s after the run started ({} in {} chunk(s))", name(*stage),
                       static_cast<double>(std::max(flow.first_ns.load(), run_started_ns) - run_started_ns) / 1e9,
                       format_bytes(static_cast<double>(bytes)), chunks);
          } else if (seen.quiet) {
            log::debug("{}: data again after {:.1f} s without any ({} so far)", name(*stage), since_change,
                       format_bytes(static_cast<double>(bytes)));
          }
          seen.chunks = chunks;
          seen.changed_ns = now;
          seen.quiet = false;
        } else if (!ended && !seen.quiet && since_change >= kQuietSeconds) {
          seen.quiet = true;
          log::debug("{}: no data for {:.1f} s ({} chunks, {} so far{})", name(*stage), since_change, chunks,
                     format_bytes(static_cast<double>(bytes)),
                     stage->queue_capacity.load() == 0 ? "; a source: is the sender running, and sending here?"
                                                       : "; upstream stages have not handed anything on");
        }
        const std::uint64_t drops = stage->total_drops();
        if (drops != seen.drops) {
          std::string reasons;
          for (const auto& drop : stage->drops()) {
            if (drop.get() != 0) reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", drop.name, drop.get());
          }
          log::debug("{}: drops rose by {} to {} ({})", name(*stage), drops - seen.drops, drops, reasons);
          seen.drops = drops;
        }
      }
    }
  }

  static std::string name(const StageMetrics& stage) {
    return "lane " + stage.lane() + ", stage " + stage.stage() + " (" + stage.type() + ")";
  }

 private:
  struct Seen {
    std::uint64_t chunks;
    std::uint64_t drops;
    std::uint64_t changed_ns;
    bool quiet;
  };
  std::vector<Seen> seen_;
};

// Why `cores` (from cpu:) cannot be pinned to, or empty. Cores that come from a GPU's NUMA
// node are kept to those this process may use (`allowed`) instead (an empty result: not pinned).
std::string settle_cores(StageDefinition& stage, const std::vector<int>& allowed) {
  if (stage.cores.empty()) return {};
  const bool from_setting = stage.cores_reason == "cpu:" || stage.cores_reason == "lane cpu:";
  std::vector<int> usable;
  for (int cpu : stage.cores) {
    if (std::binary_search(allowed.begin(), allowed.end(), cpu)) {
      usable.push_back(cpu);
    } else if (from_setting) {
      return "cannot pin to cpu " + std::to_string(cpu) + " (" + stage.cores_reason + "): this process may use " +
             std::to_string(allowed.size()) + " cpus";
    }
  }
  if (usable.empty()) stage.cores_reason.clear();
  stage.cores = std::move(usable);
  return {};
}

// Copies between the GPUs of a pipeline go straight over PCIe or NVLink where the GPUs allow it.
void enable_peer_access(const PipelineDefinition& definition) {
  std::set<int> devices;
  for (const auto& lane : definition.lanes) {
    for (const auto& stage : lane.stages) devices.insert(stage.cuda_device);
  }
  if (devices.size() < 2 || !cuda_available()) return;
  for (int device : devices) {
    for (int peer : devices) {
      if (device == peer) continue;
      if (std::string problem = cuda_glue::enable_peer_access(device, peer); !problem.empty()) {
        log::info("GPU {} → GPU {}: {}; copies between them go through host memory", device, peer, problem);
      }
    }
  }
}

void log_placement(const LaneDefinition& lane) {
  const LaneGpu& gpu = lane.placement;
  std::string cores;
  for (const auto& stage : lane.stages) {
    cores += fmt::format("{}{} {}", cores.empty() ? "" : ", ", stage.name,
                         stage.cores.empty() ? "any" : format_core_list(stage.cores));
    if (stage.cuda_device != gpu.gpu) cores += fmt::format(" GPU {}", stage.cuda_device);
    if (const std::string threads = stage.stage->threads_placement(); !threads.empty()) cores += " (" + threads + ")";
  }
  if (!cuda_available()) {
    log::info("lane {}: no GPU ({}): host memory; cores: {}", lane.name, cuda_unavailable_reason(), cores);
    return;
  }
  log::info("lane {}: GPU {}{}, {}; cores: {}", lane.name, gpu.gpu,
            gpu.pci_bus_id.empty() ? "" : " (" + gpu.pci_bus_id + ")", gpu.reason, cores);
}
}  // namespace

std::vector<std::string> shared_busy_cores(const PipelineDefinition& definition) {
  struct Pinned {
    std::vector<std::string> threads;
    bool always = false;  // one of them always runs (not standing by)
  };
  std::map<int, Pinned> alone_on;  // core → the busy threads pinned to it alone
  for (const auto& lane : definition.lanes) {
    for (const auto& stage : lane.stages) {
      if (!stage.stage) continue;
      for (const BusyThread& thread : stage.stage->busy_threads()) {
        if (thread.cores.size() != 1) continue;
        Pinned& pinned = alone_on[thread.cores.front()];
        pinned.threads.push_back(lane.name + " " + stage.name + "'s " + thread.name);
        pinned.always = pinned.always || !thread.standby;
      }
    }
  }
  std::vector<std::string> lines;
  for (const auto& [core, pinned] : alone_on) {
    const std::vector<std::string>& threads = pinned.threads;
    if (threads.size() < 2 || !pinned.always) continue;
    std::string names;
    for (const auto& name : threads) names += (names.empty() ? "" : ", ") + name;
    lines.push_back(fmt::format(
        "core {} carries {} receive threads pinned there alone ({}): while one runs the others wait and their "
        "sockets fill; give each a core of its own (receive_cpu)",
        core, threads.size(), names));
  }
  return lines;
}

// Every stage's cores settled first, then the starting thread narrowed to the cores no cpu:
// setting takes: what stages start in start() and the unpinned stage threads inherit it.
void Pipeline::keep_off_pinned_cores() {
  const std::vector<int> allowed = allowed_cores();
  std::vector<int> pinned;
  for (auto& lane : lanes_) {
    for (auto& slot : lane.slots) {
      StageDefinition& definition = *slot.definition;
      if (std::string problem = settle_cores(definition, allowed); !problem.empty()) {
        throw PipelineError("lane " + lane.resources->name() + ", stage " + definition.name + " (" + definition.type +
                            "): " + problem);
      }
      if (definition.cores_reason == "cpu:" || definition.cores_reason == "lane cpu:")
        pinned.insert(pinned.end(), definition.cores.begin(), definition.cores.end());
    }
  }
  unpinned_ = std::make_unique<UnpinnedCores>(pinned);
  if (!unpinned_->cores().empty())
    log::info("threads without a cpu: setting run on cores {}, off the cores the cpu: settings take",
              unpinned_->cores());
}

void Pipeline::start() {
  enable_peer_access(definition_);
  keep_off_pinned_cores();
  std::vector<Slot*> started;
  for (auto& lane : lanes_) {
    const StreamInfo* upstream = nullptr;
    for (auto& slot : lane.slots) {
      StageDefinition& definition = *slot.definition;
      try {
        if (upstream != nullptr) slot.context->stream = *upstream;
        definition.stage->start(*slot.context);
        const StreamInfo& stream = slot.context->stream;
        log::debug(
            "{}: started; stream: {}, {} {}; {}; when the next queue is full: {}; cpus {}",
            FlowWatch::name(*slot.metrics), stream.description.empty() ? "-" : stream.description,
            stream.sample_rate > 0 ? format_frequency(stream.sample_rate) : "rate unknown", to_string(stream.format),
            slot.input_queue ? fmt::format("input queue {} chunks", slot.input_queue->capacity()) : "no input queue",
            !slot.output                                  ? "-"
            : definition.on_full == OverflowPolicy::block ? "block"
                                                          : "drop",
            definition.cores.empty() ? "any" : format_core_list(definition.cores));
        slot.started = true;
        started.push_back(&slot);
        upstream = &slot.context->stream;
      } catch (const std::exception& error) {
        const std::string message = "lane " + lane.resources->name() + ", stage " + definition.name + " (" +
                                    definition.type + "): " + error.what();
        for (auto it = started.rbegin(); it != started.rend(); ++it) {
          (*it)->definition->stage->stop();
          (*it)->started = false;
        }
        throw PipelineError(message);
      }
    }
  }
  // Once every stage started, so that a lane's name first shows in the log when its sockets are bound.
  for (const auto& lane : definition_.lanes) log_placement(lane);
  for (const std::string& line : shared_busy_cores(definition_)) log::warn("{}", line);
}

void Pipeline::record_failure(const Slot& slot, const std::string& lane, std::string message) {
  log::error("lane {}, stage {} ({}): {}", lane, slot.definition->name, slot.definition->type, message);
  slot.context->lane_resources().note_failure(slot.definition->name + " (" + slot.definition->type + "): " + message);
  std::lock_guard lock(failures_mutex_);
  failures_.push_back(StageFailure{lane, slot.definition->name, slot.definition->type, std::move(message)});
}

void Pipeline::run_stage(Lane& lane, std::size_t index) noexcept {
  Slot& slot = lane.slots[index];
  StageMetrics& metrics = *slot.metrics;
  Stage& stage = *slot.definition->stage;
  metrics.started_ns = monotonic_ns();
  bool failed = false;
  if (!slot.definition->cores.empty()) {
    try {
      pin_thread(pthread_self(), slot.definition->cores);
    } catch (const std::exception& error) {
      record_failure(slot, lane.resources->name(), error.what());
      failed = true;
      request_stop();
    }
  }
  metrics.stage_thread().begin(slot.definition->cores);
  while (!failed) {
    const std::uint64_t begin = monotonic_ns();
    const std::uint64_t waited_before = metrics.wait_ns.load(std::memory_order_relaxed);
    const StageStatus status = stage.process();
    const std::uint64_t spent = monotonic_ns() - begin;
    const std::uint64_t waited = metrics.wait_ns.load(std::memory_order_relaxed) - waited_before;
    if (status == StageStatus::ok)
      metrics.busy_ns.fetch_add(spent > waited ? spent - waited : 0, std::memory_order_relaxed);
    if (status == StageStatus::end_of_stream) break;
    if (status == StageStatus::error) {
      const std::string& reason = slot.context->failure();
      record_failure(slot, lane.resources->name(), reason.empty() ? "failed without a reason" : reason);
      failed = true;
      request_stop();
    }
  }
  stage.stop();
  slot.started = false;
  // Keep upstream flowing until it ends: whatever still arrives is released and counted,
  // never left blocking a producer.
  if (slot.input) {
    NamedCounter& late = metrics.drop_counter("after_stage_end");
    while (!slot.input->finished()) {
      if (ChunkPtr chunk = slot.input->pop(std::chrono::milliseconds(1))) late.add();
    }
  }
  if (slot.output) slot.output->close();
  metrics.stage_thread().end();
  metrics.stopped_ns = monotonic_ns();
  const FlowCounters& flow = slot.input ? metrics.in : metrics.out;
  log::debug("{}: {} after {} chunks, {}, {} drops", FlowWatch::name(metrics),
             failed         ? "failed"
             : stop_.load() ? "stopped"
                            : "reached end of stream",
             flow.chunks.load(), format_bytes(static_cast<double>(flow.bytes.load())), metrics.total_drops());
}

void Pipeline::run(const std::function<void()>& tick) {
  started_ns_ = monotonic_ns();
  std::size_t threads = 0;
  std::atomic<std::size_t> finished{0};
  for (auto& lane : lanes_) {
    for (std::size_t i = 0; i < lane.slots.size(); ++i) {
      lane.slots[i].thread = std::thread([this, &lane, i, &finished] {
        run_stage(lane, i);
        finished.fetch_add(1, std::memory_order_release);
      });
      ++threads;
    }
  }
  if (unpinned_) unpinned_->release();
  const auto duration = definition_.settings.duration;
  FlowWatch watch;
  const auto lanes = metrics_by_lane();
  while (finished.load(std::memory_order_acquire) < threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sample_queues();
    sample_timeline();
    sample_core_waits();
    if (log::enabled(log::Level::debug)) watch.check(lanes, started_ns_);
    if (duration.count() > 0 && monotonic_ns() - started_ns_ >= static_cast<std::uint64_t>(duration.count()))
      request_stop();
    if (tick) tick();
  }
  for (auto& lane : lanes_) {
    for (auto& slot : lane.slots) slot.thread.join();
  }
  finished_ns_ = monotonic_ns();
  sample_timeline();
}

void Pipeline::sample_core_waits() {
  const std::uint64_t now = monotonic_ns();
  if (now - core_waits_sampled_ns_ < CoreWait::kWindowNs) return;
  core_waits_sampled_ns_ = now;
  // Every core's steal, read once for all the pinned threads (none read where none is pinned).
  std::map<int, std::uint64_t> steal;
  bool read_steal = false;
  for (auto& lane : lanes_) {
    for (auto& slot : lane.slots) {
      for (CoreWait& wait : slot.metrics->threads()) {
        // Threads the cpu: settings put together take turns by design: the summary notes it.
        if (wait.sample()) {
          if (const std::vector<std::string> sharers = core_sharers(wait); sharers.empty()) {
            log::warn("lane {}, stage {}: {}", lane.resources->name(), slot.definition->name,
                      core_wait_note(wait, sharers));
          }
        }
        if (wait.core_list().empty()) continue;
        if (!read_steal) {
          steal = read_core_steal();
          read_steal = true;
        }
        if (wait.sample_steal(steal))
          log::warn("lane {}, stage {}: {}", lane.resources->name(), slot.definition->name, core_steal_note(wait));
      }
    }
  }
}

std::vector<std::string> Pipeline::core_sharers(const CoreWait& wait) const {
  std::vector<std::string> sharers;
  const std::vector<int>& mine = wait.core_list();
  if (mine.empty()) return sharers;
  for (const auto& lane : lanes_) {
    for (const auto& slot : lane.slots) {
      for (const CoreWait& other : slot.metrics->threads()) {
        if (&other == &wait) continue;
        const std::vector<int>& theirs = other.core_list();
        if (std::any_of(theirs.begin(), theirs.end(),
                        [&](int core) { return std::find(mine.begin(), mine.end(), core) != mine.end(); })) {
          sharers.push_back("lane " + lane.resources->name() + " stage " + slot.definition->name +
                            (other.name() == "stage" ? "" : " " + other.name()));
        }
      }
    }
  }
  return sharers;
}

void Pipeline::sample_timeline() {
  const double now = elapsed_seconds();
  if (!timeline_.empty() && finished_ns_ == 0 && now - timeline_.back().seconds < 0.25) return;
  TimelinePoint point;
  point.seconds = now;
  for (const auto& lane : lanes_) {
    point.source_bytes.push_back(lane.slots.front().metrics->out.bytes.load(std::memory_order_relaxed));
    point.sink_bytes.push_back(lane.slots.back().metrics->in.bytes.load(std::memory_order_relaxed));
    std::uint64_t drops = 0;
    std::uint64_t lost = 0;
    for (const auto& slot : lane.slots) {
      drops += slot.metrics->total_drops();
      lost += slot.metrics->lost_samples();
    }
    point.drops.push_back(drops);
    point.lost_samples.push_back(lost);
  }
  timeline_.push_back(std::move(point));
}

void Pipeline::sample_queues() {
  for (auto& lane : lanes_) {
    for (auto& slot : lane.slots) {
      if (!slot.input_queue) continue;
      const auto depth = static_cast<std::uint32_t>(slot.input_queue->size());
      slot.metrics->queue_depth.store(depth, std::memory_order_relaxed);
      if (depth > slot.metrics->queue_high_water.load(std::memory_order_relaxed)) {
        slot.metrics->queue_high_water.store(depth, std::memory_order_relaxed);
      }
    }
  }
}

std::vector<const StageMetrics*> Pipeline::metrics() const {
  std::vector<const StageMetrics*> all;
  for (const auto& lane : lanes_) {
    for (const auto& slot : lane.slots) all.push_back(slot.metrics.get());
  }
  return all;
}

std::vector<std::vector<const StageMetrics*>> Pipeline::metrics_by_lane() const {
  std::vector<std::vector<const StageMetrics*>> result;
  for (const auto& lane : lanes_) {
    auto& row = result.emplace_back();
    for (const auto& slot : lane.slots) row.push_back(slot.metrics.get());
  }
  return result;
}

double Pipeline::elapsed_seconds() const {
  if (started_ns_ == 0) return 0;
  const std::uint64_t end = finished_ns_ != 0 ? finished_ns_.load() : monotonic_ns();
  return static_cast<double>(end - started_ns_) / 1e9;
}

}  // namespace sluice
