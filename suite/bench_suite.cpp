// The measurements behind `sluice bench` (see bench_suite.hpp). Each pipeline row runs the
// normal runtime on embedded YAML; each ceiling is the bare loop of what that stage does,
// with the same block size, depth, batch and plan, measured minutes apart at most.
#include "suite/bench_suite.hpp"

#include <fcntl.h>
#include <fftw3.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "emulator/emulator_process.hpp"
#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/cuda_glue.hpp"
#include "pipeline/errno_message.hpp"
#include "pipeline/memory.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/units.hpp"
#include "recorder/uring.hpp"
#include "stages/fft/fft_backend.hpp"
#include "stages/socket/udp_source.hpp"
#include "suite/bare_udp.hpp"
#include "suite/cufft_loop.hpp"
#include "suite/device_source.hpp"
#include "suite/uring_loop.hpp"
#include "wire/socket.hpp"

namespace sluice::bench {
namespace {
namespace fs = std::filesystem;

constexpr std::uint64_t kChunkBytes = 4ULL << 20;  // the pipeline default, and the block of the disk rows
constexpr unsigned kWriteDepth = 8;                // record's io_depth default
constexpr unsigned kReadDepth = 4;                 // replay's read_ahead default
constexpr std::size_t kPayload = 1472;             // standard-MTU VITA-49 datagrams
constexpr std::size_t kFftSize = 1024;             // the fft stage's default size
constexpr double kBytesPerSample = 4;              // ci16, every row's input format
constexpr int kMeasurements = 14;                  // windows the total time is spread over

// Wall and process CPU time of a measured span.
class Span {
 public:
  Span() : wall_ns_(monotonic_ns()), cpu_(process_cpu_seconds()) {}
  [[nodiscard]] double wall() const { return static_cast<double>(monotonic_ns() - wall_ns_) / 1e9; }
  [[nodiscard]] double cpu() const { return process_cpu_seconds() - cpu_; }

