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
// BM_FusedKernelVsCopy, ci16, average 16, 64 MiB, twiddles in shared memory, medians of 5):
// 1 → 1084, 2 → 1191, 4 → 1210, 8 → 1249, 16 → 1051 GB/s (a D2D copy: 1394 GB/s).
// Tried and dropped: loading the next frame while transforming one (64 more registers: slower at
// every count).
constexpr unsigned kFramesPerWarp = 8;
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
unsigned g_fused_blocks[64] = {};          // per device: fused_kernel blocks that fit on it at once
unsigned g_sms[64] = {};                   // per device: multiprocessors

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

// Loads frame `base` (batch position of its sample 0) into lane `lane`'s registers: a[m] = x[lane + 32·m],
// converted and windowed. A frame wholly inside the raw span (nearly every frame) takes the plain loads.
template <typename Sample>
__device__ __forceinline__ void load_frame(const FusedArgs& args, unsigned base, unsigned lane, float scale, float2 (&a)[32]) {
  if (base >= args.raw_begin && base + kFusedSize <= args.raw_end) {
    const std::byte* raw = args.raw;
    const unsigned first = base - args.raw_begin;
#pragma unroll
    for (int m = 0; m < 32; ++m) {
      const float2 value = read_sample<Sample>(raw, first + lane + 32U * m);
      const float weight = args.window[lane + 32U * m] * scale;
      a[m] = make_float2(value.x * weight, value.y * weight);
    }
    return;
  }
#pragma unroll
  for (int m = 0; m < 32; ++m) a[m] = fused_sample<Sample>(args, base + lane + 32U * m, scale);
}

// The 32 × 32 four-step transform of one frame held by a warp: the inner 32-point DFT over n2 in
// each lane's registers, the twiddle W1024^(n1·k2) from the block's table, the transpose through
// the warp's shared rows, and the outer DFT over n1; afterwards lane t holds X[t + 32·k1] in a[k1].
__device__ __forceinline__ void transform_frame(float2 (&a)[32], const float2 (&twiddle)[32][32], float (&re)[32][33],
                                                float (&im)[32][33], unsigned lane) {
  fft32(a);  // over n2: a[k2] for n1 = lane
#pragma unroll
  for (int k2 = 0; k2 < 32; ++k2) {
    const float2 z = k2 == 0 ? a[0] : cmul(a[k2], twiddle[k2][lane]);
    re[lane][k2] = z.x;
    im[lane][k2] = z.y;
  }
  __syncwarp();
#pragma unroll
  for (int n1 = 0; n1 < 32; ++n1) a[n1] = make_float2(re[n1][lane], im[n1][lane]);
  __syncwarp();  // the next frame's stores wait until every lane has read this one
  fft32(a);      // over n1
}

// One warp per segment: up to kFramesPerWarp consecutive frames of one row. Segment s of row r
// (global frame numbers g = pending + f) covers g in [r·avg + s·F, min(r·avg + (s+1)·F, (r+1)·avg)),
// clipped to the batch's frames. Blocks stay resident and take segments in a grid-stride loop, so
// the block's twiddle table is built once per launch, not once per segment.
template <typename Sample>
__global__ void __launch_bounds__(kFusedWarps * 32) fused_kernel(FusedArgs args, unsigned segments_per_row,
                                                                 unsigned long long segments, float scale) {
  __shared__ float transpose_re[kFusedWarps][32][33];
  __shared__ float transpose_im[kFusedWarps][32][33];
  // twiddle[k2][t] = W1024^(t·k2): lane t reads row k2 at consecutive addresses (no bank conflicts).
  // Read from g_w1024 at (t·k2) mod 1024 instead, every warp's 31 twiddle loads touched up to 32 lines
  // each: ~750 L1 wavefronts per frame, against ~190 for everything else the frame needs.
  __shared__ float2 twiddle[32][32];
  for (unsigned i = threadIdx.x; i < 32 * 32; i += blockDim.x) {
    twiddle[i / 32][i % 32] = g_w1024[((i % 32) * (i / 32)) % kFusedSize];
  }
  __syncthreads();
  const unsigned warp = threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  for (unsigned long long segment = static_cast<unsigned long long>(blockIdx.x) * kFusedWarps + warp; segment < segments;
       segment += static_cast<unsigned long long>(gridDim.x) * kFusedWarps) {
    const unsigned long long row = segment / segments_per_row;
    const unsigned part = static_cast<unsigned>(segment % segments_per_row);
    const unsigned long long row_start = row * args.average;
    const unsigned long long first = row_start + part * args.frames_per_warp;
    const unsigned long long last = min(min(first + args.frames_per_warp, row_start + args.average),
                                        static_cast<unsigned long long>(args.pending) + args.frames);
    const unsigned long long begin = max(first, static_cast<unsigned long long>(args.pending));
    if (begin >= last) continue;  // the whole warp skips together: no shuffle or sync below misses a lane

    float power[32];
#pragma unroll
    for (int k = 0; k < 32; ++k) power[k] = 0.0F;
    for (unsigned long long g = begin; g < last; ++g) {
      float2 a[32];
      load_frame<Sample>(args, static_cast<unsigned>((g - args.pending) * kFusedSize), lane, scale, a);
      transform_frame(a, twiddle, transpose_re[warp], transpose_im[warp], lane);  // a[k1] = X[lane + 32·k1]
#pragma unroll
      for (int k1 = 0; k1 < 32; ++k1) power[k1] += a[k1].x * a[k1].x + a[k1].y * a[k1].y;
    }
    float* sums = args.ring + ((args.row_base + row) % args.ring_rows) * kFusedSize;
#pragma unroll
    for (int k1 = 0; k1 < 32; ++k1) atomicAdd(sums + lane + 32U * k1, power[k1]);
  }
}

