// The fft stage (generator → fft → null, real runtime) against bare FFTW loops of the same plan
// shape and planner flags over the same samples, in the same run; on one thread and on N.
#include <benchmark/benchmark.h>
#include <fftw3.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/thread_cores.hpp"
#include "stages/fft/fft_backend.hpp"

namespace sluice {
namespace {

constexpr std::size_t kBatchSamples = 32768;  // as the FFTW backend: one batch of frames fits L2

struct RawRates {
  double batched = 0;  // samples/s through fftwf_plan_many_dft
  double per_row = 0;  // samples/s through fftwf_execute_dft, one row at a time
};

RawRates raw_fftw_samples_per_second(std::size_t size, std::uint64_t total_samples) {
  const std::size_t batch = std::max<std::size_t>(1, kBatchSamples / size);
  fftwf_complex* frames = fftwf_alloc_complex(size * batch);
  if (frames == nullptr) throw std::runtime_error("fftwf_alloc_complex failed");
  const int length = static_cast<int>(size);
  fftwf_plan single = fftwf_plan_dft_1d(length, frames, frames, FFTW_FORWARD, fftw_planner_flags(size));
  fftwf_plan many = fftwf_plan_many_dft(1, &length, static_cast<int>(batch), frames, nullptr, 1, length, frames,
                                        nullptr, 1, length, FFTW_FORWARD, fftw_planner_flags(size));
  if (single == nullptr || many == nullptr) throw std::runtime_error("FFTW planning failed");
  for (std::size_t i = 0; i < size * batch; ++i) {
    frames[i][0] = static_cast<float>(i % 7) * 0.1F;
    frames[i][1] = 0;
  }
  const std::uint64_t batches = total_samples / (size * batch);
  RawRates rates;
  std::uint64_t begin = monotonic_ns();
  for (std::uint64_t i = 0; i < batches; ++i) {
    fftwf_execute(many);
    benchmark::ClobberMemory();
  }
  const double samples = static_cast<double>(batches * size * batch);
  rates.batched = samples / (static_cast<double>(monotonic_ns() - begin) / 1e9);
  begin = monotonic_ns();
  for (std::uint64_t i = 0; i < batches; ++i) {
    for (std::size_t row = 0; row < batch; ++row) fftwf_execute_dft(single, frames + row * size, frames + row * size);
    benchmark::ClobberMemory();
  }
  rates.per_row = samples / (static_cast<double>(monotonic_ns() - begin) / 1e9);
  fftwf_destroy_plan(many);
  fftwf_destroy_plan(single);
  fftwf_free(frames);
  return rates;
}

// Runs `yaml` (generator → fft → null) and returns the fft stage's input samples per second
// of its own time in process(), so the generator and sink threads sharing cores do not count.
double fft_stage_rate(const std::string& yaml, std::uint64_t total_samples) {
  Pipeline pipeline(load_pipeline_text(yaml));
  pipeline.start();
  pipeline.run();
  const auto lanes = pipeline.metrics_by_lane();
  const StageMetrics& fft = *lanes[0][1];
  if (fft.in.samples.load() != total_samples) throw std::runtime_error("fft stage lost samples");
  return static_cast<double>(total_samples) / (static_cast<double>(fft.busy_ns.load()) / 1e9);
}

double stage_samples_per_second(std::size_t size, std::uint64_t total_samples, const std::string& output) {
  return fft_stage_rate(
      "pipeline: {chunk: 4MiB, chunks: 8}\nlanes: [{name: a, stages: [{type: generator, format: ci16, stop_after: " +
          std::to_string(total_samples * 4) + "}, {type: fft, size: " + std::to_string(size) + ", output: " + output +
          "}, {type: null}]}]\n",
      total_samples);
}

// The stage against a raw fftwf_execute loop: the stage also converts, windows, takes |X|², averages,
// fftshifts and takes logs, so ratio < 1 is its whole per-sample overhead. A second baseline, one
// fftwf_execute_dft per row, shows whether batching with fftwf_plan_many_dft pays.
void BM_FftStageVsRawFftw(benchmark::State& state, const std::string& output) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const std::uint64_t total = 64ULL << 20;  // input samples (256 MiB of ci16)
  double stage = 0;
  RawRates raw;
  for (auto _ : state) {
    raw = raw_fftw_samples_per_second(size, total);
    stage = stage_samples_per_second(size, total, output);
  }
  state.counters["stage_Msps"] = stage / 1e6;
  state.counters["raw_batched_Msps"] = raw.batched / 1e6;
  state.counters["raw_per_row_Msps"] = raw.per_row / 1e6;
  state.counters["ratio"] = stage / raw.batched;
}
BENCHMARK_CAPTURE(BM_FftStageVsRawFftw, power_db, std::string("power_db"))
    ->Arg(1024)
    ->Arg(8192)
    ->Arg(65536)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FftStageVsRawFftw, complex, std::string("complex"))
    ->Arg(1024)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// N bare loops, one per core of cores[0, N): each thread its own batch buffer and the one batched plan
