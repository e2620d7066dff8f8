// An hour-long rotating recording simulated with small files, against the same bytes in one file
// in the same run: rotation's cost on the write path, and whether it grows with the recording.
//   SLUICE_BENCH_DIR=/data/bench ./rotation_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/pool.hpp"
#include "pipeline/units.hpp"
#include "recorder/recording_writer.hpp"

namespace sluice {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr unsigned kQueueDepth = 8;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  const auto parsed = text != nullptr ? parse_bytes(text) : std::nullopt;
  return parsed ? *parsed : fallback;
}
// One file set per "second" of the hour, each kFileBytes of kChunkBytes chunks.
const std::size_t kChunkBytes = std::max<std::size_t>(4096, env_number("SLUICE_BENCH_CHUNK", 64 << 10) / 4096 * 4096);
const std::uint64_t kFiles = env_number("SLUICE_BENCH_ROTATIONS", 3600);
const std::uint64_t kFileBytes =
    std::max<std::uint64_t>(kChunkBytes, env_number("SLUICE_BENCH_FILE_BYTES", 256 << 10) / kChunkBytes * kChunkBytes);

std::string bench_directory() {
  const char* configured = std::getenv("SLUICE_BENCH_DIR");
  const fs::path path = fs::path(configured != nullptr ? configured : fs::temp_directory_path().string()) /
                        ("sluice-rotation-bench-" + std::to_string(::getpid()));
  fs::remove_all(path);
  fs::create_directories(path);
  return path.string();
}

struct Run {
  double seconds = 0;
  // Seconds from the start when each file's last chunk was written and journaled (taken back
  // from the writer): the chunks free in the pool at the start do not make the first file look fast.
  std::vector<double> file_done;
  std::uint64_t waits = 0;
};

// Writes kFiles × kFileBytes through one RecordingWriter, rotating at kFileBytes or never.
Run write(const std::string& directory, bool rotating) {
  Pool pool("bench", PoolSpec{kChunkBytes, kQueueDepth * 2, MemoryKind::host, 0});
  for (std::size_t i = 0; i < pool.chunk_count(); ++i)
    std::memset(pool.chunk(i).data, static_cast<int>(i + 1), kChunkBytes);
  recorder::RecorderSettings settings;
  settings.directories = {directory};
  settings.name = rotating ? "rotating" : "single";
  settings.queue_depth = kQueueDepth;
  settings.rotate_bytes = rotating ? kFileBytes : 0;
  settings.preallocate_bytes = rotating ? kFileBytes : kFiles * kFileBytes;
  StreamInfo stream;
  stream.sample_rate = 1e9;
  recorder::RecordingWriter writer(settings, stream, "bench");
  writer.open({&pool});
  const std::uint64_t total = kFiles * kFileBytes;
  Run run;
  run.file_done.reserve(kFiles);
  const auto begin = Clock::now();
  std::uint64_t submitted = 0;
  std::uint64_t retired = 0;
  std::uint64_t sample = 0;
  while (submitted < total || writer.in_flight() > 0) {
    writer.poll(std::chrono::microseconds(0));
    while (ChunkPtr done = writer.take_done()) {
      retired += kChunkBytes;
      if (retired % kFileBytes == 0)
        run.file_done.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
    }
    if (writer.failed()) throw std::runtime_error(writer.error());
    if (submitted < total && writer.has_room()) {
      if (ChunkPtr chunk = pool.try_acquire()) {
        chunk->size = kChunkBytes;
        chunk->first_sample = sample;
        chunk->sample_count = kChunkBytes / 4;
        sample += chunk->sample_count;
        submitted += kChunkBytes;
        if (!writer.submit(std::move(chunk), nullptr)) throw std::runtime_error(writer.error());
        continue;
      }
    }
    writer.poll(std::chrono::microseconds(200));
  }
  writer.finish();
  run.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  if (writer.failed()) throw std::runtime_error(writer.error());
  run.waits = writer.rotation_waits();
  if (rotating && writer.bases().size() != kFiles) {
    throw std::runtime_error("expected " + std::to_string(kFiles) + " file sets, got " +
                             std::to_string(writer.bases().size()));
  }
  return run;
}

// Files per second over files [from, to) of a run.
double file_rate(const Run& run, std::size_t from, std::size_t to) {
  const double start = from == 0 ? 0.0 : run.file_done[from - 1];
  return static_cast<double>(to - from) / (run.file_done[to - 1] - start);
}

void BM_HourOfRotationVsOneFile(benchmark::State& state) {
  const std::string directory = bench_directory();
  Run rotating;
  Run single;
  static int round = 0;
  for (auto _ : state) {
    // Which side goes first alternates: a virtual disk's host cache favours the first writer.
    if (round++ % 2 == 0) {
      rotating = write(directory, true);
      single = write(directory, false);
    } else {
      single = write(directory, false);
      rotating = write(directory, true);
    }
    fs::remove_all(directory);
    fs::create_directories(directory);
  }
  fs::remove_all(directory);
  const double bytes = static_cast<double>(kFiles * kFileBytes);
  const std::size_t tenth = std::max<std::size_t>(1, kFiles / 10);
  // ratio: rotating rate / one file's rate. late_early: rate over the last tenth of the files /
  // over the first tenth (< 1: a cost that grows with the recording's length); with few files
  // (SLUICE_BENCH_ROTATIONS=5 SLUICE_BENCH_FILE_BYTES=4GiB) the last file's over the first's.
  // waits: rotations that found their next file set not ready.
  state.counters["files"] = static_cast<double>(kFiles);
  state.counters["rotating_MBps"] = bytes / rotating.seconds / 1e6;
  state.counters["single_MBps"] = bytes / single.seconds / 1e6;
  state.counters["ratio"] = single.seconds / rotating.seconds;
  state.counters["late_early"] = file_rate(rotating, kFiles - tenth, kFiles) / file_rate(rotating, 0, tenth);
  state.counters["waits"] = static_cast<double>(rotating.waits);
}

BENCHMARK(BM_HourOfRotationVsOneFile)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
