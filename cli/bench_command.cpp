// `sluice bench`: every stage alone, a whole lane and two lanes, each against a ceiling
// measured in the same run (suite/); a table on stdout or JSON with --json.
#include <iostream>

#include "cli/commands.hpp"
#include "suite/bench_suite.hpp"

namespace sluice::cli {
namespace {

struct BenchCommandOptions {
  double seconds = 60;
  std::vector<std::string> directories;
  bool json = false;
  bool quiet = false;
};

int run_bench_command(const BenchCommandOptions& options) {
  bench::BenchOptions settings;
  settings.seconds = options.seconds;
  settings.directories = options.directories;
  if (!options.quiet)
    settings.progress = [](const std::string& line) { std::cerr << "sluice bench: " << line << std::endl; };
  bench::BenchResult result;
  try {
    result = bench::run_bench(settings);
  } catch (const std::exception& error) {
    std::cerr << "sluice bench: " << error.what() << "\n";
    return kExitFailure;
  }
  if (options.json) {
    std::cout << bench::bench_json(result).dump(2) << "\n";
  } else {
    std::cout << bench::bench_table(result);
  }
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<BenchCommandOptions>();
  CLI::App* bench = app.add_subcommand(
      "bench", "Measure each stage, one lane and two lanes at full speed against bare-loop ceilings from the same run");
  bench->add_option("--seconds", options->seconds, "about how long the whole run takes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bench->add_option(
      "--dir", options->directories,
      "directory on a disk to measure, repeatable: the record and replay rows use the first, and lane i of "
      "two records to the i-th, (i+2)-th, ... (default: a new directory in the temp directory; removed after)");
  bench->add_flag("--json", options->json, "print the results as JSON instead of a table");
  bench->add_flag("--quiet,-q", options->quiet, "no progress lines on stderr");
  commands.add(bench, [options] { return run_bench_command(*options); });
}

}  // namespace sluice::cli
