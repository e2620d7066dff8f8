// A generator→null lane moving 4 MiB chunks against its baseline, a plain single-thread
// memcpy loop over the same bytes into the same number of chunk-sized buffers, measured in
// the same benchmark run. The runtime must not be the bottleneck: ratio ≥ 0.8.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"

namespace sluice {
namespace {

constexpr std::size_t kChunkBytes = 4 << 20;
constexpr std::size_t kPoolChunks = 16;

double memcpy_bytes_per_second(std::uint64_t total) {
  // The plainest, most cache-friendly loop: the generator's pattern copied into one
  // touched chunk-sized buffer, over and over. (The pool hands the most recently released
  // chunk out first, so the lane also stays cache-warm; a baseline cycling through 16
  // buffers would run from DRAM and flatter the lane by about 2×.)
  std::vector<std::byte> pattern(kChunkBytes + 65536 * 4, std::byte{1});
  MemoryRegion destination(MemoryKind::host, kChunkBytes);
  const std::uint64_t begin = monotonic_ns();
  for (std::uint64_t copied = 0; copied < total; copied += kChunkBytes) {
    std::memcpy(destination.data(), pattern.data(), kChunkBytes);
    benchmark::ClobberMemory();
  }
  return static_cast<double>(total) / (static_cast<double>(monotonic_ns() - begin) / 1e9);
}

double lane_bytes_per_second(std::uint64_t total) {
  Pipeline pipeline(load_pipeline_text("pipeline: {chunk: 4MiB, chunks: " + std::to_string(kPoolChunks) +
                                       "}\nlanes: [{name: a, stages: [{type: generator, stop_after: " + std::to_string(total) +
                                       "}, {type: null}]}]\n"));
  pipeline.start();
  pipeline.run();
  const auto lanes = pipeline.metrics_by_lane();
  const StageMetrics& sink = *lanes[0][1];
  if (sink.in.bytes.load() != total) throw std::runtime_error("lane lost bytes");
  // From the source's first chunk to the sink's last, so thread start-up is not counted.
  return static_cast<double>(total) / (static_cast<double>(sink.stopped_ns.load() - lanes[0][0]->started_ns.load()) / 1e9);
}

void BM_GeneratorToNullVsMemcpy(benchmark::State& state) {
  const auto total = static_cast<std::uint64_t>(state.range(0)) << 20;
  double lane = 0;
  double baseline = 0;
  for (auto _ : state) {
    baseline = memcpy_bytes_per_second(total);
    lane = lane_bytes_per_second(total);
  }
  state.counters["lane_GBps"] = lane / 1e9;
  state.counters["memcpy_GBps"] = baseline / 1e9;
  state.counters["ratio"] = lane / baseline;
}
BENCHMARK(BM_GeneratorToNullVsMemcpy)->Arg(8192)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
