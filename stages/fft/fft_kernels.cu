// The cuFFT backend's kernels: conversion + window on load and the fold on the way out (around
// cuFFT), and the fused 1024-point power and complex paths that need no cuFFT at all. Each makes
// one pass over its input, coalesced across each warp.
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
  const float power =
      args.average == 1 ? sum * args.power_scale : sum * (args.power_scale / static_cast<float>(args.average));
  reinterpret_cast<float*>(args.out)[at] = args.output == kOutputPowerDb ? decibels(power) : power;
}

// ---- The fused 1024-point power path -------------------------------------------------------
// N = 1024 = 32 × 32, one warp per frame, lane t. With n = n1 + 32·n2 and k = k2 + 32·k1:
//   X[k2 + 32·k1] = Σ_n1 W32^(n1·k1) · W1024^(n1·k2) · Σ_n2 x[n1 + 32·n2] · W32^(n2·k2).
// Lane n1 holds x[n1 + 32·m] (m = 0..31: each load instruction reads 32 consecutive samples), takes
// the inner 32-point DFT in registers, applies the twiddle, and the warp transposes through shared
// memory so that lane k2 holds all n1; the outer 32-point DFT then leaves X[t + 32·k1] in lane t.
constexpr unsigned kFusedWarps = 4;  // warps (frames in flight) per block
// Default frames of one row a warp sums before adding to the ring: the fastest count in fft_gpu_bench's
// BM_FusedKernelVsCopy (docs/PERFORMANCE.md). One warp per frame, not the complex path's two: a ci16
// byte carries twice the transforms of a cf32 one, and this kernel needs one exchange a frame where
// that one needs two.
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
__device__ float2 g_w1024[1024];   // W1024^j
bool g_fused_ready[64] = {};       // per device
unsigned g_fused_blocks[64] = {};  // per device: fused_kernel blocks that fit on it at once
unsigned g_sms[64] = {};           // per device: multiprocessors
unsigned g_pair_blocks[64] = {};   // per device: pair_complex_kernel blocks that fit on it at once

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

__host__ __device__ constexpr int reverse5(int i) {
  return ((i & 1) << 4) | ((i & 2) << 2) | (i & 4) | ((i & 8) >> 2) | ((i & 16) >> 4);
}

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
      if (index == 0 || index == 8) {
        const float2 v = index == 0 ? b : make_float2(b.y, -b.x);  // × -i
        a[start + j] = make_float2(u.x + v.x, u.y + v.y);
        a[start + j + HALF] = make_float2(u.x - v.x, u.y - v.y);
      } else {
        // u + b·w as two fused multiply-adds a component, u − b·w as 2u − (u + b·w): three
        // instructions a component where the product, its sum and its difference took four.
        const float wr = kW32Re[index];
        const float wi = kW32Im[index];
        const float2 top = make_float2(fmaf(b.x, wr, fmaf(-b.y, wi, u.x)), fmaf(b.x, wi, fmaf(b.y, wr, u.y)));
        a[start + j] = top;
        a[start + j + HALF] = make_float2(fmaf(2.0F, u.x, -top.x), fmaf(2.0F, u.y, -top.y));
      }
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
__device__ __forceinline__ void load_frame(const FusedArgs& args, unsigned base, unsigned lane, float scale,
                                           float2 (&a)[32]) {
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
__device__ __forceinline__ void transform_frame(float2 (&a)[32], const float2 (&twiddle)[32][32],
                                                float2 (&rows)[32][33], unsigned lane) {
  fft32(a);  // over n2: a[k2] for n1 = lane
#pragma unroll
  for (int k2 = 0; k2 < 32; ++k2) rows[lane][k2] = k2 == 0 ? a[0] : cmul(a[k2], twiddle[k2][lane]);
  __syncwarp();
#pragma unroll
  for (int n1 = 0; n1 < 32; ++n1) a[n1] = rows[n1][lane];
  __syncwarp();  // the next frame's stores wait until every lane has read this one
  fft32(a);      // over n1
}

// One warp per segment: up to kFramesPerWarp consecutive frames of one row. Segment s of row r
// (global frame numbers g = pending + f) covers g in [r·avg + s·F, min(r·avg + (s+1)·F, (r+1)·avg)),
// clipped to the batch's frames. Blocks stay resident and take segments in a grid-stride loop, so
// the block's twiddle table is built once per launch, not once per segment.
template <typename Sample>
__global__ void __launch_bounds__(kFusedWarps * 32)
    fused_kernel(FusedArgs args, unsigned segments_per_row, unsigned long long segments, float scale) {
  // Rows of 33 complex values: a store instruction (lanes 0..31 of one column) and a load (one
  // row) each touch every bank pair once per half-warp.
  __shared__ float2 transpose[kFusedWarps][32][33];
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
  for (unsigned long long segment = static_cast<unsigned long long>(blockIdx.x) * kFusedWarps + warp;
       segment < segments; segment += static_cast<unsigned long long>(gridDim.x) * kFusedWarps) {
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
      transform_frame(a, twiddle, transpose[warp], lane);  // a[k1] = X[lane + 32·k1]
#pragma unroll
      for (int k1 = 0; k1 < 32; ++k1) power[k1] += a[k1].x * a[k1].x + a[k1].y * a[k1].y;
    }
    float* sums = args.ring + ((args.row_base + row) % args.ring_rows) * kFusedSize;
#pragma unroll
    for (int k1 = 0; k1 < 32; ++k1) atomicAdd(sums + lane + 32U * k1, power[k1]);
  }
}

