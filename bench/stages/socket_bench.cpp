// The udp stage against a bare recvmmsg loop on loopback (same batch, receive buffer and GRO; no
// parsing or placing), fed by sluice-emulator in another process, every thread pinned alike.
//   socket_bench [--benchmark_repetitions=N]; SLUICE_BENCH_PACED_SECONDS=30 socket_bench --benchmark_filter=Paced
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/memory.hpp"
#include "pipeline/runtime.hpp"
#include "stages/socket/receive_thread.hpp"
#include "stages/socket/udp_source.hpp"
#include "suite/bare_udp.hpp"
#include "wire/samples.hpp"
#include "wire/socket.hpp"

extern char** environ;

namespace sluice {
namespace {

constexpr double kWarmupSeconds = 0.3;
constexpr double kMeasureSeconds = 1.0;
int env_or(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr ? std::atoi(text) : fallback;
}
// Bare and stage runs alternate this many times (SLUICE_BENCH_ROUNDS, default 3); the medians are
// reported, so that a neighbour's burst on a shared machine does not decide the ratio.
const int kRounds = std::max(1, env_or("SLUICE_BENCH_ROUNDS", 3));

// VsBare's pace in bytes/s for both receivers (SLUICE_BENCH_VS_BARE_RATE): 0 sends as fast as the
// emulator can, which compares rates; a pace both keep up with compares their CPU per byte at the
// same load, the udp stage's goal (at most 1.2x the bare loop's), e.g.
//   SLUICE_BENCH_VS_BARE_RATE=4e9 socket_bench --benchmark_filter='VsBare.*/8192'
const double kVsBareRate = [] {
  const char* text = std::getenv("SLUICE_BENCH_VS_BARE_RATE");
  return text != nullptr ? std::atof(text) : 0.0;
}();

// Datagrams per recvmmsg, the same for the bare loop and the stage: 0 takes the stage's default
// (default_udp_batch); SLUICE_BENCH_BATCH sets both.
const auto kBatch = static_cast<std::size_t>(env_or("SLUICE_BENCH_BATCH", 0));

// Both receivers (the bare loop's thread, the stage's thread) run on one core and the emulator
// on another, so that the scheduler's placement (another L3 domain, a busy sibling) cannot
// decide the ratio. Defaults: cores 2 and 3 where there are four or more, else 0 and 1;
// SLUICE_BENCH_RX_CPU / SLUICE_BENCH_TX_CPU override, -1 leaves placement to the scheduler.
const int kReceiveCpu = env_or("SLUICE_BENCH_RX_CPU", std::thread::hardware_concurrency() >= 4 ? 2 : 0);
const int kEmulatorCpu = env_or("SLUICE_BENCH_TX_CPU", std::thread::hardware_concurrency() >= 4 ? 3 : 1);
// Every other thread: the stage's sink, the runtime's monitor, this thread (SLUICE_BENCH_OTHER_CPU).
// With fewer than 4 cores it shares the emulator's core, and the figures say so in their label.
const int kOtherCpu = env_or("SLUICE_BENCH_OTHER_CPU", std::thread::hardware_concurrency() >= 4 ? 1 : kEmulatorCpu);
// The split (receive_thread: true): its receive thread on kReceiveCpu, the stage's own thread (the
// placing thread: checks, accounting, the copy into chunks) here (SLUICE_BENCH_PLACE_CPU): core 4
// where there are five or more, else kOtherCpu's.
const int kPlaceCpu = env_or("SLUICE_BENCH_PLACE_CPU", std::thread::hardware_concurrency() >= 5 ? 4 : kOtherCpu);
// The split's ring (receive_batches; SLUICE_BENCH_RECEIVE_BATCHES, 0: the stage's default).
const int kReceiveBatches = env_or("SLUICE_BENCH_RECEIVE_BATCHES", 0);

// One core's busy and total time from /proc/stat (clock ticks), so that both runs are charged
// the same way, kernel receive work included, whatever thread did it.
struct CpuTicks {
  std::uint64_t busy = 0;
  std::uint64_t total = 0;
};
CpuTicks cpu_ticks(int cpu) {
  CpuTicks ticks;
  if (cpu < 0) return ticks;
  std::FILE* stat = std::fopen("/proc/stat", "r");
  if (stat == nullptr) return ticks;
  const std::string wanted = "cpu" + std::to_string(cpu) + " ";
  std::array<char, 512> line{};
  while (std::fgets(line.data(), line.size(), stat) != nullptr) {
    if (std::strncmp(line.data(), wanted.c_str(), wanted.size()) != 0) continue;
    std::array<unsigned long long, 8> field{};  // user nice system idle iowait irq softirq steal
    if (std::sscanf(line.data() + wanted.size(), "%llu %llu %llu %llu %llu %llu %llu %llu", &field[0], &field[1],
                    &field[2], &field[3], &field[4], &field[5], &field[6], &field[7]) == 8) {
      for (auto value : field) ticks.total += value;
      ticks.busy = ticks.total - field[3] - field[4];
    }
  }
  std::fclose(stat);
  return ticks;
}

// Nanoseconds thread `tid` of this process has run, user and kernel (the first field of
// /proc/self/task/TID/schedstat): unlike a core's busy time, nothing else on that core counts.
std::uint64_t thread_run_ns(pid_t tid) {
  if (tid <= 0) return 0;
  std::FILE* file = std::fopen(("/proc/self/task/" + std::to_string(tid) + "/schedstat").c_str(), "r");
  if (file == nullptr) return 0;
  unsigned long long run_ns = 0;
  if (std::fscanf(file, "%llu", &run_ns) != 1) run_ns = 0;
  std::fclose(file);
  return run_ns;
}

// Times thread `tid` of this process gave up its core (voluntary_ctxt_switches in its status): each
// is a sleep and a wake-up (on a socket, a futex) that the receiving core pays for.
std::uint64_t thread_sleeps(pid_t tid) {
  if (tid <= 0) return 0;
  std::FILE* status = std::fopen(("/proc/self/task/" + std::to_string(tid) + "/status").c_str(), "r");
  if (status == nullptr) return 0;
  std::array<char, 512> line{};
  unsigned long long sleeps = 0;
  while (std::fgets(line.data(), line.size(), status) != nullptr) {
    if (std::sscanf(line.data(), "voluntary_ctxt_switches: %llu", &sleeps) == 1) break;
  }
  std::fclose(status);
  return sleeps;
}

// The udp stage's thread: this process's one thread allowed on kReceiveCpu alone (its `cpu:`).
pid_t thread_pinned_to_receive_cpu() {
  if (kReceiveCpu < 0) return 0;
  const std::string wanted = "Cpus_allowed_list:\t" + std::to_string(kReceiveCpu) + "\n";
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::FILE* status = std::fopen((task.path() / "status").c_str(), "r");
    if (status == nullptr) continue;
    std::array<char, 512> line{};
    bool pinned = false;
    while (std::fgets(line.data(), line.size(), status) != nullptr) pinned = pinned || wanted == line.data();
    std::fclose(status);
    if (pinned && std::atoi(task.path().filename().c_str()) != ::gettid())
      return std::atoi(task.path().filename().c_str());
  }
  return 0;
}

// CPU use over a window: receiving core seconds, the receiving thread's own seconds, and the
// emulator core's busy fraction.
struct CpuWindow {
  explicit CpuWindow(pid_t receive_thread) : thread(receive_thread) {}
  pid_t thread;
  CpuTicks receive_begin = cpu_ticks(kReceiveCpu);
  CpuTicks emulator_begin = cpu_ticks(kEmulatorCpu);
  std::uint64_t thread_begin_ns = thread_run_ns(thread);
  std::uint64_t sleeps_begin = thread_sleeps(thread);
  double receive_seconds = 0;
  double thread_seconds = 0;
  double thread_sleeps_count = 0;
  double emulator_busy = 0;
  void end() {
    const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
    const CpuTicks receive = cpu_ticks(kReceiveCpu);
    const CpuTicks emulator = cpu_ticks(kEmulatorCpu);
    receive_seconds = static_cast<double>(receive.busy - receive_begin.busy) / tick;
    thread_seconds = static_cast<double>(thread_run_ns(thread) - thread_begin_ns) / 1e9;
    thread_sleeps_count = static_cast<double>(thread_sleeps(thread) - sleeps_begin);
    const auto total = static_cast<double>(emulator.total - emulator_begin.total);
    emulator_busy = total > 0 ? static_cast<double>(emulator.busy - emulator_begin.busy) / total : 0;
  }
};

// A pin that fails is said on stderr: the ratio is then measured unpinned, and whoever reads
// it must know.
void pin(pid_t pid, int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(cpu), &set);
  if (::sched_setaffinity(pid, sizeof(set), &set) != 0) {
    std::fprintf(stderr, "socket_bench: cannot pin %s to CPU %d: %s; running unpinned\n",
                 pid == 0 ? "the receiver" : "the emulator", cpu, std::strerror(errno));
  }
}