 private:
  std::uint64_t wall_ns_;
  double cpu_;
};

// The machine's CPU time from /proc/stat's first line: busy and total jiffies over every CPU.
struct MachineCpu {
  double busy = 0;
  double total = 0;
};
MachineCpu machine_cpu() {
  MachineCpu result;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  stat >> cpu;
  double value = 0;
  for (int field = 0; field < 8 && (stat >> value); ++field) {  // user nice system idle iowait irq softirq steal
    result.total += value;
    if (field != 3 && field != 4) result.busy += value;
  }
  return result;
}

// Every stage's time in process() (busy_ns), in the order of metrics_by_lane().
std::vector<double> stage_busy_ns(const std::vector<std::vector<const StageMetrics*>>& lanes) {
  std::vector<double> busy;
  for (const auto& lane : lanes) {
    for (const StageMetrics* metrics : lane) busy.push_back(static_cast<double>(metrics->busy_ns.load()));
  }
  return busy;
}

// The CPU seconds of each thread of process `pid` (utime + stime from /proc/PID/task/TID/stat),
// by thread id; empty when the process is gone.
std::map<long, double> thread_cpu_seconds(pid_t pid) {
  std::map<long, double> seconds;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::error_code error;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream stat(task.path() / "stat");
    std::string text;
    std::getline(stat, text);
    const std::size_t name_end = text.rfind(')');  // the name may hold spaces and parentheses
    if (name_end == std::string::npos) continue;
    std::istringstream fields(text.substr(name_end + 2));
    std::string field;
    double user = 0;
    double system = 0;
    for (int index = 3; index <= 15 && (fields >> field); ++index) {  // state is field 3, utime 14, stime 15
      if (index == 14) user = std::strtod(field.c_str(), nullptr);
      if (index == 15) system = std::strtod(field.c_str(), nullptr);
    }
    seconds[std::strtol(task.path().filename().c_str(), nullptr, 10)] = (user + system) / ticks;
  }
  return seconds;
}

// What one window looked at to find its busiest thread: the stages' busy time and, where an
// emulator feeds the pipeline, its threads' CPU time.
struct ThreadSample {
  std::vector<double> stage_ns;
  std::map<long, double> emulator_seconds;
};

ThreadSample sample_threads(const std::vector<std::vector<const StageMetrics*>>& lanes, pid_t emulator) {
  return ThreadSample{stage_busy_ns(lanes), emulator > 0 ? thread_cpu_seconds(emulator) : std::map<long, double>{}};
}

// Sets `result`'s busiest thread from two samples `wall` seconds apart.
void find_busiest(const std::vector<std::vector<const StageMetrics*>>& lanes, const ThreadSample& before,
                  const ThreadSample& after, double wall, Rates& result) {
  if (wall <= 0) return;
  std::size_t index = 0;
  for (const auto& lane : lanes) {
    for (const StageMetrics* metrics : lane) {
      // A process() call counts when it returns, so one that began before the window may take it past 1.
      const double busy = std::min(1.0, (after.stage_ns[index] - before.stage_ns[index]) / 1e9 / wall);
      if (busy > result.busiest_busy) {
        result.busiest_busy = busy;
        result.busiest = metrics->lane() + "'s " + metrics->stage() + " stage";
      }
      ++index;
    }
  }
  for (const auto& [thread, seconds] : after.emulator_seconds) {
    const auto earlier = before.emulator_seconds.find(thread);
    if (earlier == before.emulator_seconds.end()) continue;
    const double busy = std::min(1.0, (seconds - earlier->second) / wall);  // clock ticks round up
    if (busy > result.busiest_busy) {
      result.busiest_busy = busy;
      result.busiest = "the emulator's thread " + std::to_string(thread);
    }
  }
}

Rates rates(double bytes, double samples, double packets, double wall, double cpu) {
  Rates result;
  if (wall <= 0) return result;
  result.bytes_per_second = bytes / wall;
  result.samples_per_second = samples / wall;
  result.packets_per_second = packets / wall;
  result.cpu_seconds_per_gb = bytes > 0 ? cpu / (bytes / 1e9) : 0;
  return result;
}

// ---- ceilings -------------------------------------------------------------------------

Rates memcpy_ceiling(double seconds) {
  std::vector<std::byte> from(kChunkBytes, std::byte{1});
  std::vector<std::byte> to(kChunkBytes);
  double bytes = 0;
  const Span span;
  while (span.wall() < seconds) {
    for (int i = 0; i < 16; ++i) {
      std::memcpy(to.data(), from.data(), kChunkBytes);
      from[static_cast<std::size_t>(i)] =
          to[kChunkBytes - 1 - static_cast<std::size_t>(i)];  // keeps the copy observable
    }
    bytes += 16.0 * static_cast<double>(kChunkBytes);
  }
  return rates(bytes, bytes / kBytesPerSample, 0, span.wall(), span.cpu());
}

Rates fftw_ceiling(double seconds) {
  // The FFTW backend's shape: a batch of frames that fits L2, planned with the same flags.
  const std::size_t batch = std::max<std::size_t>(1, 32768 / kFftSize);
  std::unique_ptr<fftwf_complex, decltype(&fftwf_free)> frames(fftwf_alloc_complex(kFftSize * batch), &fftwf_free);
  if (!frames) throw std::runtime_error("fftwf_alloc_complex failed");
  const int length = static_cast<int>(kFftSize);
  std::unique_ptr<fftwf_plan_s, decltype(&fftwf_destroy_plan)> plan(
      fftwf_plan_many_dft(1, &length, static_cast<int>(batch), frames.get(), nullptr, 1, length, frames.get(), nullptr,
                          1, length, FFTW_FORWARD, fftw_planner_flags(kFftSize)),
      &fftwf_destroy_plan);
  if (!plan) throw std::runtime_error("fftwf_plan_many_dft failed");
  for (std::size_t i = 0; i < kFftSize * batch; ++i) {
    frames.get()[i][0] = static_cast<float>(i % 7) * 0.1F;
    frames.get()[i][1] = 0;
  }
  double samples = 0;
  const Span span;
  while (span.wall() < seconds) {
    fftwf_execute(plan.get());
    samples += static_cast<double>(kFftSize * batch);
  }
  return rates(samples * kBytesPerSample, samples, 0, span.wall(), span.cpu());
}

// The fft stage's ceiling on the GPU: cuFFT's own 1024-point C2C over device buffers of one
// input chunk's samples, counted as ci16 bytes (4 per sample) like the stage's input.
Rates cufft_ceiling(std::size_t batch_samples, double seconds) {
  const Span span;
  const LoopResult loop = cufft_loop(kFftSize, batch_samples, seconds);
  return rates(loop.samples * kBytesPerSample, loop.samples, 0, loop.seconds, span.cpu());
}

// Bare receive on loopback from the emulator: recvmmsg with GRO, counting datagrams and bytes,
// nothing parsed or copied (bare_udp.hpp, as bench/stages/socket_bench's baseline).
Rates recvmmsg_ceiling(const std::string& emulator, double seconds, double warmup) {
  bench::BareUdpReceiver receiver("127.0.0.1:0", 256 << 20, 0);
  emulator::EmulatorProcess sender(
      emulator,
      {"--to", "127.0.0.1:" + std::to_string(receiver.port()), "--payload", std::to_string(kPayload), "--duration",
       std::to_string(static_cast<int>((warmup + seconds + 1) * 1000)) + "ms", "--batch", "64", "-q"});
  std::unique_ptr<Span> span;
  const Span total;
  while (!span || span->wall() < seconds) {
    // The warm-up starts with the first datagram: the emulator may take a while to start.
    if (!span && receiver.packets() > 0 && total.wall() >= warmup) {
      span = std::make_unique<Span>();
      receiver.reset_counts();
    }
    if (total.wall() > warmup + seconds + 10) throw std::runtime_error("bare receive loop: the emulator sent nothing");
    receiver.receive_once();
  }
  if (receiver.packets() == 0) {
    throw std::runtime_error("bare receive loop: no datagrams from sluice-emulator (" + sender.report_line() + ")");
  }
  const auto bytes = static_cast<double>(receiver.bytes());
  return rates(bytes, bytes / kBytesPerSample, static_cast<double>(receiver.packets()), span->wall(), span->cpu());
}

Rates uring_ceiling(const std::string& path, std::uint64_t total, unsigned depth, bool write, bool direct) {
  const UringLoopResult loop = uring_loop(path, total, kChunkBytes, depth, write, direct);
  return rates(loop.bytes, loop.bytes / kBytesPerSample, 0, loop.seconds, loop.cpu_seconds);
}

// ---- pipeline rows ---------------------------------------------------------------------

// Which counter a row measures: a source's output, or what a stage took in.
struct Probe {
  std::size_t stage = 0;  // index in each lane
  bool output = true;
  // A capped source run to its end (replay): the rate over the time data flowed, its first chunk
  // to its last, as the raw loop and fio count theirs, not up to when the runtime noticed the end.
  bool flow = false;
};

// Bytes and samples after each lane's first chunk over the span from the first chunk to the last.
Rates flow_rates(const std::vector<std::vector<const StageMetrics*>>& lanes, Probe probe, double cpu) {
  double bytes = 0;
  double samples = 0;
  std::uint64_t first_ns = UINT64_MAX;
  std::uint64_t last_ns = 0;
  for (const auto& lane : lanes) {
    const FlowCounters& flow = probe.output ? lane[probe.stage]->out : lane[probe.stage]->in;
    const double share = flow.bytes.load() > 0
                             ? static_cast<double>(flow.first_bytes.load()) / static_cast<double>(flow.bytes.load())
                             : 0;
    bytes += static_cast<double>(flow.bytes.load() - flow.first_bytes.load());
    samples += static_cast<double>(flow.samples.load()) * (1 - share);
    first_ns = std::min(first_ns, flow.first_ns.load());
    last_ns = std::max(last_ns, flow.last_ns.load());
  }
  return rates(bytes, samples, 0, last_ns > first_ns ? static_cast<double>(last_ns - first_ns) / 1e9 : 0, cpu);
}

// What every lane's probe has counted so far.
struct Totals {
  double bytes = 0;
  double samples = 0;
  double packets = 0;
};
Totals probe_totals(const std::vector<std::vector<const StageMetrics*>>& lanes, Probe probe) {
  Totals sum;
  for (const auto& lane : lanes) {
    const StageMetrics& metrics = *lane[probe.stage];
    const FlowCounters& flow = probe.output ? metrics.out : metrics.in;
    sum.bytes += static_cast<double>(flow.bytes.load());
    sum.samples += static_cast<double>(flow.samples.load());
    sum.packets += static_cast<double>(metrics.packets.load());
  }
  return sum;
}

// Throws the pipeline's first failure; adds every stage's notes to `notes` where given.
void check_and_note(const Pipeline& pipeline, std::vector<std::string>* notes) {
  if (!pipeline.failures().empty()) {
    const StageFailure& failure = pipeline.failures().front();
    throw std::runtime_error("lane " + failure.lane + ", stage " + failure.stage + " (" + failure.type +
                             "): " + failure.message);
  }
  if (notes == nullptr) return;
  for (const auto* metrics : pipeline.metrics()) {
    for (const auto& note : metrics->notes) notes->push_back(metrics->stage() + ": " + note);
  }
}

// Runs `yaml` through the normal loader and runtime; after start, `started` may launch what
// feeds it (the emulator). Measures every lane's probe over `seconds` after `warmup`, or
// until the pipeline ends by itself (a capped source).
Rates measure_pipeline(const std::string& yaml, Probe probe, double seconds, double warmup,
                       const std::function<std::unique_ptr<emulator::EmulatorProcess>(Pipeline&)>& started = {},
                       std::vector<std::string>* notes = nullptr) {
  Pipeline pipeline(load_pipeline_text(yaml, "<sluice bench>", {}, bench_registry()));
  pipeline.start();
  std::atomic<bool> finished{false};
  std::thread runner([&] {
    pipeline.run();
    finished.store(true);
  });
  std::unique_ptr<emulator::EmulatorProcess> feeder;
  try {
    if (started) feeder = started(pipeline);
  } catch (...) {
    pipeline.request_stop();
    runner.join();
    throw;
  }
  const auto lanes = pipeline.metrics_by_lane();
  const auto totals = [&] { return probe_totals(lanes, probe); };
  // The warm-up starts with the first bytes (a process start or a plan can take longer than a
  // short window on a loaded machine), and a window lasts until at least one more chunk passed.
  constexpr double kPatience = 30;
  const Span waiting;
  while (!finished.load() && totals().bytes == 0 && waiting.wall() < kPatience)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const Span total;
  while (!finished.load() && total.wall() < warmup) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const Totals before = totals();
  const MachineCpu machine_before = machine_cpu();
  const pid_t emulator = feeder ? feeder->pid() : -1;
  const ThreadSample threads_before = sample_threads(lanes, emulator);
  const Span span;
  while (!finished.load() && (span.wall() < seconds || (totals().bytes <= before.bytes && span.wall() < kPatience))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const Totals after = totals();
  const double wall = span.wall();
  const double cpu = span.cpu();
  const MachineCpu machine_after = machine_cpu();
  const ThreadSample threads_after = sample_threads(lanes, emulator);
  pipeline.request_stop();
  runner.join();
  if (feeder) feeder->stop();
  check_and_note(pipeline, notes);
  if (after.bytes <= before.bytes) {
    throw std::runtime_error("nothing passed stage " + std::to_string(probe.stage) + " in " + std::to_string(wall) +
                             " s" + (feeder ? " (emulator: " + feeder->report_line() + ")" : std::string()));
  }
  // Process CPU also counts the emulator-free threads only: the emulator is another process.
  Rates result =
      rates(after.bytes - before.bytes, after.samples - before.samples, after.packets - before.packets, wall, cpu);
  if (probe.flow && finished.load()) result = flow_rates(lanes, probe, cpu);
  if (const double jiffies = machine_after.total - machine_before.total; jiffies > 0) {
    result.machine_busy = (machine_after.busy - machine_before.busy) / jiffies;
  }
  find_busiest(lanes, threads_before, threads_after, wall, result);
  return result;
}

std::string seconds_text(double seconds) { return std::to_string(static_cast<int>(seconds * 1000 + 0.5)) + "ms"; }

// Starts the emulator unpaced towards every lane's udp source once they listen.
std::function<std::unique_ptr<emulator::EmulatorProcess>(Pipeline&)> emulator_feed(const std::string& program,
                                                                                   double seconds) {
  return [program, seconds](Pipeline& pipeline) {
    std::vector<std::string> args;
    for (const auto& lane : pipeline.definition().lanes) {
      const auto* source = dynamic_cast<const UdpSource*>(lane.stages.front().stage.get());
      if (source == nullptr) throw std::logic_error("emulator_feed: the lane does not start with a udp stage");
      args.emplace_back("--to");
      args.push_back("127.0.0.1:" + std::to_string(source->port()));
    }
    for (const char* word : {"--payload", "1472", "--batch", "64", "-q"}) args.emplace_back(word);
    args.emplace_back("--duration");
    args.push_back(seconds_text(seconds));
    return std::make_unique<emulator::EmulatorProcess>(program, args);
  };
}

// `directories[i]` is where lane i records (a list stripes its chunks across them).
std::string lanes_yaml(const std::vector<std::vector<std::string>>& directories, bool direct) {
  std::string yaml =
      "pipeline: {name: bench_lanes, chunk: 4MiB, chunks: 32}\n"
      "template:\n"
      "  - {name: source, type: udp, address: 127.0.0.1:0, stream_id: -1}\n"
      "  - {name: fft, type: fft, size: " +
      std::to_string(kFftSize) +
      "}\n"
      "  - {name: record, type: record, capture_name: lanes, overwrite: true, direct: " +
      (direct ? "true" : "false") +
      ", preallocate: 0}\n"
      "  - {name: sink, type: \"null\"}\n"
      "lanes:\n";
  for (std::size_t i = 0; i < directories.size(); ++i) {
    std::string list;
    for (const auto& directory : directories[i]) list += (list.empty() ? "\"" : ", \"") + directory + "\"";
    yaml += "  - {name: port" + std::to_string(i) + ", record: {directory: [" + list + "]}}\n";
  }
  return yaml;
}

BenchRow row(std::string stage, std::string ceiling, const Rates& measured, const Rates& bound, std::string note = {}) {
  BenchRow result{std::move(stage), std::move(ceiling), measured, bound, 0, std::move(note)};
  result.ratio = bound.bytes_per_second > 0 ? measured.bytes_per_second / bound.bytes_per_second : 0;
  return result;
}

std::string join(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : "; ") + part;
  return text;
}

// The directory for the disk rows: the caller's, or a fresh one in the temp directory.
class WorkDirectory {
 public:
  explicit WorkDirectory(const std::string& requested) {
    if (!requested.empty()) {
      std::error_code error;
      fs::create_directories(requested, error);
      if (error) throw std::runtime_error("--dir " + requested + ": " + error.message());
      path_ = fs::path(requested) / ("sluice-bench-" + std::to_string(::getpid()));
    } else {
      path_ = fs::temp_directory_path() / ("sluice-bench-" + std::to_string(::getpid()));
    }
    fs::create_directories(path_);
  }
  WorkDirectory(const WorkDirectory&) = delete;
  WorkDirectory& operator=(const WorkDirectory&) = delete;
  ~WorkDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Lane i of `lanes` records to work directories i, i + lanes, ...; with fewer directories than
// lanes, lane i shares directory i mod their count.
std::vector<std::vector<std::string>> lane_directories(const std::vector<std::unique_ptr<WorkDirectory>>& work,
                                                       std::size_t lanes) {
  std::vector<std::vector<std::string>> result(lanes);
  for (std::size_t lane = 0; lane < lanes; ++lane) {
    for (std::size_t i = lane; i < work.size(); i += lanes)
      result[lane].push_back((work[i]->path() / "lanes").string());
    if (result[lane].empty()) result[lane].push_back((work[lane % work.size()]->path() / "lanes").string());
    for (const auto& directory : result[lane]) fs::create_directories(directory);
  }
  return result;
}

// The file system (device number) a path is on.
dev_t device_of(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) throw std::runtime_error(errno_message("stat(" + path + ")", errno));
  return status.st_dev;
}

std::string percent(double fraction) { return std::to_string(static_cast<int>(fraction * 100 + 0.5)) + "%"; }

// What bounds two lanes: every CPU of the machine (emulator included), one thread (a stage or
// the emulator's) busy all the time, one file system both record to, or the volumes each records
// to, against raw io_uring writes on those file systems (`raw_write` by device, measured alone).
std::string two_lane_bound(const Rates& two_lanes, const std::vector<std::vector<std::string>>& lanes,
                           const std::map<dev_t, double>& raw_write) {
  if (two_lanes.machine_busy >= 0.9) {
    return "bound by the CPUs: every CPU busy (all " + std::to_string(std::thread::hardware_concurrency()) + " are " +
           percent(two_lanes.machine_busy) + " busy)";
  }
  if (two_lanes.busiest_busy >= 0.9) {
    return "bound by one thread: " + two_lanes.busiest + " is " + percent(two_lanes.busiest_busy) +
           " busy (the machine's CPUs " + percent(two_lanes.machine_busy) + ")";
  }
  std::set<dev_t> first;
  for (const auto& directory : lanes.front()) first.insert(device_of(directory));
  for (const auto& directory : lanes.back()) {
    if (first.count(device_of(directory)) == 0) continue;
    const double share = two_lanes.bytes_per_second / raw_write.at(device_of(directory));
    const std::string shared = "both lanes share one disk (" + directory + "): two lanes record at " + percent(share) +
                               " of its raw io_uring writes";
    return share >= 0.85 ? "bound by the disk: " + shared : "no shared resource at its limit; " + shared;
  }
  double aggregate = 0;
  for (const auto& [device, rate] : raw_write) aggregate += rate;
  const double share = two_lanes.bytes_per_second / aggregate;
  const std::string own = "each lane on its own volumes: two lanes record at " + percent(share) +
                          " of their volumes' raw io_uring writes (each measured alone)";
  return share >= 0.85 ? "bound by the volumes: " + own : "no shared resource at its limit; " + own;
}

// One `sluice bench` run: what every row shares (windows, work directories, the I/O mode) and
// one method per row, in the order they run.
class BenchRun {
 public:
  explicit BenchRun(const BenchOptions& options);
  BenchResult run();