// The kernel's fence (Signal): the kernel's first thread writes the value of the fence that the
// kernels before it on the stream stand for. They have all ended, and everything a kernel writes is
// visible at device scope once it has ended, so no fence instruction is needed; a plain store to the
// mapped word suffices. (Signalling its own end would cost each kernel a device-scope fence and a
// counter add in every block, then a system-scope fence in the last.)
__device__ __forceinline__ void signal_start(const Signal& signal) {
  if (signal.word != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    *reinterpret_cast<volatile unsigned long long*>(signal.word) = signal.value;
  }
}

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

// ---- The complex path: two warps per frame, 1024 = 16 × 16 × 4 ---------------------------------
// The shape of cuFFT's own batched 1024-point kernel (64 threads per frame, 16 values each), with the conversion,
// window, scale and fftshift fused in. Thread t of a frame:
//   1. holds x[t + 64·m] (m < 16: each load instruction reads 64 consecutive samples), takes the
//      16-point DFT over m and multiplies by W1024^(t·k1): Y_t[k1];
//   2. through the shared row, thread t = k1 + 16·u takes Y_(u + 4·v)[k1] (v < 16) and the 16-point
//      DFT over v: B_(k1,u)[p];
//   3. through the shared row again, it takes B_(k1,w)[u + 4·i] for every w, multiplies by
//      W64^(w·(u + 4·i)) and takes the 4-point DFT over w for each i: X[k1 + 16·u + 64·i + 256·q]
//      lands in a[4·i + q].
// (X[k1 + 16·k2] = Σ_t W64^(t·k2) Y_t[k1]; with t = u + 4·v and k2 = p + 16·q that is
// Σ_w W4^(w·q) W64^(w·p) Σ_v W16^(v·p) Y_(w+4v)[k1].) The lanes of a warp hold 32 consecutive bins
// for every (i, q), so each store instruction writes 256 contiguous bytes.
// Twiddles come from registers: W1024^t and W1024^(4t) (step 1) and W64^(w·u) (step 3) are loaded
// once per thread, and the rest are products of them and of constants, which is faster than loading
// each from a table in the step that uses it. Registers are capped at 64 (16 blocks an SM), the
// fastest of the shapes tried (docs/PERFORMANCE.md).
constexpr unsigned kPairThreads = 64;
constexpr unsigned kPairBlocksPerSm = 16;
constexpr unsigned kPairRow = 16 * 65;  // step 1's rows of 64 plus one: step 2's column reads miss no bank twice

