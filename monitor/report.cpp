// Progress lines, summary table and JSON report built from StageMetrics.
#include "monitor/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

#include "pipeline/clock.hpp"
#include "pipeline/log.hpp"
#include "pipeline/units.hpp"

namespace sluice {
namespace {

std::string count_text(std::uint64_t value) {
  const auto number = static_cast<double>(value);
  if (number >= 1e12) return fmt::format("{:.2f}T", number / 1e12);
  if (number >= 1e9) return fmt::format("{:.2f}G", number / 1e9);
  if (number >= 1e6) return fmt::format("{:.2f}M", number / 1e6);
  if (number >= 1e4) return fmt::format("{:.1f}k", number / 1e3);
  return std::to_string(value);
}

std::string latency_text(std::uint64_t nanoseconds) {
  if (nanoseconds == 0) return "-";
  return format_duration(std::chrono::nanoseconds(nanoseconds));
}

// A source's work is what it produced; every other stage's is what it consumed.
const FlowCounters& flow_of(const StageMetrics& metrics) {
  return metrics.queue_capacity.load() == 0 ? metrics.out : metrics.in;
}

// Where a lane runs: its GPU, that GPU's PCI bus id and NUMA node, and why placement chose it.
nlohmann::json gpu_json(const LaneGpu& gpu) {
  return {{"index", gpu.gpu}, {"pci_bus_id", gpu.pci_bus_id}, {"numa_node", gpu.numa_node}, {"reason", gpu.reason}};
}

}  // namespace

StageRates stage_rates(const StageMetrics& metrics) {
  StageRates rates;
  const std::uint64_t started = metrics.started_ns.load();
  std::uint64_t stopped = metrics.stopped_ns.load();
  if (started == 0) return rates;
  if (stopped == 0) stopped = monotonic_ns();
  rates.seconds = static_cast<double>(stopped - started) / 1e9;
  const FlowCounters& flow = flow_of(metrics);
  rates.bytes = flow.bytes.load();
  rates.chunks = flow.chunks.load();
  rates.samples = flow.samples.load();
  if (rates.seconds > 0) rates.busy_fraction = static_cast<double>(metrics.busy_ns.load()) / 1e9 / rates.seconds;
  // The rate over the time data flowed: from the first chunk to the last, counting the bytes
  // that arrived in that span (the first chunk was made before it began). With fewer than two
  // chunks there is no span, and the stage's whole active time stands in.
  const std::uint64_t first_ns = flow.first_ns.load();
  const std::uint64_t last_ns = flow.last_ns.load();
  const std::uint64_t first_bytes = flow.first_bytes.load();
  rates.busy_flowing_fraction = rates.busy_fraction;
  if (rates.chunks >= 2 && last_ns > first_ns && rates.bytes > first_bytes) {
    rates.flow_seconds = static_cast<double>(last_ns - first_ns) / 1e9;
    const double span = flow_work_span_ns(rates.chunks, first_ns, last_ns) / 1e9;
    rates.busy_flowing_fraction = std::min(1.0, static_cast<double>(metrics.busy_ns.load()) / 1e9 / span);
    rates.bytes_per_second = static_cast<double>(rates.bytes - first_bytes) / rates.flow_seconds;
    rates.samples_per_second =
        rates.bytes_per_second * static_cast<double>(rates.samples) / static_cast<double>(rates.bytes);
  } else if (rates.seconds > 0) {
    rates.flow_seconds = rates.seconds;
    rates.bytes_per_second = static_cast<double>(rates.bytes) / rates.seconds;
    rates.samples_per_second = static_cast<double>(rates.samples) / rates.seconds;
  }
  return rates;
}

std::optional<double> receive_ns_per_datagram(const StageMetrics& metrics) {
  const NamedCounter* cpu = metrics.find_counter("receive_thread_cpu_ns");
  const NamedCounter* spin = metrics.find_counter("receive_thread_spin_ns");
  const std::uint64_t datagrams = metrics.packets.load(std::memory_order_relaxed);
  if (cpu == nullptr || datagrams == 0) return std::nullopt;
  const std::uint64_t spun = spin == nullptr ? 0 : spin->get();
  const std::uint64_t worked = cpu->get() > spun ? cpu->get() - spun : 0;
  return static_cast<double>(worked) / static_cast<double>(datagrams);
}

namespace {

// A stage's first pinned receive thread, or none.
const CoreWait* receive_thread_of(const StageMetrics& stage) {
  for (const CoreWait& thread : stage.threads()) {
    if (thread.name() == "receive" && !thread.core_list().empty()) return &thread;
  }
  return nullptr;
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

}  // namespace

std::string receive_interrupts_text(std::uint64_t interrupts, double median, const std::string& top) {
  return fmt::format("; its receive core took {} interrupts over the run, the compared cores' median {:.0f}{}",
                     interrupts, median, top.empty() ? std::string() : ", the most from " + top);
}

std::vector<std::string> slower_receive_core_notes(const std::vector<const StageMetrics*>& stages) {
  std::vector<std::optional<double>> work;
  std::vector<double> known;
  for (const StageMetrics* stage : stages) {
    work.push_back(receive_ns_per_datagram(*stage));
    // A stage whose receive threads did little has its figure set by their start, not by the stream.
    if (work.back() && *work.back() * static_cast<double>(stage->packets.load()) < kLeastReceiveWorkNs)
      work.back().reset();
    if (work.back()) known.push_back(*work.back());
  }
  std::vector<std::string> notes(stages.size());
  if (known.size() < 3) return notes;
  const double median = median_of(known);
  if (median <= 0) return notes;
  // The compared stages' receive cores' interrupts: one taking far more is a cause to name.
  std::vector<double> interrupts;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const CoreWait* thread = work[i] ? receive_thread_of(*stages[i]) : nullptr;
    if (thread != nullptr) interrupts.push_back(static_cast<double>(thread->interrupts()));
  }
  const double interrupts_median = interrupts.empty() ? 0 : median_of(interrupts);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    if (!work[i] || *work[i] < kSlowerReceiveCore * median) continue;
    notes[i] = fmt::format(
        "its receive work, {:.2f} µs a datagram, is {:.2f}× the median of the run's {} udp stages with "
        "receive threads ({:.2f} µs): its receive core does the same work slower (a physical core shared with "
        "another vCPU or thread, interrupts on it, or its memory on another node)",
        *work[i] / 1e3, *work[i] / median, known.size(), median / 1e3);
    if (const CoreWait* thread = receive_thread_of(*stages[i]); thread != nullptr && !interrupts.empty())
      notes[i] += receive_interrupts_text(thread->interrupts(), interrupts_median, thread->top_interrupt_source());
  }
  return notes;
}

