// Recorder write, record stage and replay read against fio in the same run: same filesystem,
// block size (the chunk), queue depth and page size; counter `ratio` = ours / fio's (target ≥ 0.95).
//   SLUICE_BENCH_DIR=/data/bench SLUICE_BENCH_BYTES=8GiB ./recorder_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/units.hpp"
#include "recorder/recording_writer.hpp"
#include "suite/uring_loop.hpp"

namespace sluice {
namespace {
namespace fs = std::filesystem;

constexpr std::size_t kChunkBytes = 4 << 20;
constexpr unsigned kQueueDepth = 8;
// How far ahead the recorder preallocates its data files (SLUICE_BENCH_PREALLOCATE, e.g. 1GiB as
// the record stage's default; default: the bytes of the measurement, reserved whole at the start).
std::uint64_t bench_preallocate(std::uint64_t total) {
  const char* text = std::getenv("SLUICE_BENCH_PREALLOCATE");
  const auto parsed = text != nullptr ? parse_bytes(text) : std::nullopt;
  return parsed ? *parsed : total;
}
// Bytes per measurement (SLUICE_BENCH_BYTES, e.g. 8GiB; default 4 GiB).
const std::uint64_t kTotalBytes = [] {
  const char* text = std::getenv("SLUICE_BENCH_BYTES");
  const auto parsed = text != nullptr ? parse_bytes(text) : std::nullopt;
  return parsed ? *parsed / kChunkBytes * kChunkBytes : 4ULL << 30;
}();

// A directory of its own under SLUICE_BENCH_DIR (default: the temporary directory).
std::string bench_directory() {
  const char* configured = std::getenv("SLUICE_BENCH_DIR");
  const fs::path path = fs::path(configured != nullptr ? configured : fs::temp_directory_path().string()) /
                        ("sluice-recorder-bench-" + std::to_string(::getpid()));
  fs::create_directories(path);
  return path.string();
}

// Whether Sluice's pools use huge pages in this process (MemoryRegion reads the same variable), and
// so fio's buffers: SLUICE_HUGE_PAGES=0, 4 KiB pages and fio --iomem=malloc; default, 2 MiB
// transparent huge pages and fio --iomem=mmaphuge (echo 64 > /proc/sys/vm/nr_hugepages first).
bool huge_pages() {
  const char* value = std::getenv("SLUICE_HUGE_PAGES");
  return value == nullptr || std::string_view(value) != "0";
}

// The fraction of [data, data + bytes) that the kernel backs with transparent huge pages,
// from /proc/self/smaps: THP is advice, so "huge pages" is checked, not assumed.
double huge_fraction(const std::byte* data, std::size_t bytes) {
  std::ifstream smaps("/proc/self/smaps");
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  std::string line;
  bool inside = false;
  std::uint64_t huge_kib = 0;
  while (std::getline(smaps, line)) {
    const std::string first = line.substr(0, line.find(' '));
    if (!first.empty() && first.back() == ':') {  // a field of the current mapping
      if (inside && first == "AnonHugePages:") huge_kib += std::strtoull(line.c_str() + first.size(), nullptr, 10);
      continue;
    }
    const std::size_t dash = first.find('-');  // a mapping: "low-high perms ..."
    if (dash == std::string::npos) continue;
    const std::uintptr_t low = std::stoull(first.substr(0, dash), nullptr, 16);
    const std::uintptr_t high = std::stoull(first.substr(dash + 1), nullptr, 16);
    inside = low < begin + bytes && high > begin;
  }
  return static_cast<double>(huge_kib * 1024) / static_cast<double>(bytes);
}

// Runs fio; returns its bandwidth in bytes/s for the given direction. Its buffers are in the
// same page size as Sluice's pools in this process.
// With several files: one job per file, all at once, their bandwidth summed (group_reporting).
double run_fio(const std::string& mode, const std::vector<std::string>& files, std::uint64_t bytes) {
  std::string command = "fio --ioengine=io_uring --direct=1 --fixedbufs=1 --rw=" + mode +
                        " --bs=" + std::to_string(kChunkBytes) + " --iodepth=" + std::to_string(kQueueDepth) +
                        " --size=" + std::to_string(bytes) +
                        (huge_pages() ? " --iomem=mmaphuge --hugepage-size=2M" : " --iomem=malloc") +
                        (mode == "write" ? " --end_fsync=1" : "") + " --group_reporting --output-format=json";
  for (std::size_t i = 0; i < files.size(); ++i)
    command += " --name=sluice" + std::to_string(i) + " --filename=" + files[i];
  command += " 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen(fio) failed");
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  if (::pclose(pipe) != 0) {
    throw std::runtime_error(
        "fio failed (is fio installed? with huge pages: are 2 MiB pages reserved in "
        "/proc/sys/vm/nr_hugepages?): " +
        command);
  }
  const nlohmann::json json = nlohmann::json::parse(output.substr(output.find('{')));
  return json["jobs"][0][mode]["bw_bytes"].get<double>();
}

constexpr std::size_t kPage = 4096;

// The writer stamps each 4 KiB page with its byte offset in the stream (1024 stores per chunk),
// so a reader can tell a page that came from the wrong place, or not at all.
void stamp_pages(std::byte* data, std::uint64_t stream_offset) {
  for (std::size_t page = 0; page < kChunkBytes; page += kPage) {
    const std::uint64_t stamp = stream_offset + page;
    std::memcpy(data + page, &stamp, sizeof(stamp));
  }
}

struct WriteResult {
  double bytes_per_second = 0;
  double huge_fraction = 0;
  double thread_busy = 0;   // the submitting thread's CPU time over the time chunks were written
  double kernel_depth = 0;  // writes in the kernel a volume, averaged over the time chunks were written
  double volume_idle = 0;   // of that time, the fraction in which some volume had no write in the kernel
  // Of that time, the share the submitting thread spent in take_done() (each chunk's journal
  // record, a buffered write) and in submit() (io_uring_submit); the longest single call of each.
  double retire_share = 0;
  double submit_share = 0;
  double longest_retire_ms = 0;
  double longest_submit_ms = 0;
  double passed_share = 0;  // of the chunks, those that went past a volume with all its writes in the kernel
};

// CPU seconds the calling thread has used.
double thread_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  const auto seconds = [](const timeval& time) {
    return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The time spent in the calls it runs: in all, and the longest one.
struct CallTimes {
  std::uint64_t total_ns = 0;
  std::uint64_t longest_ns = 0;
  template <typename Call>
  auto operator()(Call&& call) {
    const std::uint64_t begin = monotonic_ns();
    auto result = call();
    const std::uint64_t ns = monotonic_ns() - begin;
    total_ns += ns;
    longest_ns = std::max(longest_ns, ns);
    return result;
  }
};

// The stream's next chunk, its samples from `sample` on (advanced past them), each page stamped.
void fill_next(Chunk& chunk, std::uint64_t& sample) {
  chunk.size = kChunkBytes;
  chunk.first_sample = sample;
  chunk.sample_count = kChunkBytes / 4;
  stamp_pages(chunk.data, sample * 4);
  sample += chunk.sample_count;
}

// A writer of `depth` writes in the kernel over `directories`, fed from a pool of `pool_chunks`.
recorder::RecorderSettings writer_settings(const std::vector<std::string>& directories, const std::string& name,
                                           unsigned depth, std::size_t pool_chunks) {
  recorder::RecorderSettings settings;
  settings.directories = directories;
  settings.name = name;
  settings.queue_depth = depth;
  settings.preallocate_bytes = bench_preallocate(kTotalBytes);
  settings.held_chunks = recorder::chunks_held(settings, pool_chunks);
  return settings;
}

// What the bench's chunks claim to be: ci16 at 1 Gsps.
StreamInfo gigasample_stream() {
  StreamInfo stream;
  stream.sample_rate = 1e9;
  return stream;
}

// The recorder's sustained write: chunks cycle through the writer as fast as it retires them.
WriteResult recorder_write(const std::vector<std::string>& directories, const std::string& name) {
  const std::uint64_t total = kTotalBytes * directories.size();
  const unsigned depth = kQueueDepth * static_cast<unsigned>(directories.size());  // kQueueDepth a volume
  // Room for what the writer may hold (twice its writes, striped) and as much again for the source.
  Pool pool("bench", PoolSpec{kChunkBytes, depth * 4, MemoryKind::host, 0});
  for (std::size_t i = 0; i < pool.chunk_count(); ++i)
    std::memset(pool.chunk(i).data, static_cast<int>(i), kChunkBytes);
  const double huge = huge_fraction(pool.region().data(), pool.region().size());
  recorder::RecordingWriter writer(writer_settings(directories, name, depth, pool.chunk_count()), gigasample_stream(),
                                   "bench");
  writer.open({&pool});
  const auto begin = std::chrono::steady_clock::now();
  const double cpu_begin = thread_cpu_seconds();
  std::uint64_t submitted = 0;
  std::uint64_t sample = 0;
  // Each turn, once completions are reaped, the time since the last turn counts with what is
  // in the kernel now: the writes in the kernel × time, and the time some volume had none.
  double depth_seconds = 0;
  double idle_seconds = 0;
  auto sampled = begin;
  CallTimes retiring;
  CallTimes submitting;
  while (submitted < total || writer.in_flight() > 0) {
    writer.poll(std::chrono::microseconds(0));
    const auto now = std::chrono::steady_clock::now();
    const double interval = std::chrono::duration<double>(now - sampled).count();
    depth_seconds += static_cast<double>(writer.writes_in_kernel()) * interval;
    idle_seconds += writer.a_volume_idles() ? interval : 0;
    sampled = now;
    while (retiring([&] { return writer.take_done(); })) {
    }
    if (writer.failed()) throw std::runtime_error(writer.error());
    if (submitted < total && writer.has_room()) {
      ChunkPtr chunk = pool.try_acquire();
      if (chunk) {
        fill_next(*chunk, sample);
        submitted += kChunkBytes;
        submitting([&] { return writer.submit(std::move(chunk), nullptr); });
        continue;
      }
    }
    writer.poll(std::chrono::microseconds(500));
  }
  // Up to the last chunk's retirement: finishing (truncate, fsync, meta) is neither submitting nor writing.
  const double writing = std::chrono::duration<double>(sampled - begin).count();
  const double busy = (thread_cpu_seconds() - cpu_begin) / writing;
  writer.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (writer.failed()) throw std::runtime_error(writer.error());
  return WriteResult{static_cast<double>(total) / seconds,
                     huge,
                     busy,
                     depth_seconds / writing / static_cast<double>(directories.size()),
                     idle_seconds / writing,
                     static_cast<double>(retiring.total_ns) / 1e9 / writing,
                     static_cast<double>(submitting.total_ns) / 1e9 / writing,
                     static_cast<double>(retiring.longest_ns) / 1e6,
                     static_cast<double>(submitting.longest_ns) / 1e6,
                     static_cast<double>(writer.turns_passed()) * kChunkBytes / static_cast<double>(total)};
}

// The record stage itself in a lane: generator (unpaced) → record → null, timed from the
// run's start to the record stage's end (its finish includes the final fsync, as fio's end_fsync).
double record_stage_write(const std::string& directory) {
  const std::string yaml =
      "pipeline: {name: stage, chunk: 4MiB, chunks: 16}\n"
      "lanes:\n  - name: bench\n    stages:\n"
      "      - {type: generator, signal: ramp, stop_after: " +
      std::to_string(kTotalBytes) +
      "}\n"
      "      - {type: record, io_depth: " +
      std::to_string(kQueueDepth) + ", preallocate: " + std::to_string(kTotalBytes) + ", directory: " + directory +
      "}\n"
      "      - {type: null}\n";
  Pipeline pipeline(load_pipeline_text(yaml, "bench"));
  pipeline.start();
  const std::uint64_t begin = monotonic_ns();
  pipeline.run();
  if (!pipeline.failures().empty()) throw std::runtime_error(pipeline.failures().front().message);
  const StageMetrics& record = *pipeline.metrics_by_lane()[0][1];
  if (record.in.bytes.load() != kTotalBytes) throw std::runtime_error("record stage lost bytes");
  return static_cast<double>(kTotalBytes) / (static_cast<double>(record.stopped_ns.load() - begin) / 1e9);
}

// The end of the replay lane: checks every page stamp of every chunk, and that no read came
// back short, then releases the chunk. Mismatches are counted into g_bad_pages.
std::atomic<std::uint64_t> g_bad_pages{0};
class CheckSink final : public Stage {
 public:
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    std::uint64_t bad = chunk->size == kChunkBytes ? 0 : 1;
    const std::uint64_t offset = chunk->first_sample * 4;
    for (std::size_t page = 0; page < chunk->size; page += kPage) {
      std::uint64_t stamp = 0;
      std::memcpy(&stamp, chunk->data + page, sizeof(stamp));
      bad += stamp == offset + page ? 0 : 1;
    }
    g_bad_pages.fetch_add(bad, std::memory_order_relaxed);
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
};

const StageRegistry& registry_with_check_sink() {
  static const StageRegistry registry = [] {
    StageRegistry built;
    register_builtin_stages(built);
    built.add(StageType{"check", StageRole::sink, "checks page stamps",
                        [](SettingsReader&, const PipelineSettings&) -> std::unique_ptr<Stage> {
                          return std::make_unique<CheckSink>();
                        }});
    return built;
  }();
  return registry;
}

// The replay stage reading a capture back as fast as it can (replay → check pipeline).
double replay_read(const std::string& collection) {
  const std::string yaml =
      "pipeline: {name: bench, chunk: 4MiB, chunks: 16}\n"
      "template:\n"
      "  - {name: replay, type: replay, pace: fast, read_ahead: " +
      std::to_string(kQueueDepth) + ", capture: " + collection +
      "}\n"
      "  - {name: sink, type: check}\n"
      "lanes:\n  - name: bench\n";
  g_bad_pages = 0;
  Pipeline pipeline(load_pipeline_text(yaml, "bench", {}, registry_with_check_sink()));
  pipeline.start();
  pipeline.run();
  if (!pipeline.failures().empty()) throw std::runtime_error(pipeline.failures().front().message);
  const FlowCounters& in = pipeline.metrics_by_lane()[0][1]->in;
  if (in.bytes.load() != kTotalBytes) throw std::runtime_error("replay lost bytes");
  if (g_bad_pages.load() != 0)
    throw std::runtime_error(std::to_string(g_bad_pages.load()) + " replayed pages hold the wrong bytes");
  // Over the time data flowed (the sink's first chunk to its last), as fio reports its bandwidth
  // over its I/O: the run's start (pool allocation and page-locking, buffer registration, opening
  // the capture) and its drain are not reading. The first chunk arrived before first_ns.
  const double seconds = static_cast<double>(in.last_ns.load() - in.first_ns.load()) / 1e9;
  return static_cast<double>(in.bytes.load() - in.first_bytes.load()) / seconds;
}

// Runs both sides of one repetition; which goes first alternates from one call to the next, as a
// virtual disk's host cache otherwise favours whichever writes first.
void alternately(int& round, const std::function<void()>& ours, const std::function<void()>& fio) {
  if (round++ % 2 == 0) {
    ours();
    fio();
  } else {
    fio();
    ours();
  }
}

void BM_RecorderWriteVsFio(benchmark::State& state) {
  const std::string directory = bench_directory();
  WriteResult ours;
  double fio = 0;
  static int round = 0;
  for (auto _ : state) {
    alternately(
        round, [&] { ours = recorder_write({directory}, "write"); },
        [&] { fio = run_fio("write", {directory + "/fio-write.dat"}, kTotalBytes); });
    fs::remove_all(directory);
    fs::create_directories(directory);
  }
  fs::remove_all(directory);
  state.counters["recorder_MBps"] = ours.bytes_per_second / 1e6;
  state.counters["fio_MBps"] = fio / 1e6;
  state.counters["ratio"] = ours.bytes_per_second / fio;
  state.counters["huge_fraction"] = ours.huge_fraction;
  state.SetLabel(huge_pages() ? "huge pages both sides" : "4 KiB pages both sides");
}

void BM_RecordStageVsFio(benchmark::State& state) {
  const std::string directory = bench_directory();
  double ours = 0;
  double fio = 0;
  static int round = 0;
  for (auto _ : state) {
    alternately(
        round, [&] { ours = record_stage_write(directory); },
        [&] { fio = run_fio("write", {directory + "/fio-write.dat"}, kTotalBytes); });
    fs::remove_all(directory);
    fs::create_directories(directory);
  }
  fs::remove_all(directory);
  state.counters["record_stage_MBps"] = ours / 1e6;
  state.counters["fio_MBps"] = fio / 1e6;
  state.counters["ratio"] = ours / fio;
  state.SetLabel(huge_pages() ? "huge pages both sides" : "4 KiB pages both sides");
}

// Replay against fio and against the raw io_uring loop that is `sluice bench`'s replay ceiling,
// all three reading the same data file with the same block, depth, O_DIRECT and page size; the
// order rotates from one repetition to the next.
void BM_ReplayReadVsFio(benchmark::State& state) {
  const std::string directory = bench_directory();
  recorder_write({directory}, "read");
  const std::string data = directory + "/read-bench-0000.sigmf-data";
  // One untimed pass first: a virtual disk may cache freshly written blocks on the host, and
  // whichever reader went first would otherwise pay for it alone.
  run_fio("read", {data}, kTotalBytes);
  double ours = 0;
  double fio = 0;
  double raw = 0;
  static int round = 0;
  for (auto _ : state) {
    const std::function<void()> sides[] = {[&] { ours = replay_read(directory + "/read.sigmf-collection"); },
                                           [&] { fio = run_fio("read", {data}, kTotalBytes); },
                                           [&] {
                                             const bench::UringLoopResult loop = bench::uring_loop(
                                                 data, kTotalBytes, kChunkBytes, kQueueDepth, false, true);
                                             raw = loop.bytes / loop.seconds;
                                           }};
    for (int side = 0; side < 3; ++side) sides[(round + side) % 3]();
    ++round;
  }
  fs::remove_all(directory);
  state.counters["replay_MBps"] = ours / 1e6;
  state.counters["fio_MBps"] = fio / 1e6;
  state.counters["raw_uring_MBps"] = raw / 1e6;
  state.counters["ratio"] = ours / fio;
  state.counters["ratio_raw"] = ours / raw;
  state.SetLabel(huge_pages() ? "huge pages both sides" : "4 KiB pages both sides");
}

// SLUICE_BENCH_DIRS split at ':' (empty: not set).
std::vector<std::string> bench_volumes() {
  std::vector<std::string> volumes;
  const char* text = std::getenv("SLUICE_BENCH_DIRS");
  std::string rest = text != nullptr ? text : "";
  while (!rest.empty()) {
    const std::size_t colon = rest.find(':');
    if (!rest.substr(0, colon).empty()) volumes.push_back(rest.substr(0, colon));
    rest = colon == std::string::npos ? std::string() : rest.substr(colon + 1);
  }
  return volumes;
}

// One lane striped over every directory of SLUICE_BENCH_DIRS (one per volume) against fio with one
// job per volume at once, the same bytes and queue depth a volume. Counters: thread_busy, the
// submitting thread's CPU time over the writes' wall time (near 1: that thread is the bound);
// kernel_depth, the writes it kept in the kernel a volume on average (fio keeps its iodepth, 8);
// volume_idle, the fraction of the time some volume had none (both sampled at every turn);
// retire_share and submit_share, the share of that time in take_done() (journal records) and in
// submit(), and the longest call of each; huge_fraction, the share of the pool the kernel backs
// with 2 MiB pages (transparent huge pages are advice; fio's buffers are reserved huge pages);
// passed_share, the chunks that went to another volume than the one whose turn it was (busy).
void BM_StripedWriteVsFio(benchmark::State& state) {
  const std::vector<std::string> volumes = bench_volumes();
  if (volumes.empty()) {
    state.SkipWithError("set SLUICE_BENCH_DIRS=/vol0:/vol1:... (one directory per volume)");
    return;
  }
  std::vector<std::string> directories;
  std::vector<std::string> fio_files;
  for (const auto& volume : volumes) {
    directories.push_back(volume + "/sluice-striped-bench-" + std::to_string(::getpid()));
    fio_files.push_back(directories.back() + "/fio-write.dat");
  }
  const auto fresh = [&] {
    for (const auto& directory : directories) {
      fs::remove_all(directory);
      fs::create_directories(directory);
    }
  };
  fresh();
  WriteResult ours;
  double fio = 0;
  static int round = 0;
  // Each side starts on volumes emptied of the other's files, so neither writes beside the
  // other's bytes nor into space the other just freed.
  for (auto _ : state) {
    alternately(
        round,
        [&] {
          ours = recorder_write(directories, "striped");
          fresh();
        },
        [&] {
          fio = run_fio("write", fio_files, kTotalBytes);
          fresh();
        });
  }
  for (const auto& directory : directories) fs::remove_all(directory);
  state.counters["volumes"] = static_cast<double>(volumes.size());
  state.counters["recorder_MBps"] = ours.bytes_per_second / 1e6;
  state.counters["fio_MBps"] = fio / 1e6;
  state.counters["ratio"] = ours.bytes_per_second / fio;
  state.counters["thread_busy"] = ours.thread_busy;
  state.counters["kernel_depth"] = ours.kernel_depth;
  state.counters["volume_idle"] = ours.volume_idle;
  state.counters["huge_fraction"] = ours.huge_fraction;
  state.counters["retire_share"] = ours.retire_share;
  state.counters["submit_share"] = ours.submit_share;
  state.counters["longest_retire_ms"] = ours.longest_retire_ms;
  state.counters["longest_submit_ms"] = ours.longest_submit_ms;
  state.counters["passed_share"] = ours.passed_share;
  state.SetLabel(huge_pages() ? "huge pages both sides" : "4 KiB pages both sides");
}

BENCHMARK(BM_RecorderWriteVsFio)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RecordStageVsFio)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReplayReadVsFio)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StripedWriteVsFio)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
