// Progress lines, summary table and JSON report built from StageMetrics.
#include "pipeline/report.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pipeline/clock.hpp"
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
  if (rates.chunks >= 2 && last_ns > first_ns && rates.bytes > first_bytes) {
    rates.flow_seconds = static_cast<double>(last_ns - first_ns) / 1e9;
    rates.bytes_per_second = static_cast<double>(rates.bytes - first_bytes) / rates.flow_seconds;
    rates.samples_per_second = rates.bytes_per_second * static_cast<double>(rates.samples) / static_cast<double>(rates.bytes);
  } else if (rates.seconds > 0) {
    rates.flow_seconds = rates.seconds;
    rates.bytes_per_second = static_cast<double>(rates.bytes) / rates.seconds;
    rates.samples_per_second = static_cast<double>(rates.samples) / rates.seconds;
  }
  return rates;
}

std::vector<std::string> progress_lines(const Pipeline& pipeline) {
  std::vector<std::string> lines;
  for (const auto& lane : pipeline.metrics_by_lane()) {
    if (lane.empty()) continue;
    const StageRates source = stage_rates(*lane.front());
    const StageRates sink = stage_rates(*lane.back());
    std::uint64_t drops = 0;
    std::string queues;
    for (const StageMetrics* stage : lane) {
      drops += stage->total_drops();
      if (stage->queue_capacity.load() != 0) {
        queues += (queues.empty() ? "" : " ") + std::to_string(stage->queue_depth.load()) + "/" +
                  std::to_string(stage->queue_capacity.load());
      }
    }
    lines.push_back(fmt::format("{:<10} {:>11} {:>9.1f} Msps  samples {:<8}  out {:<9}  drops {:<6}  queues {}",
                                lane.front()->lane(), format_byte_rate(source.bytes_per_second),
                                source.samples_per_second / 1e6, count_text(source.samples),
                                format_bytes(static_cast<double>(sink.bytes)), count_text(drops), queues));
  }
  return lines;
}

std::string summary_table(const Pipeline& pipeline) {
  std::ostringstream out;
  // GB/s and Msamp/s are over "flow s", the time between a stage's first and last chunk; the
  // run's duration is on the first line, so a lane that waited for its sender does not read slow.
  out << fmt::format("run {:.2f} s\n", pipeline.elapsed_seconds());
  out << fmt::format("{:<10} {:<12} {:<10} {:>10} {:>10} {:>8} {:>9} {:>12} {:>8} {:>6} {:>9} {:>9}\n", "lane", "stage", "type",
                     "GB/s", "Msamp/s", "flow s", "chunks", "bytes", "drops", "busy%", "lat p50", "lat p99");
  for (const auto& lane : pipeline.metrics_by_lane()) {
    for (const StageMetrics* stage : lane) {
      const StageRates rates = stage_rates(*stage);
      out << fmt::format("{:<10} {:<12} {:<10} {:>10.3f} {:>10.2f} {:>8.2f} {:>9} {:>12} {:>8} {:>6.1f} {:>9} {:>9}\n",
                         stage->lane(), stage->stage(), stage->type(), rates.bytes_per_second / 1e9,
                         rates.samples_per_second / 1e6, rates.flow_seconds, rates.chunks,
                         format_bytes(static_cast<double>(rates.bytes)), stage->total_drops(), rates.busy_fraction * 100.0,
                         latency_text(stage->latency.percentile(0.5)), latency_text(stage->latency.percentile(0.99)));
      for (const auto& drop : stage->drops()) {
        if (drop.get() != 0) out << fmt::format("{:<10}   drops {:<20} {}\n", "", drop.name, drop.get());
      }
      for (const auto& counter : stage->counters()) out << fmt::format("{:<10}   {:<26} {}\n", "", counter.name, counter.get());
      for (const auto& note : stage->notes) out << fmt::format("{:<10}   note: {}\n", "", note);
    }
  }
  for (const auto& failure : pipeline.failures()) {
    out << "FAILED lane " << failure.lane << ", stage " << failure.stage << " (" << failure.type << "): " << failure.message << "\n";
  }
  return out.str();
}