std::vector<std::string> progress_lines(const Pipeline& pipeline) {
  std::vector<std::string> lines;
  for (const auto& lane : pipeline.metrics_by_lane()) {
    if (lane.empty()) continue;
    const StageRates source = stage_rates(*lane.front());
    const StageRates sink = stage_rates(*lane.back());
    std::uint64_t drops = 0;
    std::uint64_t lost = 0;  // samples the lane never received (a source's gaps), as they happen
    std::string queues;
    for (const StageMetrics* stage : lane) {
      drops += stage->total_drops();
      lost += stage->lost_samples();
      if (stage->queue_capacity.load() != 0) {
        queues += (queues.empty() ? "" : " ") + std::to_string(stage->queue_depth.load()) + "/" +
                  std::to_string(stage->queue_capacity.load());
      }
    }
    lines.push_back(
        fmt::format("{:<10} {:>11} {:>9.1f} Msps  samples {:<8}  lost {:<7}  out {:<9}  drops {:<6}  queues {}",
                    lane.front()->lane(), format_byte_rate(source.bytes_per_second), source.samples_per_second / 1e6,
                    count_text(source.samples), count_text(lost), format_bytes(static_cast<double>(sink.bytes)),
                    count_text(drops), queues));
  }
  return lines;
}

std::string summary_table(const Pipeline& pipeline) {
  std::ostringstream out;
  // GB/s, Msamp/s and busy% are over "flow s", the time between a stage's first and last chunk
  // (busy% one chunk's time wider); the run's duration is on the first line, so a lane that
  // waited for its sender reads neither slow nor idle.
  out << fmt::format("run {:.2f} s\n", pipeline.elapsed_seconds());
  out << fmt::format("{:<10} {:<12} {:<10} {:>10} {:>10} {:>8} {:>9} {:>12} {:>8} {:>6} {:>9} {:>9}\n", "lane", "stage",
                     "type", "GB/s", "Msamp/s", "flow s", "chunks", "bytes", "drops", "busy%", "lat p50", "lat p99");
  const std::vector<std::string> slower = slower_receive_core_notes(pipeline.metrics());  // in lane order
  std::size_t index = 0;
  for (const auto& lane : pipeline.metrics_by_lane()) {
    for (const StageMetrics* stage : lane) {
      const StageRates rates = stage_rates(*stage);
      out << fmt::format("{:<10} {:<12} {:<10} {:>10.3f} {:>10.2f} {:>8.2f} {:>9} {:>12} {:>8} {:>6.1f} {:>9} {:>9}\n",
                         stage->lane(), stage->stage(), stage->type(), rates.bytes_per_second / 1e9,
                         rates.samples_per_second / 1e6, rates.flow_seconds, rates.chunks,
                         format_bytes(static_cast<double>(rates.bytes)), stage->total_drops(),
                         rates.busy_flowing_fraction * 100.0, latency_text(stage->latency.percentile(0.5)),
                         latency_text(stage->latency.percentile(0.99)));
      for (const auto& drop : stage->drops()) {
        if (drop.get() != 0) out << fmt::format("{:<10}   drops {:<20} {}\n", "", drop.name, drop.get());
      }
      for (const auto& counter : stage->counters())
        out << fmt::format("{:<10}   {:<26} {}\n", "", counter.name, counter.get());
      if (const std::uint64_t waits = stage->pool_waits.load(std::memory_order_relaxed); waits != 0) {
        out << fmt::format("{:<10}   {:<26} {} (longest {}, {} in all: downstream held every chunk)\n", "",
                           "pool waits", waits, latency_text(stage->pool_wait_max_ns.load(std::memory_order_relaxed)),
                           latency_text(stage->pool_wait_ns.load(std::memory_order_relaxed)));
      }
      for (const auto& note : stage->notes) out << fmt::format("{:<10}   note: {}\n", "", note);
      if (!slower[index].empty()) out << fmt::format("{:<10}   note: {}\n", "", slower[index]);
      ++index;
      for (const CoreWait& thread : stage->threads()) {
        if (std::string note = core_wait_note(thread, pipeline.core_sharers(thread)); !note.empty())
          out << fmt::format("{:<10}   note: {}\n", "", note);
        if (std::string note = core_steal_note(thread); !note.empty())
          out << fmt::format("{:<10}   note: {}\n", "", note);
      }
    }
  }
  for (const auto& failure : pipeline.failures()) {
    out << "FAILED lane " << failure.lane << ", stage " << failure.stage << " (" << failure.type
        << "): " << failure.message << "\n";
  }
  return out.str();
}

