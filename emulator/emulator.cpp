// Emulator: settings from YAML, packet building, fault plan, pacing and the send loops.
#include "emulator/emulator.hpp"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "emulator/capture_stream.hpp"
#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/thread_cores.hpp"
#include "pipeline/units.hpp"
#include "recorder/capture_reader.hpp"
#include "wire/raw_tcp.hpp"
#include "wire/samples.hpp"
#include "wire/socket.hpp"
#include "wire/vita49.hpp"

namespace sluice::emulator {
namespace {

using wire::errno_message;
using wire::UniqueFd;

std::uint64_t mix(std::uint64_t value) {  // splitmix64 finaliser
  value += 0x9E3779B97F4A7C15ULL;
  value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ULL;
  value = (value ^ (value >> 27)) * 0x94D049BB133111EBULL;
  return value ^ (value >> 31);
}

constexpr std::size_t kMaxGsoBytes = 65000;
constexpr std::size_t kMaxGsoSegments = 64;

FaultSpec read_fault(SettingsReader& parent, const YAML::Node& section, const std::string& key,
                     const ConfigSource& source, ConfigErrors& errors) {
  FaultSpec spec;
  const YAML::Node node = section[key];
  if (!node) return spec;
  SettingsReader reader({SettingsLayer{node, "emulator.faults." + key}}, source, errors);
  if (!node.IsMap()) {
    parent.error(key, "expected a map {probability: P, packets: [N, ...]}");
    return spec;
  }
  spec.probability = reader.number("probability", 0, "chance per packet", 0, 1);
  for (double number : reader.numbers("packets", {}, "packet numbers (from 0, per stream)")) {
    if (number < 0 || number != std::floor(number)) {
      reader.error("packets", "packet numbers are whole numbers from 0");
      continue;
    }
    spec.packets.push_back(static_cast<std::uint64_t>(number));
  }
  reader.finish();
  return spec;
}

// The map without the keys that own sub-sections, so the parent reader's unknown-key check
// does not flag them (each sub-section gets its own reader).
YAML::Node without(const YAML::Node& map, std::initializer_list<std::string_view> keys) {
  YAML::Node filtered(YAML::NodeType::Map);
  if (!map || !map.IsMap()) return filtered;
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) filtered[entry.first] = entry.second;
  }
  return filtered;
}

// Several senders per stream build batches of packets known in advance (a synthetic signal over
// udp, each batch a fixed run of packet numbers), each on the core its stream names for it.
void sender_problems(const EmulatorSettings& settings, std::vector<SettingProblem>& problems) {
  const bool udp = settings.transport == Transport::udp;
  if (settings.threads_per_stream > 1) {
    const char* why = !udp                        ? "tcp is one byte stream per connection"
                      : !settings.capture.empty() ? "a capture is read in order by one sender"
                      : settings.faults.any()     ? "faults change which packets a batch holds"
                      : settings.context.enabled  ? "IF Context packets go out between data packets of one sender"
                                                  : nullptr;
    if (why != nullptr) {
      problems.push_back({"emulator.threads_per_stream",
                          std::string("more than one sender per stream cannot apply: ") + why,
                          "threads_per_stream: 1, or udp with a synthetic signal and no faults or context"});
    }
  }
  for (std::size_t i = 0; i < settings.streams.size(); ++i) {
    const std::size_t cores = settings.streams[i].cpus.size();
    if (cores > 1 && cores != settings.threads_per_stream) {
      problems.push_back({"emulator.threads_per_stream",
                          "stream " + std::to_string(i) + " names " + std::to_string(cores) + " cores for " +
                              std::to_string(settings.threads_per_stream) + " sender thread(s)",
                          "give cpus: one core per sender thread"});
    }
  }
}

}  // namespace

std::vector<SettingProblem> framing_problems(const EmulatorSettings& settings) {
  std::vector<SettingProblem> problems;
  const FaultSettings& faults = settings.faults;
  const Framing framing = settings.wire_framing();
  const bool udp = settings.transport == Transport::udp;
  if (udp && framing == Framing::raw_tcp) {
    problems.push_back({"emulator.framing", "raw_tcp frames go over tcp",
                        "set transport: tcp, or framing: vita49 | gnuradio_seq | gnuradio_seq_size | none"});
  }
  if (!udp && framing != Framing::raw_tcp && framing != Framing::none) {
    problems.push_back({"emulator.framing", std::string(to_string(framing)) + " is a udp framing",
                        "set transport: udp, or framing: raw_tcp | none"});
  }
  if (!settings.capture.empty() && framing != Framing::vita49 && framing != Framing::raw_tcp) {
    problems.push_back({"emulator.framing",
                        "a capture's timestamps and holes need framing vita49 (udp) or raw_tcp (tcp)",
                        std::string(to_string(framing)) + " has no timestamps: leave framing at its default"});
  }
  if (settings.context.enabled && framing != Framing::vita49) {
    problems.push_back({"emulator.context", "IF Context packets are VITA-49's: sent with framing vita49 only",
                        "remove context, or set transport: udp and framing: vita49"});
  }
  if (!udp && faults.truncate.enabled()) {
    problems.push_back({"emulator.faults.truncate", "truncate applies to UDP only",
                        "a cut TCP frame would desynchronise the stream, which corrupt already tests"});
  }
  // A fault the framing cannot show the receiver is an error, not a silent no-op.
  if (framing == Framing::none) {
    for (const auto& [fault, spec] : {std::pair{"truncate", &faults.truncate}, std::pair{"corrupt", &faults.corrupt},
                                      std::pair{"shift", &faults.shift}}) {
      if (spec->enabled()) {
        problems.push_back({std::string("emulator.faults.") + fault,
                            std::string(fault) + " alters a header, which framing none does not have",
                            "use drop, duplicate or reorder (which the receiver cannot see), or another framing"});
      }
    }
  }
  if (framing == Framing::gnuradio_seq && faults.corrupt.enabled()) {
    problems.push_back(
        {"emulator.faults.corrupt", "gnuradio_seq has no header field a receiver can check",
         "use framing gnuradio_seq_size (its size field is corrupted), or shift for a wrong sequence number"});
  }
  if (settings.samples_per_packet() == 0) {
    problems.push_back({"emulator.payload",
                        "payload too small for the " + std::string(to_string(framing)) + " header and one sample",
                        "e.g. payload: 1472"});
  }
  sender_problems(settings, problems);
  return problems;
}

const FaultSpec& FaultSettings::spec(FaultKind kind) const {
  switch (kind) {
    case FaultKind::drop:
      return drop;
    case FaultKind::duplicate:
      return duplicate;
    case FaultKind::reorder:
      return reorder;
    case FaultKind::truncate:
      return truncate;
    case FaultKind::corrupt:
      return corrupt;
    case FaultKind::shift:
      return shift;
  }
  return drop;
}

