// `sluice capture info|repair|plot|export` and `sluice play`.
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "monitor/report.hpp"
#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/units.hpp"
#include "recorder/capture_reader.hpp"
#include "recorder/capture_tools.hpp"
#include "recorder/sigmf.hpp"

namespace sluice::cli {
namespace {

struct PlayOptions {
  std::string capture;
  bool fast = false;
  bool loop = false;
  bool no_fft = false;
  std::vector<std::string> overrides;
  RunOutputs outputs;
};

int capture_info(const std::string& path) {
  const recorder::Capture capture = recorder::open_capture(path);
  std::cout << recorder::describe_capture(capture);
  if (!capture.unlisted.empty()) return kExitFailure;
  for (const auto& lane : capture.lanes) {
    if (!lane.complete || !lane.journals.empty()) return kExitFailure;  // scripts can tell a cut capture
  }
  return kExitOk;
}

int capture_repair(const std::string& path, bool restore_replaced) {
  const recorder::RepairReport report = recorder::repair_capture(path, restore_replaced);
  if (report.repaired.empty() && report.listed.empty() && report.removed.empty()) {
    std::cout << path << ": nothing to repair (no journal left: the capture was finished)\n";
  }
  for (const auto& line : report.lines) std::cout << "repaired " << line << "\n";
  for (const auto& line : report.replaced_lines) std::cout << line << "\n";
  return kExitOk;
}

// Plot, export and play read a collection's unlisted recordings too: said, so that the capture is
// repaired before other readers (which see only what the collection lists) are given it.
void note_unlisted(const recorder::Capture& capture) {
  if (capture.unlisted.empty()) return;
  std::cerr << "note: " << capture.unlisted.size()
            << " recording(s) of this capture are on disk but not in its collection (the recorder stopped before "
               "listing them); they are read here too: run `sluice capture repair "
            << capture.path << "` to list them\n";
}

struct PlotOptions {
  std::string capture;
  std::string output;
  std::string lane;
  std::size_t fft_size = 1024;
  std::size_t rows = 300;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<const recorder::CaptureLane*> chosen_lanes(const recorder::Capture& capture, const std::string& name) {
  std::vector<const recorder::CaptureLane*> lanes;
  for (const auto& lane : capture.lanes) {
    if (name.empty() || lane.name == name) lanes.push_back(&lane);
  }
  if (lanes.empty()) {
    std::string names;
    for (const auto& lane : capture.lanes) names += (names.empty() ? "" : ", ") + lane.name;
    throw std::runtime_error("no lane '" + name + "' in " + capture.path + " (lanes: " + names + ")");
  }
  return lanes;
}

int capture_plot(const PlotOptions& options) {
  const recorder::Capture capture = recorder::open_capture(options.capture);
  note_unlisted(capture);
  std::string output = options.output;
  if (output.empty()) output = recorder::strip_capture_suffix(options.capture) + "-plot.svg";
  const bool png = ends_with(output, ".png");
  if (!png && !ends_with(output, ".svg")) {
    std::cerr << "sluice capture plot: -o " << output << ": the picture is written as .svg or .png\n";
    return kExitUsage;
  }
  std::vector<recorder::CaptureSpectrum> spectra;
  for (const auto* lane : chosen_lanes(capture, options.lane)) {
    spectra.push_back(recorder::capture_spectrum(*lane, options.fft_size, options.rows));
    if (png) break;  // one spectrogram per PNG: the first lane, or --lane
  }
  std::ofstream file(output, std::ios::binary | std::ios::trunc);
  file << (png ? recorder::spectrogram_png(spectra.front()) : recorder::capture_plot_svg(capture.path, spectra));
  if (!file.flush()) {
    std::cerr << "sluice capture plot: cannot write " << output << "\n";
    return kExitFailure;
  }
  std::cout << "wrote " << output << "\n";
  for (const auto& spectrum : spectra) {
    const std::size_t peak = spectrum.peak_bin();
    std::cout << "  lane " << spectrum.lane << ": " << spectrum.available
              << (spectrum.from_spectra ? " recorded rows, " : " FFT frames, ") << spectrum.frames << " averaged, peak "
              << format_frequency(spectrum.frequency_of(peak)) << " (" << spectrum.frequency_of(peak) << " Hz) at "
              << spectrum.average_db[peak] << " dB\n";
  }
  return kExitOk;
}

struct ExportOptions {
  std::string capture;
  std::string output;
  std::string lane;
  std::string from;
  std::string to;
};

// "1.5s", "250ms" (from the lane's first sample) or an ISO-8601 UTC time.
double seconds_into(const recorder::CaptureLane& lane, const std::string& text, const char* option) {
  if (auto duration = parse_duration(text)) return std::chrono::duration<double>(*duration).count();
  if (auto time = recorder::parse_iso8601(text)) {
    const Timestamp& start = lane.segments.front().time;
    if (!start.valid)
      throw std::runtime_error(std::string(option) + " " + text + ": lane " + lane.name +
                               " has no recorded time; give seconds (1.5s)");
    return (static_cast<double>(time->seconds) - static_cast<double>(start.seconds)) +
           (static_cast<double>(time->picoseconds) - static_cast<double>(start.picoseconds)) / 1e12;
  }
  throw std::runtime_error(
      std::string(option) + " " + text +
      ": expected a time from the start such as 1.5s or 250ms, or an ISO-8601 time like 2026-11-23T17:00:01.5Z");
}

int capture_export(const ExportOptions& options) {
  const recorder::Capture capture = recorder::open_capture(options.capture);
  note_unlisted(capture);
  if (options.lane.empty() && capture.lanes.size() > 1) {
    std::cerr << "sluice capture export: " << capture.path << " has " << capture.lanes.size()
              << " lanes: choose one with --lane NAME\n";
    return kExitUsage;
  }
  const recorder::CaptureLane& lane = *chosen_lanes(capture, options.lane).front();
  if (lane.segments.empty()) throw std::runtime_error("lane " + lane.name + " holds no samples");
  const std::string base = recorder::strip_capture_suffix(options.output);
  const recorder::ExportReport report = recorder::export_capture(lane, seconds_into(lane, options.from, "--from"),
                                                                 seconds_into(lane, options.to, "--to"), base);
  std::cout << "wrote " << report.data_path << " and " << report.meta_path << ": lane " << lane.name
            << ", stream samples " << report.first_index << " to " << report.end_index - 1 << ": " << report.samples
            << " samples in " << report.segments << " segment(s), " << report.gaps << " gap(s) (" << report.lost_samples
            << " samples lost";
  if (report.marked_values > 0) std::cout << ", " << report.marked_values << " values marked";
  std::cout << ")\n";
  return kExitOk;
}

// The pipeline `play` runs: one lane per capture lane, replay → [fft →] null.
std::string play_yaml(const PlayOptions& options, const recorder::Capture& capture) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "pipeline" << YAML::Value << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "play"
      << YAML::EndMap;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "replay" << YAML::Key << "type" << YAML::Value
      << "replay" << YAML::Key << "capture" << YAML::Value << options.capture << YAML::Key << "pace" << YAML::Value
      << (options.fast ? "fast" : "recorded") << YAML::Key << "loop" << YAML::Value << options.loop << YAML::EndMap;
  if (!options.no_fft) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "fft" << YAML::Key << "type" << YAML::Value << "fft"
        << YAML::Key << "size" << YAML::Value << 1024 << YAML::Key << "window" << YAML::Value << "hann" << YAML::Key
        << "average" << YAML::Value << 1 << YAML::Key << "output" << YAML::Value << "power_db" << YAML::EndMap;
  }
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "summary" << YAML::Key << "type" << YAML::Value
      << "null" << YAML::EndMap;
  out << YAML::EndSeq;
  out << YAML::Key << "lanes" << YAML::Value << YAML::BeginSeq;
  for (const auto& lane : capture.lanes) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << lane.name << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return out.c_str();
}

int play(const PlayOptions& options) {
  const recorder::Capture capture = recorder::open_capture(options.capture);
  note_unlisted(capture);
  PipelineDefinition definition;
  try {
    definition = load_pipeline_text(play_yaml(options, capture), "sluice play", options.overrides);
  } catch (const ConfigException& error) {
    std::cerr << "sluice play: " << error.errors().to_string() << "\n";
    if (!options.no_fft && StageRegistry::builtin().find("fft") == nullptr) {
      std::cerr << "sluice play: this build has no fft stage: use --no-fft\n";
    }
    return kExitUsage;
  }
  return run_definition(std::move(definition), options.outputs, "sluice play");
}

// `sluice capture plot`.
void add_plot_command(CLI::App& capture, Commands& commands) {
  auto plot_options = std::make_shared<PlotOptions>();
  CLI::App* plot = capture.add_subcommand(
      "plot", "Draw a capture's averaged spectrum and spectrogram (raw samples through an FFT; spectra as recorded)");
  plot->add_option("capture", plot_options->capture, "NAME.sigmf-collection, .sigmf-meta or base path")->required();
  plot->add_option("-o,--output", plot_options->output,
                   "picture to write: .svg (spectrum + spectrogram) or .png (spectrogram); default NAME-plot.svg");
  plot->add_option("--lane", plot_options->lane, "only this lane (default: every lane)");
  plot->add_option("--fft", plot_options->fft_size, "FFT length for raw samples")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  plot->add_option("--rows", plot_options->rows, "spectrogram rows (time resolution)")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  commands.add(plot, [plot_options] { return capture_plot(*plot_options); });
}

// `sluice capture export`.
void add_export_command(CLI::App& capture, Commands& commands) {
  auto export_options = std::make_shared<ExportOptions>();
  CLI::App* export_command = capture.add_subcommand(
      "export",
      "Copy a time range of one lane into a new SigMF recording (holes stay holes, stream indices and times kept)");
  export_command->add_option("capture", export_options->capture, "NAME.sigmf-collection, .sigmf-meta or base path")
      ->required();
  export_command
      ->add_option("--from", export_options->from,
                   "start: seconds from the lane's first sample (1.5s, 250ms) or ISO-8601 time")
      ->required();
  export_command->add_option("--to", export_options->to, "end (exclusive), as --from")->required();
  export_command->add_option("-o,--output", export_options->output, "new capture: base path or NAME.sigmf-meta")
      ->required();
  export_command->add_option("--lane", export_options->lane, "lane to export (required when the capture has several)");
  commands.add(export_command, [export_options] { return capture_export(*export_options); });
}

// `sluice play`.
void add_play_command(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<PlayOptions>();
  CLI::App* play_command = app.add_subcommand("play", "Replay a capture through a pipeline: replay → fft → summary");
  play_command->add_option("capture", options->capture, "NAME.sigmf-collection, .sigmf-meta or base path")->required();
  play_command->add_flag("--fast", options->fast, "as fast as possible (default: at the recorded rate)");
  play_command->add_flag("--loop", options->loop, "start again at the end until Ctrl-C");
  play_command->add_flag("--no-fft", options->no_fft, "replay → summary only");
  add_output_options(*play_command, options->outputs);
  play_command->add_option("--set", options->overrides, "override a setting: key.path=value (repeatable)");
  commands.add(play_command, [options] { return play(*options); });
}

}  // namespace

