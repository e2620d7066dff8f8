// `fft` transform: complex samples (ci8, ci16, cf32) in, spectra out — one row of `size`
// values per `size × average` input samples, fftshifted (DC at index size/2), as power in dB,
// linear power or complex bins. Rows are packed whole into chunks of the stage's own pool.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/gpu_stream.hpp"
#include "pipeline/stage.hpp"
#include "stages/fft/fft_backend.hpp"
#include "stages/fft/window.hpp"

namespace sluice {

struct FftSettings {
  std::size_t size = 1024;                // FFT length: samples per frame and values per output row
  WindowKind window = WindowKind::hann;   // applied to each frame before the transform
  std::size_t average = 1;                // consecutive frames averaged (in power) into one output row
  FftOutput output = FftOutput::power_db;
  FftBackendKind backend = FftBackendKind::automatic;  // auto: cuFFT when a GPU answers, else FFTW
  FftFusion fusion = FftFusion::automatic;             // cuFFT: LTO callbacks or kernels around the plan
  std::size_t threads = 1;                // FFTW: threads sharing each batch, the stage's own included
  std::vector<int> worker_cpus;           // FFTW: a core per worker (threads − 1), or empty: any core but the stage's
  PoolSettings pool;                      // the stage's output chunks
};

// Output chunk metadata convention (the spectrum stream's own index space):
//   first_sample = index of the chunk's first output value = first row index × size,
//   sample_count = values in the chunk = rows × size (a value is one float, or one complex for cf32),
//   timestamp    = time of the first input sample of the chunk's first row,
//   gaps         = output values of rows that contain lost input (whole rows: {row × size, rows × size}).
// Every absolute input sample index belongs to exactly one row: the input after the previous
// row's last sample up to this row's last sample. A row is marked when an input gap overlaps
// that range, so a gap that falls between rows (input that skips ahead) marks the row after it.
class FftStage final : public Stage {
 public:
  FftStage(SettingsReader& reader, const PipelineSettings& pipeline);
  ~FftStage() override;
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;
  [[nodiscard]] const FftSettings& settings() const { return settings_; }

 private:
  // What a row needs to know of a frame, worked out from the batch's segments where needed.
  struct FrameInfo {
    std::uint64_t first_sample = 0;  // absolute input index of the frame's first sample
    std::uint64_t end_sample = 0;    // absolute input index after its last sample
    Timestamp chunk_timestamp;       // of the input chunk its first sample came in
    std::uint64_t chunk_offset = 0;  // that sample's position in the chunk
    std::uint64_t created_ns = 0;    // of that chunk
  };
  // One run of input samples loaded into the batch from one chunk: noting one per load instead
  // of one per frame keeps the CPU's work per input chunk constant (a 64 MiB ci16 chunk is 16384
  // frames, and per-frame records were what bound the cuFFT path).
  struct Segment {
    std::uint64_t batch_start = 0;   // batch position (in samples) of the run's first sample
    std::uint64_t first_sample = 0;  // its absolute input index
    Timestamp chunk_timestamp;
    std::uint64_t chunk_offset = 0;  // its position in the chunk
    std::uint64_t created_ns = 0;
  };
  struct PendingGap {
    std::uint64_t first = 0;
    std::uint64_t end = 0;
  };
  static constexpr std::size_t kPendingGaps = 4 * Chunk::kMaxGaps;
  static constexpr std::size_t kInputsInFlight = 8;  // input chunks a GPU backend may still be reading

