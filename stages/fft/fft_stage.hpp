// `fft` transform: complex samples (ci8, ci16, cf32) in, spectra out — one row of `size`
// values per `size × average` input samples, fftshifted (DC at index size/2), as power in dB,
// linear power or complex bins. Rows are packed whole into chunks of the stage's own pool.
#pragma once

#include <cstdint>

#include "pipeline/stage.hpp"
#include "stages/fft/fft_engine.hpp"
#include "stages/fft/fft_settings.hpp"
#include "stages/fft/row_ledger.hpp"

namespace sluice {

// Output chunk metadata convention (the spectrum stream's own index space):
//   first_sample = index of the chunk's first output value = first row index × size,
//   sample_count = values in the chunk = rows × size (a value is one float, or one complex for cf32),
//   timestamp    = time of the first input sample of the chunk's first row,
//   gaps         = output values of rows that contain lost input (whole rows: {row × size, rows × size}).
// Which input a row stands for, and when a gap marks it, is RowLedger's (row_ledger.hpp); where
// and on what the numbers are computed is FftEngine's (fft_engine.hpp). The stage frames input
// into the backend's batch and packs rows into output chunks.
class FftStage final : public Stage {
 public:
  FftStage(SettingsReader& reader, const PipelineSettings& pipeline);
  ~FftStage() override;
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;
  [[nodiscard]] const FftSettings& settings() const { return settings_; }

 private:
  void describe_output(StageContext& context);  // the StreamInfo downstream sees, and the dashboard's spectrum
  StageStatus take(ChunkPtr chunk) noexcept;    // one input chunk
  void consume(const Chunk& chunk, const std::byte* samples) noexcept;  // sets failed_ on error
  bool flush_batch() noexcept;  // transform loaded frames, emit the rows they complete, carry a partial frame
  // Marks up to `room` rows from frame `frame` on into the output chunk; returns how many it took
  // (fewer where a row's gap or a retune must start the next chunk).
  std::size_t mark_rows(std::size_t frame, std::size_t room) noexcept;
  // Row metadata (gap, and for the chunk's first row its time) of the row `first`..`last` at
  // position `index` of the output chunk; false, changing nothing, when its gap does not fit.
  bool mark_row(const RowLedger::FrameInfo& first, const RowLedger::FrameInfo& last, std::size_t index) noexcept;
  void ensure_output() noexcept;  // an output chunk with room for one row
  void emit_output() noexcept;
  void hand_on(ChunkPtr finished) noexcept;  // to the dashboard's snapshot, then downstream
  // Hands on finished outputs and gives back inputs whose reads are done; `all` waits for every one.
  void retire(bool all) noexcept;
  [[nodiscard]] bool healthy() noexcept { return !failed_ && engine_.ok(); }

  FftSettings settings_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  FftEngine engine_;
  RowLedger ledger_;
  std::size_t row_bytes_ = 0;
  std::size_t rows_per_chunk_ = 0;

  // Framing: frames [0, loaded_) of the backend's batch are whole; frame loaded_ holds fill_ samples.
  std::size_t batch_frames_ = 0;
  std::size_t loaded_ = 0;
  std::size_t fill_ = 0;
  std::size_t frames_in_row_ = 0;  // transformed frames already folded into the row being built
  RowLedger::FrameInfo row_first_frame_;

  // Output in progress, and the context change (a retune) it starts with.
  ChunkPtr out_;
  std::size_t out_rows_ = 0;
  Timestamp out_timestamp_;
  std::uint64_t next_row_ = 0;
  std::uint64_t out_sequence_ = 0;
  bool out_context_change_ = false;
  StreamContext out_context_{};

  NamedCounter* rows_counter_ = nullptr;
  NamedCounter* gap_rows_counter_ = nullptr;
  NamedCounter* not_complex_drops_ = nullptr;
  NamedCounter* tail_counter_ = nullptr;
  bool failed_ = false;  // the stage failed; the reason went to StageContext::fail()
};

void register_fft_stage(StageRegistry& registry);

}  // namespace sluice