// Pins the calling thread for the lifetime of the guard, then restores its affinity.
class PinnedThread {
 public:
  explicit PinnedThread(int cpu) : saved_valid_(::sched_getaffinity(0, sizeof(saved_), &saved_) == 0) { pin(0, cpu); }
  PinnedThread(const PinnedThread&) = delete;
  PinnedThread& operator=(const PinnedThread&) = delete;
  ~PinnedThread() {
    if (saved_valid_) ::sched_setaffinity(0, sizeof(saved_), &saved_);
  }

 private:
  cpu_set_t saved_{};
  bool saved_valid_;
};

// The emulator in its own process; killed and reaped by the destructor.
class EmulatorProcess {
 public:
  EmulatorProcess(std::uint16_t port, std::size_t payload, double seconds, double rate) {
    // SLUICE_EMULATOR: where the program is when the benchmark runs on another machine.
    const char* program = std::getenv("SLUICE_EMULATOR");
    std::vector<std::string> args{program != nullptr ? program : SLUICE_EMULATOR_PATH,
                                  "--to",
                                  "127.0.0.1:" + std::to_string(port),
                                  "--payload",
                                  std::to_string(payload),
                                  "--duration",
                                  std::to_string(static_cast<int>(seconds * 1000)) + "ms",
                                  "--batch",
                                  "64",
                                  "-q"};
    if (rate > 0) {
      args.emplace_back("--rate");
      args.push_back(std::to_string(static_cast<std::uint64_t>(rate)));
    }
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
    if (pid_ > 0) pin(pid_, kEmulatorCpu);
  }
  EmulatorProcess(const EmulatorProcess&) = delete;
  EmulatorProcess& operator=(const EmulatorProcess&) = delete;
  ~EmulatorProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  [[nodiscard]] bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

struct ReceiveResult {
  double packet_rate = 0;
  double receive_cpu_seconds_per_gb = 0;  // the receiving core, over the measured window
  double thread_cpu_seconds_per_gb = 0;   // the receiving thread alone, over the same window
  double emulator_busy = 0;               // fraction of the emulator's core
  double thread_sleeps_per_mb = 0;        // the receiving thread's sleeps (and so wake-ups) per MB
};

ReceiveResult with_cpu(double packets_per_second, std::size_t payload, const CpuWindow& window,
                       double seconds = kMeasureSeconds) {
  const double gigabytes = packets_per_second * seconds * static_cast<double>(payload) / 1e9;
  return ReceiveResult{packets_per_second, gigabytes > 0 ? window.receive_seconds / gigabytes : 0,
                       gigabytes > 0 ? window.thread_seconds / gigabytes : 0, window.emulator_busy,
                       gigabytes > 0 ? window.thread_sleeps_count / gigabytes / 1e3 : 0};
}

// The split's placing thread as a neighbour of the bare loop (VsBare's bare_read), so that the
// two are pinned alike: on kPlaceCpu it waits for each of the loop's receives the way
// ReceiveThread::next waits for a batch (spinning, then napping) and reads every cache line of
// what the receive filled, message slot by message slot. The loop never waits for it.
class BareReader {
 public:
  explicit BareReader(const bench::BareUdpReceiver& receiver) : receiver_(receiver), thread_([this] { run(); }) {}
  BareReader(const BareReader&) = delete;
  BareReader& operator=(const BareReader&) = delete;
  ~BareReader() {
    stop_.store(true);
    thread_.join();
  }
  // The loop's thread, after each receive: it filled `bytes` (0: nothing came).
  void filled(std::uint64_t bytes) noexcept {
    if (bytes == 0) return;
    last_bytes_.store(bytes, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_release);
  }