bool FaultSettings::applies(FaultKind kind, std::uint32_t stream, std::uint64_t packet) const {
  const FaultSpec& fault = spec(kind);
  if (std::find(fault.packets.begin(), fault.packets.end(), packet) != fault.packets.end()) return true;
  if (fault.probability <= 0) return false;
  const std::uint64_t hash = mix(seed ^ mix(static_cast<std::uint64_t>(kind) << 32 ^ stream) ^ mix(packet));
  return static_cast<double>(hash >> 11) * 0x1.0p-53 < fault.probability;
}

std::size_t EmulatorSettings::samples_per_packet() const {
  const std::size_t overhead = framing_overhead(wire_framing(), signal.format);
  return payload > overhead ? (payload - overhead) / bytes_per_sample(signal.format) : 0;
}

namespace {

// The emulator section's own keys (every one but streams, signal, faults and context).
void read_top_level(const YAML::Node& section, const ConfigSource& source, ConfigErrors& errors,
                    EmulatorSettings& settings) {
  SettingsReader reader({SettingsLayer{without(section, {"streams", "signal", "faults", "context"}), "emulator"}},
                        source, errors);
  settings.transport =
      reader.choice("transport", Transport::udp, "udp or tcp", {{"udp", Transport::udp}, {"tcp", Transport::tcp}});
  const bool udp = settings.transport == Transport::udp;
  settings.framing =
      reader.choice("framing", udp ? Framing::vita49 : Framing::raw_tcp,
                    "udp: vita49, gnuradio_seq, gnuradio_seq_size (GNU Radio network.udp_sink headers) or none "
                    "(bare samples); tcp: raw_tcp or none (bare samples)",
                    {{"vita49", Framing::vita49},
                     {"gnuradio_seq", Framing::gnuradio_seq},
                     {"gnuradio_seq_size", Framing::gnuradio_seq_size},
                     {"none", Framing::none},
                     {"raw_tcp", Framing::raw_tcp}});
  settings.tcp_role =
      reader.choice("tcp_role", TcpRole::client, "tcp: connect to the stage (client) or listen (server)",
                    {{"client", TcpRole::client}, {"server", TcpRole::server}});
  settings.signal.sample_rate = reader.frequency("sample_rate", 100e6, "samples per second (whole Hz)", 1, 1e11);
  if (settings.signal.sample_rate != std::floor(settings.signal.sample_rate)) {
    reader.error("sample_rate", "sample rate must be a whole number of Hz", "timestamps are exact sample counts");
  }
  settings.signal.format = reader.choice("format", SampleFormat::ci16, "sample format",
                                         {{"ci16", SampleFormat::ci16}, {"cf32", SampleFormat::cf32}});
  settings.payload = reader.bytes("payload", 1472, "UDP datagram bytes (1472 standard, 8972 jumbo)", 64, 65000);
  settings.rate = reader.byte_rate("rate", 0, "bytes/s per stream; 0 = as fast as possible");
  settings.count =
      static_cast<std::uint64_t>(reader.integer("count", 0, "packets per stream, then stop (0: no limit)", 0));
  settings.duration = reader.duration("duration", std::chrono::nanoseconds(0), "stop after this long (0: no limit)");
  settings.batch = static_cast<std::size_t>(reader.integer("batch", 32, "packets per sendmmsg", 1, 1024));
  settings.threads_per_stream = static_cast<std::size_t>(
      reader.integer("threads_per_stream", 1, "udp: sender threads per stream, taking turns per batch", 1, 64));
  settings.gso = reader.boolean("gso", true, "UDP GSO (UDP_SEGMENT) where the kernel has it");
  settings.report_interval = reader.duration("report_interval", std::chrono::seconds(1), "period of progress lines");
  settings.start_seconds =
      static_cast<std::uint64_t>(reader.integer("start_seconds", 0, "UTC second of sample 0 (0: now)", 0));
  settings.autostart = reader.boolean("autostart", false,
                                      "sluice run starts this emulator once its stages listen and stops it at the end");
  settings.capture =
      reader.string("capture", "", "SigMF capture to send instead of a signal (.sigmf-collection, .sigmf-meta)");
  settings.capture_pace = reader.choice("capture_pace", CapturePace::recorded,
                                        "recorded: at the capture's timestamps; fast: as fast as possible",
                                        {{"recorded", CapturePace::recorded}, {"fast", CapturePace::fast}});
  if (settings.capture.empty() && reader.has("capture_pace")) {
    reader.error("capture_pace", "capture_pace applies to a capture", "set capture: FILE, or remove capture_pace");
  }
  if (!settings.capture.empty()) {
    for (const char* key : {"sample_rate", "format", "rate"}) {
      if (reader.has(key)) {
        reader.error(key, std::string(key) + " comes from the capture when one is sent",
                     "capture_pace: fast sends it as fast as possible");
      }
    }
  }
  reader.finish();
}

// The cores of one stream's sender threads: `cpu: N` (one thread) or `cpus: [N, M, ...]`.
std::vector<int> read_stream_cores(SettingsReader& stream) {
  const auto cpu = stream.integer("cpu", -1, "core to pin this stream's sender thread to (-1: not pinned)", -1, 4095);
  const std::vector<double> cpus = stream.numbers("cpus", {}, "cores to pin this stream's sender threads to, one each");
  if (cpu >= 0 && !cpus.empty())
    stream.error("cpus", "cpu and cpus both given", "cpu for one sender thread, cpus for several");
  std::vector<int> cores;
  if (cpu >= 0) cores.push_back(static_cast<int>(cpu));
  for (const double core : cpus) {
    if (core < 0 || core > 4095 || core != std::floor(core)) {
      stream.error("cpus", "core " + std::to_string(core) + " is not a core number", "whole numbers from 0");
      continue;
    }
    cores.push_back(static_cast<int>(core));
  }
  return cores;
}

std::vector<StreamTarget> read_streams(const YAML::Node& streams, const ConfigSource& source, ConfigErrors& errors) {
  if (!streams.IsSequence() || streams.size() == 0) {
    errors.add({source.locate(streams), "emulator.streams", "expected a non-empty list of {address, stream_id}", ""});
    return {StreamTarget{}};
  }
  std::vector<StreamTarget> targets;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    SettingsReader stream({SettingsLayer{streams[i], "emulator.streams[" + std::to_string(i) + "]"}}, source, errors);
    StreamTarget target;
    target.address = stream.string("address", "127.0.0.1:" + std::to_string(50000 + i), "destination host:port");
    target.stream_id = static_cast<std::uint32_t>(
        stream.integer("stream_id", static_cast<std::int64_t>(i + 1), "VITA-49 stream ID", 0, 0xFFFFFFFFLL));
    target.lane = stream.string("lane", "", "capture lane this stream sends (default: the lane at its position)");
    target.cpus = read_stream_cores(stream);
    if (!wire::parse_endpoint(target.address)) stream.error("address", "expected IPv4 host:port", "127.0.0.1:50000");
    stream.finish();
    targets.push_back(target);
  }
  return targets;
}