// The kernel's fence (Signal): each block publishes its writes at device scope and counts itself
// done; the last one resets the counter for the next kernel on the stream and, after a
// system-scope fence (cumulative over the blocks' writes it has observed through the counter),
// writes the fence value into host memory.
__device__ __forceinline__ void signal_done(const Signal& signal) {
  if (signal.word == nullptr) return;
  __syncthreads();  // every thread of the block has written its rows
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(signal.blocks_done, 1U) + 1U == gridDim.x) {
    *signal.blocks_done = 0U;  // the next kernel on the stream starts after this one has ended
    __threadfence_system();
    *reinterpret_cast<volatile unsigned long long*>(signal.word) = signal.value;
  }
}

// The fused 1024-point complex path: frames [first, first + count) of the batch, one warp per frame,
// each written as one output row, scaled to amplitude and fftshifted on the store (lane t writes bins
// t + 32·k1, so every store instruction covers 32 consecutive output elements). One read of the input
// and one write of the output: the same memory traffic as a bare out-of-place cufftExecC2C.
template <typename Sample>
__global__ void __launch_bounds__(kFusedWarps * 32) fused_complex_kernel(FusedArgs args, unsigned first, unsigned count,
                                                                         float amplitude, float scale, float2* out,
                                                                         Signal signal) {
  __shared__ float transpose_re[kFusedWarps][32][33];
  __shared__ float transpose_im[kFusedWarps][32][33];
  __shared__ float2 twiddle[32][32];  // as in fused_kernel
  for (unsigned i = threadIdx.x; i < 32 * 32; i += blockDim.x) {
    twiddle[i / 32][i % 32] = g_w1024[((i % 32) * (i / 32)) % kFusedSize];
  }
  __syncthreads();
  const unsigned warp = threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32;
  for (unsigned row = blockIdx.x * kFusedWarps + warp; row < count; row += gridDim.x * kFusedWarps) {
    float2 a[32];
    load_frame<Sample>(args, (first + row) * kFusedSize, lane, scale, a);
    transform_frame(a, twiddle, transpose_re[warp], transpose_im[warp], lane);
    // a[k1] = X[lane + 32·k1]; fftshift: bin k goes to (k + 512) mod 1024
    float2* target = out + static_cast<std::size_t>(row) * kFusedSize + lane;
#pragma unroll
    for (int k1 = 0; k1 < 32; ++k1) {
      target[32U * ((k1 + 16) % 32)] = make_float2(a[k1].x * amplitude, a[k1].y * amplitude);
    }
  }
  signal_done(signal);
}

// The same complex rows for small batches, one block of kBlockThreads per frame: five radix-4
// Stockham passes (natural order in and out) through the block's shared row. A 4 MiB chunk is 512
// frames; at one warp each that is 4 warps per SM, each running a whole 1024-point transform
// serially, so the kernel waited on its own latency (0.69× of cuFFT at 4 MiB). Here a frame is 8
// warps with 4 values per thread. Pass p (stride ns = 4^p) reads d[j + 256·r], applies
// W1024^((j mod ns)·r·256/ns), takes the 4-point DFT and writes d[(j / ns)·4·ns + j mod ns + r·ns].
constexpr unsigned kBlockThreads = kFusedSize / 4;

