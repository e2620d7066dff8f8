// A generator→sink lane moving 4 MiB chunks against bare threads doing the same work, in the
// same run: the runtime must not be the bottleneck (ratio ≥ 0.8).
#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"

namespace sluice {
namespace {

constexpr std::size_t kChunkBytes = 4 << 20;
constexpr std::size_t kPoolChunks = 16;

// What a consumer that touches every byte does: a sum of 64-bit words (kept, so the reads stay).
std::uint64_t sum_words(const std::byte* data, std::size_t bytes) {
  std::uint64_t sum = 0;
  for (std::size_t offset = 0; offset + 8 <= bytes; offset += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, data + offset, 8);
    sum += word;
  }
  return sum;
}

std::atomic<std::uint64_t> g_sums{0};

class SumSink final : public Stage {
 public:
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    sum_ += sum_words(chunk->data, chunk->size);
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override { g_sums.fetch_add(sum_, std::memory_order_relaxed); }

 private:
  StageContext* context_ = nullptr;
  std::uint64_t sum_ = 0;
};

const StageRegistry& registry_with_sum_sink() {
  static const StageRegistry registry = [] {
    StageRegistry built;
    register_builtin_stages(built);
    built.add(StageType{"sum", StageRole::sink, "reads every byte",
                        [](SettingsReader&, const PipelineSettings&) -> std::unique_ptr<Stage> {
                          return std::make_unique<SumSink>();
                        }});
    return built;
  }();
  return registry;
}

double seconds_since(std::uint64_t begin) { return static_cast<double>(monotonic_ns() - begin) / 1e9; }

double memcpy_bytes_per_second(std::uint64_t total) {
  // One touched buffer, over and over. (The pool hands the most recently released chunk out
  // first, so the lane also stays cache-warm; a baseline cycling through 16 buffers would run
  // from DRAM and flatter the lane.)
  std::vector<std::byte> pattern(kChunkBytes + 65536 * 4, std::byte{1});
  MemoryRegion destination(MemoryKind::host, kChunkBytes);
  const std::uint64_t begin = monotonic_ns();
  for (std::uint64_t copied = 0; copied < total; copied += kChunkBytes) {
    std::memcpy(destination.data(), pattern.data(), kChunkBytes);
    benchmark::ClobberMemory();
  }
  return static_cast<double>(total) / seconds_since(begin);
}

double copy_then_sum_bytes_per_second(std::uint64_t total) {
  // Two bare threads: the producer copies into buffer k % 2 once the consumer has summed it,
  // the consumer sums it once the producer has filled it (one flag per buffer, spin-waits).
  std::vector<std::byte> pattern(kChunkBytes + 65536 * 4, std::byte{1});
  MemoryRegion buffers(MemoryKind::host, 2 * kChunkBytes);
  std::array<std::atomic<bool>, 2> full{};
  const std::uint64_t chunks = total / kChunkBytes;
  std::uint64_t sum = 0;
  const std::uint64_t begin = monotonic_ns();
  std::thread consumer([&] {
    for (std::uint64_t k = 0; k < chunks; ++k) {
      while (!full[k % 2].load(std::memory_order_acquire)) std::this_thread::yield();
      sum += sum_words(buffers.data() + (k % 2) * kChunkBytes, kChunkBytes);
      full[k % 2].store(false, std::memory_order_release);
    }
  });
  for (std::uint64_t k = 0; k < chunks; ++k) {
    while (full[k % 2].load(std::memory_order_acquire)) std::this_thread::yield();
    std::memcpy(buffers.data() + (k % 2) * kChunkBytes, pattern.data(), kChunkBytes);
    full[k % 2].store(true, std::memory_order_release);
  }
  consumer.join();
  const double rate = static_cast<double>(total) / seconds_since(begin);
  g_sums.fetch_add(sum, std::memory_order_relaxed);
  return rate;
}

double lane_bytes_per_second(std::uint64_t total, const char* sink) {
  Pipeline pipeline(load_pipeline_text("pipeline: {chunk: 4MiB, chunks: " + std::to_string(kPoolChunks) +
                                           "}\nlanes: [{name: a, stages: [{type: generator, stop_after: " +
                                           std::to_string(total) + "}, {type: " + sink + "}]}]\n",
                                       "lane_bench", {}, registry_with_sum_sink()));
  pipeline.start();
  pipeline.run();
  const auto lanes = pipeline.metrics_by_lane();
  const StageMetrics& sink_metrics = *lanes[0][1];
  if (sink_metrics.in.bytes.load() != total) throw std::runtime_error("lane lost bytes");
  // From the source's start to the sink's end: the whole hand-off, thread start-up aside.
  return static_cast<double>(total) /
         (static_cast<double>(sink_metrics.stopped_ns.load() - lanes[0][0]->started_ns.load()) / 1e9);
}

// One repetition: the baseline, then the lane with `sink` at its end, over the same bytes.
void lane_vs_baseline(benchmark::State& state, double (*baseline_bytes_per_second)(std::uint64_t), const char* sink) {
  const auto total = static_cast<std::uint64_t>(state.range(0)) << 20;
  double lane = 0;
  double baseline = 0;
  for (auto _ : state) {
    baseline = baseline_bytes_per_second(total);
    lane = lane_bytes_per_second(total, sink);
  }
  state.counters["lane_GBps"] = lane / 1e9;
  state.counters["baseline_GBps"] = baseline / 1e9;
  state.counters["ratio"] = lane / baseline;
}

// A sink that never reads the payload against one thread copying the generator's pattern into one
// hot chunk-sized buffer: the generator's own work with no runtime at all.
void BM_GeneratorToNullVsMemcpy(benchmark::State& state) { lane_vs_baseline(state, memcpy_bytes_per_second, "null"); }
BENCHMARK(BM_GeneratorToNullVsMemcpy)->Arg(8192)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// A sink that sums every byte against two bare threads splitting the same work, copy on one core
// and sum on another, handing two buffers back and forth: what moving a chunk between cores costs
// without the runtime.
void BM_GeneratorToReaderVsBareTwoThreads(benchmark::State& state) {
  lane_vs_baseline(state, copy_then_sum_bytes_per_second, "sum");
}
BENCHMARK(BM_GeneratorToReaderVsBareTwoThreads)->Arg(8192)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