// W32^j for any j (a compile-time constant after unrolling), as a multiply by that constant.
template <int J>
__device__ __forceinline__ float2 times_w32(float2 z) {
  constexpr int j = J % 32;
  if constexpr (j == 0) return z;
  if constexpr (j == 8) return make_float2(z.y, -z.x);  // × -i
  if constexpr (j == 16) return make_float2(-z.x, -z.y);
  if constexpr (j == 24) return make_float2(-z.y, z.x);  // × i
  if constexpr (j < 16) return cmul(z, make_float2(kW32Re[j], kW32Im[j]));
  return cmul(z, make_float2(-kW32Re[j - 16], -kW32Im[j - 16]));
}

// In-place 16-point forward DFT of registers, natural order in and out: 4 × 4, with
// m = a + 4·b, k = c + 4·d: F[c + 4·d] = Σ_a W4^(a·d) · W16^(a·c) · Σ_b x[a + 4·b] W4^(b·c).
template <int A = 0>
__device__ __forceinline__ void fft16_columns(float2 (&x)[16], float2 (&y)[4][4]) {
  if constexpr (A < 4) {
    float2 v[4] = {x[A], x[A + 4], x[A + 8], x[A + 12]};
    dft4(v);
    y[A][0] = v[0];
    y[A][1] = times_w32<2 * A * 1>(v[1]);  // W16^(a·c) = W32^(2·a·c)
    y[A][2] = times_w32<2 * A * 2>(v[2]);
    y[A][3] = times_w32<2 * A * 3>(v[3]);
    fft16_columns<A + 1>(x, y);
  }
}
__device__ __forceinline__ void fft16(float2 (&x)[16]) {
  float2 y[4][4];
  fft16_columns(x, y);
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    float2 v[4] = {y[0][c], y[1][c], y[2][c], y[3][c]};
    dft4(v);
#pragma unroll
    for (int d = 0; d < 4; ++d) x[c + 4 * d] = v[d];
  }
}

// Step 3's factor W16^(w·i) for its compile-time w and i, after the thread's W64^(w·u).
template <int I>
__device__ __forceinline__ void step3_twiddles(float2 (&v)[4], const float2 (&w64)[3]) {
  v[1] = times_w32<2 * I>(cmul(v[1], w64[0]));
  v[2] = times_w32<4 * I>(cmul(v[2], w64[1]));
  v[3] = times_w32<6 * I>(cmul(v[3], w64[2]));
}

// The twiddles a thread keeps for every frame it transforms.
struct PairTwiddles {
  float2 w1;      // W1024^t
  float2 w4;      // W1024^(4t)
  float2 w64[3];  // W64^(w·u), w = 1, 2, 3
};

__device__ __forceinline__ PairTwiddles pair_twiddles(unsigned t) {
  const unsigned u = t / 16;
  return {g_w1024[t], g_w1024[4 * t], {g_w1024[16 * u], g_w1024[32 * u], g_w1024[48 * u]}};
}

// Loads frame `base` (batch position of its sample 0): a[m] = x[t + 64·m], converted and windowed.
template <typename Sample>
__device__ __forceinline__ void load_frame_pair(const FusedArgs& args, unsigned base, unsigned t, float scale,
                                                float2 (&a)[16]) {
  if (base >= args.raw_begin && base + kFusedSize <= args.raw_end) {
    const unsigned first = base - args.raw_begin;
#pragma unroll
    for (unsigned m = 0; m < 16; ++m) {
      const unsigned n = t + kPairThreads * m;
      const float2 value = read_sample<Sample>(args.raw, first + n);
      const float weight = args.window[n] * scale;
      a[m] = make_float2(value.x * weight, value.y * weight);
    }
    return;
  }
#pragma unroll
  for (unsigned m = 0; m < 16; ++m) a[m] = fused_sample<Sample>(args, base + t + kPairThreads * m, scale);
}

