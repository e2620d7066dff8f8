// The emulated FPGA digitizer: streams VITA-49, GNU Radio or bare datagrams over UDP (raw TCP frames
// or bare bytes over TCP) from a signal or a recorded SigMF capture, paced or not, with deterministic
// fault injection; the `sluice-emulator` program and, in-process, tests and benchmarks use it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "emulator/context_sender.hpp"
#include "emulator/framing.hpp"
#include "emulator/signal.hpp"
#include "pipeline/clock.hpp"
#include "pipeline/settings.hpp"

namespace sluice::emulator {

enum class Transport : std::uint8_t { udp, tcp };
enum class TcpRole : std::uint8_t { client, server };

struct StreamTarget {
  std::string address = "127.0.0.1:50000";
  std::uint32_t stream_id = 1;
  std::string lane = {};       // capture mode: the capture lane this stream sends ("": the stream's position)
  std::vector<int> cpus = {};  // cores the stream's sender threads are pinned to, one each; empty: not pinned
};

enum class CapturePace : std::uint8_t { recorded, fast };

// A fault applied to packet k (counted from 0 per stream) when k is listed or when a hash
// of (seed, kind, stream, k) falls under `probability`: the same packets every run.
struct FaultSpec {
  double probability = 0;
  std::vector<std::uint64_t> packets;
  [[nodiscard]] bool enabled() const { return probability > 0 || !packets.empty(); }
};

enum class FaultKind : std::uint8_t { drop, duplicate, reorder, truncate, corrupt, shift };

struct FaultSettings {
  std::uint64_t seed = 1;
  FaultSpec drop;       // packet not sent
  FaultSpec duplicate;  // packet sent twice in a row
  FaultSpec reorder;    // packet sent after the next one
  FaultSpec truncate;   // UDP with a header: datagram cut to half its length (size field unchanged)
  FaultSpec corrupt;    // header made invalid: VITA-49 packet type, size field or stream ID; gnuradio_seq_size
                        // size field; raw_tcp magic (framings without a checked field refuse it)
  FaultSpec shift;      // packet claims a position `shift_by` samples away (timestamp; raw_tcp first_sample
                        // too; gnuradio: the sequence number, by shift_by / samples per packet)
  std::int64_t shift_by = 3'600'000'000;  // samples; a sender whose clock or counter jumped
  [[nodiscard]] bool any() const {
    return drop.enabled() || duplicate.enabled() || reorder.enabled() || truncate.enabled() || corrupt.enabled() ||
           shift.enabled();
  }
  [[nodiscard]] bool applies(FaultKind kind, std::uint32_t stream, std::uint64_t packet) const;
  [[nodiscard]] const FaultSpec& spec(FaultKind kind) const;
};

// YAML (the `emulator:` section of a pipeline file; every key optional but streams):
//   emulator:
//     transport: udp            # udp | tcp
//     framing: vita49           # udp: vita49 | gnuradio_seq | gnuradio_seq_size | none; tcp: raw_tcp | none
//                               # (default: vita49 for udp, raw_tcp for tcp)
//     tcp_role: client          # tcp only: client (connects) | server (listens, one peer per stream)
//     streams:                  # one per lane / NIC port
//       - {address: 127.0.0.1:50000, stream_id: 1, lane: port0, cpu: 14}   # lane: capture lane to send;
//                                                 # cpu: core its sender thread is pinned to (-1: not pinned);
//                                                 # cpus: [14, 15]: one core per sender thread
//     threads_per_stream: 1     # udp: sender threads per stream, taking turns per batch (order kept)
//     capture: /data/run.sigmf-collection  # send this capture instead of a signal (its rate and format)
//     capture_pace: recorded    # recorded: at the capture's timestamps | fast: as fast as possible
//     sample_rate: 100Msps      # whole Hz: timestamps are exact sample counts
//     format: ci16              # ci16 | cf32
//     payload: 1472             # UDP datagram bytes (header + samples); 8972 for jumbo frames
//     rate: 400MB/s             # datagram bytes/s per stream; 0 = as fast as possible
//     count: 0                  # packets per stream, then stop; 0 = no limit
//     duration: 0s              # stop after this long; 0 = no limit
//     batch: 32                 # packets per sendmmsg
//     gso: true                 # UDP GSO (UDP_SEGMENT) where the kernel has it
//     report_interval: 1s
//     signal: {tones: [{frequency: 1MHz, amplitude: 0.5}], chirp: {start: 0Hz, stop: 10MHz, amplitude: 0.2},
//              noise_snr_db: 30, seed: 1}   # neither tones nor chirp: one tone at sample_rate / 16
//     context: {rf_frequency: 2.4GHz, gain: 20, reference_level: -10, every: 1000}  # udp: IF Context packets
//     faults: {seed: 1, drop: {probability: 0.001, packets: [10, 20]}, duplicate: {...}, reorder: {...},
//              truncate: {...}, corrupt: {...}, shift: {...}, shift_by: 3600000000}
struct EmulatorSettings {
  Transport transport = Transport::udp;
  // udp: vita49 | gnuradio_seq | gnuradio_seq_size | none; tcp: raw_tcp | none; unset: vita49 on udp, raw_tcp on tcp
  std::optional<Framing> framing;
  TcpRole tcp_role = TcpRole::client;
  std::vector<StreamTarget> streams{StreamTarget{}};
  SignalSettings signal;                 // sample_rate and format live here
  std::size_t payload = 1472;            // UDP datagram bytes; TCP frames carry the same samples
  double rate = 0;                       // bytes/s per stream; 0 = unpaced
  std::uint64_t count = 0;               // packets per stream; 0 = unlimited
  std::chrono::nanoseconds duration{0};  // 0 = unlimited
  std::size_t batch = 32;
  // Sender threads per stream: each builds every n-th batch and sends it when the previous one
  // has gone, so a stream's packets enter its one socket in sequence order (udp, synthetic signal).
  std::size_t threads_per_stream = 1;
  bool gso = true;
  std::chrono::nanoseconds report_interval{std::chrono::seconds(1)};
  FaultSettings faults;
  ContextSettings context;          // udp: IF Context packets (emulator/context_sender.hpp)
  std::uint64_t start_seconds = 0;  // UTC second of sample 0; 0 = now
  // A SigMF capture (collection, meta or base path) to send instead of a synthetic signal:
  // stream i sends lane `streams[i].lane` (default the i-th lane) with its recorded samples,
  // timestamps and holes; the capture's sample rate and format replace the signal's.
  std::string capture;
  CapturePace capture_pace = CapturePace::recorded;
  bool autostart = false;  // `sluice run` on this file starts and stops this emulator itself