 private:
  void run() noexcept {
    pin(0, kPlaceCpu);
    std::uint64_t seen = 0;
    std::uint64_t sum = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      const std::uint64_t begin = monotonic_ns();
      std::uint64_t calls = 0;
      while ((calls = calls_.load(std::memory_order_acquire)) == seen && !stop_.load(std::memory_order_relaxed)) {
        if (monotonic_ns() - begin < ReceiveThread::kConsumerSpinNs) {
          cpu_relax();
        } else {
          std::this_thread::sleep_for(ReceiveThread::kConsumerNap);
        }
      }
      seen = calls;
      std::uint64_t left = last_bytes_.load(std::memory_order_relaxed);
      for (std::size_t i = 0; left > 0 && i < receiver_.batch(); ++i) {
        const std::size_t bytes = std::min<std::uint64_t>(left, receiver_.slot_bytes());
        const std::byte* data = receiver_.slot(i);
        for (std::size_t at = 0; at < bytes; at += 64) sum += static_cast<std::uint64_t>(data[at]);
        left -= bytes;
      }
    }
    benchmark::DoNotOptimize(sum);
  }

  const bench::BareUdpReceiver& receiver_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> calls_{0};
  std::atomic<std::uint64_t> last_bytes_{0};
  std::thread thread_;
};