 private:
  void say(const std::string& what);
  void choose_disk_io();
  void measure_generator();
  Rates measure_udp();
  Rates measure_fft();
  Rates measure_record();
  void measure_replay();
  std::map<dev_t, double> lane_raw_writes(const Rates& raw_write);
  void measure_lanes(const Rates& lane_bound, const std::map<dev_t, double>& raw_write);

  const BenchOptions& options_;
  std::string program_;  // sluice-emulator
  double window_ = 0;    // each measurement's window, seconds
  double warmup_ = 0;
  bool gpu_ = false;
  BenchResult result_;
  std::vector<std::unique_ptr<WorkDirectory>> work_;
  int steps_ = 0;
  int step_ = 0;
  bool direct_ = true;            // O_DIRECT on every disk row, or buffered on both sides
  std::uint64_t disk_bytes_ = 0;  // bytes per disk measurement
  std::string lane_fft_name_ = "fftwf";
};

BenchRun::BenchRun(const BenchOptions& options) : options_(options) {
  if (!(options.seconds > 0)) throw std::runtime_error("--seconds must be positive");
  program_ = options.emulator_program.empty() ? emulator::locate_emulator_program() : options.emulator_program;
  window_ = std::max(0.1, options.seconds / kMeasurements * 0.8);
  warmup_ = window_ * 0.25;
  gpu_ = cuda_glue::device_count() > 0;
  for (const auto& directory : options.directories.empty() ? std::vector<std::string>{""} : options.directories) {
    work_.push_back(std::make_unique<WorkDirectory>(directory));
    result_.directories.push_back(work_.back()->path().string());
  }
  result_.directory = work_.front()->path().string();
  result_.lane_directories = lane_directories(work_, 2);
  // Raw writes are measured on every file system the lanes record to (the first's with the record row).
  std::set<dev_t> lane_devices;
  for (const auto& lane : result_.lane_directories) {
    for (const auto& directory : lane) lane_devices.insert(device_of(directory));
  }
  const int extra_writes =
      static_cast<int>(lane_devices.size()) - (lane_devices.count(device_of(result_.directory)) != 0 ? 1 : 0);
  steps_ = (gpu_ ? 16 : 14) + extra_writes;
  choose_disk_io();
}

void BenchRun::say(const std::string& what) {
  ++step_;
  if (options_.progress) options_.progress("[" + std::to_string(step_) + "/" + std::to_string(steps_) + "] " + what);
}

// O_DIRECT needs a filesystem that takes it: tmpfs does not. Fall back to buffered I/O on both
// sides of the disk rows (so the ratio stays like for like, and both lanes alike) and say so.
// Bytes per disk measurement: about a window at 1 GB/s, within what the filesystem has free.
void BenchRun::choose_disk_io() {
  for (const auto& directory : result_.directories) {
    struct statfs filesystem {};
    if (::statfs(directory.c_str(), &filesystem) == 0 && filesystem.f_type == TMPFS_MAGIC) {
      direct_ = false;
      result_.notes.push_back(
          directory +
          " is on tmpfs, which refuses O_DIRECT: the record/replay rows, the lanes and "
          "their ceilings use buffered I/O and measure memory, not a disk (--dir on a disk to measure one)");
    }
  }
  disk_bytes_ = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(window_ * 1e9), 64ULL << 20, 4ULL << 30);
  for (const auto& directory : result_.directories) {
    if (const auto space = fs::space(directory); space.available / 4 < disk_bytes_) disk_bytes_ = space.available / 4;
  }
  disk_bytes_ = disk_bytes_ / kChunkBytes * kChunkBytes;
  if (disk_bytes_ < 4 * kChunkBytes)
    throw std::runtime_error(result_.directory + ": too little free space for the disk rows");
}

