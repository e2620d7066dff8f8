// The fft stage's settings, read and checked once from its YAML (SettingsReader collects the errors).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "pipeline/stage.hpp"
#include "stages/fft/fft_backend.hpp"
#include "stages/fft/window.hpp"

namespace sluice {

struct FftSettings {
  std::size_t size = 1024;               // FFT length: samples per frame and values per output row
  WindowKind window = WindowKind::hann;  // applied to each frame before the transform
  std::size_t average = 1;               // consecutive frames averaged (in power) into one output row
  FftOutput output = FftOutput::power_db;
  FftBackendKind backend = FftBackendKind::automatic;  // auto: cuFFT when a GPU answers, else FFTW
  FftFusion fusion = FftFusion::automatic;             // cuFFT: LTO callbacks or kernels around the plan
  std::size_t threads = 1;                             // FFTW: threads sharing each batch, the stage's own included
  std::vector<int> worker_cpus;  // FFTW: a core per worker (threads − 1), or empty: any core but the stage's
  PoolSettings pool;             // the stage's output chunks
};

FftSettings read_fft_settings(SettingsReader& reader, const PipelineSettings& pipeline);

std::string_view to_string(FftOutput output);
// Bytes of one output value: a float, or a complex float for complex output.
constexpr std::size_t output_value_bytes(FftOutput output) { return output == FftOutput::complex ? 8 : 4; }

}  // namespace sluice