  void choose_backend(StageContext& context, std::size_t largest_input_bytes);
  // Where the backend reads the chunk's samples: the chunk, or the staging buffer they were copied
  // to on the stage's stream; null (the stage failed) on an error.
  const std::byte* stage_input(const Chunk& chunk) noexcept;
  // Copies the finished rows from the staging buffer into the output chunk; false (failed) on an error.
  bool copy_out(std::size_t bytes) noexcept;
  const std::byte* fail_gpu() noexcept;  // fails the stage with the stream's error; null
  void consume(const Chunk& chunk, const std::byte* samples) noexcept;  // sets failed_ on error
  bool flush_batch() noexcept;           // transform loaded frames, emit the rows they complete, carry a partial frame
  // Row metadata (time, gaps) for the row of frames `first`..`last` at position `index` of the output
  // chunk; false, changing nothing, when its gap does not fit the chunk's gap table.
  bool mark_row(const FrameInfo& first, const FrameInfo& last, std::size_t index) noexcept;
  void ensure_output() noexcept;         // an output chunk with room for one row
  void emit_output() noexcept;
  void hand_on(ChunkPtr finished) noexcept;  // to the dashboard's snapshot, then downstream
  // Hands on finished outputs and releases finished inputs; `all` waits for every one.
  void retire(bool all) noexcept;
  void retire_input(bool wait) noexcept;
  void wait_for(std::uint64_t fence) noexcept;  // backend_->wait(), its time counted as the stage's wait
  bool check_backend() noexcept;         // false (and fails the stage) once the backend reported an error
  void remember_gap(const Gap& gap) noexcept;
  [[nodiscard]] FrameInfo frame_info(std::size_t frame) const noexcept;
  // The greatest end sample of `rows` rows of `average` frames from frame `first` on: what marking
  // each of them without a gap would leave in owned_from_, in one pass over the segments.
  [[nodiscard]] std::uint64_t rows_end(std::size_t first, std::size_t rows) const noexcept;
  [[nodiscard]] const Segment& segment_at(std::uint64_t position) const noexcept;  // the segment holding a batch position
  [[nodiscard]] Timestamp timestamp_at(const Timestamp& chunk_timestamp, std::uint64_t offset) const noexcept;

  FftSettings settings_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  // The stage's stream (cuFFT's work, the staging copies, hand-offs downstream); before the backend,
  // which works on it, so that it outlives it.
  GpuStream gpu_;
  std::unique_ptr<FftBackend> backend_;
  // Input chunks not in the backend's memory are copied here first (host for FFTW, device for cuFFT),
  // and rows go here when the output pool is not in the backend's memory; allocated only when needed.
  MemoryRegion input_staging_;
  MemoryRegion output_staging_;
  // Chunks held until the backend's fence is reached: inputs it (or a staging copy) still reads,
  // host outputs it still writes. Device outputs go downstream at once with an event (hand_off).
  FenceRing inputs_in_flight_;
  FenceRing outputs_in_flight_;
  std::size_t row_bytes_ = 0;
  std::size_t rows_per_chunk_ = 0;
  double sample_rate_ = 0;

  // Framing: frames [0, loaded_) of the backend's batch are whole; frame loaded_ holds fill_ samples.
  std::size_t batch_frames_ = 0;
  std::vector<Segment> segments_;  // of the batch, in batch order; capacity reserved at start
  std::size_t loaded_ = 0;
  std::size_t fill_ = 0;
  std::size_t frames_in_row_ = 0;  // transformed frames already folded into the row being built
  FrameInfo row_first_frame_;
  bool started_input_ = false;
  std::uint64_t owned_from_ = 0;   // absolute input index where the next row's share of the input starts

  std::array<PendingGap, kPendingGaps> pending_{};
  std::size_t pending_count_ = 0;
  // A context change (a retune) on the input, not yet reached by a row; and the one the output
  // chunk being filled starts with.
  bool change_pending_ = false;
  std::uint64_t change_at_ = 0;  // input index of the first sample under the new context
  StreamContext change_context_{};
  bool out_context_change_ = false;
  StreamContext out_context_{};

  // Output in progress.
  ChunkPtr out_;
  std::size_t out_rows_ = 0;
  Timestamp out_timestamp_;
  std::uint64_t next_row_ = 0;
  std::uint64_t out_sequence_ = 0;

  NamedCounter* rows_counter_ = nullptr;
  NamedCounter* gap_rows_counter_ = nullptr;
  NamedCounter* not_complex_drops_ = nullptr;
  NamedCounter* tail_counter_ = nullptr;
  bool failed_ = false;  // a copy failed; the reason went to StageContext::fail()
};

void register_fft_stage(StageRegistry& registry);

}  // namespace sluice