BenchResult BenchRun::run() {
  const Span whole;
  measure_generator();
  const Rates bare = measure_udp();
  const Rates lane_fft = measure_fft();
  const Rates raw_write = measure_record();
  measure_replay();
  // A whole lane is bounded by its slowest part: the ceiling is the least of its parts' ceilings.
  Rates lane_bound = bare;
  for (const Rates* part : {&lane_fft, &raw_write}) {
    if (part->bytes_per_second < lane_bound.bytes_per_second) lane_bound = *part;
  }
  lane_bound.packets_per_second = lane_bound.bytes_per_second / static_cast<double>(kPayload);
  measure_lanes(lane_bound, lane_raw_writes(raw_write));
  result_.seconds = whole.wall();
  return std::move(result_);
}

void BenchRun::measure_generator() {
  say("memcpy loop (ceiling of the generator → null lane)");
  const Rates memcpy_rates = memcpy_ceiling(window_);
  say("generator → null");
  const Rates generator = measure_pipeline(
      "pipeline: {chunk: 4MiB, chunks: 32}\nlanes: [{name: a, stages: [{type: generator, format: ci16}, {type: "
      "\"null\"}]}]\n",
      Probe{0, true}, window_, warmup_);
  result_.rows.push_back(row("generator → null", "memcpy loop", generator, memcpy_rates));
}