// through fftwf_execute_dft (the stage's threads do the same), total/N samples each; samples/s over
// the time from a common start to the last thread's end.
double bare_fftw_samples_per_second(std::size_t size, std::uint64_t total_samples, std::size_t threads,
                                    const std::vector<int>& cores) {
  const std::size_t batch = std::max<std::size_t>(1, kBatchSamples / size);
  std::vector<fftwf_complex*> buffers(threads);
  for (auto& buffer : buffers) {
    buffer = fftwf_alloc_complex(size * batch);
    if (buffer == nullptr) throw std::runtime_error("fftwf_alloc_complex failed");
    for (std::size_t i = 0; i < size * batch; ++i) {
      buffer[i][0] = static_cast<float>(i % 7) * 0.1F;
      buffer[i][1] = 0;
    }
  }
  const int length = static_cast<int>(size);
  fftwf_plan many = fftwf_plan_many_dft(1, &length, static_cast<int>(batch), buffers[0], nullptr, 1, length, buffers[0],
                                        nullptr, 1, length, FFTW_FORWARD, fftw_planner_flags(size));
  if (many == nullptr) throw std::runtime_error("FFTW planning failed");
  const std::uint64_t batches = total_samples / threads / (size * batch);
  std::atomic<std::size_t> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::uint64_t> ends(threads);
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      pin_thread(pthread_self(), {cores[t]});
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      for (std::uint64_t i = 0; i < batches; ++i) {
        fftwf_execute_dft(many, buffers[t], buffers[t]);
        benchmark::ClobberMemory();
      }
      ends[t] = monotonic_ns();
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const std::uint64_t begin = monotonic_ns();
  go.store(true, std::memory_order_release);
  for (auto& worker : workers) worker.join();
  const std::uint64_t end = *std::max_element(ends.begin(), ends.end());
  fftwf_destroy_plan(many);
  for (auto* buffer : buffers) fftwf_free(buffer);
  return static_cast<double>(batches * threads * size * batch) / (static_cast<double>(end - begin) / 1e9);
}

// The stage with threads: N, its thread and workers pinned to cores[0, N) (cpu: and worker_cpus:).
double threaded_stage_samples_per_second(std::size_t size, std::uint64_t total_samples, const std::string& output,
                                         std::size_t average, std::size_t threads, const std::vector<int>& cores) {
  std::string workers;
  for (std::size_t t = 1; t < threads; ++t) workers += (workers.empty() ? "" : ", ") + std::to_string(cores[t]);
  const auto pin = [&](std::size_t index) {
    return index < cores.size() ? ", cpu: " + std::to_string(cores[index]) : std::string();
  };
  return fft_stage_rate(
      "pipeline: {chunk: 4MiB, chunks: 8}\nlanes: [{name: a, stages: [{type: generator, format: ci16, stop_after: " +
          std::to_string(total_samples * 4) + pin(threads) +
          "}, {type: fft, backend: fftw, size: " + std::to_string(size) + ", output: " + output +
          ", average: " + std::to_string(average) + ", cpu: " + std::to_string(cores[0]) +
          (threads > 1 ? ", threads: " + std::to_string(threads) + ", worker_cpus: [" + workers + "]" : "") +
          "}, {type: null" + pin(threads + 1) + "}]}]\n",
      total_samples);
}

