// `sluice run`, `sluice validate` and `sluice stages`.
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "monitor/http_server.hpp"
#include "monitor/report.hpp"
#include "pipeline/config.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/log.hpp"
#include "pipeline/memory.hpp"
#include "pipeline/placement.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/units.hpp"

namespace sluice::cli {
namespace {

struct RunOptions {
  std::string file;
  std::vector<std::string> overrides;
  std::string duration;
  std::string node;
  bool emulator = false;
  RunOutputs outputs;  // its companion is set when the run starts
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

// The file's pipeline, or with --node only that node's part. A file whose lanes span
// nodes needs --node: running both halves of a link in one process is not a deployment.
PipelineDefinition load_for_node(const RunOptions& options) {
  PipelineDefinition definition =
      load_pipeline_file(options.file, options.overrides, StageRegistry::builtin(), options.node);
  if (!options.node.empty()) return select_node(std::move(definition), options.node);
  if (spans_nodes(definition)) {
    std::string nodes;
    for (const auto& node : pipeline_nodes(definition)) nodes += (nodes.empty() ? "" : ", ") + node;
    ConfigErrors errors;
    errors.add({options.file, "--node", "this pipeline places its lanes on several nodes (" + nodes + ")",
                "run one process per node: sluice run " + options.file + " --node NAME"});
    throw ConfigException(std::move(errors));
  }
  return definition;
}

int run_pipeline(const RunOptions& options) {
  PipelineDefinition definition;
  try {
    definition = load_for_node(options);
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
  log::info("pipeline {} from {}: {} lane(s), {} stage(s); GPU: {}", definition.settings.name, options.file,
            definition.lanes.size(), stage_count(definition), cuda_available() ? "yes" : cuda_unavailable_reason());
  RunOutputs outputs = options.outputs;
  outputs.companion = emulator.get();
  return run_definition(std::move(definition), outputs, "sluice run");
}

// Where a lane's stages run: its GPU and why, then each stage's GPU and cores.
void print_placement(const LaneDefinition& lane) {
  const LaneGpu& gpu = lane.placement;
  const GpuHost& host = GpuHost::this_machine();
  if (host.gpus.empty()) {
    std::cout << "    GPU: none here (" << host.unavailable_reason << "): pools fall back to host memory\n";
  } else {
    std::cout << "    GPU " << gpu.gpu << (gpu.pci_bus_id.empty() ? "" : " (" + gpu.pci_bus_id + ")") << ": "
              << gpu.reason << "\n";
  }
  for (const auto& stage : lane.stages) {
    std::cout << "      " << stage.name << ": ";
    if (!host.gpus.empty()) std::cout << "GPU " << stage.cuda_device << (stage.gpu >= 0 ? " (gpu:)" : "") << ", ";
    std::cout << "cores "
              << (stage.cores.empty() ? "any" : format_core_list(stage.cores) + " (" + stage.cores_reason + ")");
    if (const std::string threads = stage.stage->threads_placement(); !threads.empty()) std::cout << "; " << threads;
    std::cout << "\n";
  }
}

int validate(const RunOptions& options) {
  const std::string& file = options.file;
  try {
    const PipelineDefinition definition =
        options.node.empty() ? load_pipeline_file(file, options.overrides) : load_for_node(options);
    std::cout << file << ": ok: pipeline " << definition.settings.name << ", " << definition.lanes.size()
              << " lane(s), " << stage_count(definition) << " stage(s)\n";
    for (const auto& lane : definition.lanes) {
      std::cout << "  " << lane.name << ":";
      for (std::size_t i = 0; i < lane.stages.size(); ++i) {
        const StageDefinition& stage = lane.stages[i];
        std::cout << (i == 0 ? " " : " → ") << stage.name << " (" << stage.type;
        if (!stage.node.empty() && (i == 0 || stage.joins_nodes || stage.node != lane.stages[i - 1].node)) {
          std::cout << (stage.joins_nodes ? ", to node " : ", node ") << stage.node;
        }
        std::cout << ")";
      }
      std::cout << "\n";
      print_placement(lane);
    }
    for (const std::string& line : shared_busy_cores(definition)) std::cout << "  warning: " << line << "\n";
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
    reader.cores("cpu", "cores to pin this stage's thread to: 3, 3-5, 3,7,9-10 or a list (-1: not pinned)");
    reader.integer("gpu", -1, "GPU (CUDA device) of this stage's pools, FFT and copies (-1: its lane's)");
    reader.string("on_full", "block", "when the next queue is full: block or drop");
    reader.integer("queue_depth", static_cast<std::int64_t>(pipeline.queue_depth),
                   "chunks queued in front of this stage");
    reader.string("node", "", "node this stage runs on (sluice run --node NAME); default: the previous stage's");
    auto stage = type.create(reader, pipeline);
    for (const auto& doc : docs) {
      std::cout << "  " << doc.key << " (" << doc.type << ", default "
                << (doc.default_value.empty() ? "none" : doc.default_value) << "): " << doc.doc << "\n";
    }
  }
  if (!type_name.empty() && registry.find(type_name) == nullptr) {
    std::cerr << "sluice: no stage type '" << type_name << "'\n";
    return kExitUsage;
  }
  return kExitOk;
}

// Runs the started pipeline to its end: progress each tick, a clean stop on the first Ctrl-C or
// when the companion asks for it.
void run_with_progress(Pipeline& pipeline, const RunOutputs& outputs) {
  const double interval = std::chrono::duration<double>(pipeline.definition().settings.progress_interval).count();
  const ProgressOutput output = outputs.quiet                ? ProgressOutput::none
                                : isatty(STDERR_FILENO) != 0 ? ProgressOutput::terminal
                                                             : ProgressOutput::log;
  ProgressPrinter progress(pipeline, output, interval);
  bool announced = false;
  pipeline.run([&] {
    if (stop_signalled() && !announced) {
      announced = true;
      log::info("stopping: draining queues (Ctrl-C again to abort)");
      pipeline.request_stop();
    }
    if (outputs.companion != nullptr && !pipeline.stop_requested() && !outputs.companion->keep_running())
      pipeline.request_stop();
    progress.tick();
  });
  progress.finish();
}

// Writes `text` to `path` (nothing when it is empty); false, said on stderr, when it cannot.
bool write_output(const std::string& path, const std::string& text, const char* what, const std::string& command) {
  if (path.empty()) return true;
  std::ofstream file(path);
  file << text;
  if (file.flush()) return true;
  std::cerr << command << ": cannot write " << what << " " << path << "\n";
  return false;
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
  // Declared after the pipeline, so the server stops before the metrics it reads go away.
  std::unique_ptr<MetricsServer> server;
  if (const std::string http = outputs.http.empty() ? pipeline.definition().settings.http : outputs.http;
      !http.empty()) {
    const std::optional<HttpEndpoint> endpoint = parse_http_endpoint(http);
    if (!endpoint) {
      std::cerr << command << ": --http: '" << http
                << "' is not ADDR:PORT (e.g. 127.0.0.1:9100, :9100, port 0: any free port)\n";
      return kExitUsage;
    }
    try {
      server = std::make_unique<MetricsServer>(pipeline, *endpoint);
    } catch (const std::exception& error) {
      std::cerr << command << ": " << error.what() << "\n";
      return kExitFailure;
    }
  }
  if (outputs.companion != nullptr) outputs.companion->started(pipeline);
  run_with_progress(pipeline, outputs);
  std::cout << summary_table(pipeline) << std::flush;
  const bool companion_ok = outputs.companion == nullptr || outputs.companion->finish(std::cout);
  const int exit_code = pipeline.failures().empty() && companion_ok ? kExitOk : kExitFailure;
  const bool written =
      write_output(outputs.report, report_json(pipeline, exit_code).dump(2) + "\n", "report", command) &
      write_output(outputs.plot, rate_plot_svg(pipeline), "plot", command);
  return written ? exit_code : kExitFailure;
}

void add_output_options(CLI::App& command, RunOutputs& outputs) {
  command.add_option("--report", outputs.report, "write the summary as JSON to this file");
  command.add_option(
      "--plot", outputs.plot,
      "write each lane's rate over time as an SVG chart to this file, with a marker where a lane lost samples");
  command.add_option("--http", outputs.http,
                     "serve /metrics (Prometheus) and a live dashboard at ADDR:PORT while running, e.g. 127.0.0.1:9100 "
                     "(overrides pipeline.http; port 0: any free port)");
}

void add_pipeline_commands(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run =
      app.add_subcommand("run", "Run a pipeline from a YAML file until end of stream, --duration or Ctrl-C");
  run->add_option("file", options->file, "pipeline YAML file")->required()->check(CLI::ExistingFile);
  run->add_option("--set", options->overrides, "override a setting: key.path=value (repeatable)");
  run->add_option("--duration", options->duration, "stop after this long (overrides pipeline.duration)");
  add_output_options(*run, options->outputs);
  run->add_option("--node", options->node, "run only the stages the file places on this node (node: keys)");
  run->add_flag("--quiet,-q", options->outputs.quiet, "no progress lines");
  run->add_flag("--emulator", options->emulator,
                "start the file's emulator (sluice-emulator FILE) once the stages listen, stop it at the end "
                "(also: emulator.autostart: true)");
  commands.add(run, [options] { return run_pipeline(*options); });

  auto validate_options = std::make_shared<RunOptions>();
  CLI::App* check =
      app.add_subcommand("validate", "Check a pipeline file and report every error with file:line:column");
  check->add_option("file", validate_options->file, "pipeline YAML file")->required();
  check->add_option("--set", validate_options->overrides, "override a setting: key.path=value (repeatable)");
  check->add_option("--node", validate_options->node, "show only the part that runs on this node");
  commands.add(check, [validate_options] { return validate(*validate_options); });

  auto type = std::make_shared<std::string>();
  CLI::App* stages = app.add_subcommand("stages", "List stage types, or one type's settings");
  stages->add_option("type", *type, "stage type to describe");
  commands.add(stages, [type] { return list_stages(*type); });
}

}  // namespace sluice::cli
