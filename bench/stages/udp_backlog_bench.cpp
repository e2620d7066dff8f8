// What a socket's backlog costs its receiver, on loopback: the same bytes received from a queue
// kept short (filled a MiB at a time, then drained) against one filled deep first (16 MiB, and
// past the last level cache of most hosts: 256 and 768 MiB), and a deep
// queue drained by one thread against two (the udp stage's receive_standby).
//   udp_backlog_bench [--benchmark_repetitions=N]
// Both ways of each comparison alternate SLUICE_BENCH_ROUNDS times (default 5) within one
// benchmark run, the sender, the receiver and the second receiver each pinned to a core of its
// own (SLUICE_BENCH_RX_CPU, _TX_CPU, _RX2_CPU; defaults 2, 3, 4 where the host has five cores or
// more, else 0, 1, 1: the queue is filled before it is drained), and the ratio of their medians is
// reported. Every receive is the udp
// stage's: recvmmsg of 8 GRO buffers of 64 KiB; every send a GSO burst of 7 datagrams of 8972 bytes.
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "wire/socket.hpp"

namespace {

constexpr std::size_t kDatagram = 8972;
constexpr std::size_t kBurst = 7 * kDatagram;  // one GSO send
constexpr std::size_t kMessages = 8;           // the udp stage's default batch with GRO
constexpr std::size_t kGroBytes = 65536;
constexpr std::uint64_t kShallow = 1ULL << 20;  // the short queue's fill

int env_or(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::atoi(value);
}
const int kRounds = std::max(1, env_or("SLUICE_BENCH_ROUNDS", 5));
const bool kFiveCores = std::thread::hardware_concurrency() >= 5;
const int kRxCpu = env_or("SLUICE_BENCH_RX_CPU", kFiveCores ? 2 : 0);
const int kTxCpu = env_or("SLUICE_BENCH_TX_CPU", kFiveCores ? 3 : 1);
const int kRx2Cpu = env_or("SLUICE_BENCH_RX2_CPU", kFiveCores ? 4 : 1);  // the sender is idle while it drains

void pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<std::size_t>(cpu), &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
    throw std::runtime_error("cannot pin to core " + std::to_string(cpu));
}

std::uint64_t thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
}
std::uint64_t wall_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
}

