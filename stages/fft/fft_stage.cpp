// The fft stage: frames input samples into the backend's batch (a partial frame at the end of
// a chunk is carried into the next, so no sample is skipped), transforms whole batches, folds
// frames into rows and packs whole rows into output chunks with their metadata and gaps.
#include "stages/fft/fft_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "pipeline/config.hpp"
#include "stages/fft/worker_team.hpp"

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
  settings_.backend = reader.choice("backend", FftBackendKind::automatic,
                                    "auto (cuFFT when a GPU answers, else FFTW; logged and noted), cufft or fftw",
                                    {{"auto", FftBackendKind::automatic}, {"cufft", FftBackendKind::cufft}, {"fftw", FftBackendKind::fftw}});
  settings_.fusion = reader.choice("fusion", FftFusion::automatic,
                                   "cuFFT backend only: fused (one pass: conversion, window, 1024-point FFT, then |X|² and "
                                   "averaging, or scale and fftshift for complex, in one kernel; size 1024), kernels (a load kernel, "
                                   "cuFFT and a fold kernel) or auto (fused where it applies, else kernels)",
                                   {{"auto", FftFusion::automatic}, {"fused", FftFusion::fused}, {"kernels", FftFusion::kernels}});
  if (settings_.fusion != FftFusion::automatic && settings_.backend == FftBackendKind::fftw) {
    reader.error("fusion", "fusion applies to the cuFFT backend only; backend: fftw fuses its own loops",
                 "remove fusion:, or use backend: cufft or auto");
  }
  if (settings_.fusion == FftFusion::fused && settings_.size != 1024) {
    reader.error("fusion", "fusion: fused transforms 1024-point frames only",
                 "use size: 1024, or fusion: kernels or auto");
  }
  settings_.threads = static_cast<std::size_t>(reader.integer(
      "threads", 1,
      "FFTW only: threads sharing each batch's work (conversion and window, transform, |X|², averaging and dB), "
      "the stage's own thread included; the others are workers the stage starts",
      1, static_cast<std::int64_t>(WorkerTeam::kMaxThreads)));
  const std::vector<double> worker_cpus = reader.numbers(
      "worker_cpus", {},
      "FFTW with threads > 1: the core of each worker (threads − 1 of them; the stage's own thread is pinned by cpu:); "
      "empty: workers run on any core but the stage's cpu");
  for (const double cpu : worker_cpus) {
    if (cpu < 0 || cpu > 4095 || cpu != std::floor(cpu)) {
      reader.error("worker_cpus", fmt::format("worker_cpus: {} is not a core number", cpu), "use whole numbers 0 … 4095");
    } else if (std::find(settings_.worker_cpus.begin(), settings_.worker_cpus.end(), static_cast<int>(cpu)) !=
               settings_.worker_cpus.end()) {
      reader.error("worker_cpus", "worker_cpus names core " + std::to_string(static_cast<int>(cpu)) + " twice",
                   "give each worker its own core");
    } else {
      settings_.worker_cpus.push_back(static_cast<int>(cpu));
    }
  }
  if (reader.has("threads") && settings_.backend == FftBackendKind::cufft) {
    reader.error("threads", "threads applies to the FFTW backend only; cuFFT runs the whole batch on the GPU",
                 "remove threads:, or use backend: fftw");
  }
  if (!worker_cpus.empty() && worker_cpus.size() != settings_.threads - 1) {
    reader.error("worker_cpus",
                 "worker_cpus names " + std::to_string(worker_cpus.size()) + " cores, and threads: " +
                     std::to_string(settings_.threads) + " starts " + std::to_string(settings_.threads - 1) + " workers",
                 settings_.threads == 1 ? "set threads: to one more than the cores listed, or remove worker_cpus:"
                                        : "list one core per worker (the stage's own thread, pinned by cpu:, is the first of the threads)");
  }
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

  std::size_t largest_input_bytes = 0;
  for (Pool* pool : context.lane_pools()) largest_input_bytes = std::max(largest_input_bytes, pool->chunk_bytes());
  pool_ = &context.create_pool("spectra", settings_.pool.spec(context.cuda_device()));
  choose_backend(context, largest_input_bytes);

  // Inputs or outputs not in the backend's memory go through a staging buffer (one copy each way).
  const MemoryKind engine = backend_->memory();
  const auto foreign = [engine](MemoryKind kind) { return (kind == MemoryKind::device) != (engine == MemoryKind::device); };
  std::size_t foreign_input_bytes = 0;
  for (Pool* pool : context.lane_pools()) {
    if (pool != pool_ && foreign(pool->memory())) foreign_input_bytes = std::max(foreign_input_bytes, pool->chunk_bytes());
  }
  const int device = context.cuda_device();
  if (foreign_input_bytes > 0) input_staging_ = MemoryRegion(engine, foreign_input_bytes, device);
  if (foreign(pool_->memory())) output_staging_ = MemoryRegion(engine, pool_->chunk_bytes(), device);
  // Every host buffer that one of those copies touches is page-locked (no-op for device and pinned slabs).
  if (input_staging_.size() > 0 || output_staging_.size() > 0) {
    for (Pool* pool : context.lane_pools()) {
      if (foreign(pool->memory())) pool->region().pin_for_device();
    }
    input_staging_.pin_for_device();
    output_staging_.pin_for_device();
  }
  if (input_staging_.size() > 0 || output_staging_.size() > 0) context.cuda_stream();  // create it now, not on the hot path
  // Inputs held while the backend reads them: a few, and never more than half an upstream pool,
  // so the producer always has chunks to fill.
  std::size_t in_flight = kInputsInFlight;
  for (Pool* pool : context.lane_pools()) {
    if (pool != pool_) in_flight = std::min(in_flight, std::max<std::size_t>(1, pool->chunk_count() / 2));
  }
  inputs_in_flight_.reserve(in_flight);
  outputs_in_flight_.reserve(pool_->chunk_count());

  row_bytes_ = settings_.size * output_value_bytes(settings_.output);
  rows_per_chunk_ = pool_->chunk_bytes() / row_bytes_;
  batch_frames_ = backend_->batch_frames();
  // Segments between two flushes: every chunk that completes a frame is flushed at its end, so the
  // others (and the carried partial frame) hold fewer than `size` samples, at least one each, plus
  // the loads of the chunk that completes frames: at most size + 2.
  segments_.reserve(settings_.size + 2);

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
  // One row of `size` values covers size × average input samples: the values run at
  // input rate / average, so a capture's duration, row times and replay pace match the input's.
  context.stream.sample_rate = sample_rate_ / static_cast<double>(settings_.average);
  context.stream.description = "spectra (" + std::string(to_string(settings_.output)) + ", " +
                               std::to_string(settings_.size) + "-point " + std::string(backend_->name()) + ", " +
                               context.stream.window + " window, average " + std::to_string(settings_.average) +
                               "; rows fftshifted, DC at index size/2; one row per size×average input samples) of " +
                               upstream;
}

