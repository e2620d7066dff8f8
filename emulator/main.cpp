// sluice-emulator: an emulated FPGA digitizer (VITA-49, GNU Radio or bare datagrams over UDP; raw
// TCP frames or bare bytes over TCP), configured by a pipeline file's `emulator:` section: every
// flag but --check (compare a recording with the signal) is one of its keys, read by the same reader.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <deque>
#include <sstream>

#include "emulator/check_capture.hpp"
#include "emulator/emulator.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

// The flags, as given: each one that is set becomes an `emulator.KEY=VALUE` override.
struct Flags {
  std::string config;
  std::vector<std::string> overrides;
  std::vector<std::string> addresses;
  std::vector<int> cpus;
  std::deque<std::pair<const char*, std::string>> scalars;  // key, value as typed (a deque: options keep references)
  std::vector<double> tones;
  std::string seed;
  std::deque<std::pair<const char*, std::vector<std::uint64_t>>> fault_packets;
  bool no_gso = false;
  bool quiet = false;
  std::string check;  // a capture to compare with the signal instead of sending
};

template <typename T>
std::string yaml_list(const std::vector<T>& values) {
  std::ostringstream text;
  text.precision(17);
  text << '[';
  for (std::size_t i = 0; i < values.size(); ++i) text << (i == 0 ? "" : ", ") << values[i];
  text << ']';
  return text.str();
}

void add_options(CLI::App& app, Flags& flags) {
  app.add_option("config", flags.config, "pipeline YAML file whose emulator: section to use");
  app.add_option("--set", flags.overrides, "override a YAML key: emulator.rate=1GB/s (with or without a config file)");
  app.add_option("--to", flags.addresses, "destination host:port, one per stream (stream IDs 1, 2, ...)");
  app.add_option("--cpu", flags.cpus, "core to pin each stream's sender thread to, in stream order (repeatable)");
  // Each scalar flag is the emulator: key of the same name (dashes for underscores).
  static const std::vector<std::pair<const char*, const char*>> kScalars{
      {"transport", "udp | tcp"},
      {"framing", "udp: vita49 (default) | gnuradio_seq | gnuradio_seq_size | none; tcp: raw_tcp (default) | none"},
      {"tcp_role", "client | server"},
      {"sample_rate", "e.g. 100Msps"},
      {"format", "ci16 | cf32"},
      {"payload", "UDP datagram bytes (1472, 8972 jumbo)"},
      {"rate", "bytes/s per stream, e.g. 400MB/s; 0 = unpaced"},
      {"count", "packets per stream, then stop"},
      {"duration", "stop after, e.g. 10s"},
      {"batch", "packets per sendmmsg"},
      {"threads_per_stream", "udp: sender threads per stream, taking turns per batch"},
      {"capture", "send this SigMF capture (its samples, timestamps and gaps) instead of a signal"},
      {"capture_pace", "recorded (default: at the capture's timestamps) | fast"}};
  for (const auto& [key, help] : kScalars) {
    std::string name = std::string("--") + key;
    std::replace(name.begin(), name.end(), '_', '-');
    flags.scalars.emplace_back(key, "");
    app.add_option(name, flags.scalars.back().second, help);
  }
  flags.scalars.emplace_back("signal.noise_snr_db", "");
  app.add_option("--snr", flags.scalars.back().second, "Gaussian noise at this SNR (dB)");
  flags.scalars.emplace_back("faults.drop.probability", "");
  app.add_option("--drop-probability", flags.scalars.back().second, "chance to drop each packet");
  app.add_flag("--no-gso", flags.no_gso, "do not use UDP GSO");
  app.add_option("--tone", flags.tones, "tone frequency in Hz (repeatable), amplitude 0.5 / count");
  app.add_option("--seed", flags.seed, "seed for noise and faults");
  static const std::vector<std::pair<const char*, const char*>> kFaults{
      {"drop", "packet numbers to drop"},
      {"duplicate", "packet numbers to send twice"},
      {"reorder", "packet numbers to send after the next one"},
      {"truncate", "packet numbers to cut in half (UDP)"},
      {"corrupt", "packet numbers whose header to corrupt"}};
  for (const auto& [fault, help] : kFaults) {
    flags.fault_packets.emplace_back(fault, std::vector<std::uint64_t>{});
    app.add_option(std::string("--") + fault, flags.fault_packets.back().second, help);
  }
  app.add_flag("-q,--quiet", flags.quiet, "no periodic lines");
  app.add_option("--check", flags.check,
                 "send nothing: compare every sample of this SigMF capture with the signal at its stream index");
}

