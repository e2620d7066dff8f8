// The fft stage: frames input samples into the backend's batch (a partial frame at the end of
// a chunk is carried into the next, so no sample is skipped), transforms whole batches, folds
// frames into rows and packs whole rows into output chunks with their metadata and gaps.
#include "stages/fft/fft_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "pipeline/config.hpp"

namespace sluice {
namespace {

std::string_view to_string(FftOutput output) {
  switch (output) {
    case FftOutput::power_db: return "power_db";
    case FftOutput::power: return "power";
    case FftOutput::complex: return "complex";
  }
  return "?";
}

std::size_t output_value_bytes(FftOutput output) { return output == FftOutput::complex ? 8 : 4; }

}  // namespace

FftStage::FftStage(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.size = static_cast<std::size_t>(
      reader.integer("size", 1024, "FFT length: input samples per frame and values per output row", 2, 1 << 20));
  settings_.window = reader.choice("window", WindowKind::hann, "window applied to each frame (its coherent gain is divided out)",
                                   {{"none", WindowKind::none},
                                    {"hann", WindowKind::hann},
                                    {"hamming", WindowKind::hamming},
                                    {"blackman", WindowKind::blackman}});
  settings_.average = static_cast<std::size_t>(
      reader.integer("average", 1, "consecutive spectra averaged (in power) into one output row", 1, 1 << 20));
  settings_.output = reader.choice("output", FftOutput::power_db,
                                   "power_db (rf32, 10·log10 power; a full-scale tone reads 0 dB), power (rf32, linear) "
                                   "or complex (cf32 bins scaled by 1/(size·window gain); no averaging)",
                                   {{"power_db", FftOutput::power_db}, {"power", FftOutput::power}, {"complex", FftOutput::complex}});
  settings_.pool = read_pool_settings(reader, pipeline);
  if (settings_.output == FftOutput::complex && settings_.average > 1) {
    reader.error("average", "average: " + std::to_string(settings_.average) +
                                " is impossible with output: complex (complex bins of different frames cannot be averaged)",
                 "use output: power or power_db to average, or average: 1");
  }
  const std::uint64_t row_bytes = settings_.size * output_value_bytes(settings_.output);
  if (settings_.pool.chunk_bytes < row_bytes) {
    reader.error("chunk", "chunk of " + std::to_string(settings_.pool.chunk_bytes) + " bytes cannot hold one spectrum row of " +
                              std::to_string(row_bytes) + " bytes",
                 "set chunk: on the fft stage to at least " + std::to_string(row_bytes) + " bytes");
  }
}

FftStage::~FftStage() = default;

void FftStage::start(StageContext& context) {
  context_ = &context;
  const SampleFormat input = context.stream.format;
  if (input != SampleFormat::ci8 && input != SampleFormat::ci16 && input != SampleFormat::cf32) {
    throw std::runtime_error("fft needs complex samples (ci8, ci16 or cf32); upstream sends " + std::string(to_string(input)));
  }
  sample_rate_ = context.stream.sample_rate;

  // Input chunks in device memory are copied to the host before FFTW reads them; size the copy
  // for the largest upstream chunk (the pools so far are all upstream's).
  std::size_t device_input_bytes = 0;
  for (Pool* pool : context.lane_pools()) {
    if (pool->memory() == MemoryKind::device) device_input_bytes = std::max(device_input_bytes, pool->chunk_bytes());
  }
  pool_ = &context.create_pool("spectra", settings_.pool.spec(context.pipeline().cuda_device));

  backend_ = make_fftw_backend(FftBackendSpec{settings_.size, settings_.window, settings_.output, 64, settings_.average});
  if (device_input_bytes > 0 && backend_->memory() != MemoryKind::device) {
    input_staging_ = MemoryRegion(MemoryKind::host, device_input_bytes);
  }
  if (pool_->memory() == MemoryKind::device && backend_->memory() != MemoryKind::device) {
    output_staging_ = MemoryRegion(MemoryKind::host, pool_->chunk_bytes());
  }
  if (input_staging_.size() > 0 || output_staging_.size() > 0) context.cuda_stream();  // create it now, not on the hot path

  row_bytes_ = settings_.size * output_value_bytes(settings_.output);
  rows_per_chunk_ = pool_->chunk_bytes() / row_bytes_;
  frames_.assign(backend_->batch_frames(), FrameInfo{});

  rows_counter_ = &context.metrics().counter("rows");
  gap_rows_counter_ = &context.metrics().counter("rows_with_gaps");
  tail_counter_ = &context.metrics().counter("tail_samples_unused");
  not_complex_drops_ = &context.metrics().drop_counter("not_complex_samples");
  context.metrics().spectrum.configure(settings_.size,
                                       settings_.output == FftOutput::power_db ? SpectrumScale::decibels
                                       : settings_.output == FftOutput::power  ? SpectrumScale::linear_power
                                                                               : SpectrumScale::complex_bins,
                                       sample_rate_, context.stream.center_frequency, settings_.average);

  const std::string upstream = context.stream.description;
  context.stream.format = settings_.output == FftOutput::complex ? SampleFormat::cf32 : SampleFormat::rf32;
  context.stream.fft_size = settings_.size;
  context.stream.window = std::string(to_string(settings_.window));
  context.stream.averaging = settings_.average;
  // sample_rate stays the input's: one row covers size × average input samples.
  context.stream.description = "spectra (" + std::string(to_string(settings_.output)) + ", " +
                               std::to_string(settings_.size) + "-point " + std::string(backend_->name()) + ", " +
                               context.stream.window + " window, average " + std::to_string(settings_.average) +
                               "; rows fftshifted, DC at index size/2; one row per size×average input samples) of " +
                               upstream;
}

StageStatus FftStage::process() {
  ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
  if (!chunk) {
    emit_output();  // the input paused: hand on the rows that are ready rather than hold them
    if (failed_) return StageStatus::error;
    return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
  }
  if (chunk->format != SampleFormat::ci8 && chunk->format != SampleFormat::ci16 && chunk->format != SampleFormat::cf32) {
    not_complex_drops_->add();
    return StageStatus::ok;
  }
  const std::byte* samples = chunk->data;
  if (chunk->memory == MemoryKind::device) {
    if (chunk->size > input_staging_.size()) {
      context_->fail("device chunk of " + std::to_string(chunk->size) + " bytes exceeds the host staging buffer");
      return StageStatus::error;
    }
    if (std::string error = copy_memory(input_staging_.data(), MemoryKind::host, chunk->data, chunk->memory, chunk->size,
                                        context_->cuda_stream());
        !error.empty()) {
      context_->fail(error);
      return StageStatus::error;
    }
    samples = input_staging_.data();
  }
  consume(*chunk, samples);
  return failed_ ? StageStatus::error : StageStatus::ok;
}

void FftStage::stop() noexcept {
  if (!backend_) return;
  emit_output();
  // A partial frame, or frames of an unfinished row, at the end of the stream make no row.
  tail_counter_->add(fill_ + (loaded_ + frames_in_row_) * settings_.size);
}

void FftStage::consume(const Chunk& chunk, const std::byte* samples) noexcept {
  const std::size_t sample_bytes = bytes_per_sample(chunk.format);
  const std::size_t count = chunk.size / sample_bytes;
  if (!started_input_) {
    owned_from_ = chunk.first_sample;
    started_input_ = true;
  }
  for (std::uint32_t i = 0; i < chunk.gap_count; ++i) remember_gap(chunk.gaps[i]);

  std::size_t position = 0;
  while (position < count) {
    FrameInfo& frame = frames_[loaded_];
    if (fill_ == 0) {
      frame.first_sample = chunk.first_sample + position;
      frame.timestamp = timestamp_at(chunk, position);
      frame.created_ns = chunk.created_ns;
    }
    const std::size_t take = std::min(settings_.size - fill_, count - position);
    backend_->load(loaded_, fill_, samples + position * sample_bytes, chunk.format, take);
    fill_ += take;
    position += take;
    frame.end_sample = chunk.first_sample + position;
    if (fill_ == settings_.size) {
      fill_ = 0;
      if (++loaded_ == frames_.size() && !flush_batch()) return;
    }
  }
  // Transform now what this chunk completed, so spectra never wait for the next chunk.
  if (loaded_ > 0) flush_batch();
}

bool FftStage::flush_batch() noexcept {
  backend_->transform(loaded_);
  for (std::size_t frame = 0; frame < loaded_; ++frame) {
    const bool first_of_row = frames_in_row_ == 0;
    if (first_of_row) row_first_frame_ = frames_[frame];
    backend_->accumulate(frame, first_of_row);
    if (++frames_in_row_ == settings_.average) {
      frames_in_row_ = 0;
      if (!finish_row(frames_[frame])) return false;
    }
  }
  if (fill_ > 0) {
    backend_->carry(loaded_, fill_);
    frames_[0] = frames_[loaded_];
  }
  loaded_ = 0;
  return true;
}

bool FftStage::finish_row(const FrameInfo& last_frame) noexcept {
  ensure_output();
  // This row owns the input from the previous row's end to its own last sample.
  const std::uint64_t row_end = std::max(last_frame.end_sample, owned_from_);
  bool lost_input = false;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_count_; ++i) {
    const PendingGap gap = pending_[i];
    // A gap reported after the rows it overlaps were made (late) marks the next row: never forgotten.
    if (gap.end <= owned_from_ || (gap.first < row_end && gap.end > owned_from_)) lost_input = true;
    if (gap.end > row_end) pending_[kept++] = gap;
  }
  pending_count_ = kept;
  owned_from_ = row_end;