// The udp row; returns its ceiling, the bare recvmmsg loop, which also bounds the lanes.
Rates BenchRun::measure_udp() {
  say("bare recvmmsg loop from sluice-emulator (ceiling of udp)");
  const Rates bare = recvmmsg_ceiling(program_, window_, warmup_);
  say("udp ← sluice-emulator on loopback → null");
  const Rates udp = measure_pipeline(
      "pipeline: {chunk: 4MiB, chunks: 32}\nlanes: [{name: port0, stages: [{type: udp, address: 127.0.0.1:0}, {type: "
      "\"null\"}]}]\n",
      Probe{0, true}, window_, warmup_, emulator_feed(program_, warmup_ + window_ + 1));
  result_.rows.push_back(row("udp ← emulator (1472 B)", "bare recvmmsg loop", udp, bare));
  return bare;
}

// The fft rows (FFTW, and cuFFT where a GPU answers); returns the ceiling of the backend the
// lanes' fft (backend auto) runs on.
Rates BenchRun::measure_fft() {
  say("raw fftwf_execute loop (ceiling of fft on FFTW)");
  const Rates raw_fft = fftw_ceiling(window_);
  say("generator → fft (FFTW) → null");
  std::vector<std::string> fft_notes;
  const Rates fft = measure_pipeline(
      "pipeline: {chunk: 4MiB, chunks: 32}\nlanes: [{name: a, stages: [{type: generator, format: ci16}, "
      "{type: fft, backend: fftw, size: " +
          std::to_string(kFftSize) + "}, {type: \"null\"}]}]\n",
      Probe{1, false}, window_, warmup_, {}, &fft_notes);
  result_.rows.push_back(row("fft (" + std::to_string(kFftSize) + "-point, FFTW)", "raw fftwf_execute loop", fft,
                             raw_fft, join(fft_notes)));
  if (!gpu_) return raw_fft;
  // Fed with device chunks that are filled once: a host source would measure the host, not the GPU.
  constexpr std::size_t kGpuChunk = 16ULL << 20;  // ci16 input chunk: 4 Mi samples
  const auto samples = static_cast<std::size_t>(kGpuChunk / kBytesPerSample);
  say("raw cufftExecC2C loop (ceiling of fft on cuFFT)");
  const Rates raw_cufft = cufft_ceiling(samples, window_);
  say("device chunks → fft (cuFFT) → null");
  std::vector<std::string> gpu_notes;
  const Rates gpu_fft = measure_pipeline(
      "lanes: [{name: a, stages: [{type: device_source, format: ci16, memory: device, chunk: 16MiB, chunks: 16}, "
      "{type: fft, backend: cufft, size: " +
          std::to_string(kFftSize) +
          ", memory: device, chunk: 16MiB, chunks: 8}, "
          "{type: \"null\"}]}]\n",
      Probe{1, false}, window_, warmup_, {}, &gpu_notes);
  result_.rows.push_back(row("fft (" + std::to_string(kFftSize) + "-point, cuFFT)", "raw cufftExecC2C loop", gpu_fft,
                             raw_cufft, join(gpu_notes)));
  lane_fft_name_ = "cufft";
  return raw_cufft;
}