// Bare receive (bare_udp.hpp): recvmmsg with GRO, counting datagrams (segments), nothing else;
// `with_reader`: beside a BareReader.
ReceiveResult bare_receive(std::size_t payload, double rate = 0, bool with_reader = false) {
  bench::BareUdpReceiver receiver("127.0.0.1:0", 256 << 20, kBatch);
  std::optional<BareReader> reader;
  if (with_reader) reader.emplace(receiver);
  const PinnedThread pinned(kReceiveCpu);
  EmulatorProcess emulator(receiver.port(), payload, kWarmupSeconds + kMeasureSeconds + 0.5, rate);
  if (!emulator.running()) return {};
  std::optional<CpuWindow> window;
  std::uint64_t begin_ns = 0;
  std::uint64_t start_ns = monotonic_ns();
  const auto warmup_ns = static_cast<std::uint64_t>(kWarmupSeconds * 1e9);
  const auto measure_ns = static_cast<std::uint64_t>(kMeasureSeconds * 1e9);
  for (;;) {
    const std::uint64_t now = monotonic_ns();
    if (begin_ns == 0 && now - start_ns >= warmup_ns) {
      begin_ns = now;
      receiver.reset_counts();
      window.emplace(::gettid());
    }
    if (begin_ns != 0 && now - begin_ns >= measure_ns) break;
    if (now - start_ns > 10'000'000'000ULL) return {};
    const std::uint64_t before = receiver.bytes();
    receiver.receive_once();
    if (reader) reader->filled(receiver.bytes() - before);
  }
  window->end();
  return with_cpu(static_cast<double>(receiver.packets()) / kMeasureSeconds, payload, *window);
}

struct StageResult {
  ReceiveResult receive;
  double place_cpu_seconds_per_gb = 0;  // the split's placing thread (the stage's own), over the window
  double receive_waits_per_second = 0;  // the split's receive thread finding no free slot, over the run
  double packet_rate = 0;
  std::uint64_t packets = 0;
  std::uint64_t lost_samples = 0;
  std::uint64_t lost_packets = 0;
  std::uint64_t drops = 0;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

std::uint64_t named(const std::deque<NamedCounter>& counters, const std::string& name) {
  for (const auto& counter : counters) {
    if (counter.name == name) return counter.get();
  }
  return 0;
}

// How the udp stage receives: on its own thread (inline), or on a receive thread of its own
// with the stage's thread placing (split: receive_thread: true).
enum class StageWay { inline_receive, split };

// The stage's settings for `way`: its thread (inline) or its receive thread (split) on kReceiveCpu.
std::string way_settings(StageWay way) {
  const auto core = [](const char* key, int cpu) {
    return cpu >= 0 ? ", " + std::string(key) + ": " + std::to_string(cpu) : std::string();
  };
  if (way == StageWay::inline_receive) return core("cpu", kReceiveCpu);
  return ", receive_thread: true" + core("receive_cpu", kReceiveCpu) + core("cpu", kPlaceCpu) +
         (kReceiveBatches > 0 ? ", receive_batches: " + std::to_string(kReceiveBatches) : std::string());
}

// The udp stage into a null sink; `rate` 0 = emulator unpaced, measured over the window.
StageResult stage_run(std::size_t payload, double rate, double seconds, StageWay way = StageWay::inline_receive) {
  const std::string yaml =
      "pipeline: {chunk: 4MiB, chunks: 32}\n"
      "template:\n"
      "  - {name: source, type: udp, address: 127.0.0.1:0, batch: " +
      std::to_string(kBatch) + ", max_datagram: 9000, receive_buffer: 256MiB" + way_settings(way) +
      "}\n"
      "  - {name: sink, type: \"null\"" +
      (kOtherCpu >= 0 ? ", cpu: " + std::to_string(kOtherCpu) : std::string()) +
      "}\n"
      "lanes: [{name: port0}]\n";
  Pipeline pipeline(load_pipeline_text(yaml, "<bench>"));
  pipeline.start();                       // before pinning this thread: start checks the pins against its affinity
  const PinnedThread waiting(kOtherCpu);  // this thread only waits; it stays off the two measured cores
  auto* stage = dynamic_cast<UdpSource*>(pipeline.definition().lanes[0].stages[0].stage.get());
  std::thread runner([&] {
    pin(0, kOtherCpu);  // the runtime's monitor loop runs on this thread
    pipeline.run();
  });
  StageResult result;
  const StageMetrics& metrics = *pipeline.metrics().front();
  {
    EmulatorProcess emulator(stage->port(), payload, kWarmupSeconds + seconds + 0.5, rate);
    std::this_thread::sleep_for(std::chrono::duration<double>(kWarmupSeconds));
    const std::uint64_t before = metrics.packets.load();
    // Split: the thread alone on kReceiveCpu is the receive thread, and the stage's own thread places.
    const ReceiveThread* split = stage->receive_thread();
    CpuWindow window(thread_pinned_to_receive_cpu());
    const std::uint64_t place_before_ns = split != nullptr ? split->consumer_cpu_ns() : 0;
    const std::uint64_t received_before = split != nullptr ? split->received_bytes() : 0;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    window.end();
    const std::uint64_t placed = metrics.packets.load() - before;
    result.packet_rate = static_cast<double>(placed) / seconds;
    // The receive side is charged for what it received in the window: with a backlog in the ring
    // or the socket, the stage's thread places more or less than that meanwhile.
    const double received_rate = split != nullptr ? static_cast<double>(split->received_bytes() - received_before) /
                                                        static_cast<double>(payload) / seconds
                                                  : result.packet_rate;
    result.receive = with_cpu(received_rate, payload, window, seconds);
    if (split != nullptr) {
      const double gigabytes = static_cast<double>(placed * payload) / 1e9;
      result.place_cpu_seconds_per_gb =
          gigabytes > 0 ? static_cast<double>(split->consumer_cpu_ns() - place_before_ns) / 1e9 / gigabytes : 0;
    }
  }  // the emulator has finished (or is stopped) here
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  pipeline.request_stop();
  runner.join();
  result.packets = metrics.packets.load();
  result.lost_samples = named(metrics.counters(), "lost_samples");
  result.lost_packets = named(metrics.counters(), "lost_packets");
  result.drops = metrics.total_drops();
  result.receive_waits_per_second =
      static_cast<double>(named(metrics.counters(), "receive_thread_waits")) / (kWarmupSeconds + seconds + 0.5);
  return result;
}

// One receiver's figures over the rounds, each kept for its median.
struct RoundFigures {
  std::vector<double> packet_rate;
  std::vector<double> core_cpu;    // receive core's CPU s/GB
  std::vector<double> thread_cpu;  // receiving thread's own CPU s/GB
  std::vector<double> sender_busy;
  std::vector<double> place_cpu;      // split: the placing thread's CPU s/GB
  std::vector<double> receive_waits;  // split: the receive thread's waits for a batch a second
  std::vector<double> sleeps;         // the receiving thread's sleeps per MB
  void add(const ReceiveResult& result, double place = 0, double waits = 0) {
    sleeps.push_back(result.thread_sleeps_per_mb);
    receive_waits.push_back(waits);
    packet_rate.push_back(result.packet_rate);
    core_cpu.push_back(result.receive_cpu_seconds_per_gb);
    thread_cpu.push_back(result.thread_cpu_seconds_per_gb);
    sender_busy.push_back(result.emulator_busy);
    place_cpu.push_back(place);
  }
};

// The counters of BM_UdpStageVsBareReceive, from each receiver's rounds.
struct VsBareRounds {
  const RoundFigures& bare;
  const RoundFigures& bare_read;
  const RoundFigures& stage;
  const RoundFigures& split;
};
void report_vs_bare(benchmark::State& state, std::size_t payload, double bare_rate, const VsBareRounds& rounds,
                    const std::vector<double>& ratios) {
  const RoundFigures& bare = rounds.bare;
  const RoundFigures& bare_read = rounds.bare_read;
  const RoundFigures& stage = rounds.stage;
  const RoundFigures& split = rounds.split;
  const double stage_rate = median(stage.packet_rate);
  state.counters["bare_Mpps"] = bare_rate / 1e6;
  state.counters["stage_Mpps"] = stage_rate / 1e6;
  state.counters["stage_GBps"] = stage_rate * static_cast<double>(payload) / 1e9;
  state.counters["ratio"] = stage_rate / bare_rate;    // target >= 0.9: the ratio of the medians
  state.counters["ratio_per_round"] = median(ratios);  // the median of the per-round ratios, beside it
  // Receiving core's CPU seconds per GB (lower is cheaper), and the emulator core's busy fraction:
  // near 1.0 the sender is the bound, whichever receiver is measured.
  state.counters["bare_rx_cpu_s_per_GB"] = median(bare.core_cpu);
  state.counters["stage_rx_cpu_s_per_GB"] = median(stage.core_cpu);
  state.counters["stage_vs_bare_cpu"] =
      median(stage.core_cpu) / median(bare.core_cpu);  // goal <= 1.2 at a pace both keep up with
  // The receiving threads' own run time per GB (schedstat): what a shared core's neighbours do
  // is not in it, so it is the ratio to read where other work runs on the receive core.
  state.counters["bare_thread_cpu_s_per_GB"] = median(bare.thread_cpu);
  state.counters["stage_thread_cpu_s_per_GB"] = median(stage.thread_cpu);
  state.counters["stage_vs_bare_thread_cpu"] = median(stage.thread_cpu) / median(bare.thread_cpu);
  state.counters["bare_sender_busy"] = median(bare.sender_busy);
  state.counters["stage_sender_busy"] = median(stage.sender_busy);
  // The split: its receive core and receive thread against the bare loop's (goal <= 1.2), and its
  // placing thread, whose work the inline stage does on its receive core.
  state.counters["split_Mpps"] = median(split.packet_rate) / 1e6;
  state.counters["split_rx_cpu_s_per_GB"] = median(split.core_cpu);
  state.counters["split_vs_bare_cpu"] = median(split.core_cpu) / median(bare.core_cpu);
  state.counters["split_thread_cpu_s_per_GB"] = median(split.thread_cpu);
  state.counters["split_vs_bare_thread_cpu"] = median(split.thread_cpu) / median(bare.thread_cpu);
  state.counters["split_place_cpu_s_per_GB"] = median(split.place_cpu);
  state.counters["split_sender_busy"] = median(split.sender_busy);
  // How often a second the receive thread found every slot with the placing thread and waited.
  state.counters["split_receive_waits_per_s"] = median(split.receive_waits);
  // How often the receiving thread slept (on its socket, or on the ring) per MB received: each
  // sleep is a wake-up that its core pays for, which the bare loop pays on its socket alone.
  state.counters["bare_sleeps_per_MB"] = median(bare.sleeps);
  state.counters["split_sleeps_per_MB"] = median(split.sleeps);
  // The split against the bare loop with a reader on the placing core (BareReader): the same
  // threads on the same cores, the same bytes read by another core; what is left is the ring and
  // its handover. Where the placing core is the emulator's, the reader's naps there change how the
  // emulator's datagrams bunch and so the receiver's wake-ups, as the placing thread's do.
  state.counters["bare_read_thread_cpu_s_per_GB"] = median(bare_read.thread_cpu);
  state.counters["bare_read_rx_cpu_s_per_GB"] = median(bare_read.core_cpu);
  state.counters["bare_read_sleeps_per_MB"] = median(bare_read.sleeps);
  state.counters["split_vs_bare_read_thread_cpu"] = median(split.thread_cpu) / median(bare_read.thread_cpu);
  state.counters["split_vs_bare_read_cpu"] = median(split.core_cpu) / median(bare_read.core_cpu);
}

// Bare loop, bare loop beside a reader (BareReader), udp stage receiving on its own thread, and
// the split (receive thread + placing thread) in alternating rounds at the same pace, medians
// reported. Against the bare loop: the receive core's CPU per GB (/proc/stat) and the receiving
// thread's own (schedstat); for the split
// also its placing thread's CPU per GB, which the inline stage's thread spends on its one core.
// The ratio is what validation, loss accounting and the payloads' way into chunks cost; where the
// emulator's core is near 100% busy and both receivers have time to spare, the sender bounds the
// rate and the ratio says little.
void BM_UdpStageVsBareReceive(benchmark::State& state) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  RoundFigures bare;
  RoundFigures bare_read;  // the bare loop beside a BareReader: pinned as the split is
  RoundFigures stage;
  RoundFigures split;
  std::vector<double> ratios;
  for (auto _ : state) {
    for (int round = 0; round < kRounds; ++round) {
      bare.add(bare_receive(payload, kVsBareRate));
      bare_read.add(bare_receive(payload, kVsBareRate, true));
      stage.add(stage_run(payload, kVsBareRate, kMeasureSeconds).receive);
      const StageResult split_round = stage_run(payload, kVsBareRate, kMeasureSeconds, StageWay::split);
      split.add(split_round.receive, split_round.place_cpu_seconds_per_gb, split_round.receive_waits_per_second);
      ratios.push_back(bare.packet_rate.back() > 0 ? stage.packet_rate.back() / bare.packet_rate.back() : 0);
    }
  }
  const double bare_rate = median(bare.packet_rate);
  if (bare_rate <= 0) {
    state.SkipWithError("bare receive loop got no packets (emulator did not start?)");
    return;
  }
  report_vs_bare(state, payload, bare_rate, {bare, bare_read, stage, split}, ratios);
  state.SetLabel(
      (kVsBareRate > 0 ? "paced " + std::to_string(kVsBareRate / 1e9) + " GB/s, " : std::string("unpaced, ")) +
      "rx cpu " + std::to_string(kReceiveCpu) + ", emulator cpu " + std::to_string(kEmulatorCpu) +
      ", other threads cpu " + std::to_string(kOtherCpu) + ", split placing cpu " + std::to_string(kPlaceCpu));
}
BENCHMARK(BM_UdpStageVsBareReceive)->Arg(1472)->Arg(8192)->Iterations(1)->Unit(benchmark::kSecond);

// The udp stage paced at 0.8x the bare loop's rate must lose nothing (SLUICE_BENCH_PACED_SECONDS, 3).
void BM_UdpStagePacedNoLoss(benchmark::State& state) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  double seconds = 3;
  if (const char* text = std::getenv("SLUICE_BENCH_PACED_SECONDS"); text != nullptr) seconds = std::atof(text);
  double bare = 0;
  StageResult stage;
  for (auto _ : state) {
    bare = bare_receive(payload).packet_rate;
    stage = stage_run(payload, 0.8 * bare * static_cast<double>(payload), seconds);
  }
  state.counters["bare_Mpps"] = bare / 1e6;
  state.counters["paced_Mpps"] = stage.packet_rate / 1e6;
  state.counters["seconds"] = seconds;
  state.counters["lost_samples"] = static_cast<double>(stage.lost_samples);
  state.counters["lost_packets"] = static_cast<double>(stage.lost_packets);
  state.counters["drops"] = static_cast<double>(stage.drops);
  if (stage.lost_samples != 0 || stage.drops != 0) {
    static std::string message;
    message = "lost at 0.8x the bare receive rate: " + std::to_string(stage.lost_samples) + " samples, " +
              std::to_string(stage.lost_packets) + " packets of " + std::to_string(stage.packets);
    state.SkipWithError(message.c_str());
  }
}
BENCHMARK(BM_UdpStagePacedNoLoss)->Arg(1472)->Arg(8192)->Iterations(1)->Unit(benchmark::kSecond);