  // The framing sent: `framing`, or the transport's own when unset.
  [[nodiscard]] Framing wire_framing() const {
    return framing.value_or(transport == Transport::udp ? Framing::vita49 : Framing::raw_tcp);
  }
  // Samples in one packet: as many whole samples as fit in `payload` after the framing's header
  // and trailer (raw_tcp: as many as a VITA-49 datagram of `payload` carries).
  [[nodiscard]] std::size_t samples_per_packet() const;
};

// A combination of settings that cannot apply (a framing on the wrong transport, a fault the
// framing has no field for), with the key it concerns and a hint.
struct SettingProblem {
  std::string key;
  std::string message;
  std::string hint;
};
std::vector<SettingProblem> framing_problems(const EmulatorSettings& settings);

// Reads the `emulator:` section (errors collected with file:line:column).
EmulatorSettings read_emulator_settings(const YAML::Node& section, const ConfigSource& source, ConfigErrors& errors);
// Loads the `emulator:` section of a pipeline YAML file; throws ConfigException.
EmulatorSettings load_emulator_file(const std::string& path, const std::vector<std::string>& overrides = {});
EmulatorSettings load_emulator_text(const std::string& yaml, const std::string& name = "<text>",
                                    const std::vector<std::string>& overrides = {});

using ::sluice::Pacer;  // pipeline/clock.hpp

struct EmulatorReport {
  std::uint64_t packets = 0;  // datagrams/frames sent (duplicates included)
  std::uint64_t bytes = 0;
  std::uint64_t samples = 0;  // distinct samples generated (dropped ones included)
  std::uint64_t dropped = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;
  std::uint64_t truncated = 0;
  std::uint64_t corrupted = 0;
  std::uint64_t shifted = 0;
  std::uint64_t context_packets = 0;  // IF Context packets, not in `packets`
  double seconds = 0;
  bool gso_used = false;
};

class Emulator {
 public:
  // `source` null: a SignalSource from settings.signal (unused when settings.capture is set).
  explicit Emulator(EmulatorSettings settings, std::unique_ptr<SampleSource> source = nullptr);
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;
  ~Emulator();
  // Opens the capture, if any, and the sockets (TCP server role: listens; the peer is
  // accepted in run()). Throws std::runtime_error naming the call and errno, or the capture's fault.
  void open();
  // Local port of stream `index` (TCP server role: where to connect).
  [[nodiscard]] std::uint16_t local_port(std::size_t index) const;
  // Sends until count/duration is reached or `stop` becomes true, each stream from its own
  // thread (pinned where its `cpu` says), so streams do not share one core's send rate.
  // `progress` false: no periodic lines (the summary is the caller's to print).
  EmulatorReport run(const std::atomic<bool>* stop = nullptr, bool progress = true);
  [[nodiscard]] const EmulatorSettings& settings() const { return settings_; }

  struct Impl;  // sockets, tables and streams (emulator.cpp); public so its per-stream senders can name it

 private:
  EmulatorSettings settings_;
  std::unique_ptr<Impl> impl_;
};

std::string format_report(const EmulatorReport& report);

}  // namespace sluice::emulator