void add_capture_commands(CLI::App& app, Commands& commands) {
  CLI::App* capture = app.add_subcommand("capture", "Inspect, repair, plot and export SigMF captures");
  capture->require_subcommand(1);
  auto info_path = std::make_shared<std::string>();
  CLI::App* info = capture->add_subcommand("info", "Print format, duration, rate, gaps and size of a capture");
  info->add_option("capture", *info_path, "NAME.sigmf-collection, .sigmf-meta, .sigmf-data or base path")->required();
  commands.add(info, [info_path] { return capture_info(*info_path); });

  auto repair_path = std::make_shared<std::string>();
  CLI::App* repair = capture->add_subcommand(
      "repair", "Finish a capture cut off by kill -9 or a crash, up to the last chunk that reached the disk");
  repair->add_option("capture", *repair_path, "NAME.sigmf-collection, .sigmf-meta or base path")->required();
  auto restore_replaced = std::make_shared<bool>(false);
  repair->add_flag("--restore-replaced", *restore_replaced,
                   "bring back the capture an interrupted overwrite set aside (the interrupted recording takes its "
                   "place in the set-aside directory)");
  commands.add(repair, [repair_path, restore_replaced] { return capture_repair(*repair_path, *restore_replaced); });

  add_plot_command(*capture, commands);
  add_export_command(*capture, commands);
  add_play_command(app, commands);
}

}  // namespace sluice::cli