// The signal: tones (one at sample_rate / 16 unless the section lists its own or a chirp),
// a chirp, noise and its seed.
void read_signal(const YAML::Node& signal, const ConfigSource& source, ConfigErrors& errors, SignalSettings& settings) {
  if (!signal || (!signal["tones"] && !signal["chirp"])) settings.tones.push_back(Tone{settings.sample_rate / 16, 0.5});
  if (!signal) return;
  SettingsReader sig({SettingsLayer{without(signal, {"tones", "chirp"}), "emulator.signal"}}, source, errors);
  settings.noise_snr_db = sig.number("noise_snr_db", std::numeric_limits<double>::quiet_NaN(),
                                     "Gaussian noise at this SNR in dB (absent: no noise)", -100, 300);
  settings.seed = static_cast<std::uint64_t>(sig.integer("seed", 1, "noise seed", 0));
  sig.finish();
  if (const YAML::Node tones = signal["tones"]; tones && !tones.IsSequence()) {
    errors.add({source.locate(tones), "emulator.signal.tones", "expected a list of {frequency, amplitude}", ""});
  } else if (tones) {
    for (std::size_t i = 0; i < tones.size(); ++i) {
      SettingsReader tone({SettingsLayer{tones[i], "emulator.signal.tones[" + std::to_string(i) + "]"}}, source,
                          errors);
      Tone value;
      value.frequency = tone.frequency("frequency", 1e6, "tone frequency", -1e11, 1e11);
      value.amplitude = tone.number("amplitude", 0.5, "amplitude, fraction of full scale", 0, 1);
      tone.finish();
      settings.tones.push_back(value);
    }
  }
  if (const YAML::Node chirp = signal["chirp"]) {
    SettingsReader sweep({SettingsLayer{chirp, "emulator.signal.chirp"}}, source, errors);
    settings.chirp_start = sweep.frequency("start", 0, "start frequency", -1e11, 1e11);
    settings.chirp_stop = sweep.frequency("stop", settings.sample_rate / 4, "stop frequency", -1e11, 1e11);
    settings.chirp_amplitude = sweep.number("amplitude", 0.5, "amplitude, fraction of full scale", 0, 1);
    sweep.finish();
  }
}

FaultSettings read_faults(const YAML::Node& faults, const ConfigSource& source, ConfigErrors& errors) {
  FaultSettings settings;
  SettingsReader fault({SettingsLayer{without(faults, {"drop", "duplicate", "reorder", "truncate", "corrupt", "shift"}),
                                      "emulator.faults"}},
                       source, errors);
  settings.seed = static_cast<std::uint64_t>(fault.integer("seed", 1, "seed of the fault plan", 0));
  settings.shift_by = fault.integer("shift_by", settings.shift_by, "samples a shifted packet's position moves");
  fault.finish();
  settings.drop = read_fault(fault, faults, "drop", source, errors);
  settings.duplicate = read_fault(fault, faults, "duplicate", source, errors);
  settings.reorder = read_fault(fault, faults, "reorder", source, errors);
  settings.truncate = read_fault(fault, faults, "truncate", source, errors);
  settings.corrupt = read_fault(fault, faults, "corrupt", source, errors);
  settings.shift = read_fault(fault, faults, "shift", source, errors);
  return settings;
}

}  // namespace

EmulatorSettings read_emulator_settings(const YAML::Node& section, const ConfigSource& source, ConfigErrors& errors) {
  EmulatorSettings settings;
  if (section && !section.IsMap()) {
    errors.add({source.locate(section), "emulator", "expected a map", ""});
    return settings;
  }
  read_top_level(section, source, errors, settings);
  settings.context = read_context_settings(section["context"], source, errors);
  if (const YAML::Node streams = section["streams"]) settings.streams = read_streams(streams, source, errors);
  read_signal(section["signal"], source, errors, settings.signal);
  if (const YAML::Node faults = section["faults"]) settings.faults = read_faults(faults, source, errors);
  for (const SettingProblem& problem : framing_problems(settings)) {
    const std::string key = problem.key.substr(problem.key.rfind('.') + 1);
    const YAML::Node at = problem.key.starts_with("emulator.faults") ? section["faults"] : section[key];
    errors.add({source.locate(at ? at : section), problem.key, problem.message, problem.hint});
  }
  return settings;
}

EmulatorSettings load_emulator_text(const std::string& yaml, const std::string& name,
                                    const std::vector<std::string>& overrides) {
  ConfigSource source(name);
  YAML::Node root = parse_yaml(yaml, source, overrides);
  ConfigErrors errors;
  EmulatorSettings settings = read_emulator_settings(root["emulator"], source, errors);
  if (!errors.empty()) throw ConfigException(std::move(errors));
  return settings;
}

EmulatorSettings load_emulator_file(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream file(path);
  if (!file) {
    ConfigErrors errors;
    errors.add({path, "", errno_message("cannot open", errno), ""});
    throw ConfigException(std::move(errors));
  }
  std::stringstream text;
  text << file.rdbuf();
  return load_emulator_text(text.str(), path, overrides);
}

struct Emulator::Impl {
  struct Stream {
    sockaddr_in destination{};
    UniqueFd listener;  // TCP server role
    UniqueFd socket;
    std::uint64_t next_packet = 0;
    bool done = false;
    std::unique_ptr<CaptureStream> capture;  // capture mode: what this stream sends
  };
  std::unique_ptr<SampleSource> source;  // signal mode
  std::mutex source_mutex;               // fill() of a non-periodic source, shared by the sender threads
  std::vector<Stream> streams;
  std::vector<std::byte> wire_table;   // one period (+ one packet) of samples in wire order
  std::vector<std::byte> local_table;  // the same, little-endian (TCP frames)
  std::size_t period = 0;
  std::size_t samples_per_packet = 0;
  std::size_t packet_bytes = 0;  // a full packet: UDP datagram or TCP frame (header + samples)
  std::size_t slot_bytes = 0;    // room for one packet
  bool gso = false;
  EmulatorReport report;
};

