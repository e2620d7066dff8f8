// Progress lines, summary table and JSON report built from StageMetrics.
#include "pipeline/report.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

#include <spdlog/spdlog.h>

#include "pipeline/clock.hpp"
#include "pipeline/units.hpp"

namespace sluice {
namespace {

std::string printf_string(const char* format, auto... values) {
  std::array<char, 256> buffer{};
  std::snprintf(buffer.data(), buffer.size(), format, values...);
  return buffer.data();
}

std::string count_text(std::uint64_t value) {
  const auto number = static_cast<double>(value);
  if (number >= 1e12) return printf_string("%.2fT", number / 1e12);
  if (number >= 1e9) return printf_string("%.2fG", number / 1e9);
  if (number >= 1e6) return printf_string("%.2fM", number / 1e6);
  if (number >= 1e4) return printf_string("%.1fk", number / 1e3);
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
  if (rates.seconds > 0) {
    rates.bytes_per_second = static_cast<double>(rates.bytes) / rates.seconds;
    rates.samples_per_second = static_cast<double>(rates.samples) / rates.seconds;
    rates.busy_fraction = static_cast<double>(metrics.busy_ns.load()) / 1e9 / rates.seconds;
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
    lines.push_back(printf_string("%-10s %11s %9s Msps  samples %-8s  out %-9s  drops %-6s  queues %s",
                                  lane.front()->lane().c_str(), format_byte_rate(source.bytes_per_second).c_str(),
                                  printf_string("%.1f", source.samples_per_second / 1e6).c_str(),
                                  count_text(source.samples).c_str(), format_bytes(static_cast<double>(sink.bytes)).c_str(),
                                  count_text(drops).c_str(), queues.c_str()));
  }
  return lines;
}

std::string summary_table(const Pipeline& pipeline) {
  std::ostringstream out;
  out << printf_string("%-10s %-12s %-10s %10s %10s %9s %12s %8s %6s %9s %9s\n", "lane", "stage", "type", "GB/s", "Msamp/s",
                       "chunks", "bytes", "drops", "busy%", "lat p50", "lat p99");
  for (const auto& lane : pipeline.metrics_by_lane()) {
    for (const StageMetrics* stage : lane) {
      const StageRates rates = stage_rates(*stage);
      out << printf_string("%-10s %-12s %-10s %10.3f %10.2f %9llu %12s %8llu %6.1f %9s %9s\n", stage->lane().c_str(),
                           stage->stage().c_str(), stage->type().c_str(), rates.bytes_per_second / 1e9,
                           rates.samples_per_second / 1e6, static_cast<unsigned long long>(rates.chunks),
                           format_bytes(static_cast<double>(rates.bytes)).c_str(),
                           static_cast<unsigned long long>(stage->total_drops()), rates.busy_fraction * 100.0,
                           latency_text(stage->latency.percentile(0.5)).c_str(),
                           latency_text(stage->latency.percentile(0.99)).c_str());
      for (const auto& drop : stage->drops()) {
        if (drop.get() != 0) out << printf_string("%-10s   drops %-20s %llu\n", "", drop.name.c_str(), static_cast<unsigned long long>(drop.get()));
      }
      for (const auto& counter : stage->counters()) {
        out << printf_string("%-10s   %-26s %llu\n", "", counter.name.c_str(), static_cast<unsigned long long>(counter.get()));
      }
      for (const auto& note : stage->notes) out << printf_string("%-10s   note: %s\n", "", note.c_str());
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
  svg << printf_string(R"(<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">)",
                       kWidth, kHeight)
      << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"15\">" << pipeline.definition().settings.name
      << ": rate into each lane's last stage</text>\n";
  for (int tick = 0; tick <= 5; ++tick) {
    const double value = max_rate * tick / 5;
    const double y = kTop + plot_height - plot_height * tick / 5;
    svg << printf_string(R"(<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>)", kLeft, y, kLeft + plot_width, y)
        << printf_string(R"(<text x="%.1f" y="%.1f" text-anchor="end">%s</text>)", kLeft - 6, y + 4,
                         format_byte_rate(value).c_str())
        << "\n";
  }
  for (int tick = 0; tick <= 5; ++tick) {
    const double seconds = max_time * tick / 5;
    const double x = kLeft + plot_width * tick / 5;
    svg << printf_string(R"(<text x="%.1f" y="%.1f" text-anchor="middle">%.1f s</text>)", x, kTop + plot_height + 18, seconds)
        << "\n";
  }
  svg << printf_string(R"(<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>)", kLeft, kTop,
                       plot_width, plot_height)
      << "\n";
  for (std::size_t lane = 0; lane < series.size(); ++lane) {
    const char* colour = kColours[lane % kColours.size()];
    svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << colour << "\" points=\"";
    for (const auto& [seconds, rate] : series[lane]) {
      svg << printf_string("%.1f,%.1f ", kLeft + plot_width * seconds / max_time, kTop + plot_height - plot_height * rate / max_rate);
    }
    svg << "\"/>\n";
    const std::string label = lanes[lane].empty() ? "" : lanes[lane].front()->lane();
    svg << printf_string(R"(<rect x="%.1f" y="%.1f" width="14" height="4" fill="%s"/>)", kLeft + plot_width + 14,
                         kTop + 10 + 20.0 * static_cast<double>(lane), colour)
        << printf_string(R"(<text x="%.1f" y="%.1f">%s</text>)", kLeft + plot_width + 34, kTop + 16 + 20.0 * static_cast<double>(lane),
                         label.c_str())
        << "\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

ProgressPrinter::ProgressPrinter(const Pipeline& pipeline, bool terminal, double log_interval_seconds)
    : pipeline_(&pipeline), terminal_(terminal), log_interval_(log_interval_seconds) {}

void ProgressPrinter::tick() {
  const double now = pipeline_->elapsed_seconds();
  const double interval = terminal_ ? 0.25 : log_interval_;
  if (last_print_ >= 0 && now - last_print_ < interval) return;
  last_print_ = now;
  const auto lines = progress_lines(*pipeline_);
  if (terminal_) {
    std::string text;
    if (lines_on_screen_ > 0) text += "\x1b[" + std::to_string(lines_on_screen_) + "F";  // back to the first line
    for (const auto& line : lines) text += "\x1b[2K" + printf_string("[%7.1fs] ", now) + line + "\n";
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
    lines_on_screen_ = lines.size();
  } else {
    for (const auto& line : lines) spdlog::info("{}", line);
  }
}

void ProgressPrinter::finish() {
  last_print_ = -1;
  if (terminal_) tick();
}

}  // namespace sluice