void FftStage::choose_backend(StageContext& context, std::size_t largest_input_bytes) {
  FftBackendKind kind = settings_.backend;
  if (kind == FftBackendKind::automatic) {
    kind = cuda_available() ? FftBackendKind::cufft : FftBackendKind::fftw;
    const std::string note = kind == FftBackendKind::cufft
                                 ? "backend auto → cuFFT on GPU " + std::to_string(context.cuda_device())
                                 : "backend auto → FFTW: " + cuda_unavailable_reason();
    spdlog::info("lane {} stage {}: {}", context.lane_name(), context.stage_name(), note);
    context.metrics().notes.push_back(note);
  } else if (kind == FftBackendKind::cufft && !cuda_available()) {
    throw std::runtime_error("fft backend: cufft needs a GPU: " + cuda_unavailable_reason() +
                             " (use backend: fftw, or auto to fall back)");
  }
  FftBackendSpec spec{.size = settings_.size,
                      .window = settings_.window,
                      .output = settings_.output,
                      .batch_frames = 64,
                      .average = settings_.average,
                      .cuda_device = context.cuda_device(),
                      .fusion = settings_.fusion,
                      .threads = settings_.threads,
                      .worker_cpus = settings_.worker_cpus,
                      .avoid_cpu = context.cpu()};
  if (kind == FftBackendKind::cufft) {
    if (settings_.threads > 1) {
      throw std::runtime_error("fft threads: " + std::to_string(settings_.threads) +
                               " needs the FFTW backend, and auto chose cuFFT on GPU " +
                               std::to_string(context.cuda_device()) +
                               " (use backend: fftw to run FFTW on that many threads, or remove threads:)");
    }
    // One batch takes the largest upstream chunk whole (plus a carried partial frame), so each
    // chunk is a few kernel launches and one cuFFT execution.
    const std::size_t sample_bytes = bytes_per_sample(context.stream.format);
    spec.batch_frames = std::max<std::size_t>(64, largest_input_bytes / sample_bytes / settings_.size + 2);
    backend_ = make_cufft_backend(spec);
    const std::string note = backend_->work_note();
    spdlog::info("lane {} stage {}: {}", context.lane_name(), context.stage_name(), note);
    context.metrics().notes.push_back(note);
  } else {
    if (settings_.fusion != FftFusion::automatic) {
      throw std::runtime_error("fft fusion: " + std::string(settings_.fusion == FftFusion::fused ? "fused" : "kernels") +
                               " needs the cuFFT backend, and auto chose FFTW: " + cuda_unavailable_reason() +
                               " (remove fusion: to run on FFTW)");
    }
    if (context.cpu() >= 0 && std::find(settings_.worker_cpus.begin(), settings_.worker_cpus.end(), context.cpu()) !=
                                  settings_.worker_cpus.end()) {
      throw std::runtime_error("fft worker_cpus includes core " + std::to_string(context.cpu()) +
                               ", where the stage's own thread is pinned (cpu:); a worker there would only take turns "
                               "with it (list other cores in worker_cpus)");
    }
    backend_ = make_fftw_backend(spec);
    if (std::string note = backend_->work_note(); !note.empty()) {
      spdlog::info("lane {} stage {}: {}", context.lane_name(), context.stage_name(), note);
      context.metrics().notes.push_back(std::move(note));
    }
  }
}

