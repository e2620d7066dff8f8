// The cuFFT backend's callbacks, compiled to LTO-IR (never linked into the program as code):
// cuFFT links them into its own FFT kernel when the plan is made, so the type conversion and
// window happen as the FFT reads its input, and |X|² and the averaging as it writes its output.
// No separate pass over device memory is left for either.
#include <cufftXt.h>

#include "stages/fft/fft_callbacks.hpp"

using sluice::fft_callbacks::Info;

extern "C" __device__ cufftComplex sluice_fft_load(void* /*data*/, unsigned long long offset, void* caller_info,
                                                   void* /*shared*/) {
  const Info& info = *static_cast<const Info*>(caller_info);
  const auto position = static_cast<unsigned>(offset);
  if (position < info.raw_begin) return info.batch[position];
  if (position >= info.raw_end) return make_float2(0.0F, 0.0F);
  const unsigned index = position - info.raw_begin;
  float2 value;
  if (info.format == sluice::fft_callbacks::kFormatCi16) {
    const short2 sample = static_cast<const short2*>(info.raw)[index];
    value = make_float2(sample.x, sample.y);
  } else if (info.format == sluice::fft_callbacks::kFormatCf32) {
    value = static_cast<const float2*>(info.raw)[index];
  } else {
    const char2 sample = static_cast<const char2*>(info.raw)[index];
    value = make_float2(sample.x, sample.y);
  }
  const float weight = info.window[position % info.size] * info.scale;
  return make_float2(value.x * weight, value.y * weight);
}

extern "C" __device__ void sluice_fft_store_power(void* /*data*/, unsigned long long offset, cufftComplex element,
                                                  void* caller_info, void* /*shared*/) {
  const Info& info = *static_cast<const Info*>(caller_info);
  const auto position = static_cast<unsigned>(offset);
  const unsigned frame = position / info.size;
  if (frame >= info.frames) return;
  const unsigned bin = position - frame * info.size;
  const unsigned long long row = info.row_base + (info.pending + frame) / info.average;
  atomicAdd(info.ring + (row % info.ring_rows) * info.size + bin, element.x * element.x + element.y * element.y);
}
