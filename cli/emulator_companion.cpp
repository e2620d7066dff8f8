// `sluice run --emulator` (or `emulator: {autostart: true}`): the file's own emulator, started
// once the stages listen, stopped at the end; its report is printed after Sluice's summary.
#include <chrono>
#include <ostream>

#include "cli/commands.hpp"
#include "emulator/emulator.hpp"
#include "emulator/emulator_process.hpp"
#include "pipeline/clock.hpp"
#include "pipeline/log.hpp"

namespace sluice::cli {
namespace {

// After the emulator ends by itself, its last datagrams still sit in the sources' socket
// buffers: the pipeline runs this much longer before it is asked to stop.
constexpr std::uint64_t kDrainAfterEmulatorNs = 1'000'000'000;

class EmulatorCompanion final : public RunCompanion {
 public:
  EmulatorCompanion(std::string program, std::string file, std::vector<std::string> overrides)
      : program_(std::move(program)), file_(std::move(file)), overrides_(std::move(overrides)) {}

  void started(Pipeline& /*pipeline*/) override {
    std::vector<std::string> args{file_, "--quiet"};
    for (const auto& override : overrides_) {
      args.emplace_back("--set");
      args.push_back(override);
    }
    try {
      process_ = std::make_unique<emulator::EmulatorProcess>(program_, args);
      log::info("emulator: started {} {} (pid {})", program_, file_, process_->pid());
    } catch (const std::exception& error) {
      failure_ = error.what();
      log::error("emulator: cannot start: {}", failure_);
    }
  }

  bool keep_running() override {
    if (!process_) return false;
    if (ended_ns_ == 0 && !process_->running()) {
      ended_ns_ = monotonic_ns();
      const int status = process_->stop();
      if (status != 0) {
        failure_ = "sluice-emulator exited with status " + std::to_string(status);
        log::error("emulator: {}: {}", failure_, process_->output());
        return false;
      }
      log::info("emulator: finished; stopping the pipeline in 1 s (the last packets are in the socket buffers)");
    }
    return ended_ns_ == 0 || monotonic_ns() - ended_ns_ < kDrainAfterEmulatorNs;
  }

  bool finish(std::ostream& out) override {
    if (!process_) {
      out << "emulator: not started: " << failure_ << "\n";
      return false;
    }
    const int status = process_->stop();  // SIGTERM when the pipeline ended first
    const std::string report = process_->report_line();
    out << (report.empty() ? "emulator: no report (exit status " + std::to_string(status) + ")" : report) << "\n"
        << std::flush;
    if (!failure_.empty()) return false;
    if (status != 0) {
      log::error("emulator: exited with status {}: {}", status, process_->output());
      return false;
    }
    return true;
  }

 private:
  std::string program_;
  std::string file_;
  std::vector<std::string> overrides_;
  std::unique_ptr<emulator::EmulatorProcess> process_;
  std::uint64_t ended_ns_ = 0;
  std::string failure_;
};

}  // namespace

std::unique_ptr<RunCompanion> make_emulator_companion(const std::string& file,
                                                      const std::vector<std::string>& overrides, bool requested) {
  const YAML::Node root = YAML::LoadFile(file);
  if (!root["emulator"]) {
    if (requested) throw std::runtime_error(file + " has no emulator: section to start");
    return nullptr;
  }
  const emulator::EmulatorSettings settings = emulator::load_emulator_file(file, overrides);
  if (!requested && !settings.autostart) return nullptr;
  return std::make_unique<EmulatorCompanion>(emulator::locate_emulator_program(), file, overrides);
}

}  // namespace sluice::cli
