// Bare receive loops, one pinned thread per port (socket_bench's, with the udp stage's socket
// settings): the baseline for the dual-port pipeline's highest lossless rate (run.sh dual).
//   udp_receive_loops --port 50100 --cpu 2 --port 50101 --cpu 8 --receive-buffer 256MiB --seconds 20
// With --handoff, each port's receiving is the udp stage's own receive thread (ReceiveThread, its
// ring of --ring batches) on --cpu, and a second thread on --placer-cpu takes each batch as the
// stage's placing thread does, doing only part of that thread's work: `pass` gives it straight
// back, `read` first loads every cache line of it, `copy` first copies it into a chunk-sized
// buffer with the stage's streamed stores (as a plain copy: without the stage's byte swap). Each step's receive core
// cost, against the bare loop's, says what that part of the stage's work costs the receive core (run.sh lanes-handoff).
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/thread_cores.hpp"
#include "pipeline/units.hpp"
#include "stages/socket/receive_thread.hpp"
#include "stages/socket/udp_source.hpp"
#include "suite/bare_udp.hpp"
#include "wire/samples.hpp"
#include "wire/socket.hpp"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

enum class Handoff { none, pass, read, copy };

struct Loop {
  std::uint16_t port = 0;
  int cpu = -1;
  int placer_cpu = -1;  // --handoff: the consumer's core
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  std::uint64_t spin_ns = 0;  // time spent polling an empty socket (ReceiveSpin::spun_ns)
  std::string error;
};

// Pins the calling thread to `cpu` (-1: left unpinned); false, with the error in `loop`, when it cannot.
bool pin_self(Loop& loop, int cpu) {
  if (cpu < 0) return true;
  try {
    sluice::pin_thread(pthread_self(), {cpu}, "CPU " + std::to_string(cpu));
  } catch (const std::exception& error) {
    loop.error = error.what();
    return false;
  }
  return true;
}

// With a `spin` (s), an empty socket is polled that long before a call may block, as the udp
// stage's receive thread does with receive_spin (the same ReceiveSpin).
void run_loop(Loop& loop, sluice::bench::BareUdpReceiver& receiver, double seconds, double idle, double spin) {
  if (!pin_self(loop, loop.cpu)) return;
  const std::uint64_t start = sluice::monotonic_ns();
  std::uint64_t last = 0;
  const auto limit_ns = static_cast<std::uint64_t>(seconds * 1e9);
  const auto idle_ns = static_cast<std::uint64_t>(idle * 1e9);
  sluice::ReceiveSpin spinning(static_cast<std::uint64_t>(spin * 1e9));
  while (!g_stop.load(std::memory_order_relaxed)) {
    const std::size_t got = receiver.receive_once(spinning.may_block());
    const std::uint64_t now = sluice::monotonic_ns();
    if (got != 0) {
      last = now;
      spinning.received();
    } else {
      spinning.found_empty();
    }
    if (now - start >= limit_ns || (last != 0 && now - last >= idle_ns)) break;
  }
  spinning.end();
  loop.spin_ns = spinning.spun_ns();
  loop.packets = receiver.packets();
  loop.bytes = receiver.bytes();
}

// Loads one word of every cache line of [data, data + bytes): the placing thread's read of a
// batch, without its work on what it read.
std::uint64_t read_lines(const std::byte* data, std::size_t bytes) noexcept {
  std::uint64_t sum = 0;
  for (std::size_t offset = 0; offset < bytes; offset += 64) {
    std::uint64_t word = 0;
    std::memcpy(&word, data + offset, std::min<std::size_t>(sizeof word, bytes - offset));
    sum += word;
  }
  return sum;
}