// Steps 1–3 above for one frame held by the block's 64 threads; `row` is the block's shared row.
// Starts with a barrier, so a loop may call it again at once.
__device__ __forceinline__ void transform_frame_pair(float2 (&a)[16], float2* row, unsigned t,
                                                     const PairTwiddles& twiddles) {
  fft16(a);  // over m: a[k1]
  {
    // W1024^(t·k1) = W1024^(4t·(k1 / 4)) · W1024^(t·(k1 mod 4)): two roundings more than a table.
    const float2 w2 = cmul(twiddles.w1, twiddles.w1);
    const float2 w3 = cmul(w2, twiddles.w1);
    const float2 w8 = cmul(twiddles.w4, twiddles.w4);
    const float2 w12 = cmul(w8, twiddles.w4);
    const float2 low[4] = {make_float2(1.0F, 0.0F), twiddles.w1, w2, w3};
    const float2 high[4] = {make_float2(1.0F, 0.0F), twiddles.w4, w8, w12};
#pragma unroll
    for (unsigned k1 = 1; k1 < 16; ++k1) {
      const float2 w = k1 / 4 == 0 ? low[k1 % 4] : k1 % 4 == 0 ? high[k1 / 4] : cmul(high[k1 / 4], low[k1 % 4]);
      a[k1] = cmul(a[k1], w);
    }
  }
  __syncthreads();  // the previous frame's last reads are done
#pragma unroll
  for (unsigned k1 = 0; k1 < 16; ++k1) row[k1 * 65 + t] = a[k1];
  __syncthreads();
  const unsigned k1 = t % 16;
  const unsigned u = t / 16;
#pragma unroll
  for (unsigned v = 0; v < 16; ++v) a[v] = row[k1 * 65 + u + 4 * v];
  fft16(a);  // over v: a[p]
  __syncthreads();
#pragma unroll
  for (unsigned p = 0; p < 16; ++p) row[p * kPairThreads + t] = a[p];  // B_(k1,u)[p] at p·64 + 16·u + k1
  __syncthreads();
#pragma unroll
  for (unsigned i = 0; i < 4; ++i) {
    float2 v[4];
#pragma unroll
    for (unsigned w = 0; w < 4; ++w) v[w] = row[(u + 4 * i) * kPairThreads + 16 * w + k1];
    // W64^(w·(u + 4·i)) = W64^(w·u) · W16^(w·i)
    if (i == 0) step3_twiddles<0>(v, twiddles.w64);
    if (i == 1) step3_twiddles<1>(v, twiddles.w64);
    if (i == 2) step3_twiddles<2>(v, twiddles.w64);
    if (i == 3) step3_twiddles<3>(v, twiddles.w64);
    dft4(v);  // over w: X[k1 + 16·(u + 4·i) + 256·q]
#pragma unroll
    for (unsigned q = 0; q < 4; ++q) a[4 * i + q] = v[q];
  }
}

// The fused complex path: frames [first, first + count) of the batch, one block of two warps per
// frame at a time (a grid-stride loop over frames), each written as one output row, scaled to
// amplitude and fftshifted on the store. One read of the input and one write of the output: the
// same memory traffic as a bare out-of-place cufftExecC2C.
template <typename Sample>
__global__ void __launch_bounds__(kPairThreads, kPairBlocksPerSm)
    pair_complex_kernel(FusedArgs args, unsigned first, unsigned count, float amplitude, float scale, float2* out,
                        Signal signal) {
  __shared__ float2 row[kPairRow];
  signal_start(signal);
  const unsigned t = threadIdx.x;  // also the bin k1 + 16·u
  const PairTwiddles twiddles = pair_twiddles(t);
  for (unsigned frame = blockIdx.x; frame < count; frame += gridDim.x) {
    float2 a[16];
    load_frame_pair<Sample>(args, (first + frame) * kFusedSize, t, scale, a);
    transform_frame_pair(a, row, t, twiddles);
    float2* target = out + static_cast<std::size_t>(frame) * kFusedSize;
#pragma unroll
    for (unsigned i = 0; i < 4; ++i) {
#pragma unroll
      for (unsigned q = 0; q < 4; ++q) {  // bin t + 64·i + 256·q, fftshifted: + 512
        target[t + 64 * i + 256 * ((q + 2) % 4)] = make_float2(a[4 * i + q].x * amplitude, a[4 * i + q].y * amplitude);
      }
    }
  }
}

