// The local link into and out of GPU memory (generator → link to the GPU → link back to pinned
// host memory → null) against bare cudaMemcpyAsync + cudaStreamSynchronize loops over the same
// 4 MiB chunks and kinds of memory, in the same run: counters `h2d_ratio`, `d2h_ratio`.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/memory.hpp"
#include "pipeline/runtime.hpp"

namespace sluice {
namespace {

constexpr std::size_t kChunkBytes = 4 << 20;
constexpr std::size_t kBuffers = 16;  // rotate like the pool so the copy engine does not see one hot buffer

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}

// Bare copies between `kBuffers` pinned and device buffers, one 4 MiB copy synchronised at a
// time, as the link does. Returns bytes/s.
double raw_copy_rate(bool host_to_device, bool pinned, std::uint64_t total) {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  // Pageable host memory the way a pool allocates it (MemoryRegion: aligned, pages touched).
  MemoryRegion pageable(MemoryKind::host, pinned ? 4096 : kChunkBytes * kBuffers);
  void* host = pageable.data();
  void* device = nullptr;
  if (pinned) check(cudaHostAlloc(&host, kChunkBytes * kBuffers, cudaHostAllocDefault), "cudaHostAlloc");
  check(cudaMalloc(&device, kChunkBytes * kBuffers), "cudaMalloc");
  check(cudaMemset(device, 1, kChunkBytes * kBuffers), "cudaMemset");
  std::fill_n(static_cast<char*>(host), kChunkBytes * kBuffers, 2);
  const std::uint64_t begin = monotonic_ns();
  std::size_t index = 0;
  for (std::uint64_t copied = 0; copied < total; copied += kChunkBytes, index = (index + 1) % kBuffers) {
    char* host_chunk = static_cast<char*>(host) + index * kChunkBytes;
    char* device_chunk = static_cast<char*>(device) + index * kChunkBytes;
    check(cudaMemcpyAsync(host_to_device ? static_cast<void*>(device_chunk) : host_chunk,
                          host_to_device ? static_cast<const void*>(host_chunk) : device_chunk, kChunkBytes,
                          host_to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  const double seconds = static_cast<double>(monotonic_ns() - begin) / 1e9;
  check(cudaFree(device), "cudaFree");
  if (pinned) check(cudaFreeHost(host), "cudaFreeHost");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return static_cast<double>(total) / seconds;
}

struct LaneRates {
  double lane = 0;  // end to end
  double h2d = 0;   // link into GPU memory, over its busy time
  double d2h = 0;   // link out of GPU memory, over its busy time
};

LaneRates lane_rates(bool pinned_source, std::uint64_t total) {
  Pipeline pipeline(load_pipeline_text(
      "pipeline: {chunk: 4MiB, chunks: " + std::to_string(kBuffers) +
          "}\nlanes: [{name: a, stages: [{type: generator, memory: " + (pinned_source ? "host_pinned" : "host") +
          ", stop_after: " + std::to_string(total) +
          "}, {name: to_gpu, type: link, memory: device}, "
          "{name: to_host, type: link, memory: host_pinned}, {type: null}]}]\n",
      "<link_bench>"));
  pipeline.start();
  pipeline.run();
  if (!pipeline.failures().empty()) throw std::runtime_error(pipeline.failures().front().message);
  const auto lane = pipeline.metrics_by_lane().at(0);
  for (const auto* stage : lane) {
    if (!stage->notes.empty()) throw std::runtime_error("fallback: " + stage->notes.front());
  }
  if (lane[3]->in.bytes.load() != total) throw std::runtime_error("lane lost bytes");
  const auto busy_rate = [&](const StageMetrics& stage) {
    return static_cast<double>(stage.in.bytes.load()) / (static_cast<double>(stage.busy_ns.load()) / 1e9);
  };
  LaneRates rates;
  rates.lane =
      static_cast<double>(total) / (static_cast<double>(lane[3]->stopped_ns.load() - lane[0]->started_ns.load()) / 1e9);
  rates.h2d = busy_rate(*lane[1]);
  rates.d2h = busy_rate(*lane[2]);
  return rates;
}

// Each link's rate over its busy time (one chunk's hop, hand-off included). Second argument: the
// generator's pool pageable (0, `memory: host`, what pools are unless a stage pins them) or pinned
// (1), each against a raw loop from the same memory; h2d_raw_pinned_GBps is beside both, so the cost
// of pageable memory is in plain view. lane_GBps is end to end (the generator's fill bounds it).
void BM_LinkThroughGpuMemoryVsCudaMemcpy(benchmark::State& state) {
  if (!cuda_available()) {
    state.SkipWithError(("no CUDA device: " + cuda_unavailable_reason()).c_str());
    return;
  }
  const auto total = static_cast<std::uint64_t>(state.range(0)) << 20;
  const bool pinned_source = state.range(1) != 0;
  LaneRates lane;
  double raw_h2d = 0;
  double raw_h2d_pinned = 0;
  double raw_d2h = 0;
  for (auto _ : state) {
    raw_h2d = raw_copy_rate(true, pinned_source, total);
    raw_h2d_pinned = pinned_source ? raw_h2d : raw_copy_rate(true, true, total);
    raw_d2h = raw_copy_rate(false, true, total);  // both rows land in a pinned pool
    lane = lane_rates(pinned_source, total);
  }
  state.SetLabel(pinned_source ? "source pool pinned" : "source pool pageable (memory: host)");
  state.counters["h2d_raw_pinned_GBps"] = raw_h2d_pinned / 1e9;
  state.counters["lane_GBps"] = lane.lane / 1e9;
  state.counters["h2d_link_GBps"] = lane.h2d / 1e9;
  state.counters["h2d_raw_GBps"] = raw_h2d / 1e9;
  state.counters["h2d_ratio"] = lane.h2d / raw_h2d;
  state.counters["d2h_link_GBps"] = lane.d2h / 1e9;
  state.counters["d2h_raw_GBps"] = raw_d2h / 1e9;
  state.counters["d2h_ratio"] = lane.d2h / raw_d2h;
}
BENCHMARK(BM_LinkThroughGpuMemoryVsCudaMemcpy)
    ->Args({8192, 0})
    ->Args({8192, 1})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
