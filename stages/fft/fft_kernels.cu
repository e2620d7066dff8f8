// The cuFFT backend's kernels: conversion + window on load, and the fold on the way out.
// Both are memory-bound: one pass over their input, coalesced across each warp.
#include <algorithm>
#include <cstdint>

#include "stages/fft/fft_callbacks.hpp"
#include "stages/fft/fft_kernels.hpp"

namespace sluice::fft_kernels {
namespace {

constexpr unsigned kThreads = 256;

template <typename Sample>
__device__ float2 read_sample(const std::byte* input, unsigned index);

template <>
__device__ float2 read_sample<char2>(const std::byte* input, unsigned index) {
  const char2 value = reinterpret_cast<const char2*>(input)[index];
  return make_float2(value.x, value.y);
}
template <>
__device__ float2 read_sample<short2>(const std::byte* input, unsigned index) {
  const short2 value = reinterpret_cast<const short2*>(input)[index];
  return make_float2(value.x, value.y);
}
template <>
__device__ float2 read_sample<float2>(const std::byte* input, unsigned index) {
  return reinterpret_cast<const float2*>(input)[index];
}

// Sample i of the span lands at batch position start + i, weighted by its window value times
// the format's full-scale divisor (the same product, in the same order, as the FFTW backend).
template <typename Sample>
__global__ void load_kernel(const std::byte* __restrict__ input, unsigned count, unsigned start, unsigned size,
                            const float* __restrict__ window, float scale, float2* __restrict__ batch) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    const unsigned position = start + i;
    const float weight = window[position % size] * scale;
    const float2 value = read_sample<Sample>(input, i);
    batch[position] = make_float2(value.x * weight, value.y * weight);
  }
}

__device__ float decibels(float power) {
  const float clamped = power < kPowerFloor ? kPowerFloor : power;  // NaN stays NaN, as on the CPU
  return 10.0F * log10f(clamped);
}


// One thread per (row, bin); row index `rows` is the unfinished row, summed into accumulator_out.
// Accumulators hold power in natural bin order; fftshift happens on the store: bin k → (k + size/2) mod size.
__global__ void fold_kernel(FoldArgs args, unsigned blocks_per_row) {
  const unsigned row = blockIdx.x / blocks_per_row;
  const unsigned k = (blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x;
  if (k >= args.size) return;
  if (row == args.rows) {
    float sum = args.rows == 0 && args.pending > 0 ? args.accumulator_in[k] : 0.0F;
    for (unsigned frame = args.partial_from; frame < args.end; ++frame) {
      const float2 bin = args.bins[static_cast<std::size_t>(frame) * args.size + k];
      sum += bin.x * bin.x + bin.y * bin.y;
    }
    args.accumulator_out[k] = sum;
    return;
  }
  const unsigned shifted = (k + args.size / 2) % args.size;
  const std::size_t at = static_cast<std::size_t>(row) * args.size + shifted;
  if (args.output == kOutputComplex) {  // one frame per row, never averaged
    const float2 bin = args.bins[static_cast<std::size_t>(args.first + row) * args.size + k];
    reinterpret_cast<float2*>(args.out)[at] = make_float2(bin.x * args.amplitude_scale, bin.y * args.amplitude_scale);
    return;
  }
  const unsigned from = row == 0 ? args.first : args.first + row * args.average - args.pending;
  const unsigned to = args.first + (row + 1) * args.average - args.pending;
  float sum = row == 0 && args.pending > 0 ? args.accumulator_in[k] : 0.0F;
  for (unsigned frame = from; frame < to; ++frame) {
    const float2 bin = args.bins[static_cast<std::size_t>(frame) * args.size + k];
    sum += bin.x * bin.x + bin.y * bin.y;
  }
  const float power = args.average == 1 ? sum * args.power_scale : sum * (args.power_scale / static_cast<float>(args.average));
  reinterpret_cast<float*>(args.out)[at] = args.output == kOutputPowerDb ? decibels(power) : power;
}

__global__ void set_info_kernel(sluice::fft_callbacks::Info info, sluice::fft_callbacks::Info* device_info) {
  *device_info = info;
}

// One thread per (row, bin) of the finished rows; reads the ring row, writes the output row, zeroes the ring row.
__global__ void finish_kernel(float* ring, unsigned ring_rows, unsigned size, unsigned long long first_row,
                              float scale, bool to_decibels, float* out, unsigned blocks_per_row) {
  const unsigned row = blockIdx.x / blocks_per_row;
  const unsigned k = (blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x;
  if (k >= size) return;
  float* sums = ring + ((first_row + row) % ring_rows) * size;
  const float power = sums[k] * scale;
  sums[k] = 0.0F;
  out[static_cast<std::size_t>(row) * size + (k + size / 2) % size] = to_decibels ? decibels(power) : power;
}

unsigned blocks_for(std::size_t threads) {
  // Grid-stride loops: a few waves over the H100's 132 SMs are enough for a memory-bound kernel.
  return static_cast<unsigned>(std::min<std::size_t>((threads + kThreads - 1) / kThreads, 132 * 32));
}


}  // namespace

cudaError_t load(const std::byte* input, SampleFormat format, unsigned count, unsigned start, unsigned size,
                 const float* window, float2* batch, cudaStream_t stream) noexcept {
  const unsigned blocks = blocks_for(count);
  switch (format) {
    case SampleFormat::ci8:
      load_kernel<char2><<<blocks, kThreads, 0, stream>>>(input, count, start, size, window, 1.0F / 128.0F, batch);
      break;
    case SampleFormat::ci16:
      load_kernel<short2><<<blocks, kThreads, 0, stream>>>(input, count, start, size, window, 1.0F / 32768.0F, batch);
      break;
    case SampleFormat::cf32:
      load_kernel<float2><<<blocks, kThreads, 0, stream>>>(input, count, start, size, window, 1.0F, batch);
      break;
    case SampleFormat::rf32: return cudaErrorInvalidValue;  // refused at start: real samples have no I/Q pairs
  }
  return cudaGetLastError();
}

cudaError_t fold(const FoldArgs& args, bool partial, cudaStream_t stream) noexcept {
  const unsigned blocks_per_row = (args.size + kThreads - 1) / kThreads;
  const unsigned rows = args.rows + (partial ? 1U : 0U);
  fold_kernel<<<rows * blocks_per_row, kThreads, 0, stream>>>(args, blocks_per_row);
  return cudaGetLastError();
}

}  // namespace sluice::fft_kernels

namespace sluice::fft_callbacks {

cudaError_t set_info(const Info& info, Info* device_info, cudaStream_t stream) noexcept {
  fft_kernels::set_info_kernel<<<1, 1, 0, stream>>>(info, device_info);
  return cudaGetLastError();
}

cudaError_t finish_rows(float* ring, unsigned ring_rows, unsigned size, unsigned long long first_row, unsigned rows,
                        float power_scale, unsigned average, bool decibels, float* out, cudaStream_t stream) noexcept {
  if (rows == 0) return cudaSuccess;
  const unsigned blocks_per_row = (size + fft_kernels::kThreads - 1) / fft_kernels::kThreads;
  const float scale = average == 1 ? power_scale : power_scale / static_cast<float>(average);
  fft_kernels::finish_kernel<<<rows * blocks_per_row, fft_kernels::kThreads, 0, stream>>>(
      ring, ring_rows, size, first_row, scale, decibels, out, blocks_per_row);
  return cudaGetLastError();
}

}  // namespace sluice::fft_callbacks