// One thread per (row, bin) of the finished rows; reads the ring row, writes the output row, zeroes the ring row.
__global__ void finish_kernel(float* ring, unsigned ring_rows, unsigned size, unsigned long long first_row, float scale,
                              bool to_decibels, float* out, unsigned blocks_per_row) {
  const unsigned row = blockIdx.x / blocks_per_row;
  const unsigned k = (blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x;
  if (k >= size) return;
  float* sums = ring + ((first_row + row) % ring_rows) * size;
  const float power = sums[k] * scale;
  sums[k] = 0.0F;
  out[static_cast<std::size_t>(row) * size + (k + size / 2) % size] = to_decibels ? decibels(power) : power;
}

// Calls launch(Sample{}, scale) with the format's sample type and full-scale divisor (the same
// for every kernel that reads raw samples), then returns the launch's error.
template <typename Launch>
cudaError_t launch_for_format(SampleFormat format, Launch launch) {
  switch (format) {
    case SampleFormat::ci8:
      launch(char2{}, 1.0F / 128.0F);
      break;
    case SampleFormat::ci16:
      launch(short2{}, 1.0F / 32768.0F);
      break;
    case SampleFormat::cf32:
      launch(float2{}, 1.0F);
      break;
    case SampleFormat::rf32:
      return cudaErrorInvalidValue;  // refused at start: real samples have no I/Q pairs
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

// Grid-stride loops: a few waves over the device's multiprocessors (32 blocks of kThreads each) are
// enough for a memory-bound kernel.
cudaError_t blocks_for(std::size_t threads, unsigned& blocks) {
  unsigned sms = 0;
  if (cudaError_t error = per_device(g_sms, 132, sms); error != cudaSuccess) return error;
  blocks = static_cast<unsigned>(std::min<std::size_t>((threads + kThreads - 1) / kThreads, std::size_t{sms} * 32));
  return cudaSuccess;
}

}  // namespace

cudaError_t load(const std::byte* input, SampleFormat format, unsigned count, unsigned start, unsigned size,
                 const float* window, float2* batch, cudaStream_t stream) noexcept {
  unsigned blocks = 0;
  if (cudaError_t error = blocks_for(count, blocks); error != cudaSuccess) return error;
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
  if (cudaError_t error =
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_kernel<short2>, kFusedWarps * 32, 0);
      error != cudaSuccess) {
    return error;
  }
  int pair_per_sm = 0;
  if (cudaError_t error =
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pair_per_sm, pair_complex_kernel<short2>, kPairThreads, 0);
      error != cudaSuccess) {
    return error;
  }
  if (cudaError_t error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); error != cudaSuccess)
    return error;
  if (device >= 0 && device < 64) {
    g_fused_blocks[device] = static_cast<unsigned>(std::max(1, per_sm * sms));
    g_pair_blocks[device] = static_cast<unsigned>(std::max(1, pair_per_sm * sms));
    g_sms[device] = static_cast<unsigned>(std::max(1, sms));
    g_fused_ready[device] = true;
  }
  return cudaSuccess;
}

cudaError_t fused_power(const FusedArgs& arguments, cudaStream_t stream) noexcept {
  if (arguments.frames == 0) return cudaSuccess;
  FusedArgs args = arguments;
  if (args.frames_per_warp == 0) args.frames_per_warp = kFramesPerWarp;
  const unsigned long long rows =
      (static_cast<unsigned long long>(args.pending) + args.frames + args.average - 1) / args.average;
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
                          cudaStream_t stream, Signal signal) noexcept {
  if (count == 0) {  // no kernel would write the signal
    return signal.word == nullptr ? cudaSuccess : cudaErrorInvalidValue;
  }
  unsigned resident = 0;
  if (cudaError_t error = per_device(g_pair_blocks, 2048, resident); error != cudaSuccess) return error;
  const unsigned blocks = std::min(count, resident);
  return launch_for_format(args.format, [&](auto sample, float scale) {
    pair_complex_kernel<decltype(sample)>
        <<<blocks, kPairThreads, 0, stream>>>(args, first, count, amplitude_scale, scale, out, signal);
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
