// The cuFFT backend: frames in one device batch on the stage's CUDA stream, transformed by a
// load kernel, cufftExecC2C and a fold kernel, or (1024-point frames, `fusion`) by one fused kernel.
// The fusion is our own kernels because this toolkit's cuFFT cannot link LTO callbacks.
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/log.hpp"
#include "stages/fft/decibels.hpp"
#include "stages/fft/fence_word.hpp"
#include "stages/fft/fft_backend.hpp"
#include "stages/fft/fft_kernels.hpp"

namespace sluice {
namespace {

static_assert(fft_kernels::kOutputPowerDb == static_cast<int>(FftOutput::power_db) &&
              fft_kernels::kOutputPower == static_cast<int>(FftOutput::power) &&
              fft_kernels::kOutputComplex == static_cast<int>(FftOutput::complex));
static_assert(fft_kernels::kPowerFloor == kPowerFloorLinear);

constexpr std::size_t kEvents = 1024;  // fences in the ring; an older fence reads a newer one's event (conservative)

std::string describe(const char* call, cudaError_t error) {
  return std::string(call) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
}

std::string describe(const char* call, cufftResult result) {
  return std::string(call) + " failed: cufftResult " + std::to_string(static_cast<int>(result));
}

void warn_unless(const char* call, cudaError_t error) {
  if (error != cudaSuccess) log::warn("{}", describe(call, error));
}

void check(const char* call, cudaError_t error) {
  if (error != cudaSuccess) throw std::runtime_error(describe(call, error));
}

void check(const char* call, cufftResult result) {
  if (result != CUFFT_SUCCESS) throw std::runtime_error(describe(call, result));
}

// kernels: load (conversion, scale, window) → cufftExecC2C in place → fold (|X|², averaging,
// normalisation, fftshift, dB). fused: one kernel reads each sample where it lies, transforms it in
// registers and sums |X|² into a ring of row sums (power) or writes the bins straight into their
// row (complex). Nothing is synchronised per chunk: each fence's number is written by the stream
// into a word of mapped host memory (cuStreamWriteValue64; a CUDA event where the driver lacks
// stream memory operations), so reached() is a load, not a driver call, and wait() spins on it.
// A fused complex chunk's fence is written by the next chunk's kernel when it starts. Every CUDA
// and cuFFT call is checked where it is made; the first failure is kept for error().
class CufftBackend final : public FftBackend {
 public:
  explicit CufftBackend(const FftBackendSpec& spec)
      : size_(spec.size),
        batch_(spec.batch_frames),
        output_(spec.output),
        average_(spec.average),
        device_(spec.cuda_device) {
    if (static_cast<unsigned long long>(size_) * batch_ > UINT_MAX / 2) {
      throw std::runtime_error("cuFFT batch of " + std::to_string(batch_) + " frames of " + std::to_string(size_) +
                               " points is too large; use smaller upstream chunks");
    }
    try {
      create(spec);
    } catch (...) {
      release();  // no destructor runs for a half-built object
      throw;
    }
  }

  ~CufftBackend() override { release(); }
  CufftBackend(const CufftBackend&) = delete;
  CufftBackend& operator=(const CufftBackend&) = delete;

 private:
  void destroy_plan() noexcept {
    if (plan_ == 0) return;
    if (cufftResult result = cufftDestroy(plan_); result != CUFFT_SUCCESS)
      log::warn("{}", describe("cufftDestroy", result));
    plan_ = 0;
  }