// The record row; returns its ceiling, raw io_uring writes in the first work directory.
Rates BenchRun::measure_record() {
  const std::string io = direct_ ? "O_DIRECT" : "buffered";
  const fs::path& first = work_.front()->path();
  const std::string raw_file = (first / "raw.bin").string();
  say("raw io_uring " + io + " writes (ceiling of record)");
  const Rates raw_write = uring_ceiling(raw_file, disk_bytes_, kWriteDepth, true, direct_);
  say("generator → record → null");
  const Rates record = measure_pipeline(
      "pipeline: {chunk: 4MiB, chunks: 32}\nlanes: [{name: a, stages: [{type: generator, format: ci16, stop_after: " +
          std::to_string(disk_bytes_) + "}, {type: record, directory: " + first.string() +
          ", capture_name: bench, overwrite: true, io_depth: " + std::to_string(kWriteDepth) +
          ", direct: " + (direct_ ? "true" : "false") + "}, {type: \"null\"}]}]\n",
      Probe{1, false}, window_ * 4, 0);
  result_.rows.push_back(row("record (io_uring, depth 8)", "raw io_uring " + io + " writes", record, raw_write,
                             direct_ ? "" : "buffered: tmpfs"));
  fs::remove(raw_file);
  return raw_write;
}

// The replay row, of the capture the record row left; its ceiling reads the very same file.
void BenchRun::measure_replay() {
  const std::string io = direct_ ? "O_DIRECT" : "buffered";
  const fs::path& first = work_.front()->path();
  std::string data_file;
  for (const auto& entry : fs::directory_iterator(first)) {
    if (entry.path().extension() == ".sigmf-data") data_file = entry.path().string();
  }
  if (data_file.empty()) throw std::runtime_error("the record row left no .sigmf-data in " + result_.directory);
  const std::uint64_t data_bytes = fs::file_size(data_file) / kChunkBytes * kChunkBytes;
  // Twice each, alternating, and the faster of each kept: a virtual disk's host cache favours
  // whichever reads second, and the ceiling kept its better run, so replay keeps its better too.
  const std::string replay_yaml =
      "pipeline: {chunk: 4MiB, chunks: 32}\nlanes: [{name: a, stages: [{type: replay, capture: " +
      (first / "bench.sigmf-collection").string() + ", pace: fast, read_ahead: " + std::to_string(kReadDepth) +
      ", direct: " + (direct_ ? "true" : "false") + "}, {type: \"null\"}]}]\n";
  Rates raw_read;
  Rates replay;
  for (int pass = 0; pass < 2; ++pass) {
    say("raw io_uring " + io + " reads of the recorded data (ceiling of replay), pass " + std::to_string(pass + 1) +
        " of 2");
    if (const Rates raw = uring_ceiling(data_file, data_bytes, kReadDepth, false, direct_);
        raw.bytes_per_second > raw_read.bytes_per_second) {
      raw_read = raw;
    }
    say("replay (fast) → null, of the capture just recorded, pass " + std::to_string(pass + 1) + " of 2");
    if (const Rates ours = measure_pipeline(replay_yaml, Probe{0, true, true}, window_ * 4, 0);
        ours.bytes_per_second > replay.bytes_per_second) {
      replay = ours;
    }
  }
  result_.rows.push_back(row("replay (io_uring, depth 4)", "raw io_uring " + io + " reads", replay, raw_read,
                             direct_ ? "" : "buffered: tmpfs"));
}

