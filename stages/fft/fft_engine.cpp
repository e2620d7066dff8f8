// FftEngine: the backend's choice and its memory around it (stream, staging copies, held chunks).
#include "stages/fft/fft_engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "pipeline/log.hpp"

namespace sluice {
namespace {

constexpr std::size_t kInputsInFlight = 8;  // input chunks a GPU backend may still be reading

void note(StageContext& context, std::string text) {
  log::info("lane {} stage {}: {}", context.lane_name(), context.stage_name(), text);
  context.metrics().notes.push_back(std::move(text));
}

}  // namespace

void FftEngine::open(StageContext& context, const FftSettings& settings, Pool& output) {
  context_ = &context;
  std::size_t largest_input_bytes = 0;
  for (Pool* pool : context.lane_pools()) {
    if (pool != &output) largest_input_bytes = std::max(largest_input_bytes, pool->chunk_bytes());
  }
  choose_backend(context, settings, largest_input_bytes);
  open_staging(context, output);
  // Inputs held while the backend reads them: a few, and never more than half an upstream pool,
  // so the producer always has chunks to fill.
  std::size_t in_flight = kInputsInFlight;
  for (Pool* pool : context.lane_pools()) {
    if (pool != &output) in_flight = std::min(in_flight, std::max<std::size_t>(1, pool->chunk_count() / 2));
  }
  inputs_in_flight_.reserve(in_flight);
  outputs_in_flight_.reserve(output.chunk_count());
}

void FftEngine::choose_backend(StageContext& context, const FftSettings& settings, std::size_t largest_input_bytes) {
  FftBackendKind kind = settings.backend;
  if (kind == FftBackendKind::automatic) {
    kind = cuda_available() ? FftBackendKind::cufft : FftBackendKind::fftw;
    note(context, kind == FftBackendKind::cufft ? "backend auto → cuFFT on GPU " + std::to_string(context.cuda_device())
                                                : "backend auto → FFTW: " + cuda_unavailable_reason());
  } else if (kind == FftBackendKind::cufft && !cuda_available()) {
    throw std::runtime_error("fft backend: cufft needs a GPU: " + cuda_unavailable_reason() +
                             " (use backend: fftw, or auto to fall back)");
  }
  const FftBackendSpec spec{.size = settings.size,
                            .window = settings.window,
                            .output = settings.output,
                            .batch_frames = 64,
                            .average = settings.average,
                            .cuda_device = context.cuda_device(),
                            .fusion = settings.fusion,
                            .threads = settings.threads,
                            .worker_cpus = settings.worker_cpus,
                            .avoid_cpu = context.cpu()};
  if (kind == FftBackendKind::cufft) {
    if (settings.threads > 1) {
      throw std::runtime_error("fft threads: " + std::to_string(settings.threads) +
                               " needs the FFTW backend, and auto chose cuFFT on GPU " +
                               std::to_string(context.cuda_device()) +
                               " (use backend: fftw to run FFTW on that many threads, or remove threads:)");
    }
    open_cufft(context, spec, largest_input_bytes);
  } else {
    open_fftw(context, settings, spec);
  }
}

void FftEngine::open_cufft(StageContext& context, FftBackendSpec spec, std::size_t largest_input_bytes) {
  // One batch takes the largest upstream chunk whole (plus a carried partial frame), so each
  // chunk is a few kernel launches and one cuFFT execution.
  const std::size_t sample_bytes = bytes_per_sample(context.stream.format);
  spec.batch_frames = std::max<std::size_t>(64, largest_input_bytes / sample_bytes / spec.size + 2);
  // cuFFT works on the stage's stream, so staging copies and hand-offs are ordered with it, unsynchronised.
  std::size_t events = 1;
  for (Pool* pool : context.lane_pools()) events += pool->chunk_count();
  gpu_ = GpuStream(context.cuda_device(), events);
  spec.stream = gpu_.get();
  backend_ = make_cufft_backend(spec);
  note(context, backend_->work_note());
}

void FftEngine::open_fftw(StageContext& context, const FftSettings& settings, const FftBackendSpec& spec) {
  if (settings.fusion != FftFusion::automatic) {
    throw std::runtime_error("fft fusion: " + std::string(settings.fusion == FftFusion::fused ? "fused" : "kernels") +
                             " needs the cuFFT backend, and auto chose FFTW: " + cuda_unavailable_reason() +
                             " (remove fusion: to run on FFTW)");
  }
  if (context.cpu() >= 0 && std::find(settings.worker_cpus.begin(), settings.worker_cpus.end(), context.cpu()) !=
                                settings.worker_cpus.end()) {
    throw std::runtime_error("fft worker_cpus includes core " + std::to_string(context.cpu()) +
                             ", where the stage's own thread is pinned (cpu:); a worker there would only take turns "
                             "with it (list other cores in worker_cpus)");
  }
  backend_ = make_fftw_backend(spec);
  if (std::string text = backend_->work_note(); !text.empty()) note(context, std::move(text));
}

void FftEngine::open_staging(StageContext& context, Pool& output) {
  // Inputs or outputs not in the backend's memory go through a staging buffer (one copy each way).
  const MemoryKind engine = backend_->memory();
  const auto foreign = [engine](MemoryKind kind) {
    return (kind == MemoryKind::device) != (engine == MemoryKind::device);
  };
  std::size_t foreign_input_bytes = 0;
  for (Pool* pool : context.lane_pools()) {
    if (pool != &output && foreign(pool->memory()))
      foreign_input_bytes = std::max(foreign_input_bytes, pool->chunk_bytes());
  }
  const int device = context.cuda_device();
  if (foreign_input_bytes > 0) input_staging_ = MemoryRegion(engine, foreign_input_bytes, device);
  if (foreign(output.memory())) output_staging_ = MemoryRegion(engine, output.chunk_bytes(), device);
  if (input_staging_.size() == 0 && output_staging_.size() == 0) return;
  // Every host buffer that one of those copies touches is page-locked (no-op for device and pinned slabs).
  for (Pool* pool : context.lane_pools()) {
    if (foreign(pool->memory())) pool->region().pin_for_device();
  }
  input_staging_.pin_for_device();
  output_staging_.pin_for_device();
  // FFTW with GPU chunks: its staging copies need a stream of the stage's own (cuFFT has one already).
  if (!gpu_) gpu_ = GpuStream(device, 2);
}

const std::byte* FftEngine::input(const Chunk& chunk) noexcept {
  const bool on_gpu = backend_->memory() == MemoryKind::device;
  const bool staged = (chunk.memory == MemoryKind::device) != on_gpu;
  // The backend's work (on the stage's stream) starts after the producer's GPU work on the chunk.
  if (on_gpu && !staged && !gpu_.wait_for(chunk)) return fail("fft: " + gpu_.error());
  if (!staged) return chunk.data;
  if (chunk.size > input_staging_.size()) {
    return fail(std::string(to_string(chunk.memory)) + " chunk of " + std::to_string(chunk.size) +
                " bytes exceeds the fft stage's staging buffer");
  }
  // Ordered on the stream after the backend's reads of what the buffer held before (fence()
  // enqueued every pending read), and before the loads that read it.
  if (!gpu_.wait_for(chunk) || !gpu_.copy(input_staging_.data(), chunk.data, chunk.size))
    return fail("fft: " + gpu_.error());
  if (on_gpu) {
    backend_->note_stage_work();
  } else {
    const WaitTimer waiting(context_->metrics());  // FFTW reads the staging buffer from the CPU: the copy must be done
    gpu_.wait(gpu_.fence());
    if (!gpu_.error().empty()) return fail("fft: " + gpu_.error());
  }
  return input_staging_.data();
}

void FftEngine::release_input(ChunkPtr chunk) noexcept {
  // The backend (or a staging copy before it) may still be reading the chunk: it returns to its
  // pool once the fence is reached (a host backend has finished already, and it goes back here).
  const std::uint64_t fence = backend_->fence();
  if (backend_->reached(fence)) return;
  if (inputs_in_flight_.full()) retire_inputs(true);
  inputs_in_flight_.push(std::move(chunk), fence);
}

void FftEngine::retire_inputs(bool wait) noexcept {
  if (wait && !inputs_in_flight_.empty()) wait_for(inputs_in_flight_.front_fence());
  while (!inputs_in_flight_.empty() && backend_->reached(inputs_in_flight_.front_fence())) inputs_in_flight_.pop();
}

std::byte* FftEngine::rows(Chunk& out) noexcept {
  return output_staging_.size() > 0 ? output_staging_.data() : out.data;
}

void FftEngine::finish_output(ChunkPtr out, std::size_t bytes) noexcept {
  if (output_staging_.size() > 0 && !copy_out(*out, bytes)) return;
  if (out->memory == MemoryKind::device && backend_->memory() == MemoryKind::device) {
    // Downstream's stream waits for the event of the work that writes the rows: it may go now.
    if (gpu_.hand_off(*out) != 0) outputs_in_flight_.push(std::move(out), 0);
    return;
  }
  // Read by the CPU downstream, the rows must be final: the output waits, in order, until the
  // fence of the work that writes them is reached.
  outputs_in_flight_.push(std::move(out), backend_->fence());
}

bool FftEngine::copy_out(Chunk& out, std::size_t bytes) noexcept {
  // On the stream after the folds that wrote the staging rows, and before later folds overwrite them.
  if (gpu_.copy(out.data, output_staging_.data(), bytes)) {
    if (backend_->memory() == MemoryKind::device) {
      backend_->note_stage_work();  // the output's fence covers the copy
      return true;
    }
    // FFTW writes the next rows into the staging buffer from the CPU: the copy must be done first.
    const WaitTimer waiting(context_->metrics());
    gpu_.wait(gpu_.fence());
  }
  if (gpu_.error().empty()) return true;
  fail("fft: " + gpu_.error());
  return false;
}

ChunkPtr FftEngine::take_output(bool wait) noexcept {
  if (outputs_in_flight_.empty()) return nullptr;
  if (wait) {
    wait_for(outputs_in_flight_.front_fence());
  } else if (!backend_->reached(outputs_in_flight_.front_fence())) {
    return nullptr;
  }
  return outputs_in_flight_.pop();
}

void FftEngine::wait_for(std::uint64_t fence) noexcept {
  // Time spent waiting for the GPU is waiting, not work: it counts as the stage's wait, so its
  // busy share says what the thread itself costs.
  if (backend_->reached(fence)) return;
  const WaitTimer waiting(context_->metrics());
  backend_->wait(fence);
}

bool FftEngine::ok() noexcept {
  if (failed_) return false;
  if (std::string error = backend_->error(); !error.empty()) {
    fail("fft " + std::string(backend_->name()) + ": " + error);
  } else if (!gpu_.error().empty()) {
    fail("fft: " + gpu_.error());
  }
  return !failed_;
}

void FftEngine::finish() noexcept {
  // Outputs handed on with an event are written by then, before the lane frees its pools.
  if (gpu_ && !gpu_.finish()) log::warn("fft: lane {}: {}", context_->lane_name(), gpu_.error());
}

std::nullptr_t FftEngine::fail(std::string reason) noexcept {
  if (!failed_) context_->fail(std::move(reason));
  failed_ = true;
  return nullptr;
}

}  // namespace sluice