// The backend alone, driven as the stage drives it (load a batch, transform it, fold it into rows)
// over one 4 MiB ci16 chunk read again and again (cache-resident like a chunk the generator just
// wrote), this thread on cores[0] and the workers on cores[1, N): the threads' scaling without a
// generator or sink competing for the cores (which they do on a machine with fewer than N + 2).
double backend_samples_per_second(std::size_t size, std::uint64_t total_samples, const std::string& output,
                                  std::size_t average, std::size_t threads, const std::vector<int>& cores) {
  FftBackendSpec spec;
  spec.size = size;
  spec.output = output == "complex" ? FftOutput::complex : output == "power" ? FftOutput::power : FftOutput::power_db;
  spec.average = average;
  spec.threads = threads;
  spec.worker_cpus.assign(cores.begin() + 1, cores.begin() + static_cast<std::ptrdiff_t>(threads));
  const std::unique_ptr<FftBackend> backend = make_fftw_backend(spec);
  const std::size_t batch = backend->batch_frames();
  constexpr std::size_t kChunkSamples = 1 << 20;  // 4 MiB of ci16
  std::vector<std::int16_t> chunk(2 * kChunkSamples);
  for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<std::int16_t>(i * 7919 % 65536 - 32768);
  std::vector<float> rows(batch * size);
  const std::vector<int> before = allowed_cores();
  pin_thread(pthread_self(), {cores[0]});
  const std::size_t per_batch = batch * size;
  const std::uint64_t batches = total_samples / per_batch;
  std::size_t pending = 0;
  std::size_t at = 0;
  const std::uint64_t begin = monotonic_ns();
  for (std::uint64_t i = 0; i < batches; ++i) {
    if (at + per_batch > kChunkSamples) at = 0;
    backend->load(0, 0, reinterpret_cast<const std::byte*>(chunk.data() + 2 * at), SampleFormat::ci16, per_batch);
    backend->transform(batch);
    backend->fold(0, batch, pending, reinterpret_cast<std::byte*>(rows.data()));
    benchmark::ClobberMemory();
    pending = (pending + batch) % average;
    at += per_batch;
  }
  const std::uint64_t end = monotonic_ns();
  pin_thread(pthread_self(), before);
  return static_cast<double>(batches * per_batch) / (static_cast<double>(end - begin) / 1e9);
}

// The stage on N threads (threads: N) against itself on one and against N bare fftwf_execute loops
// on the same N cores: scaling = rate(N) / rate(1); the same for the FFTW backend driven directly
// (backend_*). Arguments: FFT size, threads N, average. Input: 64 Mi ci16 samples per thread.
void BM_FftwThreads(benchmark::State& state, const std::string& output) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto threads = static_cast<std::size_t>(state.range(1));
  const auto average = static_cast<std::size_t>(state.range(2));
  // The stage's thread and its workers take the first N of these cores, the generator and the
  // sink the next two where there are any (else they float).
  const std::vector<int> cores = allowed_cores();
  const std::uint64_t per_thread = 64ULL << 20;
  double stage_one = 0;
  double stage_many = 0;
  double bare_one = 0;
  double bare_many = 0;
  double backend_one = 0;
  double backend_many = 0;
  for (auto _ : state) {
    bare_one = bare_fftw_samples_per_second(size, per_thread, 1, cores);
    backend_one = backend_samples_per_second(size, per_thread, output, average, 1, cores);
    stage_one = threaded_stage_samples_per_second(size, per_thread, output, average, 1, cores);
    bare_many = bare_fftw_samples_per_second(size, per_thread * threads, threads, cores);
    backend_many = backend_samples_per_second(size, per_thread * threads, output, average, threads, cores);
    stage_many = threaded_stage_samples_per_second(size, per_thread * threads, output, average, threads, cores);
  }
  state.counters["backend_1_Msps"] = backend_one / 1e6;
  state.counters["backend_N_Msps"] = backend_many / 1e6;
  state.counters["backend_scaling"] = backend_many / backend_one;
  state.counters["backend_ratio_N"] = backend_many / bare_many;
  state.counters["stage_1_Msps"] = stage_one / 1e6;
  state.counters["stage_N_Msps"] = stage_many / 1e6;
  state.counters["bare_1_Msps"] = bare_one / 1e6;
  state.counters["bare_N_Msps"] = bare_many / 1e6;
  state.counters["scaling"] = stage_many / stage_one;  // the goal: ≥ 1.8 at N = 2
  state.counters["bare_scaling"] = bare_many / bare_one;
  state.counters["ratio_N"] = stage_many / bare_many;  // the stage against bare loops on as many cores
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // Thread counts this machine has the cores for (N for the fft threads; the generator and the sink
  // float where no core is left for them).
  const std::size_t cores = sluice::allowed_cores().size();
  auto* threaded = benchmark::RegisterBenchmark(
      "BM_FftwThreads/power_db", [](benchmark::State& state) { sluice::BM_FftwThreads(state, "power_db"); });
  for (const long threads : {2L, 4L, 8L}) {
    if (static_cast<std::size_t>(threads) > cores) break;
    for (const long average : {1L, 16L}) threaded->Args({1024, threads, average});
  }
  threaded->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
