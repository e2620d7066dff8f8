// Subcommands of `sluice`: each module adds its commands to the CLI11 app and returns the
// action to run once parsing has picked one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/config.hpp"

namespace sluice {
class Pipeline;
}  // namespace sluice

namespace sluice::cli {

// Conventional exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a stage failed, a capture is damaged, ...
inline constexpr int kExitUsage = 2;    // bad command line or invalid configuration
inline constexpr int kExitInterrupted = 130;

struct Commands {
  std::vector<std::pair<CLI::App*, std::function<int()>>> actions;
  void add(CLI::App* command, std::function<int()> action) { actions.emplace_back(command, std::move(action)); }
};

void add_pipeline_commands(CLI::App& app, Commands& commands);  // run, validate, stages
void add_capture_commands(CLI::App& app, Commands& commands);   // capture info|repair, play
void add_bench_command(CLI::App& app, Commands& commands);      // bench (cli/bench_command.cpp)

// Something that runs beside a pipeline: the file's emulator under `sluice run --emulator`
// (cli/emulator_companion.cpp).
class RunCompanion {
 public:
  virtual ~RunCompanion() = default;
  virtual void started(Pipeline& pipeline) = 0;  // every stage has started: sources listen
  virtual bool keep_running() = 0;               // polled each tick; false: stop the pipeline
  virtual bool finish(std::ostream& out) = 0;    // after the summary: stop, print its own; false: it failed
};
// The file's emulator when --emulator or its `emulator: {autostart: true}` asks for it, else null.
// Throws ConfigException for a bad emulator: section, std::runtime_error when it cannot be found.
std::unique_ptr<RunCompanion> make_emulator_companion(const std::string& file,
                                                      const std::vector<std::string>& overrides, bool requested);

// What a run writes besides the summary table.
struct RunOutputs {
  std::string report;                 // JSON report path, or empty
  std::string plot;                   // SVG rate plot path, or empty
  bool quiet = false;                 // no progress lines
  std::string http;                   // ADDR:PORT for /metrics and the dashboard (overrides pipeline.http), or empty
  RunCompanion* companion = nullptr;  // started after the stages, finished after the summary
};

// --report, --plot and --http into `outputs`: what `sluice run` and `sluice play` write alike.
void add_output_options(CLI::App& command, RunOutputs& outputs);

// Starts `definition`, runs it to the end with progress on stderr and Ctrl-C handling,
// prints the summary table, writes the report and plot; returns the exit code.
// `command` prefixes messages ("sluice run", "sluice play").
int run_definition(PipelineDefinition definition, const RunOutputs& outputs, const std::string& command);

// Installs SIGINT/SIGTERM handlers: the first asks for a clean stop, the second exits at once.
void install_stop_signals();
bool stop_signalled();

}  // namespace sluice::cli
