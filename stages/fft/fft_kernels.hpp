// The cuFFT backend's own kernels around the plan, behind plain launch functions so that the
// backend itself is ordinary C++ (built by the host compiler, with spdlog and the project's warnings).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "pipeline/chunk.hpp"  // SampleFormat (this header is C++17: nvcc builds it)

namespace sluice::fft_kernels {

// FftOutput's values (fft_backend.hpp is C++20 and stays out of the .cu file); the backend checks they match.
constexpr int kOutputPowerDb = 0;
constexpr int kOutputPower = 1;
constexpr int kOutputComplex = 2;
// decibels.hpp's kPowerFloorLinear: powers below read -300 dB.
constexpr float kPowerFloor = 1e-30F;

struct FoldArgs {
  const float2* bins;
  unsigned size;
  unsigned first;         // first frame of the fold
  unsigned pending;       // frames already in the row being built (in accumulator_in)
  unsigned rows;          // rows finished by this fold
  unsigned average;
  unsigned partial_from;  // first frame of the row left unfinished (frames up to first + count)
  unsigned end;           // first + count
  int output;             // kOutputPowerDb, kOutputPower or kOutputComplex
  float amplitude_scale;
  float power_scale;
  const float* accumulator_in;
  float* accumulator_out;
  std::byte* out;
};

// Converts `count` samples of `format` (device memory) to complex float, times the window value of
// their position and the format's full-scale divisor, into `batch` from position `start` on.
// Returns the launch's error (cudaGetLastError).
cudaError_t load(const std::byte* input, SampleFormat format, unsigned count, unsigned start, unsigned size,
                 const float* window, float2* batch, cudaStream_t stream) noexcept;

// Folds frames into `args.rows` finished rows (|X|², average, scale, fftshift, dB or complex) and,
// when `partial` is true, the frames after them into args.accumulator_out.
cudaError_t fold(const FoldArgs& args, bool partial, cudaStream_t stream) noexcept;

}  // namespace sluice::fft_kernels
