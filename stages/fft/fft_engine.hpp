// Where the fft stage's numbers are computed: the backend (cuFFT or FFTW) chosen at start, the
// stage's CUDA stream and events, the staging buffers for chunks in the other memory, and the
// chunks held until the work that reads or writes them has finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pipeline/gpu_stream.hpp"
#include "pipeline/stage.hpp"
#include "stages/fft/fft_backend.hpp"
#include "stages/fft/fft_settings.hpp"

namespace sluice {

class FftEngine {
 public:
  // Chooses the backend (logged and noted under the stage), then makes the stream, the staging
  // buffers and the rings for `output` and the lane's pools before it. Throws naming the failed call.
  void open(StageContext& context, const FftSettings& settings, Pool& output);
  [[nodiscard]] FftBackend& backend() { return *backend_; }
  [[nodiscard]] bool opened() const { return backend_ != nullptr; }

  // Where the backend reads `chunk`'s samples: the chunk, or the staging buffer they were copied
  // to; the backend's work on the stream is ordered after the producer's. Null after a failure.
  const std::byte* input(const Chunk& chunk) noexcept;
  // The backend has taken the chunk's samples: it goes back to its pool once their reads are done.
  void release_input(ChunkPtr chunk) noexcept;
  [[nodiscard]] bool holds_inputs() const noexcept { return !inputs_in_flight_.empty(); }
  // Gives back held inputs whose reads are done; with `wait`, the oldest one first in any case.
  void retire_inputs(bool wait) noexcept;

  // Where the backend writes the rows of output chunk `out`.
  [[nodiscard]] std::byte* rows(Chunk& out) noexcept;
  // The rows of `out` (`bytes` of them) are all folded: it goes downstream through take_output().
  // A device chunk goes at once, with an event its consumer's stream waits for; a host chunk once
  // the work that writes it is done, since the CPU reads it.
  void finish_output(ChunkPtr out, std::size_t bytes) noexcept;
  [[nodiscard]] bool holds_outputs() const noexcept { return !outputs_in_flight_.empty(); }
  // The oldest finished output that may go downstream, or null; with `wait`, waits for the oldest.
  ChunkPtr take_output(bool wait) noexcept;
  // The stream that orders work on the stage's device chunks (the dashboard's copy), or null.
  [[nodiscard]] void* stream() const noexcept { return gpu_.get(); }

  // False once the backend or the stream failed; the first time, the stage fails with the reason.
  bool ok() noexcept;
  // Everything enqueued has finished (stop()).
  void finish() noexcept;

 private:
  void choose_backend(StageContext& context, const FftSettings& settings, std::size_t largest_input_bytes);
  void open_cufft(StageContext& context, FftBackendSpec spec, std::size_t largest_input_bytes);
  void open_fftw(StageContext& context, const FftSettings& settings, const FftBackendSpec& spec);
  void open_staging(StageContext& context, Pool& output);
  bool copy_out(Chunk& out, std::size_t bytes) noexcept;
  void wait_for(std::uint64_t fence) noexcept;  // backend_->wait(), its time counted as the stage's wait
  std::nullptr_t fail(std::string reason) noexcept;

  StageContext* context_ = nullptr;
  // The stage's stream (cuFFT's work, the staging copies, hand-offs downstream); before the
  // backend, which works on it, so that it outlives it.
  GpuStream gpu_;
  std::unique_ptr<FftBackend> backend_;
  // Input chunks not in the backend's memory are copied here first (host for FFTW, device for cuFFT),
  // and rows go here when the output pool is not in the backend's memory; allocated only when needed.
  MemoryRegion input_staging_;
  MemoryRegion output_staging_;
  // Chunks held until the backend's fence is reached: inputs it (or a staging copy) still reads,
  // outputs it still writes (a device output handed on with an event is held with fence 0).
  FenceRing inputs_in_flight_;
  FenceRing outputs_in_flight_;
  bool failed_ = false;
};

}  // namespace sluice
