// The fft stage's settings: what each means, its default, and the combinations that cannot work.
#include "stages/fft/fft_settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "pipeline/config.hpp"
#include "stages/fft/worker_team.hpp"

namespace sluice {
namespace {

// What is computed: length, window, averaging, output, and by which engine.
void read_transform(SettingsReader& reader, FftSettings& settings) {
  settings.size = static_cast<std::size_t>(
      reader.integer("size", 1024, "FFT length: input samples per frame and values per output row", 2, 1 << 20));
  settings.window =
      reader.choice("window", WindowKind::hann, "window applied to each frame (its coherent gain is divided out)",
                    {{"none", WindowKind::none},
                     {"hann", WindowKind::hann},
                     {"hamming", WindowKind::hamming},
                     {"blackman", WindowKind::blackman}});
  settings.average = static_cast<std::size_t>(
      reader.integer("average", 1, "consecutive spectra averaged (in power) into one output row", 1, 1 << 20));
  settings.output =
      reader.choice("output", FftOutput::power_db,
                    "power_db (rf32, 10·log10 power; a full-scale tone reads 0 dB), power (rf32, linear) "
                    "or complex (cf32 bins scaled by 1/(size·window gain); no averaging)",
                    {{"power_db", FftOutput::power_db}, {"power", FftOutput::power}, {"complex", FftOutput::complex}});
  settings.backend = reader.choice(
      "backend", FftBackendKind::automatic,
      "auto (cuFFT when a GPU answers, else FFTW; logged and noted), cufft or fftw",
      {{"auto", FftBackendKind::automatic}, {"cufft", FftBackendKind::cufft}, {"fftw", FftBackendKind::fftw}});
  settings.fusion =
      reader.choice("fusion", FftFusion::automatic,
                    "cuFFT backend only: fused (one pass: conversion, window, 1024-point FFT, then |X|² and "
                    "averaging, or scale and fftshift for complex, in one kernel; size 1024), kernels (a load kernel, "
                    "cuFFT and a fold kernel) or auto (fused where it applies, else kernels)",
                    {{"auto", FftFusion::automatic}, {"fused", FftFusion::fused}, {"kernels", FftFusion::kernels}});
  if (settings.fusion != FftFusion::automatic && settings.backend == FftBackendKind::fftw) {
    reader.error("fusion", "fusion applies to the cuFFT backend only; backend: fftw fuses its own loops",
                 "remove fusion:, or use backend: cufft or auto");
  }
  if (settings.fusion == FftFusion::fused && settings.size != 1024) {
    reader.error("fusion", "fusion: fused transforms 1024-point frames only",
                 "use size: 1024, or fusion: kernels or auto");
  }
}

// FFTW's threads and their cores.
void read_threads(SettingsReader& reader, FftSettings& settings) {
  settings.threads = static_cast<std::size_t>(reader.integer(
      "threads", 1,
      "FFTW only: threads sharing each batch's work (conversion and window, transform, |X|², averaging and dB), "
      "the stage's own thread included; the others are workers the stage starts",
      1, static_cast<std::int64_t>(WorkerTeam::kMaxThreads)));
  const std::vector<double> worker_cpus = reader.numbers(
      "worker_cpus", {},
      "FFTW with threads > 1: the core of each worker (threads − 1 of them; the stage's own thread is pinned by cpu:); "
      "empty: workers run on any core but the stage's cpu");
  for (const double cpu : worker_cpus) {
    if (cpu < 0 || cpu > 4095 || cpu != std::floor(cpu)) {
      reader.error("worker_cpus", fmt::format("worker_cpus: {} is not a core number", cpu),
                   "use whole numbers 0 … 4095");
    } else if (std::find(settings.worker_cpus.begin(), settings.worker_cpus.end(), static_cast<int>(cpu)) !=
               settings.worker_cpus.end()) {
      reader.error("worker_cpus", "worker_cpus names core " + std::to_string(static_cast<int>(cpu)) + " twice",
                   "give each worker its own core");
    } else {
      settings.worker_cpus.push_back(static_cast<int>(cpu));
    }
  }
  if (reader.has("threads") && settings.backend == FftBackendKind::cufft) {
    reader.error("threads", "threads applies to the FFTW backend only; cuFFT runs the whole batch on the GPU",
                 "remove threads:, or use backend: fftw");
  }
  if (!worker_cpus.empty() && worker_cpus.size() != settings.threads - 1) {
    reader.error(
        "worker_cpus",
        "worker_cpus names " + std::to_string(worker_cpus.size()) + " cores, and threads: " +
            std::to_string(settings.threads) + " starts " + std::to_string(settings.threads - 1) + " workers",
        settings.threads == 1
            ? "set threads: to one more than the cores listed, or remove worker_cpus:"
            : "list one core per worker (the stage's own thread, pinned by cpu:, is the first of the threads)");
  }
}

}  // namespace

FftSettings read_fft_settings(SettingsReader& reader, const PipelineSettings& pipeline) {
  FftSettings settings;
  read_transform(reader, settings);
  read_threads(reader, settings);
  settings.pool = read_pool_settings(reader, pipeline);
  if (settings.output == FftOutput::complex && settings.average > 1) {
    reader.error("average",
                 "average: " + std::to_string(settings.average) +
                     " is impossible with output: complex (complex bins of different frames cannot be averaged)",
                 "use output: power or power_db to average, or average: 1");
  }
  const std::uint64_t row_bytes = settings.size * output_value_bytes(settings.output);
  if (settings.pool.chunk_bytes < row_bytes) {
    reader.error("chunk",
                 "chunk of " + std::to_string(settings.pool.chunk_bytes) + " bytes cannot hold one spectrum row of " +
                     std::to_string(row_bytes) + " bytes",
                 "set chunk: on the fft stage to at least " + std::to_string(row_bytes) + " bytes");
  }
  return settings;
}

std::string_view to_string(FftOutput output) {
  switch (output) {
    case FftOutput::power_db:
      return "power_db";
    case FftOutput::power:
      return "power";
    case FftOutput::complex:
      return "complex";
  }
  return "?";
}

}  // namespace sluice