void FftStage::FenceRing::push(ChunkPtr chunk, std::uint64_t fence) noexcept {
  InFlight& slot = slots_[(head_ + count_) % slots_.size()];
  slot.chunk = std::move(chunk);
  slot.fence = fence;
  ++count_;
}

ChunkPtr FftStage::FenceRing::pop() noexcept {
  ChunkPtr chunk = std::move(slots_[head_].chunk);
  head_ = (head_ + 1) % slots_.size();
  --count_;
  return chunk;
}

StageStatus FftStage::process() {
  retire(false);
  // While the GPU still reads input chunks, upstream may be waiting for exactly those to come back
  // to its pool: never sleep on an empty queue then, but hand the oldest back the moment the
  // backend is done with it. (Sleeping 10 ms here idled the GPU between rounds of a small pool:
  // measured rates were 342.6 GB/s divided by whole numbers.)
  ChunkPtr chunk = context_->input().pop(inputs_in_flight_.empty() ? std::chrono::microseconds(10'000)
                                                                    : std::chrono::microseconds(0));
  if (!chunk && !inputs_in_flight_.empty()) {
    retire_input(true);
    return failed_ || !check_backend() ? StageStatus::error : StageStatus::ok;
  }
  if (!chunk) {
    emit_output();  // the input paused: hand on the rows that are ready rather than hold them
    retire(true);
    if (failed_ || !check_backend()) return StageStatus::error;
    return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
  }
  if (chunk->format != SampleFormat::ci8 && chunk->format != SampleFormat::ci16 && chunk->format != SampleFormat::cf32) {
    not_complex_drops_->add();
    return StageStatus::ok;
  }
  const std::byte* samples = chunk->data;
  const bool staged = (chunk->memory == MemoryKind::device) != (backend_->memory() == MemoryKind::device);
  if (staged) {
    if (chunk->size > input_staging_.size()) {
      context_->fail(std::string(to_string(chunk->memory)) + " chunk of " + std::to_string(chunk->size) +
                     " bytes exceeds the fft stage's staging buffer");
      return StageStatus::error;
    }
    wait_for(staging_fence_);  // the backend is done reading the previous chunk staged there
    if (std::string error = copy_memory(input_staging_.data(), input_staging_.kind(), chunk->data, chunk->memory,
                                        chunk->size, context_->cuda_stream());
        !error.empty()) {
      context_->fail(error);
      return StageStatus::error;
    }
    samples = input_staging_.data();
  }
  consume(*chunk, samples);
  if (failed_ || !check_backend()) return StageStatus::error;
  const std::uint64_t fence = backend_->fence();
  if (staged) {
    staging_fence_ = fence;  // the chunk itself is free now: its bytes were copied
  } else {
    // The backend may still be reading the chunk: it returns to its pool once the fence is reached
    // (a host backend has finished already, and the chunk goes back here).
    if (!backend_->reached(fence)) {
      if (inputs_in_flight_.full()) retire_input(true);
      inputs_in_flight_.push(std::move(chunk), fence);
    }
  }
  return StageStatus::ok;
}

void FftStage::stop() noexcept {
  if (!backend_) return;
  emit_output();
  retire(true);
  while (!inputs_in_flight_.empty()) retire_input(true);
  // A partial frame, or frames of an unfinished row, at the end of the stream make no row.
  tail_counter_->add(fill_ + (loaded_ + frames_in_row_) * settings_.size);
}

void FftStage::retire(bool all) noexcept {
  while (!outputs_in_flight_.empty()) {
    InFlight& oldest = outputs_in_flight_.front();
    if (all) {
      wait_for(oldest.fence);
    } else if (!backend_->reached(oldest.fence)) {
      break;
    }
    hand_on(outputs_in_flight_.pop());
  }
  while (!inputs_in_flight_.empty() && (all || backend_->reached(inputs_in_flight_.front().fence))) retire_input(all);
}

void FftStage::retire_input(bool wait) noexcept {
  if (wait) wait_for(inputs_in_flight_.front().fence);
  inputs_in_flight_.pop();  // back to its pool
}

void FftStage::wait_for(std::uint64_t fence) noexcept {
  // Time spent waiting for the GPU is waiting, not work: it counts as the stage's wait, so its
  // busy share says what the thread itself costs.
  if (backend_->reached(fence)) return;
  const WaitTimer waiting(context_->metrics());
  backend_->wait(fence);
}

bool FftStage::check_backend() noexcept {
  if (failed_) return false;
  if (std::string error = backend_->error(); !error.empty()) {
    context_->fail("fft " + std::string(backend_->name()) + ": " + error);
    failed_ = true;
  }
  return !failed_;
}

void FftStage::consume(const Chunk& chunk, const std::byte* samples) noexcept {
  const std::size_t sample_bytes = bytes_per_sample(chunk.format);
  const std::size_t count = chunk.size / sample_bytes;
  const std::size_t size = settings_.size;
  if (!started_input_) {
    owned_from_ = chunk.first_sample;
    started_input_ = true;
  }
  for (std::uint32_t i = 0; i < chunk.gap_count; ++i) remember_gap(chunk.gaps[i]);
  if (chunk.context_change) {  // the sender retuned from this chunk's first sample on
    change_pending_ = true;
    change_at_ = chunk.first_sample;
    change_context_ = chunk.context;
  }

  std::size_t position = 0;
  while (position < count) {
    // As much as the batch holds in one load, noted as one segment.
    const std::size_t take = std::min((batch_frames_ - loaded_) * size - fill_, count - position);
    backend_->load(loaded_, fill_, samples + position * sample_bytes, chunk.format, take);
    if (segments_.size() < segments_.capacity()) {  // always true (see start()); never reallocates on the hot path
      segments_.push_back(Segment{loaded_ * size + fill_, chunk.first_sample + position, chunk.timestamp, position,
                                  chunk.created_ns});
    }
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
  backend_->transform(loaded_);
  const std::size_t average = settings_.average;
  std::size_t frame = 0;
  while (frame < loaded_) {
    const std::size_t completing = (frames_in_row_ + loaded_ - frame) / average;
    if (completing == 0) {  // the rest only starts or extends the row being built
      if (frames_in_row_ == 0) row_first_frame_ = frame_info(frame);
      backend_->fold(frame, loaded_ - frame, frames_in_row_, nullptr);
      frames_in_row_ += loaded_ - frame;
      break;
    }
    ensure_output();
    const std::size_t room = std::min(completing, rows_per_chunk_ - out_rows_);
    std::size_t rows = 0;
    for (std::size_t next = frame; rows < room; ++rows) {
      if (rows > 0 && pending_count_ == 0 && !change_pending_) {
        // No gap is pending, and none arrives while this loop runs: the rest of the rows are marked
        // by moving owned_from_ past them (a row per frame made this loop the stage's bound with
        // complex output, ~27 ns a row on the H100 host).
        owned_from_ = std::max(owned_from_, rows_end(next, room - rows));
        rows = room;
        break;
      }
      const std::size_t in_row = rows == 0 ? frames_in_row_ : 0;
      const FrameInfo first = in_row > 0 ? row_first_frame_ : frame_info(next);
      if (change_pending_ && first.first_sample >= change_at_) {
        // The first row wholly from input under the sender's new context: it starts an output
        // chunk of its own, which carries the change (rows that straddle it stay with the old).
        if (out_rows_ + rows > 0) break;
        change_pending_ = false;
        out_context_change_ = true;
        out_context_ = change_context_;
        out_context_.sample_rate = StreamContext::kAbsent;  // the input's rate, not the spectra's
      }
      const std::size_t last = next + average - in_row - 1;
      if (!mark_row(first, frame_info(last), out_rows_ + rows)) break;  // its gap starts the next chunk
      next = last + 1;
    }
    const std::size_t frames = rows * average - frames_in_row_;
    if (rows > 0) {
      std::byte* out = (output_staging_.size() > 0 ? output_staging_.data() : out_->data) + out_rows_ * row_bytes_;
      backend_->fold(frame, frames, frames_in_row_, out);
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
  if (fill_ > 0) {
    backend_->carry(loaded_, fill_);
    // The carried samples keep their segments, moved to batch position 0 on.
    const std::uint64_t from = loaded_ * settings_.size;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < segments_.size(); ++i) {
      const bool last = i + 1 == segments_.size();
      if (!last && segments_[i + 1].batch_start <= from) continue;  // ends before the carried samples
      Segment segment = segments_[i];
      if (segment.batch_start < from) {
        const std::uint64_t skip = from - segment.batch_start;
        segment.first_sample += skip;
        segment.chunk_offset += skip;
        segment.batch_start = from;
      }
      segment.batch_start -= from;
      segments_[kept++] = segment;
    }
    segments_.resize(kept);
  } else {
    segments_.clear();
  }
  loaded_ = 0;
  return true;
}

bool FftStage::mark_row(const FrameInfo& first, const FrameInfo& last, std::size_t index) noexcept {
  // This row owns the input from the previous row's end to its own last sample.
  const std::uint64_t row_end = std::max(last.end_sample, owned_from_);
  bool lost_input = false;
  for (std::size_t i = 0; i < pending_count_; ++i) {
    // A gap reported after the rows it overlaps were made (late) marks the next row: never forgotten.
    const PendingGap gap = pending_[i];
    if (gap.end <= owned_from_ || (gap.first < row_end && gap.end > owned_from_)) lost_input = true;
  }
  if (lost_input) {
    const std::uint64_t first_value = (next_row_ + index - out_rows_) * settings_.size;
    Gap* previous = out_->gap_count > 0 ? &out_->gaps[out_->gap_count - 1] : nullptr;
    // in_data: the row is in the output, computed from input with a hole (marked, not missing).
    if (previous != nullptr && previous->in_data && previous->first_sample + previous->length == first_value) {
      previous->length += settings_.size;
    } else if (!out_->add_gap(first_value, settings_.size, true)) {
      return false;
    }
    gap_rows_counter_->add();
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_count_; ++i) {
    if (pending_[i].end > row_end) pending_[kept++] = pending_[i];
  }
  pending_count_ = kept;
  owned_from_ = row_end;
  if (index == 0) {
    out_timestamp_ = timestamp_at(first.chunk_timestamp, first.chunk_offset);
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
    if (!outputs_in_flight_.empty()) {
      wait_for(outputs_in_flight_.front().fence);
      hand_on(outputs_in_flight_.pop());
      continue;
    }
    out_ = context_->acquire(*pool_, std::chrono::milliseconds(100));
  }
}

void FftStage::hand_on(ChunkPtr finished) noexcept {
  // The dashboard's live spectrum: offer() copies about one row ten times a second and never
  // waits; the rows are final here (their fence was reached), in host or GPU memory.
  const std::size_t rows = row_bytes_ == 0 ? 0 : finished->size / row_bytes_;
  void* stream = finished->memory == MemoryKind::device ? context_->cuda_stream() : nullptr;
  context_->metrics().spectrum.offer(finished->data, rows, row_bytes_, finished->memory, stream);
  context_->emit(std::move(finished));
}

void FftStage::emit_output() noexcept {
  if (!out_ || out_rows_ == 0) return;
  const std::size_t bytes = out_rows_ * row_bytes_;
  if (output_staging_.size() > 0) {
    wait_for(backend_->fence());
    if (std::string error = copy_memory(out_->data, out_->memory, output_staging_.data(), output_staging_.kind(), bytes,
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
  out_->context_change = out_context_change_;
  out_->context = out_context_change_ ? out_context_ : StreamContext{};
  out_context_change_ = false;
  out_rows_ = 0;
  // Downstream may read the rows only once the backend has written them: a GPU backend's
  // output waits here, in order, until its fence is reached (retire()).
  outputs_in_flight_.push(std::move(out_), backend_->fence());
  retire(false);
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

const FftStage::Segment& FftStage::segment_at(std::uint64_t position) const noexcept {
  // The last segment starting at or before `position` (segments are in batch order).
  auto after = std::upper_bound(segments_.begin(), segments_.end(), position,
                                [](std::uint64_t at, const Segment& segment) { return at < segment.batch_start; });
  return after == segments_.begin() ? segments_.front() : *(after - 1);
}

FftStage::FrameInfo FftStage::frame_info(std::size_t frame) const noexcept {
  const std::uint64_t first = frame * settings_.size;
  const std::uint64_t last = first + settings_.size - 1;
  const Segment& head = segment_at(first);
  const Segment& tail = segment_at(last);
  return FrameInfo{head.first_sample + (first - head.batch_start), tail.first_sample + (last - tail.batch_start) + 1,
                   head.chunk_timestamp, head.chunk_offset + (first - head.batch_start), head.created_ns};
}

std::uint64_t FftStage::rows_end(std::size_t first, std::size_t rows) const noexcept {
  // Row r's last sample sits at batch position last0 + r·step. Within one segment a row's end
  // sample grows with r, so the greatest is that of the last row ending in some segment.
  const std::uint64_t step = static_cast<std::uint64_t>(settings_.average) * settings_.size;
  const std::uint64_t last0 = (first + settings_.average) * settings_.size - 1;
  const std::uint64_t last_row = last0 + (rows - 1) * step;
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const std::uint64_t low = i == 0 ? 0 : segments_[i].batch_start;  // segment_at() gives the first segment to what precedes it
    const std::uint64_t high = i + 1 < segments_.size() ? segments_[i + 1].batch_start : ~std::uint64_t{0};
    if (high <= last0 || low > last_row) continue;
    const std::uint64_t last = std::min(last_row, last0 + (high - 1 - last0) / step * step);
    if (last < low) continue;
    end = std::max(end, segments_[i].first_sample + (last - segments_[i].batch_start) + 1);
  }
  return end;
}

Timestamp FftStage::timestamp_at(const Timestamp& chunk_timestamp, std::uint64_t offset) const noexcept {
  if (!chunk_timestamp.valid) return {};
  return time_after(chunk_timestamp, offset, sample_rate_);
}

void register_fft_stage(StageRegistry& registry) {
  registry.add(StageType{"fft", StageRole::transform,
                         "spectra of complex samples (cuFFT on a GPU, else FFTW): power in dB, linear power or complex bins, fftshifted rows",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<FftStage>(reader, pipeline);
                         }});
}

}  // namespace sluice