namespace {

// Where each of a stage's threads ran and what kept it from its cores.
nlohmann::json threads_json(const Pipeline& pipeline, const StageMetrics& stage) {
  nlohmann::json threads = nlohmann::json::array();
  for (const CoreWait& thread : stage.threads()) {
    threads.push_back({{"name", thread.name()},
                       {"cores", thread.cores()},
                       {"seconds", static_cast<double>(thread.lifetime_ns()) / 1e9},
                       {"core_wait_seconds", static_cast<double>(thread.waited_ns()) / 1e9},
                       {"core_wait_peak_seconds", static_cast<double>(thread.peak_window_ns()) / 1e9},
                       {"core_wait_window_seconds", static_cast<double>(CoreWait::kWindowNs) / 1e9},
                       {"preemptions", thread.preemptions()},
                       {"stolen_seconds", static_cast<double>(thread.stolen_ns()) / 1e9},
                       {"interrupts", thread.interrupts()},
                       {"interrupts_top", thread.top_interrupt_source()},
                       {"note", core_wait_note(thread, pipeline.core_sharers(thread))},
                       {"steal_note", core_steal_note(thread)}});
  }
  return threads;
}

// One stage's entry in the report: its rates, counts, queue, pool waits, latency, drops and
// counters, and where it ran.
nlohmann::json stage_report_json(const Pipeline& pipeline, const StageMetrics& stage, const StageDefinition& definition,
                                 const std::string& slower_note) {
  const StageRates rates = stage_rates(stage);
  std::vector<std::string> notes = stage.notes;
  if (!slower_note.empty()) notes.push_back(slower_note);
  const std::optional<double> receive_work = receive_ns_per_datagram(stage);
  nlohmann::json stage_json{
      {"name", stage.stage()},
      {"type", stage.type()},
      {"seconds", rates.seconds},
      {"flow_seconds", rates.flow_seconds},
      {"bytes_per_second", rates.bytes_per_second},
      {"samples_per_second", rates.samples_per_second},
      {"busy_fraction", rates.busy_fraction},
      {"busy_fraction_flowing", rates.busy_flowing_fraction},
      {"in",
       {{"bytes", stage.in.bytes.load()}, {"chunks", stage.in.chunks.load()}, {"samples", stage.in.samples.load()}}},
      {"out",
       {{"bytes", stage.out.bytes.load()}, {"chunks", stage.out.chunks.load()}, {"samples", stage.out.samples.load()}}},
      {"packets", stage.packets.load()},
      {"drops_total", stage.total_drops()},
      {"queue", {{"capacity", stage.queue_capacity.load()}, {"high_water", stage.queue_high_water.load()}}},
      {"pool_waits",
       {{"count", stage.pool_waits.load()},
        {"seconds", static_cast<double>(stage.pool_wait_ns.load()) / 1e9},
        {"longest_seconds", static_cast<double>(stage.pool_wait_max_ns.load()) / 1e9}}},
      {"latency_ns",
       {{"count", stage.latency.count()},
        {"p50", stage.latency.percentile(0.5)},
        {"p90", stage.latency.percentile(0.9)},
        {"p99", stage.latency.percentile(0.99)},
        {"p999", stage.latency.percentile(0.999)},
        {"max", stage.latency.max()}}},
      {"notes", notes},
      {"receive_ns_per_datagram", receive_work ? nlohmann::json(*receive_work) : nlohmann::json()},
      {"gpu", definition.cuda_device},
      {"cores", format_core_list(definition.cores)},
  };
  nlohmann::json drops = nlohmann::json::object();
  for (const auto& drop : stage.drops()) drops[drop.name] = drop.get();
  stage_json["drops"] = drops;
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& counter : stage.counters()) counters[counter.name] = counter.get();
  stage_json["counters"] = counters;
  stage_json["threads"] = threads_json(pipeline, stage);
  return stage_json;
}

