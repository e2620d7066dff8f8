// The fft stage's cuFFT backend on the GPU against bare loops (cufftExecC2C, a device-to-device
// copy, its own kernels alone) over the same buffers in the same run; counter `ratio`.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/memory.hpp"
#include "pipeline/runtime.hpp"
#include "stages/fft/fence_word.hpp"
#include "stages/fft/fft_kernels.hpp"
#include "suite/device_source.hpp"

namespace sluice {
namespace {

constexpr std::size_t kBuffers =
    16;  // chunks in the source's pool and in the bare loops' rotation (a lane's usual depth)

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}
void check(cufftResult status, const char* call) {
  if (status != CUFFT_SUCCESS) throw std::runtime_error(std::string(call) + ": cufftResult " + std::to_string(status));
}

// Without a CUDA device a benchmark reports why and measures nothing.
bool skipped_without_cuda(benchmark::State& state) {
  if (cuda_available()) return false;
  state.SkipWithError(("no CUDA device: " + cuda_unavailable_reason()).c_str());
  return true;
}

SampleFormat g_format = SampleFormat::cf32;  // the current benchmark's input format

// Chunks in the fft stage's output pool: SLUICE_BENCH_FFT_OUT_CHUNKS, else 32, the pipeline's
// default `chunks` (what a stage gets unless its config says otherwise). With few, the rows of
// small chunks wait on the sink, whose thread polls and then sleeps, and the GPU runs dry
// between its wake-ups.
std::size_t out_chunks() {
  const char* text = std::getenv("SLUICE_BENCH_FFT_OUT_CHUNKS");
  return text != nullptr && std::atoi(text) > 0 ? static_cast<std::size_t>(std::atoi(text)) : 32;
}

// Input bytes/s through device_source → fft (cuFFT, device in and out) → null, over the time data
// flowed (first chunk in to last rows out); the source only re-stamps chunks filled once.
double stage_rate(std::size_t chunk_bytes, std::uint64_t chunks, const std::string& fft, std::size_t out_chunk_bytes) {
  Pipeline pipeline(load_pipeline_text(
      "lanes: [{name: a, stages: [{type: device_source, format: " + std::string(to_string(g_format)) +
          ", chunks_to_send: " + std::to_string(chunks) + ", memory: device, chunk: " + std::to_string(chunk_bytes) +
          ", chunks: " + std::to_string(kBuffers) +
          "}, {type: fft, backend: cufft, memory: device, chunks: " + std::to_string(out_chunks()) +
          ", chunk: " + std::to_string(out_chunk_bytes) + ", " + fft + "}, {type: null}]}]\n",
      "bench.yaml", {}, bench::bench_registry()));
  pipeline.start();
  pipeline.run();
  if (!pipeline.failures().empty()) throw std::runtime_error(pipeline.failures()[0].message);
  // Over the time data flowed: from the fft stage taking its first chunk to the sink receiving the
  // last rows (every row is handed on only once the GPU has written it). The run's start and end
  // (plans, pools, the drain's polls) are not the stage's rate: over the whole run, their fixed
  // time would cap every rate of large chunks, whatever the kernels did.
  const std::vector<const StageMetrics*> stages = pipeline.metrics_by_lane()[0];
  const FlowCounters& in = stages[1]->in;
  const double seconds = static_cast<double>(stages[2]->in.last_ns.load() - in.first_ns.load()) / 1e9;
  // Where the time goes: each thread's share of the run that it spent in process() (waits for
  // queues and pools excluded), printed with SLUICE_BENCH_BUSY=1.
  if (std::getenv("SLUICE_BENCH_BUSY") != nullptr) {
    const double total = static_cast<double>(stages[2]->in.last_ns.load() - stages[0]->started_ns);
    std::fprintf(
        stderr, "busy: source %.2f fft %.2f (wait %.2f) sink %.2f over %.3f s, %llu chunks\n",
        static_cast<double>(stages[0]->busy_ns.load()) / total, static_cast<double>(stages[1]->busy_ns.load()) / total,
        static_cast<double>(stages[1]->wait_ns.load()) / total, static_cast<double>(stages[2]->busy_ns.load()) / total,
        total / 1e9, static_cast<unsigned long long>(in.chunks.load()));
  }
  return static_cast<double>(in.bytes.load() - in.first_bytes.load()) / seconds;
}

// Enqueues `enqueue(i)` for chunks i = 0.. on `stream`: kBuffers as warm-up, then `chunks` timed up
// to the stream's completion. Returns input bytes/s.
double timed_loop(cudaStream_t stream, std::size_t chunk_bytes, std::uint64_t chunks,
                  const std::function<void(std::uint64_t)>& enqueue) {
  const auto run = [&](std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i) enqueue(i);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };
  run(kBuffers);
  const std::uint64_t begin = monotonic_ns();
  run(chunks);
  const double seconds = static_cast<double>(monotonic_ns() - begin) / 1e9;
  return static_cast<double>(chunk_bytes * chunks) / seconds;
}

