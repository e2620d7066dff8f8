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
  unsigned first;    // first frame of the fold
  unsigned pending;  // frames already in the row being built (in accumulator_in)
  unsigned rows;     // rows finished by this fold
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

// The fused path (1024-point power outputs; complex outputs below): one kernel reads the samples
// where they lie, converts and windows them, transforms each frame in registers (a 32 × 32
// four-step FFT, one warp per frame, the transpose through shared memory) and sums |X|² of a row's
// frames in registers, then adds the sums into a small ring of row sums; finish_rows turns finished
// rows into output rows.
constexpr unsigned kFusedSize = 1024;

struct FusedArgs {
  // Batch position p (frame · 1024 + n) reads
  //   p < raw_begin:            batch[p], already converted and windowed (a carried partial frame);
  //   raw_begin <= p < raw_end: sample p − raw_begin of `raw` in `format`, converted and windowed here.
  const float2* batch;
  const std::byte* raw;
  unsigned raw_begin;
  unsigned raw_end;
  SampleFormat format;
  const float* window;  // 1024 values
  // Frame f (< frames) belongs to row row_base + (pending + f) / average of the ring (ring_rows rows of
  // 1024 sums in natural bin order).
  float* ring;
  unsigned ring_rows;
  unsigned pending;
  unsigned average;
  unsigned frames;
  unsigned long long row_base;
  unsigned frames_per_warp;  // frames of one row a warp sums in registers before one add to the ring (0: default)
};

// Fills the fused FFT's twiddle tables (once per device; later calls return at once).
cudaError_t prepare_fused() noexcept;

// Transforms frames [0, args.frames) and adds their power into the ring. Returns the launch's error.
cudaError_t fused_power(const FusedArgs& args, cudaStream_t stream) noexcept;

// A fence the kernel itself writes: its first thread stores `value` into `word` (mapped host
// memory) when the kernel starts, that is once every kernel before it on the stream has ended and
// its writes are visible on the device; so `value` stands for the work enqueued before this
// kernel, not for this kernel. The stream needs no separate operation for it. word null: none.
struct Signal {
  unsigned long long* word = nullptr;
  unsigned long long value = 0;
};

// The fused complex path: frames [first, first + count) of the batch described by args (its ring,
// pending, average and row fields unused), each transformed and written as one output row of `out`:
// X · amplitude_scale, fftshifted. Two warps per frame, 16 values a thread (1024 = 16 × 16 × 4, the
// shape of cuFFT's own kernel). Writes `signal` when it starts. Returns the launch's error.
cudaError_t fused_complex(const FusedArgs& args, unsigned first, unsigned count, float amplitude_scale, float2* out,
                          cudaStream_t stream, Signal signal = {}) noexcept;

// Finishes `rows` rows of the ring from global row `first_row` on: sum × power_scale / average,
// fftshifted, in dB when `decibels`, into `out` (rf32 rows of `size`); zeroes each ring row after.
cudaError_t finish_rows(float* ring, unsigned ring_rows, unsigned size, unsigned long long first_row, unsigned rows,
                        float power_scale, unsigned average, bool decibels, float* out, cudaStream_t stream) noexcept;

// Converts `count` samples of `format` (device memory) to complex float, times the window value of
// their position and the format's full-scale divisor, into `batch` from position `start` on.
// Returns the launch's error (cudaGetLastError).
cudaError_t load(const std::byte* input, SampleFormat format, unsigned count, unsigned start, unsigned size,
                 const float* window, float2* batch, cudaStream_t stream) noexcept;

// Folds frames into `args.rows` finished rows (|X|², average, scale, fftshift, dB or complex) and,
// when `partial` is true, the frames after them into args.accumulator_out.
cudaError_t fold(const FoldArgs& args, bool partial, cudaStream_t stream) noexcept;

}  // namespace sluice::fft_kernels
