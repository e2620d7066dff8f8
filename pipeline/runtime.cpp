// Pipeline runtime: wiring, start order, one thread per stage, drain-on-stop.
#include "pipeline/runtime.hpp"

#include <pthread.h>
#include <sched.h>

#include <cstring>

#include <spdlog/spdlog.h>

#include "pipeline/clock.hpp"

namespace sluice {

std::vector<Pool*> LaneResources::pools() const {
  std::vector<Pool*> pools;
  for (const auto& pool : pools_) pools.push_back(pool.get());
  return pools;
}

void* LaneResources::cuda_stream() {
  if (stream_.get() == nullptr) stream_ = CudaStream(cuda_device_);
  return stream_.get();
}

Pipeline::Pipeline(PipelineDefinition definition) : definition_(std::move(definition)) {
  for (auto& lane_definition : definition_.lanes) {
    Lane& lane = lanes_.emplace_back();
    lane.resources = std::make_unique<LaneResources>(lane_definition.name, lane_definition.index, stop_,
                                                     definition_.settings.cuda_device);
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
      slot.context = std::make_unique<StageContext>(*lane.resources, *slot.metrics, definition_.settings, slot.definition->name);
    }
    for (std::size_t i = 0; i + 1 < count; ++i) {
      Slot& slot = lane.slots[i];
      NamedCounter& queue_full = slot.metrics->drop_counter("queue_full");
      slot.output = std::make_unique<OutputPort>(*lane.slots[i + 1].input_queue, *slot.metrics, slot.definition->on_full, queue_full);
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
std::string pin_problem(int cpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return std::string("sched_getaffinity: ") + std::strerror(errno);
  if (cpu >= CPU_SETSIZE || !CPU_ISSET(static_cast<std::size_t>(cpu), &allowed)) {
    return "cannot pin to cpu " + std::to_string(cpu) + ": this process may use " + std::to_string(CPU_COUNT(&allowed)) +
           " cpus";
  }
  return {};
}
}  // namespace

void Pipeline::start() {
  std::vector<Slot*> started;
  for (auto& lane : lanes_) {
    const StreamInfo* upstream = nullptr;
    for (auto& slot : lane.slots) {
      StageDefinition& definition = *slot.definition;
      try {
        if (definition.cpu >= 0) {
          if (std::string problem = pin_problem(definition.cpu); !problem.empty()) throw std::runtime_error(problem);
        }
        if (upstream != nullptr) slot.context->stream = *upstream;
        definition.stage->start(*slot.context);
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
}

void Pipeline::record_failure(const Slot& slot, const std::string& lane, std::string message) {
  spdlog::error("lane {}, stage {} ({}): {}", lane, slot.definition->name, slot.definition->type, message);
  std::lock_guard lock(failures_mutex_);
  failures_.push_back(StageFailure{lane, slot.definition->name, slot.definition->type, std::move(message)});
}

void Pipeline::run_stage(Lane& lane, std::size_t index) noexcept {
  Slot& slot = lane.slots[index];
  StageMetrics& metrics = *slot.metrics;
  Stage& stage = *slot.definition->stage;
  metrics.started_ns = monotonic_ns();
  bool failed = false;
  if (slot.definition->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<std::size_t>(slot.definition->cpu), &set);
    if (int error = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); error != 0) {
      record_failure(slot, lane.resources->name(), std::string("pthread_setaffinity_np: ") + std::strerror(error));
      failed = true;
      request_stop();
    }
  }
  while (!failed) {
    const std::uint64_t begin = monotonic_ns();
    const std::uint64_t waited_before = metrics.wait_ns.load(std::memory_order_relaxed);
    const StageStatus status = stage.process();
    const std::uint64_t spent = monotonic_ns() - begin;
    const std::uint64_t waited = metrics.wait_ns.load(std::memory_order_relaxed) - waited_before;
    if (status == StageStatus::ok) metrics.busy_ns.fetch_add(spent > waited ? spent - waited : 0, std::memory_order_relaxed);
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
  metrics.stopped_ns = monotonic_ns();
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
  const auto duration = definition_.settings.duration;
  while (finished.load(std::memory_order_acquire) < threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sample_queues();
    sample_timeline();
    if (duration.count() > 0 && monotonic_ns() - started_ns_ >= static_cast<std::uint64_t>(duration.count())) request_stop();
    if (tick) tick();
  }
  for (auto& lane : lanes_) {
    for (auto& slot : lane.slots) slot.thread.join();
  }
  finished_ns_ = monotonic_ns();
  sample_timeline();
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
    for (const auto& slot : lane.slots) drops += slot.metrics->total_drops();
    point.drops.push_back(drops);
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
