// sluice-emulator: an emulated FPGA digitizer streaming VITA-49, GNU Radio or bare datagrams
// over UDP, or raw TCP frames or bare bytes over TCP,
// configured from flags or from the `emulator:` section of a pipeline YAML file.
#include <csignal>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "emulator/emulator.hpp"
#include "pipeline/units.hpp"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  using namespace sluice;
  CLI::App app{"sluice-emulator: emulated FPGA digitizer (VITA-49, GNU Radio or bare samples over UDP; raw or bare over TCP)"};
  std::string config;
  std::vector<std::string> overrides;
  std::vector<std::string> addresses;
  std::vector<int> cpus;
  std::string transport;
  std::string framing;
  std::string tcp_role;
  std::string sample_rate;
  std::string format;
  std::size_t payload = 0;
  std::string rate;
  std::uint64_t count = 0;
  std::string duration;
  std::size_t batch = 0;
  bool no_gso = false;
  std::vector<double> tones;
  double snr = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t seed = 0;
  std::vector<std::uint64_t> drop;
  std::vector<std::uint64_t> duplicate;
  std::vector<std::uint64_t> reorder;
  std::vector<std::uint64_t> truncate;
  std::vector<std::uint64_t> corrupt;
  double drop_probability = 0;
  bool quiet = false;
  std::string capture;
  std::string capture_pace;
  app.add_option("config", config, "pipeline YAML file whose emulator: section to use");
  app.add_option("--set", overrides, "override a YAML key: emulator.rate=1GB/s (with or without a config file)");
  app.add_option("--to", addresses, "destination host:port, one per stream (stream IDs 1, 2, ...)");
  app.add_option("--transport", transport, "udp | tcp");
  app.add_option("--framing", framing,
                 "udp: vita49 (default) | gnuradio_seq | gnuradio_seq_size | none; tcp: raw_tcp (default) | none");
  app.add_option("--tcp-role", tcp_role, "client | server");
  app.add_option("--sample-rate", sample_rate, "e.g. 100Msps");
  app.add_option("--format", format, "ci16 | cf32");
  app.add_option("--payload", payload, "UDP datagram bytes (1472, 8972 jumbo)");
  app.add_option("--rate", rate, "bytes/s per stream, e.g. 400MB/s; 0 = unpaced");
  app.add_option("--count", count, "packets per stream, then stop");
  app.add_option("--duration", duration, "stop after, e.g. 10s");
  app.add_option("--batch", batch, "packets per sendmmsg");
  app.add_flag("--no-gso", no_gso, "do not use UDP GSO");
  app.add_option("--cpu", cpus, "core to pin each stream's sender thread to, in stream order (repeatable)");
  app.add_option("--tone", tones, "tone frequency in Hz (repeatable), amplitude 0.5 / count");
  app.add_option("--snr", snr, "Gaussian noise at this SNR (dB)");
  app.add_option("--seed", seed, "seed for noise and faults");
  app.add_option("--drop", drop, "packet numbers to drop");
  app.add_option("--drop-probability", drop_probability, "chance to drop each packet");
  app.add_option("--duplicate", duplicate, "packet numbers to send twice");
  app.add_option("--reorder", reorder, "packet numbers to send after the next one");
  app.add_option("--truncate", truncate, "packet numbers to cut in half (UDP)");
  app.add_option("--corrupt", corrupt, "packet numbers whose header to corrupt");
  app.add_option("--capture", capture, "send this SigMF capture (its samples, timestamps and gaps) instead of a signal");
  app.add_option("--capture-pace", capture_pace, "recorded (default: at the capture's timestamps) | fast");
  app.add_flag("-q,--quiet", quiet, "no periodic lines");
  CLI11_PARSE(app, argc, argv);

  // Transport and framing go through the YAML reader, so a framing defaults by transport and
  // every combination is checked in one place.
  if (!transport.empty()) overrides.push_back("emulator.transport=" + transport);
  if (!framing.empty()) overrides.push_back("emulator.framing=" + framing);
  try {
    emulator::EmulatorSettings settings =
        config.empty() ? emulator::load_emulator_text("emulator: {}\n", "<flags>", overrides)
                       : emulator::load_emulator_file(config, overrides);
    auto fail = [](const std::string& message) {
      std::fprintf(stderr, "sluice-emulator: %s\n", message.c_str());
      return 2;
    };
    if (!addresses.empty()) {
      settings.streams.clear();
      for (std::size_t i = 0; i < addresses.size(); ++i) {
        settings.streams.push_back({addresses[i], static_cast<std::uint32_t>(i + 1)});
      }
    }
    if (!tcp_role.empty()) {
      if (tcp_role != "client" && tcp_role != "server") return fail("--tcp-role: client or server");
      settings.tcp_role = tcp_role == "client" ? emulator::TcpRole::client : emulator::TcpRole::server;
    }
    if (!sample_rate.empty()) {
      auto value = parse_frequency(sample_rate);
      if (!value || *value < 1) return fail("--sample-rate: expected e.g. 100Msps");
      settings.signal.sample_rate = *value;
    }
    if (!format.empty()) {
      if (format != "ci16" && format != "cf32") return fail("--format: ci16 or cf32");
      settings.signal.format = format == "ci16" ? SampleFormat::ci16 : SampleFormat::cf32;
    }
    if (!capture.empty()) {
      if (!sample_rate.empty() || !format.empty() || !rate.empty()) {
        return fail("--sample-rate, --format and --rate come from the capture (--capture-pace fast: unpaced)");
      }
      settings.capture = capture;
    }
    if (!capture_pace.empty()) {
      if (capture_pace != "recorded" && capture_pace != "fast") return fail("--capture-pace: recorded or fast");
      if (settings.capture.empty()) return fail("--capture-pace needs --capture");
      settings.capture_pace = capture_pace == "fast" ? emulator::CapturePace::fast : emulator::CapturePace::recorded;
    }
    if (payload != 0) settings.payload = payload;
    if (!rate.empty()) {
      auto value = parse_byte_rate(rate);
      if (!value) return fail("--rate: expected e.g. 400MB/s");
      settings.rate = *value;
    }
    if (count != 0) settings.count = count;
    if (!duration.empty()) {
      auto value = parse_duration(duration);
      if (!value) return fail("--duration: expected e.g. 10s");
      settings.duration = *value;
    }
    if (batch != 0) settings.batch = batch;
    if (no_gso) settings.gso = false;
    if (cpus.size() > settings.streams.size()) {
      return fail("--cpu given " + std::to_string(cpus.size()) + " times for " + std::to_string(settings.streams.size()) +
                  " streams");
    }
    for (std::size_t i = 0; i < cpus.size(); ++i) settings.streams[i].cpu = cpus[i];
    if (!tones.empty()) {
      settings.signal.tones.clear();
      for (double tone : tones) settings.signal.tones.push_back({tone, 0.5 / static_cast<double>(tones.size())});
    }
    if (!std::isnan(snr)) settings.signal.noise_snr_db = snr;
    if (seed != 0) {
      settings.signal.seed = seed;
      settings.faults.seed = seed;
    }
    if (!drop.empty()) settings.faults.drop.packets = drop;
    if (drop_probability > 0) settings.faults.drop.probability = drop_probability;
    if (!duplicate.empty()) settings.faults.duplicate.packets = duplicate;
    if (!reorder.empty()) settings.faults.reorder.packets = reorder;
    if (!truncate.empty()) settings.faults.truncate.packets = truncate;
    if (!corrupt.empty()) settings.faults.corrupt.packets = corrupt;
    // Flags set after the YAML was read: check their combination with the framing again.
    if (const auto problems = emulator::framing_problems(settings); !problems.empty()) {
      for (const auto& problem : problems) {
        std::fprintf(stderr, "sluice-emulator: %s: %s (%s)\n", problem.key.c_str(), problem.message.c_str(), problem.hint.c_str());
      }
      return 2;
    }

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    emulator::Emulator emulator(settings);
    emulator.open();
    const emulator::EmulatorReport report = emulator.run(&g_stop, !quiet);
    std::fprintf(stderr, "%s\n", emulator::format_report(report).c_str());
  } catch (const ConfigException& error) {
    std::fprintf(stderr, "%s", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "sluice-emulator: %s\n", error.what());
    return 1;
  }
  return 0;
}