// Raw writes on each file system the lanes record to, each alone (the first's is the record
// row's ceiling): what the lanes' bound is measured against.
std::map<dev_t, double> BenchRun::lane_raw_writes(const Rates& raw_write) {
  const std::string io = direct_ ? "O_DIRECT" : "buffered";
  std::map<dev_t, double> writes;
  for (const auto& lane : result_.lane_directories) {
    for (const auto& directory : lane) {
      const dev_t device = device_of(directory);
      if (writes.count(device) != 0) continue;
      if (device == device_of(result_.directory)) {
        writes[device] = raw_write.bytes_per_second;
        continue;
      }
      say("raw io_uring " + io + " writes on " + directory + " (ceiling of the lane recording there)");
      const std::string file = (fs::path(directory) / "raw.bin").string();
      writes[device] = uring_ceiling(file, disk_bytes_, kWriteDepth, true, direct_).bytes_per_second;
      fs::remove(file);
    }
  }
  return writes;
}

// One lane against the least of its parts' ceilings, then two lanes against twice one.
void BenchRun::measure_lanes(const Rates& lane_bound, const std::map<dev_t, double>& raw_write) {
  const std::vector<std::vector<std::string>> one_lane_directories{result_.lane_directories.front()};
  say("one lane: udp ← emulator → fft → record → null");
  const Rates one_lane = measure_pipeline(lanes_yaml(one_lane_directories, direct_), Probe{0, true}, window_, warmup_,
                                          emulator_feed(program_, warmup_ + window_ + 1));
  result_.rows.push_back(
      row("lane: udp → fft → record", "least of recvmmsg, " + lane_fft_name_ + ", write", one_lane, lane_bound));
  // The one-lane capture is the bench's own scratch: removed before the two lanes record, so that
  // their overwrite sets nothing aside and a small volume holds the second row as it held the first.
  for (const auto& directory : one_lane_directories.front()) {
    std::error_code ignored;
    fs::remove_all(directory, ignored);
    fs::create_directories(directory, ignored);
  }
  say("two lanes: 2 × (udp ← emulator → fft → record → null)");
  const Rates two_lanes = measure_pipeline(lanes_yaml(result_.lane_directories, direct_), Probe{0, true}, window_,
                                           warmup_, emulator_feed(program_, warmup_ + window_ + 1));
  Rates ideal = one_lane;
  ideal.bytes_per_second *= 2;
  ideal.samples_per_second *= 2;
  ideal.packets_per_second *= 2;
  result_.rows.push_back(row("2 lanes: udp → fft → record", "2 × one lane", two_lanes, ideal));
  result_.two_lane_scaling = two_lanes.bytes_per_second / one_lane.bytes_per_second;
  for (std::size_t lane = 0; lane < result_.lane_directories.size(); ++lane) {
    std::string list;
    for (const auto& directory : result_.lane_directories[lane]) list += (list.empty() ? "" : ", ") + directory;
    result_.notes.push_back("lane port" + std::to_string(lane) + " records to " + list);
  }
  result_.notes.push_back("two-lane scaling " + std::to_string(result_.two_lane_scaling).substr(0, 4) + "× on " +
                          std::to_string(std::thread::hardware_concurrency()) + " core(s): " +
                          two_lane_bound(two_lanes, result_.lane_directories, raw_write) + " (CPUs busy: one lane " +
                          percent(one_lane.machine_busy) + ", two lanes " + percent(two_lanes.machine_busy) +
                          "; busiest thread: one lane, " + one_lane.busiest + " " + percent(one_lane.busiest_busy) +
                          "; two lanes, " + two_lanes.busiest + " " + percent(two_lanes.busiest_busy) + ")");
}

}  // namespace