// Where a received byte goes, six ways (and a seventh on request), each on the same paced stream (8972-byte VITA-49
// datagrams, GRO, batches of 8 as the stage's): `hot` receives into the same 512 KiB of buffers
// every time (the bare loop); `copy` also streams every payload byte-swapped into a 128 MiB ring
// of chunk-sized memory (the udp stage's copy); `land` has the kernel
// write every payload straight into that ring (iovecs: the header to a side buffer, the payload
// to the ring), no copy of its own; `land_swap` is `land` plus the byte swap in place right after
// the receive. The ring is a host MemoryRegion, as a chunk pool's
// slab: every page touched, 2 MiB pages where the kernel gives them (on 4 KiB pages `land` pays a
// TLB miss per 4 KiB the kernel writes, which is not what a pool costs). Reported: the receiving thread's CPU seconds
// per GB for each and the ratios to `hot`. SLUICE_BENCH_LANDING_RATE (bytes/s, default 500e6)
// sets the pace; SLUICE_BENCH_LANDING_WAYS (e.g. "hot,land_swap") picks the ways, among them
// `land_swap_each` (not run by default): a message a call, as the stage receives, each swapped
// right after its receive. Two more ways are the receive thread's ring (receive_thread: true)
// without its handover: `ring` receives each call into the next batch of a ring of
// SLUICE_BENCH_RECEIVE_BATCHES (default 4) batches of 512 KiB, `ring_read` also has a thread on
// the split's placing core read every batch it filled, as the stage's thread does: `ring` over
// `hot` is the ring's footprint, `ring_read` over `ring` the cost of another core reading it. The
// reader spins: on a core of its own (five cores or more) it changes nothing else; sharing the
// emulator's core it changes how the emulator's datagrams bunch, and with that the receiver's
// wake-ups, which this ratio then mixes in.
enum class Landing { hot, copy, land, land_swap, land_swap_each, ring, ring_read };