// The flags as `emulator.*` overrides, after the --set ones so that a flag wins.
std::vector<std::string> overrides_of(const Flags& flags) {
  std::vector<std::string> overrides = flags.overrides;
  const auto set = [&](const std::string& key, const std::string& value) {
    overrides.push_back("emulator." + key + "=" + value);
  };
  for (const auto& [key, value] : flags.scalars) {
    if (!value.empty()) set(key, value);
  }
  if (flags.no_gso) set("gso", "false");
  if (!flags.seed.empty()) {
    set("signal.seed", flags.seed);
    set("faults.seed", flags.seed);
  }
  for (const auto& [fault, packets] : flags.fault_packets) {
    if (!packets.empty()) set(std::string("faults.") + fault + ".packets", yaml_list(packets));
  }
  if (!flags.tones.empty()) {
    std::string tones;
    for (const double tone : flags.tones) {
      tones += (tones.empty() ? "" : ", ") + ("{frequency: " + std::to_string(tone) + ", amplitude: " +
                                              std::to_string(0.5 / static_cast<double>(flags.tones.size())) + "}");
    }
    set("signal.tones", "[" + tones + "]");
  }
  if (!flags.addresses.empty()) {
    std::string streams;
    for (std::size_t i = 0; i < flags.addresses.size(); ++i) {
      streams += (i == 0 ? "{address: " : ", {address: ") + flags.addresses[i] +
                 ", stream_id: " + std::to_string(i + 1) +
                 (i < flags.cpus.size() ? ", cpu: " + std::to_string(flags.cpus[i]) : "") + "}";
    }
    set("streams", "[" + streams + "]");
  }
  for (std::size_t i = flags.addresses.empty() ? 0 : flags.cpus.size(); i < flags.cpus.size(); ++i) {
    set("streams." + std::to_string(i) + ".cpu", std::to_string(flags.cpus[i]));
  }
  return overrides;
}

// --check: prints a line per lane; 0 when every lane's samples are the signal's, 1 otherwise.
int check(const sluice::emulator::EmulatorSettings& settings, const std::string& capture) {
  if (!settings.capture.empty()) {
    std::fprintf(stderr, "sluice-emulator: --check compares with the signal, and this emulator sends a capture\n");
    return 2;
  }
  int result = 0;
  for (const auto& lane : sluice::emulator::check_capture(settings.signal, capture)) {
    if (lane.mismatch) {
      std::printf("lane %s: stream sample %llu differs from the emulator's signal (%llu samples before it match)\n",
                  lane.lane.c_str(), static_cast<unsigned long long>(lane.first_bad),
                  static_cast<unsigned long long>(lane.samples));
      result = 1;
    } else if (lane.samples == 0) {
      std::printf("lane %s: no samples recorded\n", lane.lane.c_str());
      result = 1;
    } else {
      std::printf("lane %s: %llu samples in %llu segment(s) are the emulator's signal (%llu lost, not compared)\n",
                  lane.lane.c_str(), static_cast<unsigned long long>(lane.samples),
                  static_cast<unsigned long long>(lane.segments), static_cast<unsigned long long>(lane.lost));
    }
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice;
  CLI::App app{
      "sluice-emulator: emulated FPGA digitizer (VITA-49, GNU Radio or bare samples over UDP; raw or bare over TCP)"};
  Flags flags;
  add_options(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (!flags.addresses.empty() && flags.cpus.size() > flags.addresses.size()) {
    std::fprintf(stderr, "sluice-emulator: --cpu given %zu times for %zu streams\n", flags.cpus.size(),
                 flags.addresses.size());
    return 2;
  }
  try {
    const std::vector<std::string> overrides = overrides_of(flags);
    const emulator::EmulatorSettings settings =
        flags.config.empty() ? emulator::load_emulator_text("emulator: {}\n", "<flags>", overrides)
                             : emulator::load_emulator_file(flags.config, overrides);
    if (!flags.check.empty()) return check(settings, flags.check);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    emulator::Emulator emulator(settings);
    emulator.open();
    const emulator::EmulatorReport report = emulator.run(&g_stop, !flags.quiet);
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
