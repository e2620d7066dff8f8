// Recorder write and replay read against fio in the same run, on the same filesystem, with
// the same block size (the chunk) and queue depth: counters `ratio` = ours / fio's
// (target ≥ 0.95). Each repetition measures both sides back to back, and the side that goes
// first alternates: a virtual disk's host cache otherwise favours whichever writes first.
//   SLUICE_BENCH_DIR=/data/bench SLUICE_BENCH_BYTES=8GiB ./recorder_bench --benchmark_repetitions=5
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "pipeline/config.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/units.hpp"
#include "recorder/recording_writer.hpp"

namespace sluice {
namespace {
namespace fs = std::filesystem;

constexpr std::size_t kChunkBytes = 4 << 20;
constexpr unsigned kQueueDepth = 8;
// Bytes per measurement (SLUICE_BENCH_BYTES, e.g. 8GiB; default 4 GiB).
const std::uint64_t kTotalBytes = [] {
  const char* text = std::getenv("SLUICE_BENCH_BYTES");
  const auto parsed = text != nullptr ? parse_bytes(text) : std::nullopt;
  return parsed ? *parsed / kChunkBytes * kChunkBytes : 4ULL << 30;
}();

std::string bench_directory() {
  const char* configured = std::getenv("SLUICE_BENCH_DIR");
  const fs::path path = fs::path(configured != nullptr ? configured : fs::temp_directory_path().string()) /
                        ("sluice-recorder-bench-" + std::to_string(::getpid()));
  fs::create_directories(path);
  return path.string();
}

// Runs fio; returns its bandwidth in bytes/s for the given direction.
double run_fio(const std::string& mode, const std::string& file, std::uint64_t bytes) {
  const std::string command = "fio --name=sluice --ioengine=io_uring --direct=1 --fixedbufs=1 --rw=" + mode +
                              " --bs=" + std::to_string(kChunkBytes) + " --iodepth=" + std::to_string(kQueueDepth) +
                              " --size=" + std::to_string(bytes) + " --filename=" + file +
                              (mode == "write" ? " --end_fsync=1" : "") + " --output-format=json 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen(fio) failed");
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  if (::pclose(pipe) != 0) throw std::runtime_error("fio failed (is the fio package installed?): " + command);
  const nlohmann::json json = nlohmann::json::parse(output.substr(output.find('{')));
  return json["jobs"][0][mode]["bw_bytes"].get<double>();
}

// The recorder's sustained write: chunks cycle through the writer as fast as it retires them.
double recorder_write(const std::string& directory, const std::string& name) {
  Pool pool("bench", PoolSpec{kChunkBytes, kQueueDepth * 2, MemoryKind::host, 0});
  for (std::size_t i = 0; i < pool.chunk_count(); ++i) std::memset(pool.chunk(i).data, static_cast<int>(i), kChunkBytes);
  recorder::RecorderSettings settings;
  settings.directories = {directory};
  settings.name = name;
  settings.queue_depth = kQueueDepth;
  settings.preallocate_bytes = kTotalBytes;
  StreamInfo stream;
  stream.sample_rate = 1e9;
  recorder::RecordingWriter writer(settings, stream, "bench");
  writer.open({&pool});
  const auto begin = std::chrono::steady_clock::now();
  std::uint64_t submitted = 0;
  std::uint64_t sample = 0;
  while (submitted < kTotalBytes || writer.in_flight() > 0) {
    writer.poll(std::chrono::microseconds(0));
    while (ChunkPtr done = writer.take_done()) {
    }
    if (writer.failed()) throw std::runtime_error(writer.error());
    if (submitted < kTotalBytes && writer.has_room()) {
      ChunkPtr chunk = pool.try_acquire();
      if (chunk) {
        chunk->size = kChunkBytes;
        chunk->first_sample = sample;
        chunk->sample_count = kChunkBytes / 4;
        sample += chunk->sample_count;
        submitted += kChunkBytes;
        writer.submit(std::move(chunk), nullptr);
        continue;
      }
    }
    writer.poll(std::chrono::microseconds(500));
  }
  writer.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (writer.failed()) throw std::runtime_error(writer.error());
  return static_cast<double>(kTotalBytes) / seconds;
}

// The replay stage reading a capture back as fast as it can (replay → null pipeline).
double replay_read(const std::string& collection) {
  const std::string yaml = "pipeline: {name: bench, chunk: 4MiB, chunks: 16}\n"
                           "template:\n"
                           "  - {name: replay, type: replay, pace: fast, read_ahead: " + std::to_string(kQueueDepth) +
                           ", capture: " + collection + "}\n"
                           "  - {name: sink, type: null}\n"
                           "lanes:\n  - name: bench\n";
  Pipeline pipeline(load_pipeline_text(yaml, "bench"));
  pipeline.start();
  const auto begin = std::chrono::steady_clock::now();
  pipeline.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (!pipeline.failures().empty()) throw std::runtime_error(pipeline.failures().front().message);
  return static_cast<double>(kTotalBytes) / seconds;
}

// Runs both sides of one repetition; which goes first alternates from one call to the next.
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
  double ours = 0;
  double fio = 0;
  static int round = 0;
  for (auto _ : state) {
    alternately(
        round, [&] { ours = recorder_write(directory, "write"); },
        [&] { fio = run_fio("write", directory + "/fio-write.dat", kTotalBytes); });
    fs::remove_all(directory);
    fs::create_directories(directory);
  }
  fs::remove_all(directory);
  state.counters["recorder_MBps"] = ours / 1e6;
  state.counters["fio_MBps"] = fio / 1e6;
  state.counters["ratio"] = ours / fio;
}

void BM_ReplayReadVsFio(benchmark::State& state) {
  const std::string directory = bench_directory();
  recorder_write(directory, "read");
  const std::string data = directory + "/read-bench-0000.sigmf-data";
  // One untimed pass first: a virtual disk may cache freshly written blocks on the host, and
  // whichever reader went first would otherwise pay for it alone.
  run_fio("read", data, kTotalBytes);
  double ours = 0;
  double fio = 0;
  static int round = 0;
  for (auto _ : state) {
    alternately(
        round, [&] { ours = replay_read(directory + "/read.sigmf-collection"); },
        [&] { fio = run_fio("read", data, kTotalBytes); });
  }
  fs::remove_all(directory);
  state.counters["replay_MBps"] = ours / 1e6;
  state.counters["fio_MBps"] = fio / 1e6;
  state.counters["ratio"] = ours / fio;
}

BENCHMARK(BM_RecorderWriteVsFio)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReplayReadVsFio)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