  if (lost_input) {
    const std::uint64_t first_value = next_row_ * settings_.size;
    Gap* last = out_->gap_count > 0 ? &out_->gaps[out_->gap_count - 1] : nullptr;
    if (last != nullptr && last->first_sample + last->length == first_value) {
      last->length += settings_.size;
    } else if (!out_->add_gap(first_value, settings_.size)) {
      emit_output();  // the gap table is full: this row starts the next chunk, which records its gap
      if (failed_) return false;
      ensure_output();
      out_->add_gap(first_value, settings_.size);
    }
    gap_rows_counter_->add();
  }
  if (out_rows_ == 0) {
    out_timestamp_ = row_first_frame_.timestamp;
    out_->created_ns = row_first_frame_.created_ns;  // latency from the source chunk that began this row
  }
  std::byte* rows = output_staging_.size() > 0 ? output_staging_.data() : out_->data;
  backend_->write_row(rows + out_rows_ * row_bytes_);
  // The dashboard's live spectrum: copies a row about ten times a second, never waits.
  const MemoryKind row_memory = output_staging_.size() > 0 ? MemoryKind::host : out_->memory;
  context_->metrics().spectrum.offer(rows + out_rows_ * row_bytes_, row_memory,
                                     row_memory == MemoryKind::device ? context_->cuda_stream() : nullptr);
  ++out_rows_;
  ++next_row_;
  rows_counter_->add();
  if (out_rows_ == rows_per_chunk_) emit_output();
  return !failed_;
}

