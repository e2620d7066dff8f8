// Metric families read from the stages' relaxed atomics at the moment of the scrape; no
// prometheus-cpp registry, so nothing is kept between scrapes and the lanes never touch it.
#include "monitor/prometheus_text.hpp"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <atomic>
#include <span>
#include <vector>

#include "monitor/report.hpp"
#include "pipeline/metrics.hpp"
#include "pipeline/runtime.hpp"

namespace sluice {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::vector<ClientMetric::Label> stage_labels(const StageMetrics& stage) {
  return {{"lane", stage.lane()}, {"stage", stage.stage()}, {"type", stage.type()}};
}

ClientMetric sample(std::vector<ClientMetric::Label> labels, MetricType type, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  (type == MetricType::Counter ? metric.counter.value : metric.gauge.value) = value;
  return metric;
}

template <typename T>
double load(const std::atomic<T>& value) {
  return static_cast<double>(value.load(std::memory_order_relaxed));
}
double seconds(const std::atomic<std::uint64_t>& nanoseconds) { return load(nanoseconds) / 1e9; }

// A family with one sample per stage, read from its metrics and rates.
struct StageFamily {
  const char* name;
  MetricType type;
  const char* help;
  double (*value)(const StageMetrics&, const StageRates&);
};

constexpr std::array<StageFamily, 20> kStageFamilies{{
    {"sluice_stage_in_bytes_total", MetricType::Counter, "Bytes taken from the stage's input queue.",
     [](const StageMetrics& m, const StageRates&) { return load(m.in.bytes); }},
    {"sluice_stage_in_chunks_total", MetricType::Counter, "Chunks taken from the stage's input queue.",
     [](const StageMetrics& m, const StageRates&) { return load(m.in.chunks); }},
    {"sluice_stage_in_samples_total", MetricType::Counter,
     "Samples (or spectrum values) taken from the stage's input queue.",
     [](const StageMetrics& m, const StageRates&) { return load(m.in.samples); }},
    {"sluice_stage_out_bytes_total", MetricType::Counter, "Bytes handed on by the stage (or consumed, for a sink).",
     [](const StageMetrics& m, const StageRates&) { return load(m.out.bytes); }},
    {"sluice_stage_out_chunks_total", MetricType::Counter, "Chunks handed on by the stage (or consumed, for a sink).",
     [](const StageMetrics& m, const StageRates&) { return load(m.out.chunks); }},
    {"sluice_stage_out_samples_total", MetricType::Counter, "Samples (or spectrum values) handed on by the stage.",
     [](const StageMetrics& m, const StageRates&) { return load(m.out.samples); }},
    {"sluice_stage_packets_total", MetricType::Counter, "Network packets received by the stage.",
     [](const StageMetrics& m, const StageRates&) { return load(m.packets); }},
    {"sluice_stage_lost_samples_total", MetricType::Counter, "Samples the source never received (holes in the stream).",
     [](const StageMetrics& m, const StageRates&) { return static_cast<double>(m.lost_samples()); }},
    {"sluice_stage_drops_all_total", MetricType::Counter,
     "Chunks or packets dropped by the stage, all reasons together.",
     [](const StageMetrics& m, const StageRates&) { return static_cast<double>(m.total_drops()); }},
    {"sluice_stage_busy_seconds_total", MetricType::Counter, "Time spent inside process(), minus waits.",
     [](const StageMetrics& m, const StageRates&) { return seconds(m.busy_ns); }},
    {"sluice_stage_wait_seconds_total", MetricType::Counter,
     "Time blocked on an empty input, a full output or an empty pool.",
     [](const StageMetrics& m, const StageRates&) { return seconds(m.wait_ns); }},
    {"sluice_stage_pool_waits_total", MetricType::Counter,
     "Times the stage found its own pool empty and waited for a chunk (backpressure).",
     [](const StageMetrics& m, const StageRates&) { return load(m.pool_waits); }},
    {"sluice_stage_pool_wait_seconds_total", MetricType::Counter, "Time spent waiting for the stage's own pool.",
     [](const StageMetrics& m, const StageRates&) { return seconds(m.pool_wait_ns); }},
    {"sluice_stage_active_seconds", MetricType::Gauge, "Time since the stage's thread started (until it stopped).",
     [](const StageMetrics&, const StageRates& r) { return r.seconds; }},
    {"sluice_stage_busy_ratio", MetricType::Gauge, "Fraction of the active time spent busy (0..1).",
     [](const StageMetrics&, const StageRates& r) { return r.busy_fraction; }},
    {"sluice_stage_throughput_bytes_per_second", MetricType::Gauge,
     "Average bytes per second over the active time (produced for sources, consumed otherwise).",
     [](const StageMetrics&, const StageRates& r) { return r.bytes_per_second; }},
    {"sluice_stage_throughput_samples_per_second", MetricType::Gauge,
     "Average samples per second over the active time.",
     [](const StageMetrics&, const StageRates& r) { return r.samples_per_second; }},
    {"sluice_stage_queue_depth_chunks", MetricType::Gauge,
     "Chunks waiting in the stage's input queue (sampled about every 50 ms).",
     [](const StageMetrics& m, const StageRates&) { return load(m.queue_depth); }},
    {"sluice_stage_queue_capacity_chunks", MetricType::Gauge, "Capacity of the stage's input queue (0 for sources).",
     [](const StageMetrics& m, const StageRates&) { return load(m.queue_capacity); }},
    {"sluice_stage_queue_high_water_chunks", MetricType::Gauge,
     "Most chunks ever seen waiting in the stage's input queue.",
     [](const StageMetrics& m, const StageRates&) { return load(m.queue_high_water); }},
}};

// The first nine families count chunks, bytes, samples, packets, lost samples and drops.
constexpr std::size_t kCounterFamilies = 9;

void add_stage_families(std::vector<MetricFamily>& families, std::span<const StageFamily> table,
                        const std::vector<const StageMetrics*>& stages, const std::vector<StageRates>& rates) {
  for (const StageFamily& family : table) {
    MetricFamily built{family.name, family.help, family.type, {}};
    for (std::size_t i = 0; i < stages.size(); ++i) {
      built.metric.push_back(sample(stage_labels(*stages[i]), family.type, family.value(*stages[i], rates[i])));
    }
    families.push_back(std::move(built));
  }
}

// Drops by reason and the other named counters by event ("lost_samples" has its own family).
void add_named_counters(std::vector<MetricFamily>& families, const std::vector<const StageMetrics*>& stages) {
  MetricFamily drops{
      "sluice_stage_drops_total", "Chunks or packets dropped by the stage, by reason.", MetricType::Counter, {}};
  MetricFamily events{"sluice_stage_events_total",
                      "Other events a stage counts (rows, gaps, lost_packets, duplicates, ...), by name.",
                      MetricType::Counter,
                      {}};
  for (const StageMetrics* stage : stages) {
    for (const auto& drop : stage->drops()) {
      auto labels = stage_labels(*stage);
      labels.push_back({"reason", drop.name});
      drops.metric.push_back(sample(std::move(labels), MetricType::Counter, static_cast<double>(drop.get())));
    }
    for (const auto& counter : stage->counters()) {
      if (counter.name == "lost_samples") continue;
      auto labels = stage_labels(*stage);
      labels.push_back({"event", counter.name});
      events.metric.push_back(sample(std::move(labels), MetricType::Counter, static_cast<double>(counter.get())));
    }
  }
  families.push_back(std::move(drops));
  families.push_back(std::move(events));
}

// Each stage thread's wait for a core, the times another thread took its core, and the hypervisor's
// steal on its cores.
void add_core_waits(std::vector<MetricFamily>& families, const std::vector<const StageMetrics*>& stages) {
  MetricFamily waited{"sluice_stage_thread_core_wait_seconds_total",
                      "Time a stage's thread was ready to run but kept off a core (schedstat run delay), by thread.",
                      MetricType::Counter,
                      {}};
  MetricFamily preempted{"sluice_stage_thread_preemptions_total",
                         "Times another thread took a stage thread's core (nonvoluntary context switches), by thread.",
                         MetricType::Counter,
                         {}};
  MetricFamily stolen{"sluice_stage_thread_stolen_seconds_total",
                      "The hypervisor's steal on a pinned stage thread's cores (/proc/stat), by thread: time their "
                      "vCPUs were ready to run while the host ran other work.",
                      MetricType::Counter,
                      {}};
  for (const StageMetrics* stage : stages) {
    for (const CoreWait& thread : stage->threads()) {
      auto labels = stage_labels(*stage);
      labels.push_back({"thread", thread.name()});
      waited.metric.push_back(sample(labels, MetricType::Counter, static_cast<double>(thread.waited_ns()) / 1e9));
      stolen.metric.push_back(sample(labels, MetricType::Counter, static_cast<double>(thread.stolen_ns()) / 1e9));
      preempted.metric.push_back(
          sample(std::move(labels), MetricType::Counter, static_cast<double>(thread.preemptions())));
    }
  }
  families.push_back(std::move(waited));
  families.push_back(std::move(preempted));
  families.push_back(std::move(stolen));
}

// The log-linear buckets merged at powers of two: group g (buckets 8g..8g+7) holds 2^(g+2) to
// 2^(g+3) - 1 ns. Buckets from 2^10 ns (about 1 µs) to 2^38 ns (about 275 s); the serializer adds +Inf.
ClientMetric latency_histogram(const StageMetrics& stage) {
  constexpr std::size_t kFirstGroup = 7;
  constexpr std::size_t kLastGroup = 35;
  ClientMetric metric;
  metric.label = stage_labels(stage);
  std::uint64_t cumulative = 0;
  std::size_t bucket = 0;
  for (std::size_t group = kFirstGroup; group <= kLastGroup; ++group) {
    const std::size_t last = group * LatencyHistogram::kSubBuckets + LatencyHistogram::kSubBuckets - 1;
    for (; bucket <= last; ++bucket) cumulative += stage.latency.bucket_count(bucket);
    const double bound = static_cast<double>(LatencyHistogram::bucket_upper_bound(last) + 1) / 1e9;
    metric.histogram.bucket.push_back({cumulative, bound});
  }
  for (; bucket < LatencyHistogram::kBuckets; ++bucket) cumulative += stage.latency.bucket_count(bucket);
  metric.histogram.sample_count = cumulative;
  metric.histogram.sample_sum = static_cast<double>(stage.latency.sum()) / 1e9;
  return metric;
}

std::vector<MetricFamily> metric_families(const Pipeline& pipeline) {
  const std::vector<const StageMetrics*> stages = pipeline.metrics();
  std::vector<StageRates> rates;
  for (const StageMetrics* stage : stages) rates.push_back(stage_rates(*stage));
  std::vector<MetricFamily> families;
  families.push_back({"sluice_pipeline_info",
                      "The running pipeline (always 1).",
                      MetricType::Gauge,
                      {sample({{"pipeline", pipeline.definition().settings.name}, {"version", SLUICE_VERSION}},
                              MetricType::Gauge, 1)}});
  const std::span<const StageFamily> per_stage(kStageFamilies);
  add_stage_families(families, per_stage.first(kCounterFamilies), stages, rates);
  add_named_counters(families, stages);
  add_core_waits(families, stages);
  add_stage_families(families, per_stage.subspan(kCounterFamilies), stages, rates);
  MetricFamily fill{"sluice_stage_queue_fill_ratio", "Input queue depth over capacity (0..1).", MetricType::Gauge, {}};
  for (const StageMetrics* stage : stages) {
    const double capacity = load(stage->queue_capacity);
    if (capacity == 0) continue;  // a source has no input queue
    fill.metric.push_back(sample(stage_labels(*stage), MetricType::Gauge, load(stage->queue_depth) / capacity));
  }
  families.push_back(std::move(fill));
  MetricFamily latency{"sluice_stage_latency_seconds",
                       "Chunk latency from its creation at the source to done in this stage.",
                       MetricType::Histogram,
                       {}};
  for (const StageMetrics* stage : stages) latency.metric.push_back(latency_histogram(*stage));
  families.push_back(std::move(latency));
  return families;
}

}  // namespace

std::string prometheus_text(const Pipeline& pipeline) {
  return prometheus::TextSerializer().Serialize(metric_families(pipeline));
}

}  // namespace sluice