Emulator::Emulator(EmulatorSettings settings, std::unique_ptr<SampleSource> source)
    : settings_(std::move(settings)), impl_(std::make_unique<Impl>()) {
  if (source) {
    impl_->source = std::move(source);
  } else if (settings_.capture.empty()) {
    impl_->source = std::make_unique<SignalSource>(settings_.signal);
  }
}

Emulator::~Emulator() = default;

std::uint16_t Emulator::local_port(std::size_t index) const {
  const auto& stream = impl_->streams.at(index);
  const int fd = stream.listener.valid() ? stream.listener.get() : stream.socket.get();
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  return ntohs(address.sin_port);
}

namespace {

// The capture lanes the streams send, in stream order; sets the signal's rate and format to
// theirs. Throws naming what does not fit (a spectra lane, lanes that disagree, a rate that is
// not a whole number of Hz).
std::vector<recorder::CaptureLane> capture_lanes(EmulatorSettings& settings) {
  const recorder::Capture capture = recorder::open_capture(settings.capture);
  std::vector<recorder::CaptureLane> lanes;
  for (std::size_t i = 0; i < settings.streams.size(); ++i) {
    const std::string& wanted = settings.streams[i].lane;
    const recorder::CaptureLane* lane = nullptr;
    if (!wanted.empty()) {
      lane = capture.lane(wanted);
      if (lane == nullptr) throw std::runtime_error("capture " + settings.capture + " has no lane '" + wanted + "'");
    } else if (i < capture.lanes.size()) {
      lane = &capture.lanes[i];
    } else {
      throw std::runtime_error("capture " + settings.capture + " has " + std::to_string(capture.lanes.size()) +
                               " lane(s) for " + std::to_string(settings.streams.size()) +
                               " streams: name each stream's lane, or send fewer streams");
    }
    if (!lane->format || (*lane->format != SampleFormat::ci16 && *lane->format != SampleFormat::cf32)) {
      throw std::runtime_error(
          "capture lane " + lane->name + " holds " + lane->datatype +
          " samples; the emulator sends complex ci16 or cf32 (spectra cannot go back on the wire)");
    }
    if (lane->sample_rate < 1 || lane->sample_rate != std::floor(lane->sample_rate)) {
      throw std::runtime_error("capture lane " + lane->name + " has sample rate " + std::to_string(lane->sample_rate) +
                               ": VITA-49 timestamps need a whole number of samples per second");
    }
    if (!lanes.empty() && (lane->format != lanes.front().format || lane->sample_rate != lanes.front().sample_rate)) {
      throw std::runtime_error("capture lanes " + lanes.front().name + " and " + lane->name +
                               " differ in format or sample rate: send them with one emulator each");
    }
    lanes.push_back(*lane);
  }
  settings.signal.format = *lanes.front().format;
  settings.signal.sample_rate = lanes.front().sample_rate;
  return lanes;
}

}  // namespace

namespace {

// A connected UDP socket with a large send buffer, and GSO where it is wanted and the kernel has it.
void open_udp_socket(Emulator::Impl::Stream& stream, Emulator::Impl& impl) {
  stream.socket.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!stream.socket.valid()) throw std::runtime_error(errno_message("socket(AF_INET, SOCK_DGRAM)"));
  const int buffer = 8 << 20;
  if (::setsockopt(stream.socket.get(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer)) != 0) {
    throw std::runtime_error(errno_message("setsockopt(SO_SNDBUF)"));
  }
  if (::connect(stream.socket.get(), reinterpret_cast<const sockaddr*>(&stream.destination), sizeof(sockaddr_in)) !=
      0) {
    throw std::runtime_error(errno_message("connect(" + wire::to_string(stream.destination) + ")"));
  }
  if (impl.gso) {
    const int segment = static_cast<int>(impl.packet_bytes);
    if (::setsockopt(stream.socket.get(), SOL_UDP, UDP_SEGMENT, &segment, sizeof(segment)) != 0) {
      fmt::print(stderr, "emulator: {}: sending one datagram per message\n", errno_message("UDP GSO unavailable"));
      impl.gso = false;
    }
  }
}

// TCP server role: a listener on the stream's address, accepted from in run().
void open_tcp_listener(Emulator::Impl::Stream& stream) {
  stream.listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!stream.listener.valid()) throw std::runtime_error(errno_message("socket(AF_INET, SOCK_STREAM)"));
  const int one = 1;
  if (::setsockopt(stream.listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    throw std::runtime_error(errno_message("setsockopt(SO_REUSEADDR)"));
  }
  if (::bind(stream.listener.get(), reinterpret_cast<const sockaddr*>(&stream.destination), sizeof(sockaddr_in)) != 0) {
    throw std::runtime_error(errno_message("bind(" + wire::to_string(stream.destination) + ")"));
  }
  if (::listen(stream.listener.get(), 1) != 0) throw std::runtime_error(errno_message("listen"));
}

}  // namespace

void Emulator::open() {
  Impl& impl = *impl_;
  std::vector<recorder::CaptureLane> lanes;
  if (!settings_.capture.empty()) lanes = capture_lanes(settings_);
  const SampleFormat format = impl.source ? impl.source->format() : settings_.signal.format;
  settings_.signal.format = format;
  const std::size_t size = bytes_per_sample(format);
  impl.samples_per_packet = settings_.samples_per_packet();
  if (impl.samples_per_packet == 0) {
    throw std::runtime_error("emulator: payload too small for a " + std::string(to_string(settings_.wire_framing())) +
                             " packet");
  }
  impl.packet_bytes = FrameEncoder(settings_.wire_framing(), 0, format, impl.samples_per_packet, false)
                          .packet_bytes(impl.samples_per_packet);
  impl.period = impl.source ? impl.source->period() : 0;
  if (impl.period != 0) {
    impl.local_table.resize((impl.period + impl.samples_per_packet) * size);
    impl.source->fill(0, impl.local_table);
    impl.wire_table.resize(impl.local_table.size());
    wire::copy_swapped(format, impl.local_table.data(), impl.wire_table.data(), impl.local_table.size());
  }
  impl.slot_bytes = impl.packet_bytes;
  impl.gso = settings_.transport == Transport::udp && settings_.gso && !settings_.faults.any();
  if (settings_.transport == Transport::udp && settings_.gso && settings_.faults.any()) {
    fmt::print(stderr, "emulator: faults configured: GSO off so each datagram can be altered on its own\n");
  }

  impl.streams.clear();
  impl.streams.resize(settings_.streams.size());
  for (std::size_t i = 0; i < settings_.streams.size(); ++i) {
    Impl::Stream& stream = impl.streams[i];
    if (!lanes.empty()) {
      stream.capture = std::make_unique<CaptureStream>(lanes[i]);
      const recorder::CaptureLane& lane = stream.capture->lane();
      fmt::print(stderr, "emulator: stream {} sends capture lane {}: {} at {}, {} samples, {} gap(s), {}\n",
                 settings_.streams[i].stream_id, lane.name, lane.datatype, format_frequency(lane.sample_rate),
                 lane.total_samples, lane.gaps.size(),
                 settings_.capture_pace == CapturePace::recorded ? "paced by its timestamps" : "as fast as possible");
    }
    const auto destination = wire::parse_endpoint(settings_.streams[i].address);
    if (!destination) throw std::runtime_error("emulator: bad address '" + settings_.streams[i].address + "'");
    stream.destination = *destination;
    if (settings_.transport == Transport::udp) {
      open_udp_socket(stream, impl);
    } else if (settings_.tcp_role == TcpRole::server) {
      open_tcp_listener(stream);
    }
  }
  impl.report.gso_used = impl.gso;
}

