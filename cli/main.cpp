// sluice: run pipelines from YAML, validate them, and inspect stages.
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>

#include "cli/commands.hpp"

namespace sluice::cli {
namespace {
volatile std::sig_atomic_t g_signals = 0;
extern "C" void on_stop_signal(int) {
  g_signals = g_signals + 1;
  if (g_signals > 1) _exit(kExitInterrupted);  // second Ctrl-C: the user means it
}
}  // namespace

void install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool stop_signalled() { return g_signals > 0; }

}  // namespace sluice::cli

int main(int argc, char** argv) {
  using namespace sluice::cli;
  // Logs and progress go to stderr; stdout carries results (summary, validate, info).
  spdlog::set_default_logger(spdlog::stderr_color_mt("sluice"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug

  CLI::App app{"Sluice: record high-rate sensor data (VITA-49/TCP → GPU → NVMe) from YAML pipelines"};
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION);
  app.require_subcommand(1);
  std::string log_level = "info";
  auto* log_level_option = app.add_option("--log-level", log_level,
                                          "trace, debug, info, warn, error or off (default: SPDLOG_LEVEL, else info)")
                               ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  Commands commands;
  add_pipeline_commands(app, commands);
  add_capture_commands(app, commands);
  add_bench_command(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? kExitOk : kExitUsage;
  }
  // An explicit --log-level wins; otherwise SPDLOG_LEVEL (already loaded above) stands.
  const char* environment_level = std::getenv("SPDLOG_LEVEL");
  if (log_level_option->count() > 0 || environment_level == nullptr || *environment_level == '\0') {
    spdlog::set_level(spdlog::level::from_str(log_level));
  }
  for (auto& [command, action] : commands.actions) {
    if (command->parsed()) {
      try {
        return action();
      } catch (const std::exception& error) {
        std::cerr << "sluice: " << error.what() << "\n";
        return kExitFailure;
      }
    }
  }
  return kExitUsage;
}
