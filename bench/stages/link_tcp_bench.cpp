// The tcp link transport, over one connection and over several, against a bare TCP send/recv loop
// on loopback: same bytes, chunk size and TCP_NODELAY; medians of interleaved runs and their ratios.
//   link_tcp_bench [MiB per run, default 1024] [rounds, default 7] [connections, default 4]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "stages/link/tcp_transport.hpp"
#include "wire/socket.hpp"

namespace sluice {
namespace {

constexpr std::size_t kRingSlots = 8;

std::uint16_t listen_any(wire::UniqueFd& listener) {
  listener = wire::UniqueFd(::socket(AF_INET, SOCK_STREAM, 0));
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener.get(), 1) != 0) {
    throw std::runtime_error(wire::errno_message("bind/listen"));
  }
  socklen_t size = sizeof(address);
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &size);
  return ntohs(address.sin_port);
}

// Bytes per second of a bare send()/recv() loop moving `total` bytes in `chunk`-sized sends, one
// sending and one receiving thread, each with one buffer.
double bare_loop(std::size_t chunk, std::size_t total) {
  wire::UniqueFd listener;
  const std::uint16_t port = listen_any(listener);
  std::vector<std::byte> send_buffer(chunk, std::byte{0x5A});
  std::vector<std::byte> receive_buffer(chunk);
  const std::uint64_t begin = monotonic_ns();
  auto receiver = std::async(std::launch::async, [&] {
    wire::UniqueFd fd(::accept(listener.get(), nullptr, nullptr));
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::size_t got = 0;
    while (got < total) {
      const ssize_t n = ::recv(fd.get(), receive_buffer.data(), std::min(chunk, total - got), 0);
      if (n <= 0) throw std::runtime_error(wire::errno_message("recv"));
      got += static_cast<std::size_t>(n);
    }
    return monotonic_ns();
  });
  wire::UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    throw std::runtime_error(wire::errno_message("connect"));
  }
  for (std::size_t sent = 0; sent < total;) {
    const ssize_t n = ::send(fd.get(), send_buffer.data(), std::min(chunk, total - sent), MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error(wire::errno_message("send"));
    sent += static_cast<std::size_t>(n);
  }
  const std::uint64_t end = receiver.get();
  return static_cast<double>(total) / (static_cast<double>(end - begin) / 1e9);
}

// One link run: its rate, and the sending thread's busy and CPU shares of the run per GB/s.
struct LinkRun {
  double bytes_per_second = 0;
  double busy_per_gbps = 0;       // as LinkSendingHalf and the runtime count it: time in send() returning ok
  double cpu_per_gbps = 0;        // the calling thread's CPU time
  double writing_per_gb = 0;      // seconds the writer threads spent writing, per GB moved
  double writing_cpu_per_gb = 0;  // their CPU seconds in those writes, per GB moved
};