namespace {

bool send_all(int fd, const std::byte* data, std::size_t bytes) {
  while (bytes > 0) {
    const ssize_t sent = ::send(fd, data, bytes, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += sent;
    bytes -= static_cast<std::size_t>(sent);
  }
  return true;
}

// Packets due this close to now leave in the current batch: pacing by timestamps then
// costs one sendmmsg per 250 µs of signal instead of one per packet.
constexpr std::uint64_t kCaptureLeadNs = 250'000;

}  // namespace

namespace {

// What every sender of one run shares, read-only once run() starts.
struct SendPlan {
  const EmulatorSettings* settings;
  SampleFormat format;
  std::size_t sample_bytes;
  std::size_t samples_per_packet;
  std::uint64_t rate;           // samples/s: timestamps
  std::uint64_t start_seconds;  // UTC second of sample 0
  std::uint64_t start_ns;       // monotonic start of the run
  bool capture_mode;
  bool capture_paced;
  std::size_t segments_per_message;  // GSO datagrams per message (1 without GSO)
};

void add_report(EmulatorReport& total, const EmulatorReport& part) {
  total.packets += part.packets;
  total.bytes += part.bytes;
  total.samples += part.samples;
  total.dropped += part.dropped;
  total.shifted += part.shifted;
  total.context_packets += part.context_packets;
  total.duplicated += part.duplicated;
  total.reordered += part.reordered;
  total.truncated += part.truncated;
  total.corrupted += part.corrupted;
}

// The handoff between the senders of one stream: whose batch goes next, and whether the stream
// has ended (a sender that stops ends it for all, so no later batch leaves after a missing one).
struct BatchTurns {
  std::atomic<std::uint64_t> next{0};  // the batch that may be sent now
  std::atomic<bool> over{false};
};

// One stream's sender: its own packet slots, message arrays, pacer and counts, so that each
// stream runs on its own thread. Loop: pace → build a batch (faults applied) → send it. With
// several senders per stream, sender `turn` of n builds batches turn, turn + n, ... ahead and
// sends each when the one before it has gone.
class StreamSender {
 public:
  StreamSender(const SendPlan& plan, Emulator::Impl& impl, std::uint32_t index, std::size_t turn = 0,
               BatchTurns* turns = nullptr)
      : plan_(plan),
        impl_(impl),
        stream_(impl.streams[index]),
        index_(index),
        turn_(turn),
        turns_(turns),
        pacer_(plan.capture_mode ? 0 : plan.settings->rate),
        encoder_(plan.settings->wire_framing(), plan.settings->streams[index].stream_id, plan.format,
                 plan.samples_per_packet, plan.capture_mode),
        slots_(plan.settings->batch + 1, std::vector<std::byte>(impl.slot_bytes)),
        scratch_(impl.samples_per_packet * plan.sample_bytes),
        iovs_(3 * (2 * plan.settings->batch + 4)),
        messages_(2 * plan.settings->batch + 4) {
    order_.reserve(2 * plan.settings->batch + 4);
    table_payload_ = plan.settings->transport == Transport::udp && !plan.settings->faults.any() && !stream_.capture &&
                     impl.period != 0;
    if (plan.settings->context.enabled) {
      context_.emplace(plan.settings->context, plan.settings->streams[index].stream_id, static_cast<double>(plan.rate),
                       plan.samples_per_packet);
    }
  }

  // Sends until the stream ends, `stop` is set or the duration passes. Errors are kept for the caller.
  void run(const std::atomic<bool>* stop) noexcept {
    try {
      if (turns_ != nullptr) {
        loop_in_turns(stop);
      } else {
        loop(stop);
      }
    } catch (const std::exception& error) {
      error_ = error.what();
    }
    if (turns_ != nullptr) turns_->over.store(true, std::memory_order_release);
    finished_.store(true, std::memory_order_release);
  }

