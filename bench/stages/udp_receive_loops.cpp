// Bare receive loops, one pinned thread per port (socket_bench's, with the udp stage's socket
// settings): the baseline for the dual-port pipeline's highest lossless rate (run.sh dual).
//   udp_receive_loops --port 50100 --cpu 2 --port 50101 --cpu 8 --receive-buffer 256MiB --seconds 20
#include <sched.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/units.hpp"
#include "stages/socket/receive_thread.hpp"
#include "suite/bare_udp.hpp"
#include "wire/socket.hpp"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

struct Loop {
  std::uint16_t port = 0;
  int cpu = -1;
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  std::uint64_t spin_ns = 0;  // time spent polling an empty socket (ReceiveSpin::spun_ns)
  std::string error;
};

// With a `spin` (s), an empty socket is polled that long before a call may block, as the udp
// stage's receive thread does with receive_spin (the same ReceiveSpin).
void run_loop(Loop& loop, sluice::bench::BareUdpReceiver& receiver, double seconds, double idle, double spin) {
  if (loop.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<unsigned>(loop.cpu), &set);
    if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
      loop.error = "cannot pin to CPU " + std::to_string(loop.cpu);
      return;
    }
  }
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

// One receiver per port, its loop told its port (the bound one) and core.
std::vector<std::unique_ptr<sluice::bench::BareUdpReceiver>> open_receivers(const std::string& address,
                                                                            const std::vector<int>& ports,
                                                                            const std::vector<int>& cpus, int buffer,
                                                                            std::size_t batch,
                                                                            std::vector<Loop>& loops) {
  std::vector<std::unique_ptr<sluice::bench::BareUdpReceiver>> receivers;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    receivers.push_back(
        std::make_unique<sluice::bench::BareUdpReceiver>(address + ":" + std::to_string(ports[i]), buffer, batch));
    loops[i].port = receivers.back()->port();
    loops[i].cpu = cpus.empty() ? -1 : cpus[i];
  }
  return receivers;
}

// Prints the JSON report (per port and summed); 1 when a loop failed.
int print_report(const std::vector<Loop>& loops) {
  nlohmann::json report{{"ports", nlohmann::json::array()}, {"packets", 0}, {"bytes", 0}};
  int status = 0;
  for (const auto& loop : loops) {
    report["ports"].push_back({{"port", loop.port},
                               {"cpu", loop.cpu},
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Bare UDP receive loops, one pinned thread per port (the dual-port pipeline's baseline)"};
  std::vector<int> ports;
  std::vector<int> cpus;
  std::string buffer_text = "256MiB";
  std::string address = "127.0.0.1";
  double seconds = 60;
  double idle = 2;
  std::size_t batch = 0;
  double spin = 0;
  app.add_option("--port", ports, "a port to receive on (repeat for more loops)")
      ->required()
      ->check(CLI::Range(1, 65535));
  app.add_option("--cpu", cpus, "the CPU of each loop, in --port order (-1: unpinned)");
  app.add_option("--address", address, "the address to bind");
  app.add_option("--receive-buffer", buffer_text, "socket receive buffer, as the udp stage's receive_buffer");
  app.add_option("--batch", batch, "datagrams per recvmmsg (0: the udp stage's default)");
  app.add_option("--seconds", seconds, "stop this long after the start")->check(CLI::PositiveNumber);
  app.add_option("--spin", spin, "poll an empty socket this many seconds before a call may block (receive_spin)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle", idle, "stop a loop this long after its last datagram")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;  // --help is 0; every usage error is 2, as for sluice
  }
  if (!cpus.empty() && cpus.size() != ports.size()) {
    std::fprintf(stderr, "udp_receive_loops: give one --cpu per --port (%zu ports, %zu cpus)\n", ports.size(),
                 cpus.size());
    return 2;
  }
  const auto buffer = sluice::parse_bytes(buffer_text);
  if (!buffer || *buffer == 0 || *buffer > sluice::wire::kMaxReceiveBuffer) {
    std::fprintf(stderr, "udp_receive_loops: --receive-buffer %s: a size from 1 B to 1 GiB, e.g. 256MiB\n",
                 buffer_text.c_str());
    return 2;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::vector<Loop> loops(ports.size());
  std::vector<std::unique_ptr<sluice::bench::BareUdpReceiver>> receivers;
  try {
    receivers = open_receivers(address, ports, cpus, static_cast<int>(*buffer), batch, loops);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "udp_receive_loops: %s\n", error.what());
    return 1;
  }
  std::fprintf(stderr, "udp_receive_loops: %zu loops ready (GRO %s, batch %zu)\n", loops.size(),
               receivers.front()->gro() ? "on" : "off", receivers.front()->batch());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < loops.size(); ++i) {
    threads.emplace_back(run_loop, std::ref(loops[i]), std::ref(*receivers[i]), seconds, idle, spin);
  }
  for (auto& thread : threads) thread.join();

  return print_report(loops);
}