// A GRO receiver holding up to `depth` (and more) and a GSO sender connected to it.
struct Loopback {
  explicit Loopback(std::uint64_t depth) {
    receiver.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sender.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    const int buffer = static_cast<int>(std::min<std::uint64_t>(2 * depth + (16ULL << 20), 1ULL << 30));
    if (::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer)) != 0)
      throw std::runtime_error("SO_RCVBUFFORCE needs CAP_NET_ADMIN: run as root");
    const int one = 1;
    if (::setsockopt(receiver.get(), SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0)
      throw std::runtime_error("UDP_GRO unavailable");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (::bind(receiver.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::getsockname(receiver.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
        ::connect(sender.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0)
      throw std::runtime_error("loopback socket pair");
    const int segment = kDatagram;
    if (::setsockopt(sender.get(), SOL_UDP, UDP_SEGMENT, &segment, sizeof(segment)) != 0)
      throw std::runtime_error("UDP_SEGMENT unavailable");
  }
  // `bytes` (whole bursts) queued at the receiver, sent from the sender's core.
  void fill(std::uint64_t bytes) {
    std::thread([&] {
      pin_self(kTxCpu);
      for (std::uint64_t sent = 0; sent < bytes; sent += kBurst) {
        if (::send(sender.get(), payload.data(), payload.size(), 0) != static_cast<ssize_t>(payload.size()))
          throw std::runtime_error("send");
      }
    }).join();
  }
  sluice::wire::UniqueFd receiver;
  sluice::wire::UniqueFd sender;
  std::vector<char> payload = std::vector<char>(kBurst, 1);
};

// A receiver's batch of buffers, written once before any timing so that no timed receive pays
// for their first touch.
struct Batch {
  Batch() {
    for (std::size_t i = 0; i < kMessages; ++i) {
      iovs[i] = {buffers.data() + i * kGroBytes, kGroBytes};
      headers[i].msg_hdr.msg_iov = &iovs[i];
      headers[i].msg_hdr.msg_iovlen = 1;
    }
  }
  std::vector<char> buffers = std::vector<char>(kMessages * kGroBytes, 0);
  std::array<iovec, kMessages> iovs{};
  std::array<mmsghdr, kMessages> headers{};
};

// Receives until the socket is empty, as the udp stage does; the bytes taken.
std::uint64_t drain(int fd, Batch& batch) {
  std::uint64_t bytes = 0;
  for (;;) {
    const int received = ::recvmmsg(fd, batch.headers.data(), kMessages, MSG_DONTWAIT, nullptr);
    if (received <= 0) return bytes;
    for (int i = 0; i < received; ++i) bytes += batch.headers[static_cast<std::size_t>(i)].msg_len;
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The receiver's CPU time a byte for `depth` bytes, queued at once (deep) or kShallow at a time.
double receive_ns_per_byte(Loopback& loopback, std::uint64_t depth, bool deep) {
  Batch batch;
  std::uint64_t cpu = 0;
  std::uint64_t bytes = 0;
  for (std::uint64_t done = 0; done < depth;) {
    const std::uint64_t step = deep ? depth : kShallow;
    loopback.fill(step);
    std::thread([&] {
      pin_self(kRxCpu);
      const std::uint64_t begin = thread_cpu_ns();
      bytes += drain(loopback.receiver.get(), batch);
      cpu += thread_cpu_ns() - begin;
    }).join();
    done += step;
  }
  return static_cast<double>(cpu) / static_cast<double>(bytes);
}

// `first` and `second` (each measuring on the benchmark's loopback pair) in turns, kRounds times
// each: their medians.
template <typename Measure>
std::pair<double, double> medians_in_turns(benchmark::State& state, Measure first, Measure second) {
  std::vector<double> firsts;
  std::vector<double> seconds;
  for (auto _ : state) {
    for (int round = 0; round < kRounds; ++round) {
      firsts.push_back(first());
      seconds.push_back(second());
    }
  }
  return {median(firsts), median(seconds)};
}

// A backlog of `depth` bytes received from a short queue and from a deep one, alternating.
void BM_BacklogReceiveCost(benchmark::State& state) {
  const std::uint64_t depth = static_cast<std::uint64_t>(state.range(0)) << 20;
  Loopback loopback(depth);
  const std::function<double()> shallow = [&] { return receive_ns_per_byte(loopback, depth, false); };
  const std::function<double()> deep = [&] { return receive_ns_per_byte(loopback, depth, true); };
  const auto [short_queue, deep_queue] = medians_in_turns(state, shallow, deep);
  state.counters["shallow_ns_per_KiB"] = short_queue * 1024;
  state.counters["deep_ns_per_KiB"] = deep_queue * 1024;
  state.counters["deep_vs_shallow"] = deep_queue / short_queue;
}
BENCHMARK(BM_BacklogReceiveCost)->Arg(16)->Arg(256)->Arg(768)->Iterations(1)->Unit(benchmark::kMillisecond);

// A backlog of `depth` bytes drained by `threads` receivers (the first on the receive core, the
// second on its own): the drain's rate in bytes/s.
double drain_rate(Loopback& loopback, std::uint64_t depth, int threads) {
  loopback.fill(depth);
  std::vector<std::thread> receivers;
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(threads));
  std::vector<Batch> batches(static_cast<std::size_t>(threads));
  const std::uint64_t begin = wall_ns();
  for (int k = 0; k < threads; ++k) {
    receivers.emplace_back([&, k] {
      pin_self(k == 0 ? kRxCpu : kRx2Cpu);
      bytes[static_cast<std::size_t>(k)] = drain(loopback.receiver.get(), batches[static_cast<std::size_t>(k)]);
    });
  }
  for (auto& receiver : receivers) receiver.join();
  const std::uint64_t took = wall_ns() - begin;
  std::uint64_t total = 0;
  for (const std::uint64_t part : bytes) total += part;
  return static_cast<double>(total) / (static_cast<double>(took) * 1e-9);
}

void BM_BacklogDrainTwoThreads(benchmark::State& state) {
  const std::uint64_t depth = static_cast<std::uint64_t>(state.range(0)) << 20;
  Loopback loopback(depth);
  const std::function<double()> one = [&] { return drain_rate(loopback, depth, 1); };
  const std::function<double()> two = [&] { return drain_rate(loopback, depth, 2); };
  const auto [one_thread, two_threads] = medians_in_turns(state, one, two);
  state.counters["one_thread_GBps"] = one_thread / 1e9;
  state.counters["two_threads_GBps"] = two_threads / 1e9;
  state.counters["two_vs_one"] = two_threads / one_thread;
}
BENCHMARK(BM_BacklogDrainTwoThreads)->Arg(256)->Arg(768)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