// The tcp link transport moving the same bytes in `chunk`-sized chunks from a pool, through credits,
// frames and metadata, into a landing ring whose slots a null-sink thread releases at once.
LinkRun link_transport(std::size_t chunk, std::size_t total, std::uint32_t connections) {
  wire::UniqueFd probe;
  TransportSettings settings;
  settings.connections = connections;
  settings.endpoint = {"127.0.0.1", listen_any(probe)};
  probe.reset();
  Pool source("bench.source", PoolSpec{chunk, kRingSlots, MemoryKind::host, 0});
  Pool landing("bench.landing", PoolSpec{chunk, kRingSlots, MemoryKind::host, 0});
  TcpReceiver receiver;
  receiver.listen(settings, 0, landing);
  auto accepted = std::async(std::launch::async, [&] { return receiver.accept(); });
  TcpSender sender;
  sender.connect(settings, 0, {&source}, {});
  accepted.get();
  const std::uint64_t begin = monotonic_ns();
  auto sink = std::async(std::launch::async, [&] {
    std::size_t got = 0;
    for (;;) {
      ChunkPtr chunk_in;
      const LinkStatus status = receiver.receive(chunk_in, std::chrono::seconds(10));
      if (status == LinkStatus::end_of_stream) break;
      if (status != LinkStatus::ok) throw std::runtime_error("receive: " + receiver.error());
      got += chunk_in->size;  // released here: its credit goes back
    }
    if (got != total) throw std::runtime_error("link bench lost bytes");
    return monotonic_ns();
  });
  const std::uint64_t cpu_begin = thread_cpu_ns();
  std::uint64_t busy_ns = 0;
  for (std::size_t sent = 0; sent < total;) {
    ChunkPtr out = source.acquire(std::chrono::seconds(10));
    out->size = std::min(chunk, total - sent);
    sent += out->size;
    LinkStatus status;
    for (;;) {
      const std::uint64_t call = monotonic_ns();
      const std::uint64_t waited = sender.times().credit_wait_ns;
      status = sender.send(out, std::chrono::milliseconds(10));  // LinkSendingHalf's poll
      if (status == LinkStatus::idle) continue;
      busy_ns += (monotonic_ns() - call) - (sender.times().credit_wait_ns - waited);
      break;
    }
    if (status != LinkStatus::ok) throw std::runtime_error("send: " + sender.error());
  }
  const std::uint64_t cpu_ns = thread_cpu_ns() - cpu_begin;
  if (sender.finish(std::chrono::seconds(10)) != LinkStatus::ok) throw std::runtime_error("finish: " + sender.error());
  const std::uint64_t end = sink.get();
  const double seconds = static_cast<double>(end - begin) / 1e9;
  const double gbps = static_cast<double>(total) / seconds / 1e9;
  return {static_cast<double>(total) / seconds, static_cast<double>(busy_ns) / 1e9 / seconds / gbps,
          static_cast<double>(cpu_ns) / 1e9 / seconds / gbps,
          static_cast<double>(sender.times().writing_ns) / 1e9 / (static_cast<double>(total) / 1e9),
          static_cast<double>(sender.times().writing_cpu_ns) / 1e9 / (static_cast<double>(total) / 1e9)};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double median(const std::vector<LinkRun>& runs, double LinkRun::*field) {
  std::vector<double> values;
  for (const LinkRun& run : runs) values.push_back(run.*field);
  return median(std::move(values));
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  using namespace sluice;
  spdlog::set_level(spdlog::level::warn);
  const std::size_t total = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024) << 20;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const auto connections = static_cast<std::uint32_t>(argc > 3 ? std::atoi(argv[3]) : 4);
  std::printf("tcp link vs bare TCP loop on loopback, %zu MiB per run, %d interleaved runs each, medians\n",
              total >> 20, rounds);
  const std::string several_name = "x" + std::to_string(connections);
  std::printf("%10s %10s %12s %8s %12s %8s %13s %13s %13s %13s %11s %11s %13s\n", "chunk", "bare GB/s", "link x1 GB/s",
              "ratio", ("link " + several_name + " GB/s").c_str(), "ratio", "x1 busy/GB/s", "x1 cpu/GB/s",
              (several_name + " busy/GB/s").c_str(), (several_name + " cpu/GB/s").c_str(), "x1 write s/GB",
              (several_name + " write s/GB").c_str(), (several_name + " write cpu s/GB").c_str());
  for (const std::size_t chunk : {std::size_t{1} << 20, std::size_t{4} << 20, std::size_t{16} << 20}) {
    std::vector<double> bare;
    std::vector<LinkRun> one;
    std::vector<LinkRun> several;
    for (int round = 0; round < rounds; ++round) {
      // Rotate which goes first, so a neighbour's burst does not always hit the same side.
      for (int turn = 0; turn < 3; ++turn) {
        switch ((turn + round) % 3) {
          case 0:
            bare.push_back(bare_loop(chunk, total));
            break;
          case 1:
            one.push_back(link_transport(chunk, total, 1));
            break;
          default:
            several.push_back(link_transport(chunk, total, connections));
            break;
        }
      }
    }
    const double bare_median = median(bare);
    const double one_median = median(one, &LinkRun::bytes_per_second);
    const double several_median = median(several, &LinkRun::bytes_per_second);
    std::printf("%7zu MiB %10.2f %12.2f %8.2f %12.2f %8.2f %12.1f%% %12.1f%% %12.1f%% %12.1f%% %11.2f %11.2f %13.2f\n",
                chunk >> 20, bare_median / 1e9, one_median / 1e9, one_median / bare_median, several_median / 1e9,
                several_median / bare_median, 100 * median(one, &LinkRun::busy_per_gbps),
                100 * median(one, &LinkRun::cpu_per_gbps), 100 * median(several, &LinkRun::busy_per_gbps),
                100 * median(several, &LinkRun::cpu_per_gbps), median(one, &LinkRun::writing_per_gb),
                median(several, &LinkRun::writing_per_gb), median(several, &LinkRun::writing_cpu_per_gb));
  }
  return 0;
}