void FftStage::ensure_output() noexcept {
  // Downstream always drains (even after failing), so a chunk comes back; waiting is backpressure.
  while (!out_) out_ = context_->acquire(*pool_, std::chrono::milliseconds(100));
}

void FftStage::emit_output() noexcept {
  if (!out_ || out_rows_ == 0) return;
  const std::size_t bytes = out_rows_ * row_bytes_;
  if (output_staging_.size() > 0) {
    if (std::string error = copy_memory(out_->data, out_->memory, output_staging_.data(), MemoryKind::host, bytes,
                                        context_->cuda_stream());
        !error.empty()) {
      context_->fail(error);
      failed_ = true;
      return;
    }
  }
  out_->size = bytes;
  out_->format = settings_.output == FftOutput::complex ? SampleFormat::cf32 : SampleFormat::rf32;
  out_->lane = context_->lane_index();
  out_->sequence = out_sequence_++;
  out_->first_sample = (next_row_ - out_rows_) * settings_.size;
  out_->sample_count = out_rows_ * settings_.size;
  out_->timestamp = out_timestamp_;
  out_->packets = 0;
  out_rows_ = 0;
  context_->emit(std::move(out_));
}

void FftStage::remember_gap(const Gap& gap) noexcept {
  if (gap.length == 0) return;
  const PendingGap pending{gap.first_sample, gap.first_sample + gap.length};
  if (pending_count_ == kPendingGaps) {
    // Full: widen the last entry to cover this one too; rows between them get marked as well,
    // which overstates the loss but never hides it.
    PendingGap& last = pending_[kPendingGaps - 1];
    last.first = std::min(last.first, pending.first);
    last.end = std::max(last.end, pending.end);
    return;
  }
  pending_[pending_count_++] = pending;
}

Timestamp FftStage::timestamp_at(const Chunk& chunk, std::size_t offset) const noexcept {
  if (!chunk.timestamp.valid) return {};
  if (offset == 0) return chunk.timestamp;
  if (sample_rate_ <= 0) return {};
  constexpr std::uint64_t kPicosecondsPerSecond = 1'000'000'000'000ULL;
  const long double seconds = static_cast<long double>(offset) / static_cast<long double>(sample_rate_);
  const auto whole = static_cast<std::uint64_t>(seconds);
  const std::uint64_t picoseconds =
      chunk.timestamp.picoseconds + static_cast<std::uint64_t>(std::llround((seconds - static_cast<long double>(whole)) * 1e12L));
  return Timestamp{chunk.timestamp.seconds + whole + picoseconds / kPicosecondsPerSecond, picoseconds % kPicosecondsPerSecond,
                   true};
}

void register_fft_stage(StageRegistry& registry) {
  registry.add(StageType{"fft", StageRole::transform,
                         "spectra of complex samples (FFTW): power in dB, linear power or complex bins, fftshifted rows",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<FftStage>(reader, pipeline);
                         }});
}

}  // namespace sluice