__device__ __forceinline__ void dft4(float2 (&v)[4]) {  // forward: W4 = -i
  const float2 s02 = make_float2(v[0].x + v[2].x, v[0].y + v[2].y);
  const float2 d02 = make_float2(v[0].x - v[2].x, v[0].y - v[2].y);
  const float2 s13 = make_float2(v[1].x + v[3].x, v[1].y + v[3].y);
  const float2 d13 = make_float2(v[1].x - v[3].x, v[1].y - v[3].y);
  v[0] = make_float2(s02.x + s13.x, s02.y + s13.y);
  v[2] = make_float2(s02.x - s13.x, s02.y - s13.y);
  v[1] = make_float2(d02.x + d13.y, d02.y - d13.x);  // d02 − i·d13
  v[3] = make_float2(d02.x - d13.y, d02.y + d13.x);  // d02 + i·d13
}

// The shared row, one float2 of padding after every 16: the first pass's stores (stride 4) and
// the next ones' (runs of 4 and 16) then spread over the banks instead of piling onto a few.
__device__ __forceinline__ unsigned padded(unsigned i) { return i + (i >> 4); }
constexpr unsigned kPaddedRow = kFusedSize + kFusedSize / 16;

template <unsigned NS>
__device__ __forceinline__ void stockham_pass(float2* data, unsigned j) {
  float2 v[4];
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) {
    const float2 x = data[padded(j + kBlockThreads * r)];
    // Twiddles from the global table: a few distinct values per warp, served from L1.
    v[r] = r == 0 ? x : cmul(x, __ldg(&g_w1024[(j % NS) * r * (kBlockThreads / NS)]));
  }
  dft4(v);
  __syncthreads();  // every thread has read its inputs before any output lands on them
  const unsigned base = (j / NS) * NS * 4 + j % NS;
#pragma unroll
  for (unsigned r = 0; r < 4; ++r) data[padded(base + r * NS)] = v[r];
  __syncthreads();
}

template <typename Sample>
__global__ void __launch_bounds__(kBlockThreads) block_complex_kernel(FusedArgs args, unsigned first, unsigned count,
                                                                      float amplitude, float scale, float2* out,
                                                                      Signal signal) {
  __shared__ float2 data[kPaddedRow];
  const unsigned j = threadIdx.x;
  for (unsigned row = blockIdx.x; row < count; row += gridDim.x) {
    const unsigned base = (first + row) * kFusedSize;
    float2 v[4];
    if (base >= args.raw_begin && base + kFusedSize <= args.raw_end) {
#pragma unroll
      for (unsigned r = 0; r < 4; ++r) {
        const unsigned n = j + kBlockThreads * r;
        const float2 value = read_sample<Sample>(args.raw, base - args.raw_begin + n);
        const float weight = args.window[n] * scale;
        v[r] = make_float2(value.x * weight, value.y * weight);
      }
    } else {
#pragma unroll
      for (unsigned r = 0; r < 4; ++r) v[r] = fused_sample<Sample>(args, base + j + kBlockThreads * r, scale);
    }
    dft4(v);          // pass 1 (ns = 1, no twiddles) straight from the input
    __syncthreads();  // the previous frame's last pass has read the row
#pragma unroll
    for (unsigned r = 0; r < 4; ++r) data[padded(j * 4 + r)] = v[r];
    __syncthreads();
    stockham_pass<4>(data, j);
    stockham_pass<16>(data, j);
    stockham_pass<64>(data, j);
    // Pass 5 (ns = 256) writes X[j + 256·r] straight to the output row, scaled and fftshifted.
#pragma unroll
    for (unsigned r = 0; r < 4; ++r) {
      const float2 x = data[padded(j + kBlockThreads * r)];
      v[r] = r == 0 ? x : cmul(x, __ldg(&g_w1024[j * r]));
    }
    dft4(v);
    float2* target = out + static_cast<std::size_t>(row) * kFusedSize;
#pragma unroll
    for (unsigned r = 0; r < 4; ++r) {
      target[(j + kBlockThreads * r + kFusedSize / 2) % kFusedSize] = make_float2(v[r].x * amplitude, v[r].y * amplitude);
    }
  }
  signal_done(signal);
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

// Calls launch(Sample{}, scale) with the format's sample type and full-scale divisor (the same
// for every kernel that reads raw samples), then returns the launch's error.
template <typename Launch>
cudaError_t launch_for_format(SampleFormat format, Launch launch) {
  switch (format) {
    case SampleFormat::ci8: launch(char2{}, 1.0F / 128.0F); break;
    case SampleFormat::ci16: launch(short2{}, 1.0F / 32768.0F); break;
    case SampleFormat::cf32: launch(float2{}, 1.0F); break;
    case SampleFormat::rf32: return cudaErrorInvalidValue;  // refused at start: real samples have no I/Q pairs
  }
  return cudaGetLastError();
}

// The current device's entry in a per-device table filled by prepare_fused(), or `fallback`.
cudaError_t per_device(const unsigned (&table)[64], unsigned fallback, unsigned& value) {
  int device = 0;
  if (cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) return error;
  value = device >= 0 && device < 64 && table[device] > 0 ? table[device] : fallback;
  return cudaSuccess;
}


}  // namespace