  [[nodiscard]] const EmulatorReport& report() const { return report_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] bool finished() const { return finished_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t packets_sent() const { return packets_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t bytes_sent() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  // A packet to send: its bytes in its slot, or, where `payload` is set, its header and trailer
  // in the slot around samples that stay in the signal table.
  struct Send {
    std::size_t slot;
    std::size_t bytes;
    const std::byte* payload = nullptr;
  };

  void loop(const std::atomic<bool>* stop) {
    const EmulatorSettings& settings = *plan_.settings;
    for (;;) {
      const std::uint64_t elapsed = monotonic_ns() - plan_.start_ns;
      if (stop != nullptr && stop->load(std::memory_order_relaxed)) break;
      if (settings.duration.count() > 0 && elapsed >= static_cast<std::uint64_t>(settings.duration.count())) break;
      if (stream_.done) break;
      if (const std::uint64_t wait = wait_ns(elapsed); wait > 0) {
        // Sleep for the bulk, spin the last stretch: sleeps overshoot by tens of microseconds.
        if (wait > 200'000) {
          std::this_thread::sleep_for(std::chrono::nanoseconds(wait - 100'000));
        } else {
          std::this_thread::yield();
        }
        continue;
      }
      // IF Context ahead of the data it describes: at start, every `every` packets, on a retune.
      if (context_) report_.context_packets += context_->maybe_send(stream_.socket.get(), stream_.next_packet);
      build_batch(monotonic_ns() - plan_.start_ns);
      if (order_.empty()) continue;
      if (settings.transport == Transport::tcp) {
        send_tcp();
      } else {
        send_udp();
      }
      packets_.store(report_.packets, std::memory_order_relaxed);
      bytes_.store(report_.bytes, std::memory_order_relaxed);
    }
  }

  [[nodiscard]] bool ended(const std::atomic<bool>* stop) const {
    const std::chrono::nanoseconds duration = plan_.settings->duration;
    return (stop != nullptr && stop->load(std::memory_order_relaxed)) ||
           (duration.count() > 0 && monotonic_ns() - plan_.start_ns >= static_cast<std::uint64_t>(duration.count())) ||
           turns_->over.load(std::memory_order_acquire);
  }

  // Batches turn_, turn_ + n, ... of a synthetic udp stream (no faults, no context, no capture:
  // the settings refuse them with several senders), each packets [b·batch, (b + 1)·batch).
  void loop_in_turns(const std::atomic<bool>* stop) {
    const EmulatorSettings& settings = *plan_.settings;
    for (std::uint64_t batch = turn_;; batch += settings.threads_per_stream) {
      const std::uint64_t first = batch * settings.batch;
      std::uint64_t end = first + settings.batch;
      if (settings.count != 0) end = std::min<std::uint64_t>(end, settings.count);
      if (first < end && !paced_until(first * impl_.packet_bytes, stop)) return;
      if (first < end) build_packets(first, end);
      while (turns_->next.load(std::memory_order_acquire) != batch) {
        if (ended(stop)) return;
        std::this_thread::yield();
      }
      if (first >= end || ended(stop)) return;  // the count is sent, or the stream stops here
      send_udp();
      report_.samples += (end - first) * plan_.samples_per_packet;
      packets_.store(report_.packets, std::memory_order_relaxed);
      bytes_.store(report_.bytes, std::memory_order_relaxed);
      turns_->next.store(batch + 1, std::memory_order_release);
    }
  }

  // Waits until `bytes` of the stream are due at its rate; false if the stream ended meanwhile.
  bool paced_until(std::uint64_t bytes, const std::atomic<bool>* stop) {
    for (;;) {
      if (ended(stop)) return false;
      const std::uint64_t wait = pacer_.wait_ns(bytes, monotonic_ns() - plan_.start_ns);
      if (wait == 0) return true;
      if (wait > 200'000) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(wait - 100'000));
      } else {
        std::this_thread::yield();
      }
    }
  }

  // Packets [first, end) of the synthetic signal into the slots, in order.
  void build_packets(std::uint64_t first, std::uint64_t end) {
    order_.clear();
    for (std::uint64_t k = first; k < end; ++k) {
      PacketSpan span;
      span.first_sample = k * plan_.samples_per_packet;
      span.count = plan_.samples_per_packet;
      span.time.valid = false;
      span.after_gap = false;
      const auto slot = static_cast<std::size_t>(k - first);
      const std::byte* payload = nullptr;
      const std::size_t bytes = encode(k, span, slots_[slot].data(), &payload);
      order_.push_back(Send{slot, bytes, payload});
    }
  }

  // Nanoseconds until this stream may send more (its byte rate, or its capture's timestamps).
  std::uint64_t wait_ns(std::uint64_t elapsed) {
    if (!plan_.capture_paced) return pacer_.wait_ns(report_.bytes, elapsed);
    PacketSpan span;
    if (!next_span(span)) {
      stream_.done = true;
      return 0;
    }
    const std::uint64_t due = due_ns(span);
    return due > elapsed ? due - elapsed : 0;
  }

  // The next packet of the stream, not yet consumed: a capture's next run of recorded samples,
  // or the synthetic signal's packet k (samples k·spp on, timestamps from start_seconds).
  bool next_span(PacketSpan& span) {
    if (stream_.capture) return stream_.capture->peek(plan_.samples_per_packet, span);
    span.first_sample = stream_.next_packet * plan_.samples_per_packet;
    span.count = plan_.samples_per_packet;
    span.time.valid = false;
    span.after_gap = false;
    return true;
  }

  // Writes a span's samples (wire order for UDP, little-endian for TCP) to `out`, consuming it.
  void take_samples(const PacketSpan& span, bool wire_order, std::byte* out) {
    const std::size_t bytes = span.count * plan_.sample_bytes;
    if (stream_.capture) {
      stream_.capture->take(span, wire_order ? scratch_.data() : out);
      if (wire_order) wire::copy_swapped(plan_.format, scratch_.data(), out, bytes);
    } else if (impl_.period != 0) {
      const auto& table = wire_order ? impl_.wire_table : impl_.local_table;
      std::memcpy(out, table.data() + static_cast<std::size_t>(span.first_sample % impl_.period) * plan_.sample_bytes,
                  bytes);
    } else {
      {
        const std::lock_guard lock(impl_.source_mutex);
        impl_.source->fill(span.first_sample, std::span<std::byte>(scratch_.data(), bytes));
      }
      if (wire_order) {
        wire::copy_swapped(plan_.format, scratch_.data(), out, bytes);
      } else {
        std::memcpy(out, scratch_.data(), bytes);
      }
    }
  }

  void timestamp_of(const PacketSpan& span, std::uint64_t& seconds, std::uint64_t& picoseconds) const {
    if (span.time.valid) {
      seconds = span.time.seconds;
      picoseconds = span.time.picoseconds;
      return;
    }
    vita49::timestamp_of(span.first_sample, plan_.rate, seconds, picoseconds);
    seconds += plan_.start_seconds;
  }

  // Capture mode, recorded pace: nanoseconds after the start at which a span is due.
  std::uint64_t due_ns(const PacketSpan& span) const {
    return static_cast<std::uint64_t>(stream_.capture->seconds_until(span) * 1e9);
  }

  // Packet k into a slot, framed as the settings say. Returns its bytes.
  // With `payload` given, a whole packet of a periodic synthetic signal sent over udp without
  // faults leaves its samples in the signal table: *payload points at them there.
  std::size_t encode(std::uint64_t k, const PacketSpan& span, std::byte* buffer, const std::byte** payload = nullptr) {
    PacketFields fields;
    fields.k = k;
    fields.first_sample = span.first_sample;
    fields.samples = span.count;
    fields.after_gap = span.after_gap;
    timestamp_of(span, fields.seconds, fields.picoseconds);
    // A sender whose clock or sample counter jumped: this packet claims another position.
    if (const FaultSettings& faults = plan_.settings->faults;
        faults.any() && faults.applies(FaultKind::shift, index_, k)) {
      const auto shift = static_cast<std::uint64_t>(faults.shift_by);  // modulo 2^64: back is fine
      fields.first_sample += shift;
      vita49::timestamp_of(vita49::sample_index(fields.seconds, fields.picoseconds, plan_.rate) + shift, plan_.rate,
                           fields.seconds, fields.picoseconds);
      ++report_.shifted;
    }
    const std::size_t bytes = encoder_.write(fields, buffer);
    if (payload != nullptr && table_payload_ && span.count == plan_.samples_per_packet) {
      const auto& table = encoder_.big_endian_samples() ? impl_.wire_table : impl_.local_table;
      *payload = table.data() + static_cast<std::size_t>(span.first_sample % impl_.period) * plan_.sample_bytes;
      return bytes;
    }
    take_samples(span, encoder_.big_endian_samples(), buffer + encoder_.prefix_bytes());
    return bytes;
  }

  // Alters a built packet as the fault plan says for packet k (truncate, corrupt).
  std::size_t damage(std::uint64_t k, std::byte* buffer, std::size_t bytes) {
    const FaultSettings& faults = plan_.settings->faults;
    if (faults.applies(FaultKind::truncate, index_, k) && plan_.settings->transport == Transport::udp) {
      bytes = bytes / 2 / 4 * 4;
      ++report_.truncated;
    }
    if (faults.applies(FaultKind::corrupt, index_, k)) {
      ++report_.corrupted;
      encoder_.corrupt(k, buffer);
    }
    return bytes;
  }

  // Fills order_ with up to `batch` packets due now, faults applied.
  void build_batch(std::uint64_t elapsed) {
    const EmulatorSettings& settings = *plan_.settings;
    const FaultSettings& faults = settings.faults;
    order_.clear();
    std::size_t used_slots = 0;
    std::optional<Send> held;  // a packet to send after the next one (reorder)
    while ((order_.size() < settings.batch || held) && used_slots < slots_.size()) {
      const std::uint64_t k = stream_.next_packet;
      PacketSpan span;
      if ((settings.count != 0 && k >= settings.count) || !next_span(span)) {
        stream_.done = true;
        break;
      }
      if (plan_.capture_paced && due_ns(span) > elapsed + kCaptureLeadNs && !held) break;
      if (context_ && context_->retune_before(k)) break;  // its context packet goes first, next round
      ++stream_.next_packet;
      report_.samples += span.count;
      if (faults.any() && faults.applies(FaultKind::drop, index_, k)) {
        if (stream_.capture) stream_.capture->take(span, nullptr);
        ++report_.dropped;
        continue;
      }
      const std::size_t slot = used_slots++;
      std::byte* buffer = slots_[slot].data();
      const std::byte* payload = nullptr;
      std::size_t bytes = encode(k, span, buffer, &payload);
      if (faults.any()) bytes = damage(k, buffer, bytes);
      const Send send{slot, bytes, payload};
      if (faults.any() && !held && faults.applies(FaultKind::reorder, index_, k)) {
        held = send;
        ++report_.reordered;
        continue;
      }
      order_.push_back(send);
      if (held) {
        order_.push_back(*held);
        held.reset();
      }
      if (faults.any() && faults.applies(FaultKind::duplicate, index_, k)) {
        order_.push_back(send);
        ++report_.duplicated;
      }
    }
    if (held) order_.push_back(*held);
  }

  void send_tcp() {
    for (const Send& send : order_) {
      if (!send_all(stream_.socket.get(), slots_[send.slot].data(), send.bytes)) {
        if (errno == EPIPE || errno == ECONNRESET) {
          stream_.done = true;
          return;
        }
        throw std::runtime_error(errno_message("send(tcp)"));
      }
      ++report_.packets;
      report_.bytes += send.bytes;
    }
  }

  // A packet's pieces for sendmsg: its slot, or header, samples in the table and trailer.
  std::size_t packet_iovs(const Send& send, iovec* out) {
    std::byte* slot = slots_[send.slot].data();
    if (send.payload == nullptr) {
      out[0] = {slot, send.bytes};
      return 1;
    }
    const std::size_t prefix = encoder_.prefix_bytes();
    const std::size_t samples = plan_.samples_per_packet * plan_.sample_bytes;
    out[0] = {slot, prefix};
    out[1] = {const_cast<std::byte*>(send.payload), samples};  // sendmsg only reads it
    if (send.bytes == prefix + samples) return 2;
    out[2] = {slot + prefix + samples, send.bytes - prefix - samples};
    return 3;
  }

  // One message per datagram, or with GSO one message per run of full-size datagrams, which may
  // end with one shorter datagram (the kernel segments at the full size).
  void send_udp() {
    std::size_t message_count = 0;
    std::size_t used_iovs = 0;
    for (std::size_t i = 0; i < order_.size();) {
      std::size_t take = 1;
      while (take < plan_.segments_per_message && i + take < order_.size() &&
             order_[i + take - 1].bytes == impl_.packet_bytes) {
        ++take;
      }
      const std::size_t first_iov = used_iovs;
      for (std::size_t j = 0; j < take; ++j) used_iovs += packet_iovs(order_[i + j], &iovs_[used_iovs]);
      mmsghdr& message = messages_[message_count++];
      message = {};
      message.msg_hdr.msg_iov = &iovs_[first_iov];
      message.msg_hdr.msg_iovlen = used_iovs - first_iov;
      i += take;
    }
    std::size_t done = 0;
    while (done < message_count) {
      const int sent =
          ::sendmmsg(stream_.socket.get(), messages_.data() + done, static_cast<unsigned>(message_count - done), 0);
      if (sent < 0) {
        // Nobody listening yet on loopback: the datagrams are gone, as on a real wire.
        if (errno == ECONNREFUSED) break;
        if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN) continue;
        throw std::runtime_error(errno_message("sendmmsg"));
      }
      done += static_cast<std::size_t>(sent);
    }
    report_.packets += order_.size();
    for (const Send& send : order_) report_.bytes += send.bytes;
  }

  const SendPlan& plan_;
  Emulator::Impl& impl_;
  Emulator::Impl::Stream& stream_;
  std::uint32_t index_;
  std::size_t turn_;   // this sender's place among the stream's senders
  BatchTurns* turns_;  // shared by the stream's senders; null with one sender
  Pacer pacer_;
  FrameEncoder encoder_;
  std::optional<ContextSender> context_;  // udp with a context: section only
  bool table_payload_ = false;            // whole packets' samples go out from the signal table
  std::vector<std::vector<std::byte>> slots_;
  std::vector<std::byte> scratch_;  // one packet's samples, little-endian
  std::vector<Send> order_;
  std::vector<iovec> iovs_;
  std::vector<mmsghdr> messages_;
  EmulatorReport report_;
  std::atomic<std::uint64_t> packets_{0};  // report_'s, for the progress lines of another thread
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<bool> finished_{false};
  std::string error_;
};

// Connects (client) or accepts (server) every TCP stream before any sender starts.
void connect_tcp_streams(Emulator::Impl& impl, const EmulatorSettings& settings, const std::atomic<bool>* stop) {
  for (auto& stream : impl.streams) {
    if (settings.tcp_role == TcpRole::server) {
      stream.socket.reset(::accept4(stream.listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!stream.socket.valid()) throw std::runtime_error(errno_message("accept"));
      continue;
    }
    stream.socket.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!stream.socket.valid()) throw std::runtime_error(errno_message("socket(AF_INET, SOCK_STREAM)"));
    // The stage may still be starting: retry a refused connection for a few seconds.
    int attempts = 0;
    while (::connect(stream.socket.get(), reinterpret_cast<const sockaddr*>(&stream.destination),
                     sizeof(sockaddr_in)) != 0) {
      if (errno != ECONNREFUSED || ++attempts > 500 || (stop != nullptr && stop->load())) {
        throw std::runtime_error(errno_message("connect(" + wire::to_string(stream.destination) + ")"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      stream.socket.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    }
  }
}

}  // namespace

namespace {

// What every sender of this run shares: the stream's format, packet shape, rate and time base.
SendPlan make_send_plan(const EmulatorSettings& settings, const Emulator::Impl& impl) {
  SendPlan plan{};
  plan.settings = &settings;
  plan.format = settings.signal.format;
  plan.sample_bytes = bytes_per_sample(plan.format);
  plan.samples_per_packet = impl.samples_per_packet;
  plan.rate = static_cast<std::uint64_t>(settings.signal.sample_rate);
  plan.capture_mode = !settings.capture.empty();
  plan.capture_paced = plan.capture_mode && settings.capture_pace == CapturePace::recorded;
  plan.start_seconds = settings.start_seconds;
  if (plan.start_seconds == 0) {
    plan.start_seconds = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
  plan.segments_per_message =
      impl.gso ? std::max<std::size_t>(1, std::min(kMaxGsoSegments, kMaxGsoBytes / impl.packet_bytes)) : 1;
  return plan;
}

// Waits for every sender to finish, printing the aggregate rate every report interval when asked.
void report_until_finished(const std::vector<std::unique_ptr<StreamSender>>& senders, const EmulatorSettings& settings,
                           std::uint64_t start_ns, bool progress) {
  const auto all_finished = [&] {
    return std::all_of(senders.begin(), senders.end(), [](const auto& sender) { return sender->finished(); });
  };
  std::uint64_t last_packets = 0;
  std::uint64_t last_ns = start_ns;
  while (!all_finished()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::uint64_t now = monotonic_ns();
    if (!progress || settings.report_interval.count() <= 0 ||
        now - last_ns < static_cast<std::uint64_t>(settings.report_interval.count())) {
      continue;
    }
    std::uint64_t packets = 0;
    std::uint64_t bytes = 0;
    for (const auto& sender : senders) {
      packets += sender->packets_sent();
      bytes += sender->bytes_sent();
    }
    const double interval = static_cast<double>(now - last_ns) * 1e-9;
    const double seconds = static_cast<double>(now - start_ns) * 1e-9;
    fmt::print(stderr, "emulator: {:.1f} s  {:.3f} Mpkt/s  {}  sent {} packets, {}\n", seconds,
               static_cast<double>(packets - last_packets) / interval / 1e6,
               format_byte_rate(static_cast<double>(bytes) / seconds), packets,
               format_bytes(static_cast<double>(bytes)));
    last_packets = packets;
    last_ns = now;
  }
}

}  // namespace

// `threads_per_stream` threads per stream send (pinned where the stream says); this thread
// reports progress.
EmulatorReport Emulator::run(const std::atomic<bool>* stop, bool progress) {
  Impl& impl = *impl_;
  if (impl.streams.empty()) open();
  if (settings_.transport == Transport::tcp) connect_tcp_streams(impl, settings_, stop);
  SendPlan plan = make_send_plan(settings_, impl);
  for (const StreamTarget& target : settings_.streams) {
    for (const int cpu : target.cpus) {
      if (static_cast<unsigned>(cpu) >= std::thread::hardware_concurrency()) {
        throw std::runtime_error("emulator: cannot pin a sender to cpu " + std::to_string(cpu) + ": this host has " +
                                 std::to_string(std::thread::hardware_concurrency()) + " cpus");
      }
    }
  }
  const std::size_t per_stream = settings_.threads_per_stream;
  std::vector<std::unique_ptr<BatchTurns>> turns;
  std::vector<std::unique_ptr<StreamSender>> senders;
  for (std::uint32_t index = 0; index < impl.streams.size(); ++index) {
    turns.push_back(per_stream > 1 ? std::make_unique<BatchTurns>() : nullptr);
    for (std::size_t turn = 0; turn < per_stream; ++turn) {
      senders.push_back(std::make_unique<StreamSender>(plan, impl, index, turn, turns.back().get()));
    }
  }
  plan.start_ns = monotonic_ns();
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < senders.size(); ++i) {
    threads.emplace_back([&, i] {
      const std::vector<int>& cpus = settings_.streams[i / per_stream].cpus;
      try {
        if (!cpus.empty()) {
          const int cpu = cpus[i % per_stream % cpus.size()];
          pin_thread(pthread_self(), {cpu}, "cpu " + std::to_string(cpu));
        }
      } catch (const std::exception& error) {
        fmt::print(stderr, "emulator: {}: stream {} sends unpinned\n", error.what(), i / per_stream);
      }
      senders[i]->run(stop);
    });
  }
  report_until_finished(senders, settings_, plan.start_ns, progress);
  for (std::thread& thread : threads) thread.join();
  impl.report.seconds = static_cast<double>(monotonic_ns() - plan.start_ns) * 1e-9;
  for (auto& stream : impl.streams) {
    if (settings_.transport == Transport::tcp) stream.socket.reset();  // EOF tells the stage the stream ended
  }
  for (const auto& sender : senders) {
    if (!sender->error().empty()) throw std::runtime_error(sender->error());
    add_report(impl.report, sender->report());
  }
  return impl.report;
}

std::string format_report(const EmulatorReport& report) {
  return fmt::format(
      "emulator: sent {} packets ({}) in {:.2f} s, {:.3f} Mpkt/s, {}; samples {}; faults: dropped {}, duplicated {}, "
      "reordered {}, truncated {}, corrupted {}, shifted {}; IF Context packets {}; GSO {}",
      report.packets, format_bytes(static_cast<double>(report.bytes)), report.seconds,
      report.seconds > 0 ? static_cast<double>(report.packets) / report.seconds / 1e6 : 0.0,
      format_byte_rate(report.seconds > 0 ? static_cast<double>(report.bytes) / report.seconds : 0), report.samples,
      report.dropped, report.duplicated, report.reordered, report.truncated, report.corrupted, report.shifted,
      report.context_packets, report.gso_used ? "on" : "off");
}

}  // namespace sluice::emulator