class LandingReceiver {
 public:
  static constexpr std::size_t kDatagram = 8972;
  static constexpr std::size_t kHeader = 28;
  static constexpr std::size_t kPayload = kDatagram - kHeader;
  static constexpr std::size_t kSegments = 65536 / kDatagram;  // datagrams in one GRO buffer
  static constexpr std::size_t kBatch = 8;

  // land_swap_each: a message a call (as the udp stage receives), each swapped right after its
  // receive while its 62 KiB are still in L1/L2.
  void receive_each() {
    int got = 0;
    for (std::size_t i = 0; i < kBatch; ++i) {
      const int one = ::recvmmsg(socket_.get(), &messages_[i], 1, i == 0 ? MSG_WAITFORONE : MSG_DONTWAIT, nullptr);
      if (one <= 0) break;
      ++got;
      const std::size_t length = messages_[i].msg_len;
      bytes_ += length;
      const std::size_t segments = (length + kDatagram - 1) / kDatagram;
      for (std::size_t k = 0; k < segments; ++k) {
        const std::size_t payload = std::min(kDatagram, length - k * kDatagram) - kHeader;
        wire::swap_in_place(SampleFormat::ci16, ring_.data() + (at_ + i * kSegments + k) * kPayload, payload);
      }
    }
    at_ += static_cast<std::size_t>(got) * kSegments;
  }

