// The fft stage (generator → fft → null, real runtime) against its baseline: a raw
// fftwf_execute loop of the same FFTW plan shape and planner flags over the same number of
// samples, measured in the same run. The stage also converts, windows, takes |X|², averages,
// fftshifts and takes logs, so ratio < 1 is its whole per-sample overhead. A second baseline,
// one fftwf_execute_dft per row, shows whether batching with fftwf_plan_many_dft pays.
#include <benchmark/benchmark.h>
#include <fftw3.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
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
  fftwf_plan many = fftwf_plan_many_dft(1, &length, static_cast<int>(batch), frames, nullptr, 1, length, frames, nullptr, 1,
                                        length, FFTW_FORWARD, fftw_planner_flags(size));
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

double stage_samples_per_second(std::size_t size, std::uint64_t total_samples, const std::string& output) {
  Pipeline pipeline(load_pipeline_text(
      "pipeline: {chunk: 4MiB, chunks: 8}\nlanes: [{name: a, stages: [{type: generator, format: ci16, stop_after: " +
      std::to_string(total_samples * 4) + "}, {type: fft, size: " + std::to_string(size) + ", output: " + output +
      "}, {type: null}]}]\n"));
  pipeline.start();
  pipeline.run();
  const auto lanes = pipeline.metrics_by_lane();
  const StageMetrics& fft = *lanes[0][1];
  if (fft.in.samples.load() != total_samples) throw std::runtime_error("fft stage lost samples");
  // The fft stage's own time in process(), so the generator and sink threads sharing cores do not count.
  return static_cast<double>(total_samples) / (static_cast<double>(fft.busy_ns.load()) / 1e9);
}

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
    ->Arg(1024)->Arg(8192)->Arg(65536)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FftStageVsRawFftw, complex, std::string("complex"))
    ->Arg(1024)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
