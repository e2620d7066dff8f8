// The engine behind the fft stage, chosen once at start. The stage owns framing (carry of a
// partial frame, rows, averaging counts), metadata and gaps; a backend owns the numbers and
// the memory they live in: FFTW on the host now, cuFFT on the lane's CUDA stream later.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "pipeline/chunk.hpp"
#include "pipeline/memory.hpp"
#include "stages/fft/window.hpp"

namespace sluice {

enum class FftOutput { power_db, power, complex };

struct FftBackendSpec {
  std::size_t size = 1024;          // FFT length
  WindowKind window = WindowKind::hann;
  FftOutput output = FftOutput::power_db;
  std::size_t batch_frames = 64;    // frames loaded before one transform()
  std::size_t average = 1;          // frames per row (the stage's `average`); 1 lets a backend skip its accumulator
};

// Output normalisation, shared by every backend: X[k] = sum_n w[n] x[n] e^(-2πi kn/N) is
// divided by N · coherent_gain(w), so a complex tone of amplitude A on a bin centre reads
// |X| = A (complex), A² (power) and 20·log10(A) dB (power_db): a full-scale tone is 0 dB.
// Broadband noise of power P reads P · ENBW / (N · gain²)-ish per bin, i.e. lower for longer FFTs.
class FftBackend {
 public:
  virtual ~FftBackend() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Where load() can read input from and where write_row() writes (host for FFTW).
  [[nodiscard]] virtual MemoryKind memory() const = 0;
  [[nodiscard]] virtual std::size_t batch_frames() const = 0;

  // Converts `count` samples of `format` at `input` to complex float (ci8 / 128, ci16 / 32768),
  // windows them as positions [offset, offset + count) of a frame and stores them there in frame `frame`.
  virtual void load(std::size_t frame, std::size_t offset, const std::byte* input, SampleFormat format,
                    std::size_t count) noexcept = 0;
  // Transforms frames [0, frames) of the batch in place.
  virtual void transform(std::size_t frames) noexcept = 0;
  // Moves the first `count` loaded samples of frame `from` to frame 0: a partial frame carried into the next batch.
  virtual void carry(std::size_t from, std::size_t count) noexcept = 0;
  // Folds transformed frame `frame` into the row being built; the first frame of a row replaces what was there.
  virtual void accumulate(std::size_t frame, bool first_of_row) noexcept = 0;
  // Writes the finished row (averaged over the frames accumulated, normalised, fftshifted so that
  // DC sits at index size/2, in rf32 or cf32) at `row`.
  virtual void write_row(std::byte* row) noexcept = 0;
};

// Throws std::runtime_error naming the failed FFTW call. Plans under a process-wide mutex.
std::unique_ptr<FftBackend> make_fftw_backend(const FftBackendSpec& spec);

// The planner flag make_fftw_backend uses for this FFT length (FFTW_MEASURE where its
// planning stays fast, FFTW_ESTIMATE above), for the stream description and the benchmark.
unsigned fftw_planner_flags(std::size_t size);

}  // namespace sluice
