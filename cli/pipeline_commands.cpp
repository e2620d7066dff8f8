// `sluice run`, `sluice validate` and `sluice stages`.
#include <fstream>
#include <iostream>

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "pipeline/config.hpp"
#include "pipeline/memory.hpp"
#include "pipeline/report.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/units.hpp"

namespace sluice::cli {
namespace {

struct RunOptions {
  std::string file;
  std::vector<std::string> overrides;
  std::string duration;
  std::string report;
  std::string plot;
  bool quiet = false;
  bool emulator = false;
};

void print_config_errors(const ConfigException& error) {
  std::cerr << "sluice: invalid configuration (" << error.errors().size() << " error"
            << (error.errors().size() == 1 ? "" : "s") << "):\n";
  for (const auto& each : error.errors().all()) std::cerr << "  " << each.to_string() << "\n";
}

std::size_t stage_count(const PipelineDefinition& definition) {
  std::size_t count = 0;
  for (const auto& lane : definition.lanes) count += lane.stages.size();
  return count;
}

int run_pipeline(const RunOptions& options) {
  PipelineDefinition definition;
  try {
    definition = load_pipeline_file(options.file, options.overrides);
  } catch (const ConfigException& error) {
    print_config_errors(error);
    return kExitUsage;
  }
  if (!options.duration.empty()) {
    auto duration = parse_duration(options.duration);
    if (!duration) {
      std::cerr << "sluice: --duration: expected a duration like 10s or 500ms, got '" << options.duration << "'\n";
      return kExitUsage;
    }
    definition.settings.duration = *duration;
  }
  std::unique_ptr<RunCompanion> emulator;
  try {
    emulator = make_emulator_companion(options.file, options.overrides, options.emulator);
  } catch (const ConfigException& error) {
    print_config_errors(error);
    return kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "sluice run: --emulator: " << error.what() << "\n";
    return kExitUsage;
  }
  spdlog::info("pipeline {} from {}: {} lane(s), {} stage(s); GPU: {}", definition.settings.name, options.file,
               definition.lanes.size(), stage_count(definition), cuda_available() ? "yes" : cuda_unavailable_reason());
  return run_definition(std::move(definition), RunOutputs{options.report, options.plot, options.quiet, emulator.get()},
                        "sluice run");
}

int validate(const std::string& file, const std::vector<std::string>& overrides) {
  try {
    const PipelineDefinition definition = load_pipeline_file(file, overrides);
    std::cout << file << ": ok: pipeline " << definition.settings.name << ", " << definition.lanes.size() << " lane(s), "
              << stage_count(definition) << " stage(s)\n";
    for (const auto& lane : definition.lanes) {
      std::cout << "  " << lane.name << ":";
      for (std::size_t i = 0; i < lane.stages.size(); ++i) {
        std::cout << (i == 0 ? " " : " → ") << lane.stages[i].name << " (" << lane.stages[i].type << ")";
      }
      std::cout << "\n";
    }
    return kExitOk;
  } catch (const ConfigException& error) {
    print_config_errors(error);
    return kExitUsage;
  }
}

int list_stages(const std::string& type_name) {
  const StageRegistry& registry = StageRegistry::builtin();
  PipelineSettings pipeline;
  for (const auto& [name, type] : registry.all()) {
    if (!type_name.empty() && name != type_name) continue;
    std::cout << name << " (" << to_string(type.role) << "): " << type.summary << "\n";
    if (type_name.empty()) continue;
    std::vector<SettingDoc> docs;
    SettingsReader reader = SettingsReader::for_docs(docs);
    // The runtime's own per-stage settings, then the stage's.
    reader.string("name", name, "stage name, unique in its lane");
    reader.integer("cpu", -1, "core to pin this stage's thread to (-1: not pinned)");
    reader.string("on_full", "block", "when the next queue is full: block or drop");
    reader.integer("queue_depth", static_cast<std::int64_t>(pipeline.queue_depth), "chunks queued in front of this stage");
    auto stage = type.create(reader, pipeline);
    for (const auto& doc : docs) {
      std::cout << "  " << doc.key << " (" << doc.type << ", default " << (doc.default_value.empty() ? "none" : doc.default_value)
                << "): " << doc.doc << "\n";
    }
  }
  if (!type_name.empty() && registry.find(type_name) == nullptr) {
    std::cerr << "sluice: no stage type '" << type_name << "'\n";
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

int run_definition(PipelineDefinition definition, const RunOutputs& outputs, const std::string& command) {
  install_stop_signals();
  Pipeline pipeline(std::move(definition));
  try {
    pipeline.start();
  } catch (const PipelineError& error) {
    std::cerr << command << ": cannot start: " << error.what() << "\n";
    return kExitFailure;
  }
  if (outputs.companion != nullptr) outputs.companion->started(pipeline);
  const double interval = std::chrono::duration<double>(pipeline.definition().settings.progress_interval).count();
  ProgressPrinter progress(pipeline, !outputs.quiet && isatty(STDERR_FILENO) != 0, outputs.quiet ? 1e18 : interval);
  bool announced = false;
  pipeline.run([&] {
    if (stop_signalled() && !announced) {
      announced = true;
      spdlog::info("stopping: draining queues (Ctrl-C again to abort)");
      pipeline.request_stop();
    }
    if (outputs.companion != nullptr && !pipeline.stop_requested() && !outputs.companion->keep_running()) pipeline.request_stop();
    progress.tick();
  });
  progress.finish();
  std::cout << summary_table(pipeline) << std::flush;
  const bool companion_ok = outputs.companion == nullptr || outputs.companion->finish(std::cout);
  const int exit_code = pipeline.failures().empty() && companion_ok ? kExitOk : kExitFailure;
  auto write_file = [&](const std::string& path, const std::string& text, const char* what) {
    if (path.empty()) return true;
    std::ofstream file(path);
    file << text;
    if (file.flush()) return true;
    std::cerr << command << ": cannot write " << what << " " << path << "\n";
    return false;
  };
  const bool written = write_file(outputs.report, report_json(pipeline, exit_code).dump(2) + "\n", "report") &
                       write_file(outputs.plot, rate_plot_svg(pipeline), "plot");
  return written ? exit_code : kExitFailure;
}

void add_pipeline_commands(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand("run", "Run a pipeline from a YAML file until end of stream, --duration or Ctrl-C");
  run->add_option("file", options->file, "pipeline YAML file")->required()->check(CLI::ExistingFile);
  run->add_option("--set", options->overrides, "override a setting: key.path=value (repeatable)");
  run->add_option("--duration", options->duration, "stop after this long (overrides pipeline.duration)");
  run->add_option("--report", options->report, "write the summary as JSON to this file");
  run->add_option("--plot", options->plot, "write each lane's rate over time as an SVG chart to this file");
  run->add_flag("--quiet,-q", options->quiet, "no progress lines");
  run->add_flag("--emulator", options->emulator,
                "start the file's emulator (sluice-emulator FILE) once the stages listen, stop it at the end "
                "(also: emulator.autostart: true)");
  commands.add(run, [options] { return run_pipeline(*options); });

  auto validate_options = std::make_shared<RunOptions>();
  CLI::App* check = app.add_subcommand("validate", "Check a pipeline file and report every error with file:line:column");
  check->add_option("file", validate_options->file, "pipeline YAML file")->required();
  check->add_option("--set", validate_options->overrides, "override a setting: key.path=value (repeatable)");
  commands.add(check, [validate_options] { return validate(validate_options->file, validate_options->overrides); });

  auto type = std::make_shared<std::string>();
  CLI::App* stages = app.add_subcommand("stages", "List stage types, or one type's settings");
  stages->add_option("type", *type, "stage type to describe");
  commands.add(stages, [type] { return list_stages(*type); });
}

}  // namespace sluice::cli
