// The cuFFT backend's LTO callbacks (fft_callbacks.cu, compiled to LTO-IR and linked into the
// plan by cuFFT at plan time) and what they read: one Info in device memory per plan, rewritten
// in stream order before each transform. Shared by nvcc (the callbacks, the info kernel) and the
// host compiler (the backend); C++17.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace sluice::fft_callbacks {

constexpr int kFormatCi8 = 0;
constexpr int kFormatCi16 = 1;
constexpr int kFormatCf32 = 2;

struct Info {
  // Load: batch position p (frame · size + bin) reads
  //   p < raw_begin:            batch[p], already converted and windowed (a carried partial frame);
  //   raw_begin <= p < raw_end: sample p − raw_begin of `raw` in `format`, converted and windowed here;
  //   p >= raw_end:             zero (frames past the last whole one are transformed and ignored).
  const float2* batch;
  const void* raw;
  unsigned raw_begin;
  unsigned raw_end;
  const float* window;  // `size` values
  float scale;          // the format's full-scale divisor
  int format;           // kFormat*
  unsigned size;
  // Store (power outputs): |X|² of frame f (f < frames) is added to row
  //   row_base + (pending + f) / average   of the ring (ring_rows rows of `size` sums, natural bin order);
  // the fold kernel finishes rows out of the ring and zeroes them.
  float* ring;
  unsigned ring_rows;
  unsigned pending;
  unsigned average;
  unsigned frames;
  unsigned long long row_base;
};

// Symbol names of the callbacks in the fatbin.
inline constexpr const char* kLoadSymbol = "sluice_fft_load";
inline constexpr const char* kStorePowerSymbol = "sluice_fft_store_power";

// The LTO-IR fatbin (generated at build time from fft_callbacks.cu).
const unsigned char* fatbin() noexcept;
std::size_t fatbin_size() noexcept;

// Writes `info` to `device_info` in stream order (a one-thread kernel takes it by value, so no host
// buffer has to outlive the call). Returns the launch's error.
cudaError_t set_info(const Info& info, Info* device_info, cudaStream_t stream) noexcept;

// Finishes `rows` rows of the ring, from global row `first_row` on: the sum × power_scale / average,
// fftshifted (bin k at (k + size/2) mod size), in dB when `decibels`, into `out` (rf32 rows); each ring
// row is zeroed for its next use.
cudaError_t finish_rows(float* ring, unsigned ring_rows, unsigned size, unsigned long long first_row, unsigned rows,
                        float power_scale, unsigned average, bool decibels, float* out, cudaStream_t stream) noexcept;

}  // namespace sluice::fft_callbacks