  void create(const FftBackendSpec& spec) {
    check("cudaSetDevice", cudaSetDevice(device_));
    stream_ = static_cast<cudaStream_t>(spec.stream);
    if (stream_ == nullptr) {
      check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      owns_stream_ = true;
    }
    batch_memory_ = MemoryRegion(MemoryKind::device, batch_ * size_ * sizeof(float2), device_);
    window_memory_ = MemoryRegion(MemoryKind::device, size_ * sizeof(float), device_);
    kept_memory_ = MemoryRegion(MemoryKind::device, size_ * sizeof(float2), device_);
    for (MemoryRegion& accumulator : accumulators_)
      accumulator = MemoryRegion(MemoryKind::device, size_ * sizeof(float), device_);

    std::vector<float> window(size_);
    fill_window(spec.window, window);
    check("cudaMemcpy(window)",
          cudaMemcpy(window_memory_.data(), window.data(), size_ * sizeof(float), cudaMemcpyHostToDevice));
    const double amplitude_scale = 1.0 / (static_cast<double>(size_) * coherent_gain(window));
    amplitude_scale_ = static_cast<float>(amplitude_scale);
    power_scale_ = static_cast<float>(amplitude_scale * amplitude_scale);

    for (cudaEvent_t& event : events_) {
      check("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    }
    prepare_fence_word();
    const bool applies = size_ == fft_kernels::kFusedSize;
    if (spec.fusion == FftFusion::fused && !applies) {
      throw std::runtime_error("fft fusion: fused needs size: 1024 (use fusion: kernels or auto)");
    }
    if (spec.fusion != FftFusion::kernels && applies) {
      fused_ = true;
      check("fused FFT twiddles", fft_kernels::prepare_fused());
      if (output_ == FftOutput::complex) {
        fusion_note_ =
            "fused: conversion, window, 1024-point FFT, scale and fftshift in one pass from input to output rows";
        return;  // no ring, no cuFFT plan
      }
      // Rows one batch can touch: every finished row of a full batch, plus the unfinished one.
      ring_rows_ = batch_ / average_ + 2;
      ring_memory_ = MemoryRegion(MemoryKind::device, ring_rows_ * size_ * sizeof(float), device_);
      check("cudaMemset(ring)", cudaMemset(ring_memory_.data(), 0, ring_memory_.size()));
      fusion_note_ = "fused: conversion, window, 1024-point FFT, |X|² and averaging in one pass over the input";
      return;  // no cuFFT plan: the fused kernel transforms
    }
    fusion_note_ =
        spec.fusion == FftFusion::kernels
            ? "cuFFT with load and fold kernels around the plan (fusion: kernels)"
            : "cuFFT with load and fold kernels around the plan (the fused path takes size 1024, power outputs)";
    int length = static_cast<int>(size_);
    check("cufftCreate", cufftCreate(&plan_));
    std::size_t work_bytes = 0;
    check("cufftMakePlanMany", cufftMakePlanMany(plan_, 1, &length, nullptr, 1, length, nullptr, 1, length, CUFFT_C2C,
                                                 static_cast<int>(batch_), &work_bytes));
    check("cufftSetStream", cufftSetStream(plan_, stream_));
  }

  // The fence word: tried once (written and read back); left off, with events alone, where the
  // driver has no stream memory operations.
  void prepare_fence_word() { fence_word_ = FenceWord::open(stream_); }

  void release() noexcept {
    // Everything enqueued must finish before the memory it uses is freed.
    if (stream_ != nullptr) warn_unless("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
    fence_word_ = FenceWord();
    destroy_plan();
    for (cudaEvent_t event : events_) {
      if (event != nullptr) warn_unless("cudaEventDestroy", cudaEventDestroy(event));
    }
    if (stream_ != nullptr && owns_stream_) warn_unless("cudaStreamDestroy", cudaStreamDestroy(stream_));
    stream_ = nullptr;
    plan_ = 0;
  }

 public:
  [[nodiscard]] std::string_view name() const override { return "cuFFT"; }
  [[nodiscard]] MemoryKind memory() const override { return MemoryKind::device; }
  [[nodiscard]] std::size_t batch_frames() const override { return batch_; }

  [[nodiscard]] std::string work_note() const override { return fusion_note_; }

  void load(std::size_t frame, std::size_t offset, const std::byte* input, SampleFormat format,
            std::size_t count) noexcept override {
    if (!error_.empty() || count == 0) return;
    if (!ok("cudaSetDevice", cudaSetDevice(device_))) return;  // the stage's thread may not have chosen it yet
    const std::size_t position = frame * size_ + offset;
    if (!fused_) {
      load_kernel(input, format, count, position, reinterpret_cast<float2*>(batch_memory_.data()));
      return;
    }
    // Fused, the kernel reads the span where it lies. One span at a time: an earlier one
    // that no transform took (a chunk shorter than the frame) is converted into the batch now.
    if (raw_.count > 0) materialize();
    if (position != prefix_end_) {  // not contiguous with what the batch holds: convert it in place
      load_kernel(input, format, count, position, reinterpret_cast<float2*>(batch_memory_.data()));
      prefix_end_ = position + count;
      return;
    }
    raw_ = RawSpan{input, format, position, count};
  }

  void transform(std::size_t frames) noexcept override {
    if (!error_.empty()) return;
    // The plan covers the whole batch (plans are made once); frames past `frames` are transformed
    // too and ignored. The stage sizes the batch to its largest input chunk, so that is at most a
    // frame or two. Frame `frames` may hold a partial frame that carry() moves to the next batch:
    // it is kept aside first, since the transform overwrites it.
    auto* batch = reinterpret_cast<cufftComplex*>(batch_memory_.data());
    kept_frame_ = frames;
    if (fused_) {
      transform_fused(frames);
      return;
    }
    if (frames < batch_ && !enqueued("cudaMemcpyAsync(keep partial frame)",
                                     cudaMemcpyAsync(kept_memory_.data(), batch + frames * size_,
                                                     size_ * sizeof(float2), cudaMemcpyDeviceToDevice, stream_))) {
      return;
    }
    note_enqueued();
    if (cufftResult result = cufftExecC2C(plan_, batch, batch, CUFFT_FORWARD); result != CUFFT_SUCCESS) {
      error_ = describe("cufftExecC2C", result);
    }
  }

  void carry(std::size_t from, std::size_t count) noexcept override {
    if (!error_.empty() || count == 0) return;
    if (from != kept_frame_) {
      error_ =
          "carry of frame " + std::to_string(from) + " after a transform of " + std::to_string(kept_frame_) + " frames";
      return;
    }
    if (!enqueued("cudaMemcpyAsync(carry)",
                  cudaMemcpyAsync(batch_memory_.data(), kept_memory_.data(), count * sizeof(float2),
                                  cudaMemcpyDeviceToDevice, stream_))) {
      return;
    }
    prefix_end_ = count;
  }

  void fold(std::size_t first, std::size_t count, std::size_t pending, std::byte* rows) noexcept override {
    if (!error_.empty() || count == 0) return;
    const std::size_t finished = (pending + count) / average_;
    const std::size_t left = pending + count - finished * average_;
    if (fused_ && output_ == FftOutput::complex) {  // one frame per row, never averaged
      if (rows == nullptr || first + count > complex_input_.frames) {
        error_ = "fused complex fold of frames " + std::to_string(first) + "+" + std::to_string(count) +
                 " after a transform of " + std::to_string(complex_input_.frames);
        return;
      }
      // No stream operation for the fence (a cuStreamWriteValue64 after each kernel costs host and
      // stream time a small chunk notices), and none in the kernel's own end (a fence and a counter
      // in every block). The kernel writes the fence owed for the work before it when it starts;
      // its own is owed until the next kernel, or wait(), writes it.
      fft_kernels::Signal signal{};
      if (fence_word_ && owed_ != 0) {
        signal.word = fence_word_.device_pointer();
        signal.value = owed_;
      }
      const bool launched =
          enqueued("fused kernel launch", fft_kernels::fused_complex(complex_input_, static_cast<unsigned>(first),
                                                                     static_cast<unsigned>(count), amplitude_scale_,
                                                                     reinterpret_cast<float2*>(rows), stream_, signal));
      if (launched && fence_word_) {
        owed_ = ++fences_;  // taken now: a later fold before the next fence owes a later one
        signaled_ = true;
      }
      return;
    }
    if (fused_) {
      // The fused kernel already summed every frame into its row of the ring; finish whole rows.
      if (pending != pending_frames_) {
        error_ = "fold with " + std::to_string(pending) + " frames pending, the ring holds " +
                 std::to_string(pending_frames_);
        return;
      }
      if (finished > 0 && !enqueued("fold kernel launch",
                                    fft_kernels::finish_rows(
                                        reinterpret_cast<float*>(ring_memory_.data()),
                                        static_cast<unsigned>(ring_rows_), static_cast<unsigned>(size_), row_cursor_,
                                        static_cast<unsigned>(finished), power_scale_, static_cast<unsigned>(average_),
                                        output_ == FftOutput::power_db, reinterpret_cast<float*>(rows), stream_))) {
        return;
      }
      row_cursor_ += finished;
      pending_frames_ = left;
      return;
    }
    fft_kernels::FoldArgs args{};
    args.bins = reinterpret_cast<const float2*>(batch_memory_.data());
    args.size = static_cast<unsigned>(size_);
    args.first = static_cast<unsigned>(first);
    args.pending = static_cast<unsigned>(pending);
    args.rows = static_cast<unsigned>(finished);
    args.average = static_cast<unsigned>(average_);
    args.partial_from = static_cast<unsigned>(finished > 0 ? first + finished * average_ - pending : first);
    args.end = static_cast<unsigned>(first + count);
    args.output = static_cast<int>(output_);
    args.amplitude_scale = amplitude_scale_;
    args.power_scale = power_scale_;
    // Two accumulators: the unfinished row is written to one while the first finished row may still read the other.
    args.accumulator_in = reinterpret_cast<const float*>(accumulators_[current_].data());
    args.accumulator_out = reinterpret_cast<float*>(accumulators_[current_ ^ 1].data());
    args.out = rows;
    if (!enqueued("fold kernel launch", fft_kernels::fold(args, left > 0, stream_))) return;
    if (left > 0) current_ ^= 1;
  }

  std::uint64_t fence() noexcept override {
    // A span no transform took yet must not be read after its chunk goes back to its pool.
    if (fused_ && raw_.count > 0 && error_.empty()) materialize();
    // Nothing enqueued since the last fence: it already covers everything. The stage asks for a
    // fence for its output and another for its input each chunk, and each costs a stream
    // operation (about as much host time as a kernel launch).
    if (!enqueued_) return fences_;
    enqueued_ = false;
    if (signaled_) {  // the last work enqueued was a complex kernel: its fence is fences_, owed
      signaled_ = false;
      return fences_;
    }
    const std::uint64_t fence = ++fences_;
    if (!fence_word_) {
      ok("cudaEventRecord", cudaEventRecord(events_[fence % kEvents], stream_));
    } else {
      write_fence(fence);
    }
    return fence;
  }

  bool reached(std::uint64_t fence) noexcept override {
    if (fence <= completed_ || !error_.empty()) return true;
    if (fence_word_) {  // the stream wrote every fence up to this one: no driver call
      const std::uint64_t written = fence_word_.load();
      if (written > completed_) completed_ = written;
      return fence <= completed_;
    }
    const cudaError_t state = cudaEventQuery(events_[fence % kEvents]);
    if (state == cudaErrorNotReady) return false;
    if (ok("cudaEventQuery", state)) completed_ = fence;  // events complete in stream order
    return true;
  }

  void wait(std::uint64_t fence) noexcept override {
    if (fence <= completed_ || !error_.empty()) return;
    if (!fence_word_) {
      if (ok("cudaEventSynchronize", cudaEventSynchronize(events_[fence % kEvents]))) completed_ = fence;
      return;
    }
    // No event stands for the fence: spin on the word, as cudaEventSynchronize spins on an event.
    // A fence still owed (no kernel enqueued after it would write it) is written by the stream now.
    // A stream that failed never writes it, so every 4096 polls the stream is asked.
    if (owed_ != 0 && fence >= owed_) write_fence(owed_);
    for (unsigned polls = 1;; ++polls) {
      if (reached(fence)) return;
      if (polls % 4096 != 0) {
        cpu_relax();
        continue;
      }
      const cudaError_t state = cudaStreamQuery(stream_);
      if (state == cudaSuccess && !reached(fence)) {
        error_ = "the stream finished without writing fence " + std::to_string(fence);
        return;
      }
      if (state != cudaSuccess && state != cudaErrorNotReady) {
        ok("cudaStreamQuery", state);
        return;
      }
      std::this_thread::yield();
    }
  }

  [[nodiscard]] std::string error() const override { return error_; }

  void note_stage_work() noexcept override { note_enqueued(); }

 private:
  struct RawSpan {
    const std::byte* data = nullptr;
    SampleFormat format = SampleFormat::cf32;
    std::size_t position = 0;  // batch position of its first sample
    std::size_t count = 0;
  };

  void load_kernel(const std::byte* input, SampleFormat format, std::size_t count, std::size_t position,
                   float2* target) noexcept {
    enqueued("load kernel launch",
             fft_kernels::load(input, format, static_cast<unsigned>(count), static_cast<unsigned>(position),
                               static_cast<unsigned>(size_), reinterpret_cast<const float*>(window_memory_.data()),
                               target, stream_));
  }

  // Converts the pending span into the batch at its position (the kernels' way).
  void materialize() noexcept {
    load_kernel(raw_.data, raw_.format, raw_.count, raw_.position, reinterpret_cast<float2*>(batch_memory_.data()));
    prefix_end_ = raw_.position + raw_.count;
    raw_ = RawSpan{};
  }

  // The input of a fused transform of `frames` whole frames: where each batch position is read
  // from. The partial frame after them is converted aside for carry() first. Clears the span: the
  // kernels that read it are enqueued before the input chunk's fence, so it outlives them.
  fft_kernels::FusedArgs fused_input(std::size_t frames) noexcept {
    const std::size_t whole = frames * size_;
    const std::size_t raw_end = raw_.count > 0 ? raw_.position + raw_.count : prefix_end_;
    if (raw_end > whole && raw_.count > 0 && raw_.position <= whole) {
      // The partial frame after the last whole one lies in the span: converted aside for carry().
      const std::size_t skip = whole - raw_.position;
      load_kernel(raw_.data + skip * bytes_per_sample(raw_.format), raw_.format, raw_end - whole, 0,
                  reinterpret_cast<float2*>(kept_memory_.data()));
    } else if (raw_end > whole) {
      // It begins among converted samples (never with the stage's framing, which keeps those
      // shorter than a frame): convert everything into the batch and keep it aside from there.
      if (raw_.count > 0) materialize();
      enqueued("cudaMemcpyAsync(keep partial frame)",
               cudaMemcpyAsync(kept_memory_.data(), batch_memory_.data() + whole * sizeof(float2),
                               (prefix_end_ - whole) * sizeof(float2), cudaMemcpyDeviceToDevice, stream_));
    }
    fft_kernels::FusedArgs args{};
    args.batch = reinterpret_cast<const float2*>(batch_memory_.data());
    args.raw = raw_.data;
    args.raw_begin = static_cast<unsigned>(raw_.count > 0 ? raw_.position : prefix_end_);
    args.raw_end = static_cast<unsigned>(std::min(raw_.count > 0 ? raw_.position + raw_.count : prefix_end_, whole));
    args.format = raw_.count > 0 ? raw_.format : SampleFormat::cf32;
    args.window = reinterpret_cast<const float*>(window_memory_.data());
    args.frames = static_cast<unsigned>(frames);
    raw_ = RawSpan{};
    prefix_end_ = 0;  // until carry() puts the partial frame back
    return args;
  }

  void transform_fused(std::size_t frames) noexcept {
    fft_kernels::FusedArgs args = fused_input(frames);
    if (!error_.empty()) return;
    if (output_ == FftOutput::complex) {
      complex_input_ = args;  // fold() transforms each run of frames straight into its output rows
      return;
    }
    args.ring = reinterpret_cast<float*>(ring_memory_.data());
    args.ring_rows = static_cast<unsigned>(ring_rows_);
    args.pending = static_cast<unsigned>(pending_frames_);
    args.average = static_cast<unsigned>(average_);
    args.row_base = row_cursor_;
    enqueued("fused kernel launch", fft_kernels::fused_power(args, stream_));
  }

  // The stream writes `fence` into the word after everything enqueued so far; that pays any fence owed.
  void write_fence(std::uint64_t fence) noexcept {
    if (!error_.empty()) return;
    owed_ = 0;
    error_ = fence_word_.write(stream_, fence);
  }

  // Work went on the stream: the next fence must cover it (and a plain fence, since this work
  // does not write one itself).
  void note_enqueued() noexcept {
    enqueued_ = true;
    signaled_ = false;
  }

  // ok() for a call that put work on the stream.
  bool enqueued(const char* call, cudaError_t error) noexcept {
    note_enqueued();
    return ok(call, error);
  }

  bool ok(const char* call, cudaError_t error) noexcept {
    if (error == cudaSuccess) return true;
    if (error_.empty()) {
      try {
        error_ = describe(call, error);
      } catch (...) {
        error_ = "CUDA error";
      }
    }
    return false;
  }

  std::size_t size_;
  std::size_t batch_;
  FftOutput output_;
  std::size_t average_;
  int device_;
  float amplitude_scale_ = 1;
  float power_scale_ = 1;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;  // made here (no stage stream given): destroyed here too
  cufftHandle plan_ = 0;
  std::array<cudaEvent_t, kEvents> events_{};
  std::uint64_t fences_ = 0;
  std::uint64_t completed_ = 0;
  bool enqueued_ = false;   // work went on the stream after the last fence
  bool signaled_ = false;   // ... and the last of it was a complex kernel, whose fence is fences_
  std::uint64_t owed_ = 0;  // a complex kernel's fence that nothing enqueued yet writes (0: none)
  FenceWord fence_word_;    // the word the stream writes fences into; empty: events only
  MemoryRegion batch_memory_;
  MemoryRegion window_memory_;
  MemoryRegion kept_memory_;  // the partial frame after the last transformed one, for carry()
  std::size_t kept_frame_ = 0;
  std::array<MemoryRegion, 2> accumulators_;
  // Fused: the ring of row sums, where rows and spans stand.
  bool fused_ = false;
  std::string fusion_note_;
  MemoryRegion ring_memory_;
  std::size_t ring_rows_ = 0;
  std::uint64_t row_cursor_ = 0;            // global index of the row being built
  std::size_t pending_frames_ = 0;          // frames already summed into it
  RawSpan raw_;                             // the span the next transform reads in place
  fft_kernels::FusedArgs complex_input_{};  // fused complex: the last transform's input, read by its folds
  std::size_t prefix_end_ = 0;              // batch positions [0, prefix_end_) hold converted samples
  unsigned current_ = 0;                    // the accumulator holding the row being built
  std::string error_;
};

}  // namespace

std::unique_ptr<FftBackend> make_cufft_backend(const FftBackendSpec& spec) {
  return std::make_unique<CufftBackend>(spec);
}

}  // namespace sluice