// --handoff: the udp stage's receive thread fills its ring on loop.cpu; this thread, on
// loop.placer_cpu, takes each batch, counts it, does `handoff`'s part of the placing thread's
// work and gives it back.
void run_handoff(Loop& loop, sluice::bench::BareUdpReceiver& receiver, Handoff handoff, std::size_t ring,
                 double seconds, double idle, double spin) {
  if (!pin_self(loop, loop.placer_cpu)) return;
  sluice::ReceiveThread thread(receiver.fd(), ring, receiver.batch(), receiver.slot_bytes(), sluice::kUdpControlBytes,
                               std::chrono::nanoseconds(static_cast<std::int64_t>(spin * 1e9)));
  try {
    thread.start(loop.cpu < 0 ? std::vector<int>{} : std::vector<int>{loop.cpu}, "rx-" + std::to_string(loop.port));
  } catch (const std::exception& error) {
    loop.error = error.what();
    return;
  }
  constexpr std::size_t kChunkBytes = 16 << 20;  // a lane's chunk size (run.sh lanes)
  std::vector<std::byte> chunk(handoff == Handoff::copy ? kChunkBytes + 65536 : 0);
  std::size_t offset = 0;
  std::uint64_t sum = 0;
  const std::uint64_t start = sluice::monotonic_ns();
  std::uint64_t last = 0;
  const auto limit_ns = static_cast<std::uint64_t>(seconds * 1e9);
  const auto idle_ns = static_cast<std::uint64_t>(idle * 1e9);
  while (!g_stop.load(std::memory_order_relaxed)) {
    sluice::ReceiveBatch* batch = thread.next(std::chrono::milliseconds(10));
    const std::uint64_t now = sluice::monotonic_ns();
    if (batch != nullptr) {
      last = now;
      for (std::size_t i = 0; i < batch->received; ++i) {
        const mmsghdr& message = batch->message(i);
        loop.packets += sluice::bench::datagrams_in(message);
        loop.bytes += message.msg_len;
        if (handoff == Handoff::read) sum += read_lines(batch->data(i), message.msg_len);
        if (handoff == Handoff::copy) {
          if (offset + message.msg_len > kChunkBytes) offset = 0;
          sluice::wire::stream_copy(sluice::SampleFormat::ci16, false, batch->data(i), chunk.data() + offset,
                                    message.msg_len);
          offset += message.msg_len;
        }
      }
      if (handoff == Handoff::copy) sluice::wire::stream_fence();
      thread.give_back(batch);
    } else if (thread.failed_errno() != 0) {
      loop.error = "recvmmsg: " + std::string(std::strerror(thread.failed_errno()));
      break;
    }
    if (now - start >= limit_ns || (last != 0 && now - last >= idle_ns)) break;
  }
  thread.stop();
  loop.spin_ns = thread.spin_ns();
  volatile std::uint64_t kept = sum;  // the reads stay: their sum is stored
  static_cast<void>(kept);
}

// One receiver per port, its loop told its port (the bound one) and core.
std::vector<std::unique_ptr<sluice::bench::BareUdpReceiver>> open_receivers(
    const std::string& address, const std::vector<int>& ports, const std::vector<int>& cpus,
    const std::vector<int>& placer_cpus, int buffer, std::size_t batch, std::vector<Loop>& loops) {
  std::vector<std::unique_ptr<sluice::bench::BareUdpReceiver>> receivers;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    receivers.push_back(
        std::make_unique<sluice::bench::BareUdpReceiver>(address + ":" + std::to_string(ports[i]), buffer, batch));
    loops[i].port = receivers.back()->port();
    loops[i].cpu = cpus.empty() ? -1 : cpus[i];
    loops[i].placer_cpu = placer_cpus.empty() ? -1 : placer_cpus[i];
  }
  return receivers;
}

// Prints the JSON report (per port and summed); 1 when a loop failed.
int print_report(const std::vector<Loop>& loops, const std::string& handoff, std::size_t ring) {
  nlohmann::json report{
      {"ports", nlohmann::json::array()}, {"packets", 0}, {"bytes", 0}, {"handoff", handoff}, {"ring", ring}};
  int status = 0;
  for (const auto& loop : loops) {
    report["ports"].push_back({{"port", loop.port},
                               {"cpu", loop.cpu},
                               {"placer_cpu", loop.placer_cpu},
                               {"packets", loop.packets},
                               {"bytes", loop.bytes},
                               {"spin_ns", loop.spin_ns}});
    report["packets"] = report["packets"].get<std::uint64_t>() + loop.packets;
    report["bytes"] = report["bytes"].get<std::uint64_t>() + loop.bytes;
    if (!loop.error.empty()) {
      std::fprintf(stderr, "udp_receive_loops: port %u: %s\n", loop.port, loop.error.c_str());
      status = 1;
    }
  }
  std::puts(report.dump().c_str());
  return status;
}

// --handoff's value, checked against the --placer-cpu and --port counts; none (said why) on a
// usage error.
std::optional<Handoff> parse_handoff(const std::string& text, std::size_t placer_cpus, std::size_t ports) {
  const std::map<std::string, Handoff> handoffs{
      {"none", Handoff::none}, {"pass", Handoff::pass}, {"read", Handoff::read}, {"copy", Handoff::copy}};
  const auto named = handoffs.find(text);
  if (named == handoffs.end()) {
    std::fprintf(stderr, "udp_receive_loops: --handoff %s: one of none, pass, read, copy\n", text.c_str());
    return std::nullopt;
  }
  if (named->second != Handoff::none && placer_cpus != ports) {
    std::fprintf(stderr, "udp_receive_loops: --handoff needs one --placer-cpu per --port (%zu ports, %zu given)\n",
                 ports, placer_cpus);
    return std::nullopt;
  }
  if (named->second == Handoff::none && placer_cpus != 0) {
    std::fprintf(stderr, "udp_receive_loops: --placer-cpu applies to --handoff pass, read or copy\n");
    return std::nullopt;
  }
  return named->second;
}

