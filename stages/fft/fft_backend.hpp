// FftBackend: the engine behind the fft stage (FFTW or cuFFT), chosen once at start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/memory.hpp"
#include "stages/fft/window.hpp"

namespace sluice {

// The engine behind the fft stage, chosen once at start. The stage owns framing (carry of a
// partial frame, rows, averaging counts), metadata and gaps; a backend owns the numbers and
// the memory they live in: FFTW on the host, cuFFT on the GPU (on the stage's CUDA stream). Calls take
// whole spans (a load may cover many frames, a fold many rows) so that a GPU backend turns
// one input chunk into a handful of kernel launches, not one call per frame.

enum class FftOutput { power_db, power, complex };
enum class FftBackendKind { automatic, cufft, fftw };
// How the cuFFT backend does the work around the transform: `fused` is one kernel per batch that
// reads the samples where they lie, converts and windows them, transforms in registers and sums
// |X|² of a row's frames (1024-point power outputs only: its FFT is a 32 × 32 four-step in one
// warp); `kernels` runs a load kernel, cuFFT and a fold kernel; `automatic` takes fused where it
// applies and kernels elsewhere.
enum class FftFusion { automatic, fused, kernels };

struct FftBackendSpec {
  std::size_t size = 1024;  // FFT length
  WindowKind window = WindowKind::hann;
  FftOutput output = FftOutput::power_db;
  std::size_t batch_frames = 64;  // frames the batch holds (a backend may take fewer: batch_frames() says)
  std::size_t average = 1;        // frames per row (the stage's `average`); 1 lets a backend skip its accumulator
  int cuda_device = 0;            // GPU backends only
  void* stream = nullptr;         // GPU backends: the stage's CUDA stream to work on (null: a stream of its own)
  FftFusion fusion = FftFusion::automatic;  // cuFFT only
  std::size_t threads = 1;                  // FFTW only: threads sharing each batch (the caller's included)
  std::vector<int> worker_cpus;             // FFTW only: a core per extra thread (threads − 1), or empty
  int avoid_cpu = -1;  // FFTW only: with no worker_cpus, workers run anywhere but here (the stage's core)
};

// Output normalisation, shared by every backend: X[k] = sum_n w[n] x[n] e^(-2πi kn/N) is
// divided by N · coherent_gain(w), so a complex tone of amplitude A on a bin centre reads
// |X| = A (complex), A² (power) and 20·log10(A) dB (power_db): a full-scale tone is 0 dB.
// Broadband noise of power P reads P · ENBW / (N · gain²)-ish per bin, i.e. lower for longer FFTs.
//
// Pointers passed in (input samples, output rows) are in memory(): host for FFTW, device for
// cuFFT. A GPU backend only enqueues work: what it read or wrote is final once reached(fence())
// taken after the call is true; a host backend finishes every call before returning.
class FftBackend {
 public:
  virtual ~FftBackend() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual MemoryKind memory() const = 0;
  [[nodiscard]] virtual std::size_t batch_frames() const = 0;

  // Converts `count` samples of `format` at `input` to complex float (ci8 / 128, ci16 / 32768),
  // windows them and stores them in the batch from position `offset` of frame `frame` on; the span
  // may run over several frames (it must end inside the batch).
  virtual void load(std::size_t frame, std::size_t offset, const std::byte* input, SampleFormat format,
                    std::size_t count) noexcept = 0;
  // Transforms frames [0, frames) of the batch in place.
  virtual void transform(std::size_t frames) noexcept = 0;
  // Moves the first `count` loaded samples of frame `from` to frame 0: a partial frame carried into the next batch.
  virtual void carry(std::size_t from, std::size_t count) noexcept = 0;
  // Folds transformed frames [first, first + count) into rows, in order. The row being built
  // already holds `pending` frames from earlier folds (0: none). Each time it reaches `average`
  // frames it is finished (averaged, normalised, fftshifted so that DC sits at index size/2, rf32
  // or cf32) and written at `rows` + i · row bytes; frames after the last finished row stay in the
  // row being built. `rows` has room for (pending + count) / average rows (may be null when that is 0).
  virtual void fold(std::size_t first, std::size_t count, std::size_t pending, std::byte* rows) noexcept = 0;

  // Completion of enqueued work (GPU backends): a fence marks everything enqueued so far.
  virtual std::uint64_t fence() noexcept { return 0; }
  // The stage put work of its own (a copy) on the backend's stream: the next fence must cover it.
  virtual void note_stage_work() noexcept {}
  [[nodiscard]] virtual bool reached(std::uint64_t /*fence*/) noexcept { return true; }
  virtual void wait(std::uint64_t /*fence*/) noexcept {}
  // The first failed call (a GPU backend's calls are noexcept and cannot throw), or empty.
  [[nodiscard]] virtual std::string error() const { return {}; }
  // How the work is done (cuFFT: fused or kernels, and why; FFTW: the threads that share each
  // batch and their cores), for the stage's note and log line; empty where there is nothing to say
  // (FFTW on one thread).
  [[nodiscard]] virtual std::string work_note() const { return {}; }
};

// Throws std::runtime_error naming the failed FFTW call. Plans under a process-wide mutex.
std::unique_ptr<FftBackend> make_fftw_backend(const FftBackendSpec& spec);

// Throws std::runtime_error naming the failed CUDA or cuFFT call; plans once here. Builds
// without CUDA throw saying so (the stage checks cuda_available() first).
std::unique_ptr<FftBackend> make_cufft_backend(const FftBackendSpec& spec);

// The planner flag make_fftw_backend uses for this FFT length (FFTW_MEASURE where its
// planning stays fast, FFTW_ESTIMATE above), for the stream description and the benchmark.
unsigned fftw_planner_flags(std::size_t size);

}  // namespace sluice