cudaError_t load(const std::byte* input, SampleFormat format, unsigned count, unsigned start, unsigned size,
                 const float* window, float2* batch, cudaStream_t stream) noexcept {
  const unsigned blocks = blocks_for(count);
  return launch_for_format(format, [&](auto sample, float scale) {
    load_kernel<decltype(sample)><<<blocks, kThreads, 0, stream>>>(input, count, start, size, window, scale, batch);
  });
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
  // The grid that fills the device once (the kernel loops over segments); the ci16 instance stands
  // for all three, which differ only in their loads.
  int per_sm = 0;
  int sms = 0;
  if (cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_kernel<short2>, kFusedWarps * 32, 0);
      error != cudaSuccess) {
    return error;
  }
  if (cudaError_t error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); error != cudaSuccess) return error;
  if (device >= 0 && device < 64) {
    g_fused_blocks[device] = static_cast<unsigned>(std::max(1, per_sm * sms));
    g_sms[device] = static_cast<unsigned>(std::max(1, sms));
    g_fused_ready[device] = true;
  }
  return cudaSuccess;
}

cudaError_t fused_power(const FusedArgs& arguments, cudaStream_t stream) noexcept {
  if (arguments.frames == 0) return cudaSuccess;
  FusedArgs args = arguments;
  if (args.frames_per_warp == 0) args.frames_per_warp = kFramesPerWarp;
  const unsigned long long rows = (static_cast<unsigned long long>(args.pending) + args.frames + args.average - 1) / args.average;
  const unsigned segments_per_row = (args.average + args.frames_per_warp - 1) / args.frames_per_warp;
  const unsigned long long segments = rows * segments_per_row;
  const unsigned long long needed = (segments + kFusedWarps - 1) / kFusedWarps;
  unsigned resident = 0;
  if (cudaError_t error = per_device(g_fused_blocks, 1024, resident); error != cudaSuccess) return error;
  const auto blocks = static_cast<unsigned>(std::min<unsigned long long>(needed, resident));
  return launch_for_format(args.format, [&](auto sample, float scale) {
    fused_kernel<decltype(sample)><<<blocks, kFusedWarps * 32, 0, stream>>>(args, segments_per_row, segments, scale);
  });
}

cudaError_t fused_complex(const FusedArgs& args, unsigned first, unsigned count, float amplitude_scale, float2* out,
                          cudaStream_t stream, ComplexKernel kernel, Signal signal) noexcept {
  if (count == 0) return cudaSuccess;
  if (kernel == ComplexKernel::block_per_frame || (kernel == ComplexKernel::automatic && count < kBlockKernelBelow)) {
    // Grid-stride: enough blocks to fill every SM several times over.
    unsigned sms = 0;
    if (cudaError_t error = per_device(g_sms, 132, sms); error != cudaSuccess) return error;
    const unsigned blocks = std::min(count, sms * 8U);
    return launch_for_format(args.format, [&](auto sample, float scale) {
      block_complex_kernel<decltype(sample)><<<blocks, kBlockThreads, 0, stream>>>(args, first, count, amplitude_scale, scale, out,
                                                                                  signal);
    });
  }
  unsigned resident = 0;
  if (cudaError_t error = per_device(g_fused_blocks, 1024, resident); error != cudaSuccess) return error;
  const unsigned blocks = std::min((count + kFusedWarps - 1) / kFusedWarps, resident);
  return launch_for_format(args.format, [&](auto sample, float scale) {
    fused_complex_kernel<decltype(sample)><<<blocks, kFusedWarps * 32, 0, stream>>>(args, first, count, amplitude_scale, scale, out,
                                                                                    signal);
  });
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