nlohmann::json timeline_json(const Pipeline& pipeline) {
  nlohmann::json timeline = nlohmann::json::array();
  for (const auto& point : pipeline.timeline()) {
    timeline.push_back({{"seconds", point.seconds},
                        {"source_bytes", point.source_bytes},
                        {"sink_bytes", point.sink_bytes},
                        {"drops", point.drops},
                        {"lost_samples", point.lost_samples}});
  }
  return timeline;
}

}  // namespace

nlohmann::json report_json(const Pipeline& pipeline, int exit_code) {
  nlohmann::json report;
  report["sluice_version"] = SLUICE_VERSION;
  report["pipeline"] = pipeline.definition().settings.name;
  report["file"] = pipeline.definition().file;
  report["elapsed_seconds"] = pipeline.elapsed_seconds();
  report["exit_code"] = exit_code;
  report["failures"] = nlohmann::json::array();
  for (const auto& failure : pipeline.failures()) {
    report["failures"].push_back(
        {{"lane", failure.lane}, {"stage", failure.stage}, {"type", failure.type}, {"message", failure.message}});
  }
  report["timeline"] = timeline_json(pipeline);
  report["lanes"] = nlohmann::json::array();
  const auto lanes = pipeline.metrics_by_lane();
  const std::vector<std::string> slower = slower_receive_core_notes(pipeline.metrics());  // in lane order
  std::size_t index = 0;
  for (std::size_t lane_index = 0; lane_index < lanes.size(); ++lane_index) {
    const auto& lane = lanes[lane_index];
    const LaneDefinition& definition = pipeline.definition().lanes[lane_index];
    nlohmann::json lane_json;
    lane_json["name"] = lane.empty() ? "" : lane.front()->lane();
    lane_json["gpu"] = gpu_json(definition.placement);
    lane_json["stages"] = nlohmann::json::array();
    for (std::size_t stage_index = 0; stage_index < lane.size(); ++stage_index) {
      lane_json["stages"].push_back(
          stage_report_json(pipeline, *lane[stage_index], definition.stages[stage_index], slower[index++]));
    }
    report["lanes"].push_back(lane_json);
  }
  return report;
}

