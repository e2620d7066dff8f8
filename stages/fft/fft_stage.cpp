// The fft stage: frames input samples into the backend's batch (a partial frame at the end of
// a chunk is carried into the next, so no sample is skipped), transforms whole batches, folds
// frames into rows and packs whole rows into output chunks with their metadata and gaps.
#include "stages/fft/fft_stage.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "pipeline/config.hpp"

namespace sluice {

FftStage::FftStage(SettingsReader& reader, const PipelineSettings& pipeline)
    : settings_(read_fft_settings(reader, pipeline)) {}

FftStage::~FftStage() = default;

void FftStage::start(StageContext& context) {
  context_ = &context;
  const SampleFormat input = context.stream.format;
  if (input != SampleFormat::ci8 && input != SampleFormat::ci16 && input != SampleFormat::cf32) {
    throw std::runtime_error("fft needs complex samples (ci8, ci16 or cf32); upstream sends " +
                             std::string(to_string(input)));
  }
  pool_ = &context.create_pool("spectra", settings_.pool.spec(context.cuda_device()));
  engine_.open(context, settings_, *pool_);
  ledger_.start(settings_.size, settings_.average, context.stream.sample_rate);
  row_bytes_ = settings_.size * output_value_bytes(settings_.output);
  rows_per_chunk_ = pool_->chunk_bytes() / row_bytes_;
  batch_frames_ = engine_.backend().batch_frames();
  rows_counter_ = &context.metrics().counter("rows");
  gap_rows_counter_ = &context.metrics().counter("rows_with_gaps");
  tail_counter_ = &context.metrics().counter("tail_samples_unused");
  not_complex_drops_ = &context.metrics().drop_counter("not_complex_samples");
  describe_output(context);
}

void FftStage::describe_output(StageContext& context) {
  const double sample_rate = context.stream.sample_rate;
  context.metrics().spectrum.configure(settings_.size,
                                       settings_.output == FftOutput::power_db ? SpectrumScale::decibels
                                       : settings_.output == FftOutput::power  ? SpectrumScale::linear_power
                                                                               : SpectrumScale::complex_bins,
                                       sample_rate, context.stream.center_frequency, settings_.average);
  const std::string upstream = context.stream.description;
  context.stream.format = settings_.output == FftOutput::complex ? SampleFormat::cf32 : SampleFormat::rf32;
  context.stream.fft_size = settings_.size;
  context.stream.window = std::string(to_string(settings_.window));
  context.stream.averaging = settings_.average;
  // One row of `size` values covers size × average input samples: the values run at
  // input rate / average, so a capture's duration, row times and replay pace match the input's.
  context.stream.sample_rate = sample_rate / static_cast<double>(settings_.average);
  context.stream.description = "spectra (" + std::string(to_string(settings_.output)) + ", " +
                               std::to_string(settings_.size) + "-point " + std::string(engine_.backend().name()) +
                               ", " + context.stream.window + " window, average " + std::to_string(settings_.average) +
                               "; rows fftshifted, DC at index size/2; one row per size×average input samples) of " +
                               upstream;
}

StageStatus FftStage::process() {
  retire(false);
  // While the GPU still reads input chunks, upstream may be waiting for exactly those to come back
  // to its pool: never sleep on an empty queue then, but hand the oldest back the moment the
  // backend is done with it (sleeping here idles the GPU between rounds of a small pool).
  ChunkPtr chunk =
      context_->input().pop(engine_.holds_inputs() ? std::chrono::microseconds(0) : std::chrono::microseconds(10'000));
  if (chunk) return take(std::move(chunk));
  if (engine_.holds_inputs()) {
    engine_.retire_inputs(true);
    return healthy() ? StageStatus::ok : StageStatus::error;
  }
  emit_output();  // the input paused: hand on the rows that are ready rather than hold them
  retire(true);
  if (!healthy()) return StageStatus::error;
  return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
}

StageStatus FftStage::take(ChunkPtr chunk) noexcept {
  if (chunk->format != SampleFormat::ci8 && chunk->format != SampleFormat::ci16 &&
      chunk->format != SampleFormat::cf32) {
    not_complex_drops_->add();
    return StageStatus::ok;
  }
  const std::byte* samples = engine_.input(*chunk);
  if (samples == nullptr) return StageStatus::error;
  consume(*chunk, samples);
  if (!healthy()) return StageStatus::error;
  engine_.release_input(std::move(chunk));
  return StageStatus::ok;
}

void FftStage::stop() noexcept {
  if (!engine_.opened()) return;
  emit_output();
  retire(true);
  engine_.finish();
  // A partial frame, or frames of an unfinished row, at the end of the stream make no row.
  tail_counter_->add(fill_ + (loaded_ + frames_in_row_) * settings_.size);
}

void FftStage::retire(bool all) noexcept {
  while (ChunkPtr done = engine_.take_output(all)) hand_on(std::move(done));
  engine_.retire_inputs(false);
  while (all && engine_.holds_inputs()) engine_.retire_inputs(true);
}

void FftStage::consume(const Chunk& chunk, const std::byte* samples) noexcept {
  const std::size_t sample_bytes = bytes_per_sample(chunk.format);
  const std::size_t count = chunk.size / sample_bytes;
  const std::size_t size = settings_.size;
  ledger_.note_chunk(chunk);
  std::size_t position = 0;
  while (position < count) {
    // As much as the batch holds in one load, noted as one segment.
    const std::size_t take = std::min((batch_frames_ - loaded_) * size - fill_, count - position);
    engine_.backend().load(loaded_, fill_, samples + position * sample_bytes, chunk.format, take);
    ledger_.note_load(chunk, position, loaded_ * size + fill_);
    const std::size_t filled = fill_ + take;
    loaded_ += filled / size;
    fill_ = filled % size;
    position += take;
    if (loaded_ == batch_frames_ && !flush_batch()) return;
  }
  // Transform now what this chunk completed, so spectra never wait for the next chunk.
  if (loaded_ > 0) flush_batch();
}

bool FftStage::flush_batch() noexcept {
  FftBackend& backend = engine_.backend();
  backend.transform(loaded_);
  const std::size_t average = settings_.average;
  std::size_t frame = 0;
  while (frame < loaded_) {
    const std::size_t completing = (frames_in_row_ + loaded_ - frame) / average;
    if (completing == 0) {  // the rest only starts or extends the row being built
      if (frames_in_row_ == 0) row_first_frame_ = ledger_.frame_info(frame);
      backend.fold(frame, loaded_ - frame, frames_in_row_, nullptr);
      frames_in_row_ += loaded_ - frame;
      break;
    }
    ensure_output();
    const std::size_t room = std::min(completing, rows_per_chunk_ - out_rows_);
    const std::size_t rows = mark_rows(frame, room);
    if (rows > 0) {
      const std::size_t frames = rows * average - frames_in_row_;
      backend.fold(frame, frames, frames_in_row_, engine_.rows(*out_) + out_rows_ * row_bytes_);
      frame += frames;
      frames_in_row_ = 0;
      out_rows_ += rows;
      next_row_ += rows;
      rows_counter_->add(rows);
    }
    if (rows < room || out_rows_ == rows_per_chunk_) {
      emit_output();  // full, or its gap table is
      if (failed_) return false;
    }
  }
  ledger_.keep_carried(loaded_, fill_);
  if (fill_ > 0) backend.carry(loaded_, fill_);
  loaded_ = 0;
  return true;
}

std::size_t FftStage::mark_rows(std::size_t frame, std::size_t room) noexcept {
  const std::size_t average = settings_.average;
  std::size_t rows = 0;
  for (std::size_t next = frame; rows < room; ++rows) {
    if (rows > 0 && ledger_.quiet()) {
      // No gap is pending, and none arrives while this loop runs: the rest of the rows are taken
      // in one pass (a row per frame made this loop the stage's bound with complex output).
      ledger_.pass_rows(next, room - rows);
      return room;
    }
    const std::size_t in_row = rows == 0 ? frames_in_row_ : 0;
    const RowLedger::FrameInfo first = in_row > 0 ? row_first_frame_ : ledger_.frame_info(next);
    if (ledger_.change_reached(first.first_sample)) {
      // The first row wholly from input under the sender's new context: it starts an output
      // chunk of its own, which carries the change (rows that straddle it stay with the old).
      if (out_rows_ + rows > 0) return rows;
      out_context_change_ = true;
      out_context_ = ledger_.take_change();
      out_context_.sample_rate = StreamContext::kAbsent;  // the input's rate, not the spectra's
    }
    const std::size_t last = next + average - in_row - 1;
    if (!mark_row(first, ledger_.frame_info(last), out_rows_ + rows)) return rows;  // its gap starts the next chunk
    next = last + 1;
  }
  return rows;
}

bool FftStage::mark_row(const RowLedger::FrameInfo& first, const RowLedger::FrameInfo& last,
                        std::size_t index) noexcept {
  const std::uint64_t first_value = (next_row_ + index - out_rows_) * settings_.size;
  bool marked = false;
  if (!ledger_.mark_row(last, *out_, first_value, marked)) return false;
  if (marked) gap_rows_counter_->add();
  if (index == 0) {
    out_timestamp_ = ledger_.time_of(first);
    out_->created_ns = first.created_ns;  // latency from the source chunk that began this row
  }
  return true;
}

void FftStage::ensure_output() noexcept {
  // Downstream always drains (even after failing), so a chunk comes back; waiting is backpressure.
  // Outputs of ours still being computed come back only through us: finish the oldest first.
  while (!out_) {
    out_ = context_->acquire(*pool_, std::chrono::microseconds(0));
    if (out_) break;
    if (engine_.holds_outputs()) {
      hand_on(engine_.take_output(true));
      continue;
    }
    out_ = context_->acquire(*pool_, std::chrono::milliseconds(100));
  }
}

void FftStage::hand_on(ChunkPtr finished) noexcept {
  // The dashboard's live spectrum: offer() copies about one row ten times a second and never
  // waits for a lock; rows in GPU memory are copied on the stage's stream, after the work that writes them.
  const std::size_t rows = row_bytes_ == 0 ? 0 : finished->size / row_bytes_;
  void* stream = finished->memory == MemoryKind::device ? engine_.stream() : nullptr;
  context_->metrics().spectrum.offer(finished->data, rows, row_bytes_, finished->memory, stream);
  context_->emit(std::move(finished));
}

void FftStage::emit_output() noexcept {
  if (!out_ || out_rows_ == 0) return;
  out_->size = out_rows_ * row_bytes_;
  out_->format = settings_.output == FftOutput::complex ? SampleFormat::cf32 : SampleFormat::rf32;
  out_->lane = context_->lane_index();
  out_->sequence = out_sequence_++;
  out_->first_sample = (next_row_ - out_rows_) * settings_.size;
  out_->sample_count = out_rows_ * settings_.size;
  out_->timestamp = out_timestamp_;
  out_->packets = 0;
  out_->context_change = out_context_change_;
  out_->context = out_context_change_ ? out_context_ : StreamContext{};
  out_context_change_ = false;
  out_rows_ = 0;
  const std::size_t bytes = out_->size;
  engine_.finish_output(std::move(out_), bytes);
  failed_ = failed_ || !engine_.ok();
  retire(false);
}

void register_fft_stage(StageRegistry& registry) {
  registry.add(StageType{"fft", StageRole::transform,
                         "spectra of complex samples (cuFFT on a GPU, else FFTW): power in dB, linear power or complex "
                         "bins, fftshifted rows",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<FftStage>(reader, pipeline);
                         }});
}

}  // namespace sluice
