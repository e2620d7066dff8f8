// `sluice capture export`: a time range of one lane copied into a new SigMF recording. The
// range is cut in stream indices, so a hole in the source stays a hole (a new capture
// segment and its gap annotation) and every sample keeps its stream index and datetime.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "recorder/capture_tools.hpp"
#include "recorder/sigmf.hpp"

namespace sluice::recorder {
namespace {

// One run of output samples, contiguous in the stream.
struct Piece {
  std::uint64_t global_index = 0;
  std::uint64_t count = 0;
  std::uint64_t output_start = 0;  // samples into the new data file
  Timestamp time;                  // of its first sample
};

nlohmann::json read_global(const std::string& base) {
  std::ifstream in(base + std::string(kMetaSuffix));
  nlohmann::json meta = nlohmann::json::parse(in, nullptr, false);
  if (meta.is_discarded() || !meta.contains("global"))
    throw std::runtime_error(base + std::string(kMetaSuffix) + " is not SigMF metadata");
  return meta["global"];
}

// The stream index after the lane's last sample or hole: a range is cut to it, so samples
// after the end of the recording are never counted as lost.
std::uint64_t lane_end(const CaptureLane& lane) {
  std::uint64_t end = lane.segments.back().global_index + lane.segments.back().sample_count;
  for (const auto& gap : lane.gaps) end = std::max(end, gap.global_index + gap.length);
  return end;
}

// Copies the samples of [report.first_index, report.end_index) into `data_path`, one piece per
// run that is contiguous in the stream; counts them into `report`.
std::vector<Piece> copy_samples(const CaptureLane& lane, const std::string& data_path, double values_per_second,
                                ExportReport& report) {
  std::vector<Piece> pieces;
  std::ofstream data(data_path, std::ios::binary | std::ios::trunc);
  if (!data) throw std::runtime_error("cannot create " + data_path);
  std::vector<std::byte> buffer(std::size_t{4} << 20);
  const std::uint64_t per_read = buffer.size() / lane.sample_bytes;
  for (const auto& segment : lane.segments) {
    const std::uint64_t begin = std::max(segment.global_index, report.first_index);
    const std::uint64_t end = std::min(segment.global_index + segment.sample_count, report.end_index);
    if (begin >= end) continue;
    if (pieces.empty() || pieces.back().global_index + pieces.back().count != begin) {
      pieces.push_back({begin, 0, report.samples, time_of_sample(segment, begin, values_per_second)});
    }
    for (std::uint64_t index = begin; index < end;) {
      const std::uint64_t count = std::min(per_read, end - index);
      if (read_segment(lane, segment, index - segment.global_index, count, buffer.data()) != count) {
        throw std::runtime_error("short read from " + segment.data_path);
      }
      data.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(count * lane.sample_bytes));
      index += count;
      pieces.back().count += count;
      report.samples += count;
    }
  }
  if (!data.flush()) throw std::runtime_error("cannot write " + data_path);
  return pieces;
}

// The gap annotations of the range, written as the recorder writes them: each gap of the
// source cut to [first_index, end_index), so a range that starts or ends inside a hole has
// that part of the hole as its leading or trailing gap. Counts them into `report`.
nlohmann::json gap_annotations(const CaptureLane& lane, const std::vector<Piece>& pieces, ExportReport& report) {
  // Where a stream index falls in the new file (a hole: where the next recorded sample went).
  auto output_position = [&](std::uint64_t index) {
    std::uint64_t position = 0;
    for (const auto& piece : pieces) {
      if (index < piece.global_index) break;
      position = piece.output_start + std::min(index - piece.global_index, piece.count);
    }
    return position;
  };
  nlohmann::json annotations = nlohmann::json::array();
  for (const auto& gap : lane.gaps) {
    const std::uint64_t first = std::max(gap.global_index, report.first_index);
    const std::uint64_t end = std::min(gap.global_index + gap.length, report.end_index);
    if (first >= end) continue;
    const std::uint64_t length = end - first;
    std::string range = " (stream samples " + std::to_string(first) + " to " + std::to_string(end - 1);
    if (length != gap.length) {
      range += ": the part inside the exported range of the source's gap of " + std::to_string(gap.length) +
               " at stream samples " + std::to_string(gap.global_index) + " to " +
               std::to_string(gap.global_index + gap.length - 1);
    }
    range += ")";
    nlohmann::json annotation{{"core:label", "gap"}, {"core:generator", "sluice"}, {"sluice:global_index", first}};
    const std::uint64_t start = output_position(first);
    if (gap.in_data) {
      annotation["core:sample_start"] = start;
      annotation["core:sample_count"] = std::max(output_position(end), start + 1) - start;
      annotation["core:comment"] = std::to_string(length) + " values computed from input with lost samples" + range +
                                   ": present in the data file, marked";
      annotation["sluice:in_data"] = true;
      annotation["sluice:marked_values"] = length;
      report.marked_values += length;
    } else {
      annotation["core:sample_start"] = start;
      annotation["core:sample_count"] = 0;
      annotation["core:comment"] = std::to_string(length) + " samples lost" + range +
                                   ": absent from the data file, which goes on at file sample " + std::to_string(start);
      annotation["sluice:lost_samples"] = length;
      report.lost_samples += length;
    }
    annotations.push_back(std::move(annotation));
    ++report.gaps;
  }
  // SigMF wants annotations ordered by core:sample_start.
  std::stable_sort(annotations.begin(), annotations.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["core:sample_start"].get<std::uint64_t>() < b["core:sample_start"].get<std::uint64_t>();
  });
  return annotations;
}