nlohmann::json report_json(const Pipeline& pipeline, int exit_code) {
  nlohmann::json report;
  report["sluice_version"] = SLUICE_VERSION;
  report["pipeline"] = pipeline.definition().settings.name;
  report["file"] = pipeline.definition().file;
  report["elapsed_seconds"] = pipeline.elapsed_seconds();
  report["exit_code"] = exit_code;
  report["failures"] = nlohmann::json::array();
  for (const auto& failure : pipeline.failures()) {
    report["failures"].push_back({{"lane", failure.lane}, {"stage", failure.stage}, {"type", failure.type}, {"message", failure.message}});
  }
  nlohmann::json timeline = nlohmann::json::array();
  for (const auto& point : pipeline.timeline()) {
    timeline.push_back({{"seconds", point.seconds}, {"source_bytes", point.source_bytes}, {"sink_bytes", point.sink_bytes},
                        {"drops", point.drops}});
  }
  report["timeline"] = timeline;
  report["lanes"] = nlohmann::json::array();
  for (const auto& lane : pipeline.metrics_by_lane()) {
    nlohmann::json lane_json;
    lane_json["name"] = lane.empty() ? "" : lane.front()->lane();
    lane_json["stages"] = nlohmann::json::array();
    for (const StageMetrics* stage : lane) {
      const StageRates rates = stage_rates(*stage);
      nlohmann::json stage_json{
          {"name", stage->stage()},
          {"type", stage->type()},
          {"seconds", rates.seconds},
          {"flow_seconds", rates.flow_seconds},
          {"bytes_per_second", rates.bytes_per_second},
          {"samples_per_second", rates.samples_per_second},
          {"busy_fraction", rates.busy_fraction},
          {"in", {{"bytes", stage->in.bytes.load()}, {"chunks", stage->in.chunks.load()}, {"samples", stage->in.samples.load()}}},
          {"out", {{"bytes", stage->out.bytes.load()}, {"chunks", stage->out.chunks.load()}, {"samples", stage->out.samples.load()}}},
          {"packets", stage->packets.load()},
          {"drops_total", stage->total_drops()},
          {"queue", {{"capacity", stage->queue_capacity.load()}, {"high_water", stage->queue_high_water.load()}}},
          {"latency_ns",
           {{"count", stage->latency.count()},
            {"p50", stage->latency.percentile(0.5)},
            {"p90", stage->latency.percentile(0.9)},
            {"p99", stage->latency.percentile(0.99)},
            {"p999", stage->latency.percentile(0.999)},
            {"max", stage->latency.max()}}},
          {"notes", stage->notes},
      };
      nlohmann::json drops = nlohmann::json::object();
      for (const auto& drop : stage->drops()) drops[drop.name] = drop.get();
      stage_json["drops"] = drops;
      nlohmann::json counters = nlohmann::json::object();
      for (const auto& counter : stage->counters()) counters[counter.name] = counter.get();
      stage_json["counters"] = counters;
      lane_json["stages"].push_back(stage_json);
    }
    report["lanes"].push_back(lane_json);
  }
  return report;
}

std::string rate_plot_svg(const Pipeline& pipeline) {
  const auto& timeline = pipeline.timeline();
  const auto lanes = pipeline.metrics_by_lane();
  constexpr double kWidth = 900, kHeight = 420, kLeft = 95, kRight = 160, kTop = 40, kBottom = 50;
  const double plot_width = kWidth - kLeft - kRight;
  const double plot_height = kHeight - kTop - kBottom;
  // Rate of each lane's sink between consecutive samples.
  std::vector<std::vector<std::pair<double, double>>> series(lanes.size());
  double max_rate = 0;
  double max_time = timeline.empty() ? 1 : std::max(timeline.back().seconds, 1e-3);
  for (std::size_t i = 1; i < timeline.size(); ++i) {
    const double dt = timeline[i].seconds - timeline[i - 1].seconds;
    if (dt < 0.05) continue;  // the final sample can come right after the last periodic one
    for (std::size_t lane = 0; lane < lanes.size() && lane < timeline[i].sink_bytes.size(); ++lane) {
      const double rate = static_cast<double>(timeline[i].sink_bytes[lane] - timeline[i - 1].sink_bytes[lane]) / dt;
      series[lane].emplace_back(timeline[i].seconds, rate);
      max_rate = std::max(max_rate, rate);
    }
  }
  if (max_rate <= 0) max_rate = 1;
  max_rate *= 1.1;
  static constexpr std::array<const char*, 8> kColours{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  std::ostringstream svg;
  svg << fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" font-family="sans-serif" font-size="12">)",
                     kWidth, kHeight)
      << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"15\">" << pipeline.definition().settings.name
      << ": rate into each lane's last stage</text>\n";
  for (int tick = 0; tick <= 5; ++tick) {
    const double value = max_rate * tick / 5;
    const double y = kTop + plot_height - plot_height * tick / 5;
    svg << fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#ddd"/>)", kLeft, y, kLeft + plot_width, y)
        << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)", kLeft - 6, y + 4, format_byte_rate(value))
        << "\n";
  }
  for (int tick = 0; tick <= 5; ++tick) {
    const double seconds = max_time * tick / 5;
    const double x = kLeft + plot_width * tick / 5;
    svg << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{:.1f} s</text>)", x, kTop + plot_height + 18, seconds)
        << "\n";
  }
  svg << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="none" stroke="#444"/>)", kLeft, kTop,
                     plot_width, plot_height)
      << "\n";
  for (std::size_t lane = 0; lane < series.size(); ++lane) {
    const char* colour = kColours[lane % kColours.size()];
    svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << colour << "\" points=\"";
    for (const auto& [seconds, rate] : series[lane]) {
      svg << fmt::format("{:.1f},{:.1f} ", kLeft + plot_width * seconds / max_time, kTop + plot_height - plot_height * rate / max_rate);
    }
    svg << "\"/>\n";
    const std::string label = lanes[lane].empty() ? "" : lanes[lane].front()->lane();
    svg << fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="14" height="4" fill="{}"/>)", kLeft + plot_width + 14,
                       kTop + 10 + 20.0 * static_cast<double>(lane), colour)
        << fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", kLeft + plot_width + 34, kTop + 16 + 20.0 * static_cast<double>(lane),
                       label)
        << "\n";
  }
  svg << "</svg>\n";
  return svg.str();
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
    for (const auto& line : lines) spdlog::info("{}", line);
  }
}

void ProgressPrinter::finish() {
  last_print_ = -1;
  if (output_ == ProgressOutput::terminal) tick();
}

}  // namespace sluice