// The command line.
struct Options {
  std::vector<int> ports;
  std::vector<int> cpus;
  std::string buffer_text = "256MiB";
  std::string address = "127.0.0.1";
  double seconds = 60;
  double idle = 2;
  std::size_t batch = 0;
  double spin = 0;
  std::string handoff_text = "none";
  std::vector<int> placer_cpus;
  std::size_t ring = sluice::UdpSourceSettings{}.receive_batches;
};

void add_options(CLI::App& app, Options& options) {
  app.add_option("--port", options.ports, "a port to receive on (repeat for more loops)")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--cpu", options.cpus, "the CPU of each loop, in --port order (-1: unpinned)");
  app.add_option("--address", options.address, "the address to bind");
  app.add_option("--receive-buffer", options.buffer_text, "socket receive buffer, as the udp stage's receive_buffer");
  app.add_option("--batch", options.batch, "datagrams per recvmmsg (0: the udp stage's default)");
  app.add_option("--seconds", options.seconds, "stop this long after the start")->check(CLI::PositiveNumber);
  app.add_option("--spin", options.spin,
                 "poll an empty socket this many seconds before a call may block (receive_spin)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--handoff", options.handoff_text,
                 "none: the bare loop; else the udp stage's receive thread, and a thread on --placer-cpu that "
                 "takes each batch and gives it back (pass), after loading every line (read) or after copying it "
                 "into a chunk with streamed stores (copy)");
  app.add_option("--placer-cpu", options.placer_cpus,
                 "--handoff: the CPU of each port's taking thread, in --port order");
  app.add_option("--ring", options.ring,
                 "--handoff: the receive thread's ring in batches (the udp stage's receive_batches)")
      ->check(CLI::Range(2, 64));
  app.add_option("--idle", options.idle, "stop a loop this long after its last datagram")->check(CLI::PositiveNumber);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Bare UDP receive loops, one pinned thread per port (the dual-port pipeline's baseline)"};
  Options options;
  add_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;  // --help is 0; every usage error is 2, as for sluice
  }
  if (!options.cpus.empty() && options.cpus.size() != options.ports.size()) {
    std::fprintf(stderr, "udp_receive_loops: give one --cpu per --port (%zu ports, %zu cpus)\n", options.ports.size(),
                 options.cpus.size());
    return 2;
  }
  const auto handoff = parse_handoff(options.handoff_text, options.placer_cpus.size(), options.ports.size());
  if (!handoff) return 2;
  const auto buffer = sluice::parse_bytes(options.buffer_text);
  if (!buffer || *buffer == 0 || *buffer > sluice::wire::kMaxReceiveBuffer) {
    std::fprintf(stderr, "udp_receive_loops: --receive-buffer %s: a size from 1 B to 1 GiB, e.g. 256MiB\n",
                 options.buffer_text.c_str());
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::vector<Loop> loops(options.ports.size());
  std::vector<std::unique_ptr<sluice::bench::BareUdpReceiver>> receivers;
  try {
    receivers = open_receivers(options.address, options.ports, options.cpus, options.placer_cpus,
                               static_cast<int>(*buffer), options.batch, loops);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "udp_receive_loops: %s\n", error.what());
    return 1;
  }
  std::fprintf(stderr, "udp_receive_loops: %zu loops ready (GRO %s, batch %zu)\n", loops.size(),
               receivers.front()->gro() ? "on" : "off", receivers.front()->batch());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < loops.size(); ++i) {
    if (*handoff == Handoff::none) {
      threads.emplace_back(run_loop, std::ref(loops[i]), std::ref(*receivers[i]), options.seconds, options.idle,
                           options.spin);
    } else {
      threads.emplace_back(run_handoff, std::ref(loops[i]), std::ref(*receivers[i]), *handoff, options.ring,
                           options.seconds, options.idle, options.spin);
    }
  }
  for (auto& thread : threads) thread.join();

  return print_report(loops, options.handoff_text, *handoff == Handoff::none ? 0 : options.ring);
}