  explicit LandingReceiver(Landing how) : how_(how), socket_(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    const int buffer = 256 << 20;
    const int one = 1;
    const timeval timeout{0, 10'000};
    (void)::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer));
    (void)::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    (void)::setsockopt(socket_.get(), SOL_UDP, UDP_GRO, &one, sizeof(one));
    sockaddr_in address = *wire::parse_endpoint("127.0.0.1:0");
    if (::bind(socket_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return;
    socklen_t length = sizeof(address);
    ::getsockname(socket_.get(), reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }
  // ring_read: on another thread, reads each batch the receiving thread filled (every cache line
  // of it, the latest one when it lags) until `stop`.
  void read_ring(const std::atomic<bool>& stop) const {
    std::uint64_t seen = 0;
    std::uint64_t sum = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::uint64_t filled = filled_calls_.load(std::memory_order_acquire);
      if (filled == seen) {
        cpu_relax();
        continue;
      }
      seen = filled;
      const std::byte* batch = shared_.data() + ((filled - 1) % shared_batches_) * kBatch * 65536;
      for (std::size_t at = 0; at < kBatch * 65536; at += 64) sum += static_cast<std::uint64_t>(batch[at]);
    }
    benchmark::DoNotOptimize(sum);
  }

  // One recvmmsg (waits at most 10 ms for the first datagram), then this way's work on it.
  void receive_once() {
    constexpr std::size_t kRingSlots = (std::size_t{128} << 20) / kPayload;
    if (at_ + kBatch * kSegments > kRingSlots) at_ = 0;
    for (std::size_t i = 0; i < kBatch; ++i) {
      msghdr& header = messages_[i].msg_hdr;
      header = {};
      if (how_ == Landing::land || how_ == Landing::land_swap || how_ == Landing::land_swap_each) {
        for (std::size_t k = 0; k < kSegments; ++k) {
          iovs_[i * 2 * kSegments + 2 * k] = {headers_.data() + k * kHeader, kHeader};
          iovs_[i * 2 * kSegments + 2 * k + 1] = {ring_.data() + (at_ + i * kSegments + k) * kPayload, kPayload};
        }
        header.msg_iov = &iovs_[i * 2 * kSegments];
        header.msg_iovlen = 2 * kSegments;
      } else if (how_ == Landing::ring || how_ == Landing::ring_read) {
        iovs_[i] = {shared_.data() + ((calls_ % shared_batches_) * kBatch + i) * 65536, 65536};
        header.msg_iov = &iovs_[i];
        header.msg_iovlen = 1;
      } else {
        iovs_[i] = {hot_.data() + i * 65536, 65536};
        header.msg_iov = &iovs_[i];
        header.msg_iovlen = 1;
      }
      header.msg_control = controls_.data() + i * 64;
      header.msg_controllen = 64;
    }
    if (how_ == Landing::land_swap_each) {
      receive_each();
      return;
    }
    const int got = ::recvmmsg(socket_.get(), messages_.data(), kBatch, MSG_WAITFORONE, nullptr);
    if (got > 0) filled_calls_.store(++calls_, std::memory_order_release);
    for (int i = 0; i < got; ++i) {
      const std::size_t length = messages_[static_cast<std::size_t>(i)].msg_len;
      bytes_ += length;
      if (how_ == Landing::land_swap) {
        const std::size_t segments = (length + kDatagram - 1) / kDatagram;
        for (std::size_t k = 0; k < segments; ++k) {
          const std::size_t payload = std::min(kDatagram, length - k * kDatagram) - kHeader;
          wire::swap_in_place(SampleFormat::ci16,
                              ring_.data() + (at_ + static_cast<std::size_t>(i) * kSegments + k) * kPayload, payload);
        }
      }
      if (how_ != Landing::copy) continue;
      for (std::size_t offset = 0; offset + kHeader < length; offset += kDatagram, ++at_) {
        const std::size_t payload = std::min(kDatagram, length - offset) - kHeader;
        wire::stream_copy(SampleFormat::ci16, true,
                          hot_.data() + static_cast<std::size_t>(i) * 65536 + offset + kHeader,
                          ring_.data() + at_ * kPayload, payload);
      }
    }
    if ((how_ == Landing::land || how_ == Landing::land_swap) && got > 0)
      at_ += static_cast<std::size_t>(got) * kSegments;
    wire::stream_fence();
  }

 private:
  Landing how_;
  wire::UniqueFd socket_;
  std::uint16_t port_ = 0;
  std::uint64_t bytes_ = 0;
  std::size_t at_ = 0;  // ring slot of the next payload
  std::vector<std::byte> hot_ = std::vector<std::byte>(kBatch * 65536);
  std::size_t shared_batches_ = static_cast<std::size_t>(kReceiveBatches > 0 ? kReceiveBatches : 4);
  std::vector<std::byte> shared_ = std::vector<std::byte>(shared_batches_ * kBatch * 65536);
  std::uint64_t calls_ = 0;                     // recvmmsg calls that received
  std::atomic<std::uint64_t> filled_calls_{0};  // calls_, for ring_read's reader
  MemoryRegion ring_{MemoryKind::host, std::size_t{128} << 20};
  std::vector<std::byte> headers_ = std::vector<std::byte>(kSegments * kHeader);
  std::array<iovec, kBatch * 2 * kSegments> iovs_{};
  std::array<mmsghdr, kBatch> messages_{};
  std::array<std::byte, kBatch * 64> controls_{};
};

// This thread's CPU time, user and system (its receive calls): other processes on a shared core
// are not charged to it.
double thread_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// The receiving thread's CPU seconds per GB for one way at `rate` bytes/s, over 2 s of the stream.
double landing_cpu_per_gb(Landing how, double rate) {
  LandingReceiver receiver(how);
  std::atomic<bool> stop_reading{false};
  std::thread reader;
  if (how == Landing::ring_read) {
    reader = std::thread([&] {
      pin(0, kPlaceCpu);
      receiver.read_ring(stop_reading);
    });
  }
  struct JoinReader {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~JoinReader() {
      stop.store(true);
      if (thread.joinable()) thread.join();
    }
  } join_reader{stop_reading, reader};
  const PinnedThread pinned(kReceiveCpu);
  EmulatorProcess emulator(receiver.port(), LandingReceiver::kDatagram, kWarmupSeconds + 2.5, rate);
  if (!emulator.running() || receiver.port() == 0) return 0;
  const std::uint64_t start = monotonic_ns();
  while (monotonic_ns() - start < static_cast<std::uint64_t>(kWarmupSeconds * 1e9)) receiver.receive_once();
  const std::uint64_t before = receiver.bytes();
  const double cpu_before = thread_cpu_seconds();
  while (monotonic_ns() - start < static_cast<std::uint64_t>((kWarmupSeconds + 2) * 1e9)) receiver.receive_once();
  const double cpu_seconds = thread_cpu_seconds() - cpu_before;
  const double gigabytes = static_cast<double>(receiver.bytes() - before) / 1e9;
  return gigabytes > 0 ? cpu_seconds / gigabytes : 0;
}

void BM_ReceiveLanding(benchmark::State& state) {
  const char* text = std::getenv("SLUICE_BENCH_LANDING_RATE");
  const double rate = text != nullptr ? std::atof(text) : 500e6;
  const char* ways_text = std::getenv("SLUICE_BENCH_LANDING_WAYS");
  const std::string ways = ways_text != nullptr ? ways_text : "hot,copy,land,land_swap,ring,ring_read";
  const std::array<std::pair<Landing, const char*>, 7> all{{{Landing::hot, "hot"},
                                                            {Landing::copy, "copy"},
                                                            {Landing::land, "land"},
                                                            {Landing::land_swap, "land_swap"},
                                                            {Landing::land_swap_each, "land_swap_each"},
                                                            {Landing::ring, "ring"},
                                                            {Landing::ring_read, "ring_read"}}};
  std::array<std::vector<double>, 7> cpu;
  for (auto _ : state) {
    for (int round = 0; round < kRounds; ++round) {
      for (std::size_t w = 0; w < all.size(); ++w) {
        if (ways.find(all[w].second) == std::string::npos) continue;
        // "land" is also a prefix of "land_swap": match whole names.
        const std::string name = all[w].second;
        const bool named_way = ("," + ways + ",").find("," + name + ",") != std::string::npos;
        if (named_way) cpu[w].push_back(landing_cpu_per_gb(all[w].first, rate));
      }
    }
  }
  const double hot = median(cpu[0]);
  for (std::size_t w = 0; w < all.size(); ++w) {
    if (cpu[w].empty()) continue;
    state.counters[std::string(all[w].second) + "_rx_cpu_s_per_GB"] = median(cpu[w]);
    if (w > 0 && hot > 0) state.counters[std::string(all[w].second) + "_vs_hot"] = median(cpu[w]) / hot;
  }
  state.SetLabel("rate " + std::to_string(rate / 1e9) + " GB/s, rx cpu " + std::to_string(kReceiveCpu));
}
BENCHMARK(BM_ReceiveLanding)->Iterations(1)->Unit(benchmark::kSecond);

// The udp stage's copy from its receive buffers into chunks, by the width of its streamed stores.
// A batch as the stage receives it (57 datagrams of 8972 bytes: a 28-byte VITA-49 header and 8944
// bytes of ci16, about 512 KiB and so cache-hot) is copied payload after payload, byte-swapped,
// into a 512 MiB pool (32 chunks of 16 MiB, as the dual-port pipeline's, every page touched
// first), on the receive core. Rounds alternate three copies of the same bytes: copy_swapped
// (ordinary stores, the stage's copy before stop 18), stream_copy with 16-byte SSE2 stores and,
// where the CPU has AVX-512BW, with 64-byte stores. Each copy's GB/s is the median of its rounds;
// the ratios are of those medians.
void BM_ChunkCopyByStoreWidth(benchmark::State& state) {
  constexpr std::size_t kDatagram = 8972;
  constexpr std::size_t kHeader = 28;
  constexpr std::size_t kPayload = kDatagram - kHeader;
  constexpr std::size_t kDatagrams = 57;
  constexpr int kCopyRounds = 7;
  const PinnedThread pinned(kReceiveCpu);
  std::vector<std::byte> received(kDatagrams * kDatagram);
  for (std::size_t i = 0; i < received.size(); ++i) received[i] = static_cast<std::byte>(i * 131 + 7);
  std::vector<std::byte> pool(std::size_t{512} << 20);
  std::memset(pool.data(), 0, pool.size());
  // Fills the pool once, payload after payload; returns GB/s.
  const auto fill = [&](auto copy) {
    const auto begin = std::chrono::steady_clock::now();
    std::size_t at = 0;
    while (at + kPayload <= pool.size()) {
      for (std::size_t d = 0; d < kDatagrams && at + kPayload <= pool.size(); ++d, at += kPayload) {
        copy(received.data() + d * kDatagram + kHeader, pool.data() + at, kPayload);
      }
    }
    wire::stream_fence();
    benchmark::DoNotOptimize(pool.data());
    return static_cast<double>(at) / std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() /
           1e9;
  };
  const bool wide = wire::stream_width() == wire::StreamWidth::avx512;
  std::vector<double> cached;
  std::vector<double> sse2;
  std::vector<double> avx512;
  for (auto _ : state) {
    for (int round = 0; round < kCopyRounds; ++round) {
      cached.push_back(fill([](const std::byte* in, std::byte* out, std::size_t bytes) {
        wire::copy_swapped(SampleFormat::ci16, in, out, bytes);
      }));
      sse2.push_back(fill([](const std::byte* in, std::byte* out, std::size_t bytes) {
        wire::stream_copy(SampleFormat::ci16, true, in, out, bytes, wire::StreamWidth::sse2);
      }));
      if (wide) {
        avx512.push_back(fill([](const std::byte* in, std::byte* out, std::size_t bytes) {
          wire::stream_copy(SampleFormat::ci16, true, in, out, bytes, wire::StreamWidth::avx512);
        }));
      }
    }
  }
  state.counters["cached_GBps"] = median(cached);
  state.counters["sse2_GBps"] = median(sse2);
  state.counters["sse2_vs_cached"] = median(sse2) / median(cached);
  if (wide) {
    state.counters["avx512_GBps"] = median(avx512);
    state.counters["avx512_vs_sse2"] = median(avx512) / median(sse2);
  }
  state.SetLabel("cpu " + std::to_string(kReceiveCpu) +
                 (wide ? "" : "; no AVX-512BW here: 64-byte stores not measured"));
}
BENCHMARK(BM_ChunkCopyByStoreWidth)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
