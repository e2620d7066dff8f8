// `sluice capture info`, `sluice capture repair` and `sluice play`.
#include <fstream>
#include <iostream>

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "cli/commands.hpp"
#include "pipeline/config.hpp"
#include "pipeline/report.hpp"
#include "pipeline/runtime.hpp"
#include "recorder/capture_reader.hpp"
#include "recorder/capture_tools.hpp"

namespace sluice::cli {
namespace {

struct PlayOptions {
  std::string capture;
  bool fast = false;
  bool loop = false;
  bool no_fft = false;
  std::string report;
  std::string plot;
  std::vector<std::string> overrides;
};

int capture_info(const std::string& path) {
  const recorder::Capture capture = recorder::open_capture(path);
  std::cout << recorder::describe_capture(capture);
  for (const auto& lane : capture.lanes) {
    if (!lane.complete || !lane.journals.empty()) return kExitFailure;  // scripts can tell a cut capture
  }
  return kExitOk;
}

int capture_repair(const std::string& path) {
  const recorder::RepairReport report = recorder::repair_capture(path);
  if (report.repaired.empty()) {
    std::cout << path << ": nothing to repair (no journal left: the capture was finished)\n";
    return kExitOk;
  }
  for (const auto& line : report.lines) std::cout << "repaired " << line << "\n";
  return kExitOk;
}

// The pipeline `play` runs: one lane per capture lane, replay → [fft →] null.
std::string play_yaml(const PlayOptions& options, const recorder::Capture& capture) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "pipeline" << YAML::Value << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "play"
      << YAML::EndMap;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "replay" << YAML::Key << "type" << YAML::Value << "replay"
      << YAML::Key << "capture" << YAML::Value << options.capture << YAML::Key << "pace" << YAML::Value
      << (options.fast ? "fast" : "recorded") << YAML::Key << "loop" << YAML::Value << options.loop << YAML::EndMap;
  if (!options.no_fft) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "fft" << YAML::Key << "type" << YAML::Value << "fft"
        << YAML::Key << "size" << YAML::Value << 1024 << YAML::Key << "window" << YAML::Value << "hann" << YAML::Key
        << "average" << YAML::Value << 1 << YAML::Key << "output" << YAML::Value << "power_db" << YAML::EndMap;
  }
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "summary" << YAML::Key << "type" << YAML::Value << "null"
      << YAML::EndMap;
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
  return run_definition(std::move(definition), RunOutputs{options.report, options.plot, false}, "sluice play");
}

}  // namespace

void add_capture_commands(CLI::App& app, Commands& commands) {
  CLI::App* capture = app.add_subcommand("capture", "Inspect and repair SigMF captures");
  capture->require_subcommand(1);
  auto info_path = std::make_shared<std::string>();
  CLI::App* info = capture->add_subcommand("info", "Print format, duration, rate, gaps and size of a capture");
  info->add_option("capture", *info_path, "NAME.sigmf-collection, .sigmf-meta, .sigmf-data or base path")->required();
  commands.add(info, [info_path] { return capture_info(*info_path); });

  auto repair_path = std::make_shared<std::string>();
  CLI::App* repair = capture->add_subcommand(
      "repair", "Finish a capture cut off by kill -9 or a crash, up to the last chunk that reached the disk");
  repair->add_option("capture", *repair_path, "NAME.sigmf-collection, .sigmf-meta or base path")->required();
  commands.add(repair, [repair_path] { return capture_repair(*repair_path); });

  auto options = std::make_shared<PlayOptions>();
  CLI::App* play_command = app.add_subcommand("play", "Replay a capture through a pipeline: replay → fft → summary");
  play_command->add_option("capture", options->capture, "NAME.sigmf-collection, .sigmf-meta or base path")->required();
  play_command->add_flag("--fast", options->fast, "as fast as possible (default: at the recorded rate)");
  play_command->add_flag("--loop", options->loop, "start again at the end until Ctrl-C");
  play_command->add_flag("--no-fft", options->no_fft, "replay → summary only");
  play_command->add_option("--report", options->report, "write the summary as JSON to this file");
  play_command->add_option("--plot", options->plot, "write each lane's rate over time as an SVG chart to this file");
  play_command->add_option("--set", options->overrides, "override a setting: key.path=value (repeatable)");
  commands.add(play_command, [options] { return play(*options); });
}

}  // namespace sluice::cli