// The source's global object, less what describes the source alone; its totals are the slice's.
nlohmann::json export_global(const CaptureLane& lane, double from_seconds, double to_seconds,
                             const ExportReport& report) {
  nlohmann::json global = read_global(lane.recordings.front());
  for (const char* key : {"core:sha512", "sluice:stripe", "sluice:stripes", "sluice:segment", "sluice:start_time",
                          "sluice:marked_values"}) {
    global.erase(key);
  }
  global["sluice:complete"] = true;
  global["sluice:first_sample"] = report.first_index;
  global["sluice:lost_samples"] = report.lost_samples;
  if (report.marked_values > 0) global["sluice:marked_values"] = report.marked_values;
  global["core:description"] = global.value("core:description", std::string()) + "; exported from " +
                               lane.recordings.front() + ", seconds " + std::to_string(from_seconds) + " to " +
                               std::to_string(to_seconds);
  return global;
}

// One capture per piece copied, at its place in the exported file.
nlohmann::json export_captures(const CaptureLane& lane, const std::vector<Piece>& pieces) {
  nlohmann::json captures = nlohmann::json::array();
  for (const auto& piece : pieces) {
    nlohmann::json capture{{"core:sample_start", piece.output_start},
                           {"core:global_index", piece.global_index},
                           {"core:frequency", lane.frequency}};
    if (piece.time.valid) capture["core:datetime"] = iso8601(piece.time);
    captures.push_back(capture);
  }
  return captures;
}

}  // namespace

ExportReport export_capture(const CaptureLane& lane, double from_seconds, double to_seconds,
                            const std::string& output_base) {
  if (lane.segments.empty()) throw std::runtime_error("lane " + lane.name + " holds no samples");
  if (lane.sample_rate <= 0)
    throw std::runtime_error("lane " + lane.name + " has no sample rate: times cannot be placed");
  if (!(from_seconds >= 0) || !(to_seconds > from_seconds)) {
    throw std::runtime_error("the range must satisfy 0 <= --from < --to (got " + std::to_string(from_seconds) + " to " +
                             std::to_string(to_seconds) + " s)");
  }
  const std::string data_path = output_base + std::string(kDataSuffix);
  const std::string meta_path = output_base + std::string(kMetaSuffix);
  if (std::filesystem::exists(data_path) || std::filesystem::exists(meta_path)) {
    throw std::runtime_error(output_base + ": a capture of that name exists (choose another name or remove it)");
  }
  // Spectra: a value's time is its row's; core:sample_rate counts values (fft_size per row).
  const std::uint64_t unit = lane.fft_size > 0 ? lane.fft_size : 1;
  const double units_per_second = lane.sample_rate / static_cast<double>(unit);
  const double values_per_second = units_per_second * static_cast<double>(unit);
  const std::uint64_t origin = lane.segments.front().global_index;
  ExportReport report;
  report.base = output_base;
  report.data_path = data_path;
  report.meta_path = meta_path;
  report.first_index = origin + static_cast<std::uint64_t>(std::ceil(from_seconds * units_per_second - 1e-9)) * unit;
  report.end_index = std::min(
      lane_end(lane), origin + static_cast<std::uint64_t>(std::ceil(to_seconds * units_per_second - 1e-9)) * unit);
  if (report.first_index >= report.end_index) {
    throw std::runtime_error("the range starts at stream sample " + std::to_string(report.first_index) +
                             ", after the end of lane " + lane.name + " (stream sample " +
                             std::to_string(lane_end(lane) - 1) + ")");
  }

  const std::vector<Piece> pieces = copy_samples(lane, data_path, values_per_second, report);
  if (pieces.empty()) {
    std::filesystem::remove(data_path);
    throw std::runtime_error("nothing was recorded in stream samples " + std::to_string(report.first_index) + " to " +
                             std::to_string(report.end_index - 1) + " of lane " + lane.name +
                             " (the range lies in a hole)");
  }
  const nlohmann::json annotations = gap_annotations(lane, pieces, report);

  const nlohmann::json global = export_global(lane, from_seconds, to_seconds, report);
  const nlohmann::json captures = export_captures(lane, pieces);
  report.segments = pieces.size();
  write_file_durably(
      meta_path,
      nlohmann::json{{"global", global}, {"captures", captures}, {"annotations", annotations}}.dump(2) + "\n");
  return report;
}

}  // namespace sluice::recorder