namespace {

// The plot's geometry: the picture, and the plotting area inside its margins.
struct PlotFrame {
  static constexpr double kWidth = 900, kHeight = 420, kLeft = 95, kRight = 160, kTop = 40, kBottom = 50;
  static constexpr double kPlotWidth = kWidth - kLeft - kRight;
  static constexpr double kPlotHeight = kHeight - kTop - kBottom;
  double max_rate = 1;
  double max_time = 1;
  [[nodiscard]] double x(double seconds) const { return kLeft + kPlotWidth * seconds / max_time; }
  [[nodiscard]] double y(double rate) const { return kTop + kPlotHeight - kPlotHeight * rate / max_rate; }
};

using RateSeries = std::vector<std::vector<std::pair<double, double>>>;  // per lane: (seconds, bytes/s)

// Rate of each lane's sink between consecutive timeline points; the highest goes to `max_rate`.
RateSeries sink_rates(const std::vector<Pipeline::TimelinePoint>& timeline, std::size_t lanes, double& max_rate) {
  RateSeries series(lanes);
  for (std::size_t i = 1; i < timeline.size(); ++i) {
    const double dt = timeline[i].seconds - timeline[i - 1].seconds;
    if (dt < 0.05) continue;  // the final sample can come right after the last periodic one
    for (std::size_t lane = 0; lane < lanes && lane < timeline[i].sink_bytes.size(); ++lane) {
      const double rate = static_cast<double>(timeline[i].sink_bytes[lane] - timeline[i - 1].sink_bytes[lane]) / dt;
      series[lane].emplace_back(timeline[i].seconds, rate);
      max_rate = std::max(max_rate, rate);
    }
  }
  return series;
}

// The frame, five rate ticks up the left and five time ticks along the bottom.
void plot_axes(std::ostringstream& svg, const PlotFrame& frame) {
  using F = PlotFrame;
  for (int tick = 0; tick <= 5; ++tick) {
    const double value = frame.max_rate * tick / 5;
    const double y = frame.y(value);
    svg << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)", F::kLeft, y,
                       F::kLeft + F::kPlotWidth, y)
        << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)", F::kLeft - 6, y + 4,
                       format_byte_rate(value))
        << "\n";
  }
  for (int tick = 0; tick <= 5; ++tick) {
    const double seconds = frame.max_time * tick / 5;
    svg << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{:.1f} s</text>)", frame.x(seconds),
                       F::kTop + F::kPlotHeight + 18, seconds)
        << "\n";
  }
  svg << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="none" stroke="#444"/>)",
                     F::kLeft, F::kTop, F::kPlotWidth, F::kPlotHeight)
      << "\n";
}

// One lane: its rate line, its legend entry, and a marker in its colour, in its own row along the
// plot's top, for every timeline interval in which its lost count grew (the count so far in its tooltip).
void plot_lane(std::ostringstream& svg, const PlotFrame& frame, const std::vector<Pipeline::TimelinePoint>& timeline,
               std::size_t lane, const std::vector<std::pair<double, double>>& rates, const std::string& label,
               const char* colour) {
  using F = PlotFrame;
  svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << colour << "\" points=\"";
  for (const auto& [seconds, rate] : rates) svg << fmt::format("{:.1f},{:.1f} ", frame.x(seconds), frame.y(rate));
  svg << "\"/>\n";
  const double row = static_cast<double>(lane);
  svg << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="14" height="4" fill="{}"/>)", F::kLeft + F::kPlotWidth + 14,
                     F::kTop + 10 + 20.0 * row, colour)
      << fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", F::kLeft + F::kPlotWidth + 34,
                     F::kTop + 16 + 20.0 * row, label)
      << "\n";
  for (std::size_t i = 0; i < timeline.size(); ++i) {
    const auto& now = timeline[i].lost_samples;
    const std::uint64_t before =
        i == 0 || lane >= timeline[i - 1].lost_samples.size() ? 0 : timeline[i - 1].lost_samples[lane];
    if (lane >= now.size() || now[lane] <= before) continue;
    svg << fmt::format(
               R"(<path d="M{:.1f},{:.1f} l-5,-9 h10 z" fill="{}"><title>{}: {} samples lost by {:.1f} s</title></path>)",
               frame.x(timeline[i].seconds), F::kTop + 12 + 10.0 * row, colour, label, count_text(now[lane]),
               timeline[i].seconds)
        << "\n";
  }
}

}  // namespace