// kBuffers chunk-sized device buffers, each holding `bytes` (or left as they come when empty).
std::vector<MemoryRegion> device_buffers(std::size_t chunk_bytes, const std::vector<std::byte>& bytes) {
  std::vector<MemoryRegion> buffers;
  for (std::size_t i = 0; i < kBuffers; ++i) {
    buffers.emplace_back(MemoryKind::device, chunk_bytes);
    if (!bytes.empty()) {
      check(cudaMemcpy(buffers.back().data(), bytes.data(), chunk_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
  }
  return buffers;
}

// Input bytes/s of cufftExecC2C (1024-point, out of place) over kBuffers chunk-sized buffers.
double bare_c2c_rate(std::size_t chunk_bytes, std::uint64_t chunks) {
  const int length = 1024;
  const int batch = static_cast<int>(chunk_bytes / 8 / 1024);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const std::vector<MemoryRegion> in =
      device_buffers(chunk_bytes, bench::random_samples(chunk_bytes, SampleFormat::cf32));
  const std::vector<MemoryRegion> out = device_buffers(chunk_bytes, {});
  cufftHandle plan = 0;
  check(cufftPlanMany(&plan, 1, const_cast<int*>(&length), nullptr, 1, length, nullptr, 1, length, CUFFT_C2C, batch),
        "cufftPlanMany");
  check(cufftSetStream(plan, stream), "cufftSetStream");
  const double rate = timed_loop(stream, chunk_bytes, chunks, [&](std::uint64_t i) {
    check(cufftExecC2C(plan, reinterpret_cast<cufftComplex*>(in[i % kBuffers].data()),
                       reinterpret_cast<cufftComplex*>(out[i % kBuffers].data()), CUFFT_FORWARD),
          "cufftExecC2C");
  });
  check(cufftDestroy(plan), "cufftDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return rate;
}

// Input bytes/s of cudaMemcpyAsync device to device of chunk-sized buffers.
double copy_rate(std::size_t chunk_bytes, std::uint64_t chunks) {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const std::vector<MemoryRegion> in = device_buffers(chunk_bytes, {});
  const std::vector<MemoryRegion> out = device_buffers(chunk_bytes, {});
  const double rate = timed_loop(stream, chunk_bytes, chunks, [&](std::uint64_t i) {
    check(cudaMemcpyAsync(out[i % kBuffers].data(), in[i % kBuffers].data(), chunk_bytes, cudaMemcpyDeviceToDevice,
                          stream),
          "cudaMemcpyAsync");
  });
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return rate;
}

std::uint64_t chunks_for(std::size_t chunk_bytes) {
  return std::max<std::uint64_t>(64, (64ULL << 30) / chunk_bytes);  // 64 GiB of input, at least 64 chunks
}

// 1024-point, cf32 in, complex out, window none, 1 MiB..256 MiB chunks, fused (second argument 0)
// or kernels (1), against cufftExecC2C out of place over the same chunk-sized buffers.
void BM_StageVsBareC2C(benchmark::State& state) {
  if (skipped_without_cuda(state)) return;
  const auto chunk_bytes = static_cast<std::size_t>(state.range(0)) << 20;
  const std::uint64_t chunks = chunks_for(chunk_bytes);
  g_format = SampleFormat::cf32;
  double stage = 0;
  double bare = 0;
  for (auto _ : state) {
    bare = bare_c2c_rate(chunk_bytes, chunks);
    stage = stage_rate(chunk_bytes, chunks,
                       std::string("size: 1024, window: none, output: complex, fusion: ") +
                           (state.range(1) == 0 ? "fused" : "kernels"),
                       chunk_bytes);
  }
  state.counters["stage_GBps"] = stage / 1e9;
  state.counters["bare_c2c_GBps"] = bare / 1e9;
  state.counters["ratio"] = stage / bare;
}
BENCHMARK(BM_StageVsBareC2C)
    ->ArgsProduct({{1, 4, 16, 64, 256}, {0, 1}})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ci16 → hann → 1024-point FFT → |X|² averaged over 16 → dB, 64 MiB chunks, against a device-to-device
// copy of the same input bytes. Argument: fused (0) or kernels (1).
void BM_Ci16PowerDbVsCopy(benchmark::State& state) {
  if (skipped_without_cuda(state)) return;
  const std::size_t chunk_bytes = 64 << 20;
  const std::uint64_t chunks = chunks_for(chunk_bytes);
  const std::string fusion = state.range(0) == 0 ? ", fusion: fused" : ", fusion: kernels";
  g_format = SampleFormat::ci16;
  double stage = 0;
  double copy = 0;
  for (auto _ : state) {
    copy = copy_rate(chunk_bytes, chunks);
    // 16 Mi samples per chunk → 1024 rows of 4 KiB: one 4 MiB output chunk per input chunk.
    stage =
        stage_rate(chunk_bytes, chunks, "size: 1024, window: hann, average: 16, output: power_db" + fusion, 4 << 20);
  }
  state.counters["stage_GBps"] = stage / 1e9;
  state.counters["d2d_copy_GBps"] = copy / 1e9;
  state.counters["ratio"] = stage / copy;
}
// Input bytes/s of the fused kernel alone (ci16 → window → 1024-point FFT → |X|² summed over 16 into
// the ring, then the fold of finished rows into dB rows), looped over kBuffers chunk-sized buffers
// on one stream: the ceiling of the fused stage without the runtime around it.
double bare_fused_rate(std::size_t chunk_bytes, std::uint64_t chunks, unsigned frames_per_warp) {
  constexpr unsigned kAverage = 16;
  const auto frames = static_cast<unsigned>(chunk_bytes / 4 / fft_kernels::kFusedSize);
  const unsigned rows = frames / kAverage;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(fft_kernels::prepare_fused(), "prepare_fused");
  const std::vector<MemoryRegion> in =
      device_buffers(chunk_bytes, bench::random_samples(chunk_bytes, SampleFormat::ci16));
  MemoryRegion ring(MemoryKind::device, (rows + 2) * fft_kernels::kFusedSize * sizeof(float));
  MemoryRegion out(MemoryKind::device, rows * fft_kernels::kFusedSize * sizeof(float));
  MemoryRegion window(MemoryKind::device, fft_kernels::kFusedSize * sizeof(float));
  const std::vector<float> ones(fft_kernels::kFusedSize, 1.0F);
  check(cudaMemcpy(window.data(), ones.data(), window.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemset(ring.data(), 0, ring.size()), "cudaMemset");
  std::uint64_t row = 0;
  const double rate = timed_loop(stream, chunk_bytes, chunks, [&](std::uint64_t i) {
    fft_kernels::FusedArgs args{};
    args.raw = in[i % kBuffers].data();
    args.raw_begin = 0;
    args.raw_end = frames * fft_kernels::kFusedSize;
    args.format = SampleFormat::ci16;
    args.window = reinterpret_cast<const float*>(window.data());
    args.ring = reinterpret_cast<float*>(ring.data());
    args.ring_rows = rows + 2;
    args.average = kAverage;
    args.frames = frames;
    args.row_base = row;
    args.frames_per_warp = frames_per_warp;
    check(fft_kernels::fused_power(args, stream), "fused kernel");
    check(fft_kernels::finish_rows(args.ring, rows + 2, fft_kernels::kFusedSize, row, rows, 1.0F, kAverage, true,
                                   reinterpret_cast<float*>(out.data()), stream),
          "fold kernel");
    row += rows;
  });
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return rate;
}

void BM_FusedKernelVsCopy(benchmark::State& state) {
  if (skipped_without_cuda(state)) return;
  const std::size_t chunk_bytes = 64 << 20;
  const std::uint64_t chunks = chunks_for(chunk_bytes);
  double fused = 0;
  double copy = 0;
  for (auto _ : state) {
    copy = copy_rate(chunk_bytes, chunks);
    fused = bare_fused_rate(chunk_bytes, chunks, static_cast<unsigned>(state.range(0)));
  }
  state.counters["fused_kernel_GBps"] = fused / 1e9;
  state.counters["d2d_copy_GBps"] = copy / 1e9;
  state.counters["ratio"] = fused / copy;
}
// Argument: frames of a row each warp sums before its one add to the ring (the stage uses 8, the default).
BENCHMARK(BM_FusedKernelVsCopy)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The cuFFT backend's fence word, opened on `stream`; a benchmark that needs it cannot run without it.
FenceWord fence_word(cudaStream_t stream) {
  FenceWord word = FenceWord::open(stream);
  if (!word) throw std::runtime_error("no cuStreamWriteValue64 on this driver");
  return word;
}

void write(const FenceWord& word, cudaStream_t stream, std::uint64_t value) {
  if (const std::string error = word.write(stream, value); !error.empty()) throw std::runtime_error(error);
}

// Input bytes/s of the fused complex kernel alone (cf32 → 1024-point FFT → scaled, fftshifted rows,
// window none), over kBuffers chunk-sized buffers on one stream: what the fused complex stage could
// reach without the runtime around it, next to bare_c2c_rate over the same bytes.
// fence: 0 none, 1 cuStreamWriteValue64 of a fence word after each kernel, 2 each kernel writes the
// previous one's fence when it starts (fft_kernels::Signal, as the stage does).
double bare_fused_complex_rate(std::size_t chunk_bytes, std::uint64_t chunks, int fence) {
  const auto frames = static_cast<unsigned>(chunk_bytes / 8 / fft_kernels::kFusedSize);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const FenceWord word = fence_word(stream);
  check(fft_kernels::prepare_fused(), "prepare_fused");
  const std::vector<MemoryRegion> in =
      device_buffers(chunk_bytes, bench::random_samples(chunk_bytes, SampleFormat::cf32));
  const std::vector<MemoryRegion> out = device_buffers(chunk_bytes, {});
  MemoryRegion window(MemoryKind::device, fft_kernels::kFusedSize * sizeof(float));
  const std::vector<float> ones(fft_kernels::kFusedSize, 1.0F);
  check(cudaMemcpy(window.data(), ones.data(), window.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  const double rate = timed_loop(stream, chunk_bytes, chunks, [&](std::uint64_t i) {
    fft_kernels::FusedArgs args{};
    args.raw = in[i % kBuffers].data();
    args.raw_begin = 0;
    args.raw_end = frames * fft_kernels::kFusedSize;
    args.format = SampleFormat::cf32;
    args.window = reinterpret_cast<const float*>(window.data());
    args.frames = frames;
    fft_kernels::Signal signal{};
    if (fence == 2 && i > 0) signal = {word.device_pointer(), i};
    check(fft_kernels::fused_complex(args, 0, frames, 1.0F / 1024.0F,
                                     reinterpret_cast<float2*>(out[i % kBuffers].data()), stream, signal),
          "fused complex kernel");
    if (fence == 1) write(word, stream, i + 1);
  });
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return rate;
}

void BM_FusedComplexKernelVsC2C(benchmark::State& state) {
  if (skipped_without_cuda(state)) return;
  const auto chunk_bytes = static_cast<std::size_t>(state.range(0)) << 20;
  const std::uint64_t chunks = chunks_for(chunk_bytes);
  double fused = 0;
  double bare = 0;
  for (auto _ : state) {
    bare = bare_c2c_rate(chunk_bytes, chunks);
    fused = bare_fused_complex_rate(chunk_bytes, chunks, static_cast<int>(state.range(1)));
  }
  state.counters["fused_kernel_GBps"] = fused / 1e9;
  state.counters["bare_c2c_GBps"] = bare / 1e9;
  state.counters["ratio"] = fused / bare;
}
// Second argument: the fence for each kernel: 0 none, 1 cuStreamWriteValue64 after it, 2 written by
// the next kernel when it starts.
BENCHMARK(BM_FusedComplexKernelVsC2C)
    ->ArgsProduct({{1, 4, 8, 16, 64, 256}, {0, 1, 2}})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// What the host pays per call on the stage's per-chunk path (the stage thread's time, not the
// GPU's): each call enqueued 64 000 times on one stream, synchronising every 256 calls outside the
// timed part so the launch queue never fills. Argument: 0 a kernel launch (the fused complex
// kernel over one frame), 1 cuStreamWriteValue64 into mapped host memory, 2 cudaEventRecord,
// 3 cudaSetDevice to the current device, 4 cudaGetLastError, 5 cudaEventQuery of a completed event.
void BM_HostCallCost(benchmark::State& state) {
  if (skipped_without_cuda(state)) return;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(fft_kernels::prepare_fused(), "prepare_fused");
  MemoryRegion in(MemoryKind::device, fft_kernels::kFusedSize * 8);
  MemoryRegion out(MemoryKind::device, fft_kernels::kFusedSize * 8);
  MemoryRegion window(MemoryKind::device, fft_kernels::kFusedSize * sizeof(float));
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  const FenceWord word = fence_word(stream);
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  fft_kernels::FusedArgs args{};
  args.raw = in.data();
  args.raw_end = fft_kernels::kFusedSize;
  args.format = SampleFormat::cf32;
  args.window = reinterpret_cast<const float*>(window.data());
  args.frames = 1;
  const auto call = [&](std::uint64_t i) {
    switch (state.range(0)) {
      case 0:
        check(fft_kernels::fused_complex(args, 0, 1, 1.0F, reinterpret_cast<float2*>(out.data()), stream), "launch");
        break;
      case 1:
        write(word, stream, i);
        break;
      case 2:
        check(cudaEventRecord(event, stream), "cudaEventRecord");
        break;
      case 3:
        check(cudaSetDevice(device), "cudaSetDevice");
        break;
      case 4:
        check(cudaGetLastError(), "cudaGetLastError");
        break;
      default:
        static_cast<void>(cudaEventQuery(event));
        break;
    }
  };
  constexpr std::uint64_t kCalls = 64'000;
  std::uint64_t spent_ns = 0;
  for (auto _ : state) {
    check(cudaEventRecord(event, stream), "cudaEventRecord");
    for (std::uint64_t i = 0; i < kCalls; i += 256) {
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const std::uint64_t begin = monotonic_ns();
      for (std::uint64_t k = 0; k < 256; ++k) call(i + k);
      spent_ns += monotonic_ns() - begin;
    }
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  state.counters["ns_per_call"] = static_cast<double>(spent_ns) / static_cast<double>(kCalls);
  check(cudaEventDestroy(event), "cudaEventDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}
BENCHMARK(BM_HostCallCost)->DenseRange(0, 5)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK(BM_Ci16PowerDbVsCopy)->Arg(0)->Arg(1)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
