// The cuFFT backend's kernels: conversion + window on load and the fold on the way out (around
// cuFFT), and the fused 1024-point power path that needs no cuFFT at all. All are memory-bound:
// one pass over their input, coalesced across each warp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>

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

// ---- The fused 1024-point path -------------------------------------------------------------
// N = 1024 = 32 × 32, one warp per frame, lane t. With n = n1 + 32·n2 and k = k2 + 32·k1:
//   X[k2 + 32·k1] = Σ_n1 W32^(n1·k1) · W1024^(n1·k2) · Σ_n2 x[n1 + 32·n2] · W32^(n2·k2).
// Lane n1 holds x[n1 + 32·m] (m = 0..31: each load instruction reads 32 consecutive samples), takes
// the inner 32-point DFT in registers, applies the twiddle, and the warp transposes through shared
// memory so that lane k2 holds all n1; the outer 32-point DFT then leaves X[t + 32·k1] in lane t.
constexpr unsigned kFusedWarps = 4;        // warps (frames in flight) per block
// Default frames of one row a warp sums before adding to the ring. Measured on the H100 (fft_gpu_bench
// BM_FusedKernelVsCopy, ci16, average 16, 64 MiB): 1 → 419, 2 → 448, 4 → 455, 8 → 458, 16 → 256 GB/s.
// Tried and dropped: loading the next frame while transforming one (64 more registers: slower at
// every count), and the window and twiddles in shared memory (46 KB a block: the same rate).
constexpr unsigned kFramesPerWarp = 4;
// W32^j = e^(-2πi j/32), j < 16, as literals: after unrolling every index is a constant, so the
// compiler folds them into the multiplies (and W32^8 = -i is a swap, below).
__device__ constexpr float kW32Re[16] = {1.000000000f,  0.980785280f,  0.923879533f,  0.831469612f,
                                         0.707106781f,  0.555570233f,  0.382683432f,  0.195090322f,
                                         0.000000000f,  -0.195090322f, -0.382683432f, -0.555570233f,
                                         -0.707106781f, -0.831469612f, -0.923879533f, -0.980785280f};
__device__ constexpr float kW32Im[16] = {-0.000000000f, -0.195090322f, -0.382683432f, -0.555570233f,
                                         -0.707106781f, -0.831469612f, -0.923879533f, -0.980785280f,
                                         -1.000000000f, -0.980785280f, -0.923879533f, -0.831469612f,
                                         -0.707106781f, -0.555570233f, -0.382683432f, -0.195090322f};
__device__ float2 g_w1024[1024];           // W1024^j
bool g_fused_ready[64] = {};               // per device

__device__ __forceinline__ float2 cmul(float2 a, float2 b) { return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }

__host__ __device__ constexpr int reverse5(int i) { return ((i & 1) << 4) | ((i & 2) << 2) | (i & 4) | ((i & 8) >> 2) | ((i & 16) >> 4); }

// One radix-2 stage over 32 registers; HALF is a template argument so that every index is a
// compile-time constant and `a` stays in registers (a runtime stage count put it in local memory).
template <int HALF>
__device__ __forceinline__ void butterflies(float2 (&a)[32]) {
#pragma unroll
  for (int start = 0; start < 32; start += 2 * HALF) {
#pragma unroll
    for (int j = 0; j < HALF; ++j) {
      const float2 u = a[start + j];
      const int index = j * (16 / HALF);
      const float2 b = a[start + j + HALF];
      const float2 v = index == 0   ? b
                       : index == 8 ? make_float2(b.y, -b.x)  // × -i
                                    : cmul(b, make_float2(kW32Re[index], kW32Im[index]));
      a[start + j] = make_float2(u.x + v.x, u.y + v.y);
      a[start + j + HALF] = make_float2(u.x - v.x, u.y - v.y);
    }
  }
}

// In-place 32-point forward DFT of registers, natural order in and out (radix-2, decimation in time).
__device__ __forceinline__ void fft32(float2 (&a)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int j = reverse5(i);
    if (j > i) {
      const float2 t = a[i];
      a[i] = a[j];
      a[j] = t;
    }
  }
  butterflies<1>(a);
  butterflies<2>(a);
  butterflies<4>(a);
  butterflies<8>(a);
  butterflies<16>(a);
}

template <typename Sample>
__device__ __forceinline__ float2 fused_sample(const FusedArgs& args, unsigned position, float scale) {
  if (position < args.raw_begin) return args.batch[position];
  if (position >= args.raw_end) return make_float2(0.0F, 0.0F);
  const float weight = args.window[position % kFusedSize] * scale;
  const float2 value = read_sample<Sample>(args.raw, position - args.raw_begin);
  return make_float2(value.x * weight, value.y * weight);
}