std::string rate_plot_svg(const Pipeline& pipeline) {
  using F = PlotFrame;
  const auto& timeline = pipeline.timeline();
  const auto lanes = pipeline.metrics_by_lane();
  PlotFrame frame;
  frame.max_rate = 0;
  frame.max_time = timeline.empty() ? 1 : std::max(timeline.back().seconds, 1e-3);
  const RateSeries series = sink_rates(timeline, lanes.size(), frame.max_rate);
  if (frame.max_rate <= 0) frame.max_rate = 1;
  const bool any_lost =
      !timeline.empty() && std::any_of(timeline.back().lost_samples.begin(), timeline.back().lost_samples.end(),
                                       [](std::uint64_t lost) { return lost != 0; });
  frame.max_rate *= any_lost ? 1.1 + 0.06 * static_cast<double>(lanes.size()) : 1.1;  // room for the loss markers' rows
  static constexpr std::array<const char*, 8> kColours{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  std::ostringstream svg;
  svg << fmt::format(
             R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" font-family="sans-serif" font-size="12">)",
             F::kWidth, F::kHeight)
      << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << F::kLeft << "\" y=\"22\" font-size=\"15\">" << pipeline.definition().settings.name
      << ": rate into each lane's last stage</text>\n";
  plot_axes(svg, frame);
  for (std::size_t lane = 0; lane < series.size(); ++lane) {
    const std::string label = lanes[lane].empty() ? "" : lanes[lane].front()->lane();
    plot_lane(svg, frame, timeline, lane, series[lane], label, kColours[lane % kColours.size()]);
  }
  if (any_lost) {
    const double y = F::kTop + 16 + 20.0 * static_cast<double>(series.size()) + 10;
    svg << fmt::format(R"(<path d="M{:.1f},{:.1f} l-5,-9 h10 z" fill="#444"/>)", F::kLeft + F::kPlotWidth + 21, y + 2)
        << fmt::format(R"(<text x="{:.1f}" y="{:.1f}">samples lost</text>)", F::kLeft + F::kPlotWidth + 34, y) << "\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

namespace {
// Each of a stage's threads: its cores, how long it has been kept off them so far, and the
// hypervisor's steal on them.
nlohmann::json live_threads_json(const StageMetrics& stage) {
  nlohmann::json threads = nlohmann::json::array();
  for (const CoreWait& thread : stage.threads()) {
    threads.push_back({{"name", thread.name()},
                       {"cores", thread.cores()},
                       {"core_wait_ns", thread.waited_ns()},
                       {"preemptions", thread.preemptions()},
                       {"stolen_ns", thread.stolen_ns()}});
  }
  return threads;
}
}  // namespace

nlohmann::json live_status_json(const Pipeline& pipeline) {
  nlohmann::json status;
  status["pipeline"] = pipeline.definition().settings.name;
  status["time_ns"] = monotonic_ns();  // the page's rates are differences over this clock, not the browser's
  status["lanes"] = nlohmann::json::array();
  const auto lanes = pipeline.metrics_by_lane();
  for (std::size_t lane_index = 0; lane_index < lanes.size(); ++lane_index) {
    const auto& lane = lanes[lane_index];
    nlohmann::json lane_json{{"name", lane.empty() ? "" : lane.front()->lane()},
                             {"gpu", gpu_json(pipeline.definition().lanes[lane_index].placement)},
                             {"stages", nlohmann::json::array()}};
    for (const StageMetrics* stage : lane) {
      const StageRates rates = stage_rates(*stage);
      nlohmann::json drops = nlohmann::json::object();
      for (const auto& drop : stage->drops()) drops[drop.name] = drop.get();
      lane_json["stages"].push_back({
          {"name", stage->stage()},
          {"type", stage->type()},
          {"running", stage->started_ns.load(std::memory_order_relaxed) != 0 &&
                          stage->stopped_ns.load(std::memory_order_relaxed) == 0},
          {"bytes", rates.bytes},
          {"samples", rates.samples},
          {"chunks", rates.chunks},
          {"bytes_per_second", rates.bytes_per_second},
          {"samples_per_second", rates.samples_per_second},
          {"busy_fraction", rates.busy_fraction},
          {"busy_fraction_flowing", rates.busy_flowing_fraction},
          {"queue_depth", stage->queue_depth.load(std::memory_order_relaxed)},
          {"queue_capacity", stage->queue_capacity.load(std::memory_order_relaxed)},
          {"drops", drops},
          {"drops_total", stage->total_drops()},
          {"lost_samples", stage->lost_samples()},
          {"latency_p50_ns", stage->latency.percentile(0.5)},
          {"latency_p99_ns", stage->latency.percentile(0.99)},
          {"threads", live_threads_json(*stage)},
      });
    }
    status["lanes"].push_back(lane_json);
  }
  return status;
}

nlohmann::json live_spectra_json(const Pipeline& pipeline, std::size_t max_points) {
  nlohmann::json spectra = nlohmann::json::array();
  for (const StageMetrics* stage : pipeline.metrics()) {
    const std::optional<SpectrumSnapshot::Copy> copy = stage->spectrum.read();
    if (!copy || copy->decibels.empty()) continue;
    const std::size_t bins = copy->decibels.size();
    const std::size_t merge = (bins + max_points - 1) / std::max<std::size_t>(max_points, 1);
    std::vector<float> points;
    for (std::size_t first = 0; first < bins; first += merge) {
      points.push_back(
          *std::max_element(copy->decibels.begin() + static_cast<std::ptrdiff_t>(first),
                            copy->decibels.begin() + static_cast<std::ptrdiff_t>(std::min(first + merge, bins))));
    }
    // Bin k of an fftshifted row sits at centre + (k - bins/2) · rate / bins; a merged point at its first bin.
    const double bin_hz = copy->sample_rate > 0 ? copy->sample_rate / static_cast<double>(bins) : 0;
    spectra.push_back({{"lane", stage->lane()},
                       {"stage", stage->stage()},
                       {"sequence", copy->sequence},
                       {"row", copy->row},
                       {"bins", bins},
                       {"first_hz", copy->center_frequency - static_cast<double>(bins / 2) * bin_hz},
                       {"step_hz", bin_hz * static_cast<double>(merge)},
                       {"bin_hz", bin_hz},
                       {"decibels", points}});
  }
  return spectra;
}

ProgressPrinter::ProgressPrinter(const Pipeline& pipeline, ProgressOutput output, double log_interval_seconds)
    : pipeline_(&pipeline), output_(output), log_interval_(log_interval_seconds) {}

void ProgressPrinter::tick() {
  if (output_ == ProgressOutput::none) return;
  const bool terminal = output_ == ProgressOutput::terminal;
  const double now = pipeline_->elapsed_seconds();
  const double interval = terminal ? 0.25 : log_interval_;
  if (last_print_ >= 0 && now - last_print_ < interval) return;
  last_print_ = now;
  const auto lines = progress_lines(*pipeline_);
  if (terminal) {
    std::string text;
    if (lines_on_screen_ > 0) text += "\x1b[" + std::to_string(lines_on_screen_) + "F";  // back to the first line
    for (const auto& line : lines) text += fmt::format("\x1b[2K[{:7.1f}s] {}\n", now, line);
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
    lines_on_screen_ = lines.size();
  } else {
    for (const auto& line : lines) log::info("{}", line);
  }
}

void ProgressPrinter::finish() {
  last_print_ = -1;
  if (output_ == ProgressOutput::terminal) tick();
}

}  // namespace sluice
