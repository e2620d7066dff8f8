// Hand-off cost between two stage threads: the SPSC ring alone, and the full port path
// (pool acquire → OutputPort::push → InputPort::pop → release) that every chunk takes.
#include <benchmark/benchmark.h>

#include <thread>

#include "pipeline/clock.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/stage.hpp"

namespace sluice {
namespace {

void BM_SpscHandOff(benchmark::State& state) {
  const auto capacity = static_cast<std::size_t>(state.range(0));
  constexpr std::int64_t kItems = 1'000'000;
  for (auto _ : state) {
    SpscQueue<std::uint64_t> queue(capacity);
    std::thread consumer([&] {
      std::int64_t received = 0;
      while (received < kItems) {
        if (auto value = queue.try_pop()) {
          benchmark::DoNotOptimize(*value);
          ++received;
        }
      }
    });
    for (std::int64_t i = 0; i < kItems; ++i) {
      while (!queue.try_push(static_cast<std::uint64_t>(i))) {
      }
    }
    consumer.join();
  }
  state.SetItemsProcessed(state.iterations() * kItems);
}
BENCHMARK(BM_SpscHandOff)->Arg(16)->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);

// Chunk hand-off through real ports and a real pool: what the runtime adds per chunk.
void BM_ChunkPortHandOff(benchmark::State& state) {
  constexpr std::int64_t kChunks = 200'000;
  for (auto _ : state) {
    Pool pool("bench", PoolSpec{4096, 64, MemoryKind::host});
    SpscQueue<Chunk*> queue(16);
    StageMetrics producer_metrics("lane", "producer", "bench");
    StageMetrics consumer_metrics("lane", "consumer", "bench");
    OutputPort output(queue, producer_metrics, OverflowPolicy::block, producer_metrics.drop_counter("queue_full"));
    InputPort input(queue, consumer_metrics);
    std::thread consumer([&] {
      std::int64_t received = 0;
      while (received < kChunks) {
        if (ChunkPtr chunk = input.pop(std::chrono::milliseconds(10))) ++received;
      }
    });
    for (std::int64_t i = 0; i < kChunks; ++i) {
      ChunkPtr chunk;
      while (!(chunk = pool.acquire(std::chrono::milliseconds(10)))) {
      }
      chunk->size = 4096;
      output.push(std::move(chunk));
    }
    consumer.join();
  }
  state.SetItemsProcessed(state.iterations() * kChunks);
}
BENCHMARK(BM_ChunkPortHandOff)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