BenchResult run_bench(const BenchOptions& options) { return BenchRun(options).run(); }

std::string bench_table(const BenchResult& result) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-28s %8s %9s %9s %8s   %-34s %8s %9s %8s %6s\n", "stage", "GB/s", "Msamp/s",
                "kpkt/s", "CPU s/GB", "ceiling", "GB/s", "kpkt/s", "CPU s/GB", "ratio");
  out << line;
  auto packets = [](double rate) {
    return rate > 0 ? std::to_string(static_cast<long long>(rate / 1e3 + 0.5)) : std::string("-");
  };
  for (const auto& row : result.rows) {
    // Multi-byte arrows count as one column in a terminal but three bytes in printf widths.
    auto padded = [](const std::string& text, std::size_t width) {
      std::size_t columns = 0;
      for (char c : text) columns += (static_cast<unsigned char>(c) & 0xC0U) != 0x80U ? 1 : 0;
      return text + std::string(columns < width ? width - columns : 0, ' ');
    };
    std::snprintf(line, sizeof(line), " %8.3f %9.1f %9s %8.2f   ", row.measured.bytes_per_second / 1e9,
                  row.measured.samples_per_second / 1e6, packets(row.measured.packets_per_second).c_str(),
                  row.measured.cpu_seconds_per_gb);
    out << padded(row.stage, 28) << line;
    std::snprintf(line, sizeof(line), " %8.3f %9s %8.2f %6.2f\n", row.bound.bytes_per_second / 1e9,
                  packets(row.bound.packets_per_second).c_str(), row.bound.cpu_seconds_per_gb, row.ratio);
    out << padded(row.ceiling, 34) << line;
  }
  std::snprintf(line, sizeof(line), "two-lane scaling: %.2f× one lane\n", result.two_lane_scaling);
  out << line;
  for (const auto& row : result.rows) {
    if (!row.note.empty()) out << "note: " << row.stage << ": " << row.note << "\n";
  }
  for (const auto& note : result.notes) out << "note: " << note << "\n";
  return out.str();
}

nlohmann::json bench_json(const BenchResult& result) {
  auto rates_json = [](const Rates& rates) {
    return nlohmann::json{{"bytes_per_second", rates.bytes_per_second},
                          {"gb_per_second", rates.bytes_per_second / 1e9},
                          {"msamples_per_second", rates.samples_per_second / 1e6},
                          {"packets_per_second", rates.packets_per_second},
                          {"cpu_seconds_per_gb", rates.cpu_seconds_per_gb},
                          {"machine_cpu_busy", rates.machine_busy},
                          {"busiest_thread", rates.busiest},
                          {"busiest_thread_busy", rates.busiest_busy}};
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : result.rows) {
    rows.push_back({{"stage", row.stage},
                    {"measured", rates_json(row.measured)},
                    {"ceiling_name", row.ceiling},
                    {"ceiling", rates_json(row.bound)},
                    {"ratio", row.ratio},
                    {"note", row.note}});
  }
  return {{"rows", rows},
          {"two_lane_scaling", result.two_lane_scaling},
          {"directory", result.directory},
          {"directories", result.directories},
          {"lane_directories", result.lane_directories},
          {"notes", result.notes},
          {"seconds", result.seconds}};
}

}  // namespace sluice::bench