// One warp per segment: up to kFramesPerWarp consecutive frames of one row. Segment s of row r
// (global frame numbers g = pending + f) covers g in [r·avg + s·F, min(r·avg + (s+1)·F, (r+1)·avg)),
// clipped to the batch's frames.
template <typename Sample>
__global__ void __launch_bounds__(kFusedWarps * 32) fused_kernel(FusedArgs args, unsigned segments_per_row, float scale) {
  __shared__ float transpose_re[kFusedWarps][32][33];
  __shared__ float transpose_im[kFusedWarps][32][33];
  const unsigned warp = threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  const unsigned segment = blockIdx.x * kFusedWarps + warp;
  const unsigned row = segment / segments_per_row;
  const unsigned part = segment % segments_per_row;
  const unsigned long long row_start = static_cast<unsigned long long>(row) * args.average;
  const unsigned long long first = row_start + part * args.frames_per_warp;
  const unsigned long long last = min(min(first + args.frames_per_warp, row_start + args.average),
                                      static_cast<unsigned long long>(args.pending) + args.frames);
  const unsigned long long begin = max(first, static_cast<unsigned long long>(args.pending));
  if (begin >= last) return;  // the whole warp leaves together: no shuffle or sync below misses a lane

  float power[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) power[k] = 0.0F;
  for (unsigned long long g = begin; g < last; ++g) {
    const auto base = static_cast<unsigned>((g - args.pending) * kFusedSize);
    float2 a[32];
#pragma unroll
    for (int m = 0; m < 32; ++m) a[m] = fused_sample<Sample>(args, base + lane + 32U * m, scale);
    fft32(a);  // over n2: a[k2] for n1 = lane
#pragma unroll
    for (int k2 = 0; k2 < 32; ++k2) {
      const float2 z = k2 == 0 ? a[0] : cmul(a[k2], g_w1024[(lane * k2) % kFusedSize]);
      transpose_re[warp][lane][k2] = z.x;
      transpose_im[warp][lane][k2] = z.y;
    }
    __syncwarp();
#pragma unroll
    for (int n1 = 0; n1 < 32; ++n1) a[n1] = make_float2(transpose_re[warp][n1][lane], transpose_im[warp][n1][lane]);
    __syncwarp();  // the next frame's stores wait until every lane has read this one
    fft32(a);      // over n1: a[k1] = X[lane + 32·k1]
#pragma unroll
    for (int k1 = 0; k1 < 32; ++k1) power[k1] += a[k1].x * a[k1].x + a[k1].y * a[k1].y;
  }
  float* sums = args.ring + ((args.row_base + row) % args.ring_rows) * kFusedSize;
#pragma unroll
  for (int k1 = 0; k1 < 32; ++k1) atomicAdd(sums + lane + 32U * k1, power[k1]);
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

cudaError_t prepare_fused() noexcept {
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  int device = 0;
  if (cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) return error;
  if (device >= 0 && device < 64 && g_fused_ready[device]) return cudaSuccess;
  float2 w1024[kFusedSize];
  for (unsigned j = 0; j < kFusedSize; ++j) {  // in double, rounded once
    const double angle = -2.0 * 3.14159265358979323846 * static_cast<double>(j) / kFusedSize;
    w1024[j] = make_float2(static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle)));
  }
  if (cudaError_t error = cudaMemcpyToSymbol(g_w1024, w1024, sizeof(w1024)); error != cudaSuccess) return error;
  if (device >= 0 && device < 64) g_fused_ready[device] = true;
  return cudaSuccess;
}

cudaError_t fused_power(const FusedArgs& arguments, cudaStream_t stream) noexcept {
  if (arguments.frames == 0) return cudaSuccess;
  FusedArgs args = arguments;
  if (args.frames_per_warp == 0) args.frames_per_warp = kFramesPerWarp;
  const unsigned long long rows = (static_cast<unsigned long long>(args.pending) + args.frames + args.average - 1) / args.average;
  const unsigned segments_per_row = (args.average + args.frames_per_warp - 1) / args.frames_per_warp;
  const unsigned long long segments = rows * segments_per_row;
  const auto blocks = static_cast<unsigned>((segments + kFusedWarps - 1) / kFusedWarps);
  switch (args.format) {
    case SampleFormat::ci8:
      fused_kernel<char2><<<blocks, kFusedWarps * 32, 0, stream>>>(args, segments_per_row, 1.0F / 128.0F);
      break;
    case SampleFormat::ci16:
      fused_kernel<short2><<<blocks, kFusedWarps * 32, 0, stream>>>(args, segments_per_row, 1.0F / 32768.0F);
      break;
    case SampleFormat::cf32:
      fused_kernel<float2><<<blocks, kFusedWarps * 32, 0, stream>>>(args, segments_per_row, 1.0F);
      break;
    case SampleFormat::rf32: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t finish_rows(float* ring, unsigned ring_rows, unsigned size, unsigned long long first_row, unsigned rows,
                        float power_scale, unsigned average, bool decibels, float* out, cudaStream_t stream) noexcept {
  if (rows == 0) return cudaSuccess;
  const unsigned blocks_per_row = (size + kThreads - 1) / kThreads;
  const float scale = average == 1 ? power_scale : power_scale / static_cast<float>(average);
  finish_kernel<<<rows * blocks_per_row, kThreads, 0, stream>>>(ring, ring_rows, size, first_row, scale, decibels, out,
                                                                 blocks_per_row);
  return cudaGetLastError();
}

}  // namespace sluice::fft_kernels
