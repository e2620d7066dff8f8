// The FFTW backend: single-precision, in place, on 64-byte aligned frames. Plans are made once
// at construction under one process-wide mutex, because FFTW's planner is not thread-safe and
// every lane plans on its own thread; fftwf_execute* is thread-safe and runs unlocked.
#include <fftw3.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "stages/fft/decibels.hpp"
#include "stages/fft/fft_backend.hpp"
#include "stages/fft/worker_team.hpp"

namespace sluice {
namespace {

// FFTW_MEASURE up to this length, FFTW_ESTIMATE past it: measuring times candidate plans, which
// grows with the length, and a stage's start should stay well under a second. Wisdom is
// process-wide: a second lane of the same size plans without measuring again.
constexpr std::size_t kMeasureLimit = 8192;
// Frames per block: about 256 KiB of complex floats, so a block stays in one core's L2 between load,
// transform and fold. A batch is one block per thread.
constexpr std::size_t kBatchSamples = 32768;

std::mutex& planner_mutex() {
  static std::mutex mutex;
  return mutex;
}

struct PlanDeleter {
  void operator()(fftwf_plan_s* plan) const noexcept {
    const std::lock_guard lock(planner_mutex());  // fftwf_destroy_plan touches planner state too
    fftwf_destroy_plan(plan);
  }
};
using Plan = std::unique_ptr<fftwf_plan_s, PlanDeleter>;

struct FftwFree {
  void operator()(fftwf_complex* memory) const noexcept { fftwf_free(memory); }
};

// The hot loops around the transform. They carry `omp simd` (this file is built with -fopenmp-simd,
// no OpenMP runtime) because at -O2 GCC's default "very cheap" cost model vectorises no loop whose
// count is unknown. On x86-64 GCC also builds an x86-64-v3 (AVX2) clone of each, picked once at load
// time by the CPU: twice the vector width of the SSE2 baseline. The file is built with
// -ffp-contract=off (no fused multiply-add), so both clones give bit-identical results.
// Not under ThreadSanitizer: the loader runs the clones' ifunc resolver while relocating, before
// the TSan runtime is up, and the instrumented resolver crashes every binary that links this file.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define SLUICE_FFT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SLUICE_FFT_CLONES
#endif

// Input value i (I and Q interleaved) to float, times its weight (window × format scale).
template <typename Component>
SLUICE_FFT_CLONES void convert(const std::byte* input, std::size_t values, const float* weights, float* out) noexcept {
#pragma omp simd
  for (std::size_t i = 0; i < values; ++i) {
    Component value;
    std::memcpy(&value, input + i * sizeof(Component), sizeof(Component));
    out[i] = static_cast<float>(value) * weights[i];
  }
}

// Input chunks arrive from another core (the producer just wrote them), and convert() stalls on
// those reads. Converting in blocks and prefetching the input kPrefetchBlocks ahead hides some of
// that latency. A prefetch never faults, so hinting past the end of the caller's range is harmless.
template <typename Component>
void convert_streaming(const std::byte* input, std::size_t values, const float* weights, float* out) noexcept {
  constexpr std::size_t kBlockBytes = 2048;
  constexpr std::size_t kPrefetchBlocks = 4;
  constexpr std::size_t kBlockValues = kBlockBytes / sizeof(Component);
  constexpr std::size_t kLine = 64;
  for (std::size_t done = 0; done < values; done += kBlockValues) {
    const std::byte* ahead = input + (done + kPrefetchBlocks * kBlockValues) * sizeof(Component);
    for (std::size_t line = 0; line < kBlockBytes; line += kLine) __builtin_prefetch(ahead + line);
    const std::size_t block = std::min(kBlockValues, values - done);
    convert<Component>(input + done * sizeof(Component), block, weights + done, out + done);
  }
}

SLUICE_FFT_CLONES void store_power(const float* bins, std::size_t count, float* sum) noexcept {
#pragma omp simd
  for (std::size_t k = 0; k < count; ++k) sum[k] = bins[2 * k] * bins[2 * k] + bins[2 * k + 1] * bins[2 * k + 1];
}

SLUICE_FFT_CLONES void add_power(const float* bins, std::size_t count, float* sum) noexcept {
#pragma omp simd
  for (std::size_t k = 0; k < count; ++k) sum[k] += bins[2 * k] * bins[2 * k] + bins[2 * k + 1] * bins[2 * k + 1];
}

SLUICE_FFT_CLONES void scale_values(const float* in, std::size_t count, float scale, float* out) noexcept {
#pragma omp simd
  for (std::size_t i = 0; i < count; ++i) out[i] = in[i] * scale;
}

// |X|² · scale (power_values) and its dB (power_decibels_values) straight from interleaved bins: the
// same operations in the same order as store_power followed by scale_values / decibels_values.
SLUICE_FFT_CLONES void power_values(const float* bins, std::size_t count, float scale, float* out) noexcept {
#pragma omp simd
  for (std::size_t k = 0; k < count; ++k) {
    out[k] = (bins[2 * k] * bins[2 * k] + bins[2 * k + 1] * bins[2 * k + 1]) * scale;
  }
}

SLUICE_FFT_CLONES void power_decibels_values(const float* bins, std::size_t count, float scale, float* out) noexcept {
#pragma omp simd
  for (std::size_t k = 0; k < count; ++k) {
    out[k] = power_to_decibels((bins[2 * k] * bins[2 * k] + bins[2 * k + 1] * bins[2 * k + 1]) * scale);
  }
}

SLUICE_FFT_CLONES void decibels_values(const float* power, std::size_t count, float scale, float* out) noexcept {
#pragma omp simd
  for (std::size_t k = 0; k < count; ++k) out[k] = power_to_decibels(power[k] * scale);
}

// With `threads` threads the batch is that many blocks of `block` frames, and each step of a batch is
// split into one part per block (part t: frames [t·block, (t+1)·block)): conversion and window into
// them, their transform, and (one frame per row) their rows. Thread t takes part t first (WorkerTeam),
// so a frame stays in one core's cache from load to fold while every thread runs. Rows averaged over
// several frames go to the part whose block holds their first frame when they are at most a block
// long; longer rows (or frames that finish none) are split by bins: each part sums and writes one
// slice of every row's bins. Either way each row's frames are summed in order, so a row that spans
// several blocks or batches sums exactly as one thread sums it: results are bit-identical whatever
// the thread count, since every other step is elementwise,
// and a block's transform uses the same plan one thread would (the batched plan of `block` frames on
// a whole block, the single-frame plan on the frames of a partial one).
class FftwBackend final : public FftBackend {
 public:
  explicit FftwBackend(const FftBackendSpec& spec)
      : size_(spec.size),
        stride_((spec.size + 7) / 8 * 8),  // 8 complex floats = 64 bytes: every frame starts aligned
        block_(std::max<std::size_t>(1, std::min(spec.batch_frames, kBatchSamples / stride_))),
        threads_(std::max<std::size_t>(1, spec.threads)),
        batch_(block_ * threads_),
        output_(spec.output),
        average_(spec.average),
        window_(spec.size),
        weights_(2 * spec.size),
        accumulators_{std::vector<float>(spec.size), std::vector<float>(spec.size)} {
    fill_window(spec.window, window_);
    fill_weights(SampleFormat::ci16);  // the usual input; another format refills once when it first arrives
    const double amplitude_scale = 1.0 / (static_cast<double>(size_) * coherent_gain(window_));
    amplitude_scale_ = static_cast<float>(amplitude_scale);
    power_scale_ = static_cast<float>(amplitude_scale * amplitude_scale);
    average_scale_ = power_scale_ / static_cast<float>(average_);

    frames_.reset(static_cast<fftwf_complex*>(fftwf_malloc(sizeof(fftwf_complex) * stride_ * batch_)));
    if (!frames_) {
      throw std::runtime_error("fftwf_malloc(" + std::to_string(sizeof(fftwf_complex) * stride_ * batch_) +
                               " bytes) failed: out of memory");
    }
    std::memset(frames_.get(), 0, sizeof(fftwf_complex) * stride_ * batch_);  // touch now, not on the hot path

    {
      const unsigned flags = fftw_planner_flags(size_);
      const int length = static_cast<int>(size_);
      const std::lock_guard lock(planner_mutex());
      single_.reset(fftwf_plan_dft_1d(length, frames_.get(), frames_.get(), FFTW_FORWARD, flags));
      if (!single_) throw std::runtime_error("fftwf_plan_dft_1d(" + std::to_string(size_) + ") returned no plan");
      // One block's plan, run on every whole block through fftwf_execute_dft (blocks sit block·stride apart,
      // so each keeps the planned alignment).
      batched_.reset(fftwf_plan_many_dft(1, &length, static_cast<int>(block_), frames_.get(), nullptr, 1,
                                         static_cast<int>(stride_), frames_.get(), nullptr, 1,
                                         static_cast<int>(stride_), FFTW_FORWARD, flags));
      if (!batched_) {
        throw std::runtime_error("fftwf_plan_many_dft(" + std::to_string(size_) + " x " + std::to_string(block_) +
                                 ") returned no plan");
      }
    }
    if (threads_ > 1 && average_ > 1 && average_ <= block_) part_sums_.assign(threads_, std::vector<float>(size_));
    if (threads_ > 1) {
      team_ = std::make_unique<WorkerTeam>(threads_, spec.worker_cpus, spec.avoid_cpu, "fftw worker");
      work_note_ = "FFTW on " + std::to_string(threads_) + " threads per batch: the stage's own and " +
                   std::to_string(threads_ - 1) + (threads_ == 2 ? " worker " : " workers ") + team_->placement();
    }
  }

  [[nodiscard]] std::string_view name() const override { return "FFTW"; }
  [[nodiscard]] MemoryKind memory() const override { return MemoryKind::host; }
  [[nodiscard]] std::size_t batch_frames() const override { return batch_; }
  [[nodiscard]] std::string work_note() const override { return work_note_; }

  void load(std::size_t frame, std::size_t offset, const std::byte* input, SampleFormat format,
            std::size_t count) noexcept override {
    if (format == SampleFormat::rf32 || count == 0) return;  // rf32 is refused at start: real samples have no I/Q pairs
    if (format != weights_format_) fill_weights(format);
    const std::size_t begin = frame * size_ + offset;  // batch positions, in samples
    const std::size_t end = begin + count;
    const std::size_t share = block_ * size_;  // samples per part
    if (begin / share == (end - 1) / share) {  // inside one block: no hand-off
      load_span(frame, offset, input, format, count);
      return;
    }
    const std::size_t sample_bytes = bytes_per_sample(format);
    team_->run([&](std::size_t part) noexcept {
      const std::size_t from = std::max(begin, part * share);
      const std::size_t to = std::min(end, (part + 1) * share);
      if (from < to) load_span(from / size_, from % size_, input + (from - begin) * sample_bytes, format, to - from);
    });
  }

  void transform(std::size_t frames) noexcept override {
    const auto transform_block = [&](std::size_t part) noexcept {
      const std::size_t from = part * block_;
      const std::size_t to = std::min(frames, from + block_);
      if (to - from == block_) {
        fftwf_complex* data = frames_.get() + from * stride_;
        fftwf_execute_dft(batched_.get(), data, data);
        return;
      }
      for (std::size_t frame = from; frame < to; ++frame) {
        fftwf_complex* data = frames_.get() + frame * stride_;
        fftwf_execute_dft(single_.get(), data, data);
      }
    };
    if (frames <= block_) {
      transform_block(0);
    } else {
      team_->run([&](std::size_t part) noexcept {
        if (part * block_ < frames) transform_block(part);
      });
    }
  }

  void carry(std::size_t from, std::size_t count) noexcept override {
    if (from != 0) std::memmove(frames_.get(), frames_.get() + from * stride_, count * sizeof(fftwf_complex));
  }

  void fold(std::size_t first, std::size_t count, std::size_t pending, std::byte* rows) noexcept override {
    if (count == 0) return;
    const std::size_t row_bytes = size_ * (output_ == FftOutput::complex ? 8 : 4);
    if (output_ == FftOutput::complex || average_ == 1) {  // a row per frame: each part writes its block's rows
      const std::size_t end = first + count;
      const auto write_rows = [&](std::size_t part) noexcept {
        const std::size_t from = std::max(first, part * block_);
        const std::size_t to = std::min(end, (part + 1) * block_);
        for (std::size_t frame = from; frame < to; ++frame) write_frame_row(frame, rows + (frame - first) * row_bytes);
      };
      if (first / block_ == (end - 1) / block_) {
        write_rows(first / block_);
      } else {
        team_->run(write_rows);
      }
      return;
    }
    const std::size_t finished = (pending + count) / average_;
    if (threads_ > 1 && finished > 0 && average_ <= block_) {
      fold_rows(first, count, pending, rows, row_bytes, finished);
      return;
    }
    // One thread, rows longer than a block, or no row finished here: a slice of bins per part, 16 floats
    // (64 bytes) aligned so that no two threads write the same cache line of the accumulator.
    const std::size_t slices = std::min(threads_, (size_ + kSliceValues - 1) / kSliceValues);
    const auto fold_slice = [&](std::size_t slice) noexcept {
      if (slice >= slices) return;
      const std::size_t from = slice_start(slice, slices);
      const std::size_t to = slice_start(slice + 1, slices);
      if (from < to) fold_bins(first, count, pending, rows, row_bytes, from, to);
    };
    if (slices == 1) {
      fold_slice(0);
    } else {
      team_->run(fold_slice);
    }
  }

 private:
  static constexpr std::size_t kSliceValues = 16;

  // Start of slice `slice` of `slices` over the row's values, a multiple of kSliceValues (the last ends at size_).
  [[nodiscard]] std::size_t slice_start(std::size_t slice, std::size_t slices) const noexcept {
    if (slice >= slices) return size_;
    return size_ * slice / slices / kSliceValues * kSliceValues;
  }

  // `count` samples from batch position frame·size + offset on, one frame's share at a time: frames sit `stride_`
  // apart.
  void load_span(std::size_t frame, std::size_t offset, const std::byte* input, SampleFormat format,
                 std::size_t count) noexcept {
    const std::size_t sample_bytes = bytes_per_sample(format);
    while (count > 0) {
      const std::size_t take = std::min(count, size_ - offset);
      load_frame(frame, offset, input, format, take);
      input += take * sample_bytes;
      count -= take;
      offset = 0;
      ++frame;
    }
  }

  void load_frame(std::size_t frame, std::size_t offset, const std::byte* input, SampleFormat format,
                  std::size_t count) noexcept {
    float* out = reinterpret_cast<float*>(frames_.get() + frame * stride_ + offset);  // fftwf_complex is float[2]
    const float* weights = weights_.data() + 2 * offset;
    switch (format) {
      case SampleFormat::ci8:
        convert_streaming<std::int8_t>(input, 2 * count, weights, out);
        break;
      case SampleFormat::ci16:
        convert_streaming<std::int16_t>(input, 2 * count, weights, out);
        break;
      case SampleFormat::cf32:
        convert_streaming<float>(input, 2 * count, weights, out);
        break;
      case SampleFormat::rf32:
        break;
    }
  }

  // The row of one frame (complex output, or average 1), fftshifted on the way: bin k goes to
  // (k + size/2) mod size, i.e. bins [0, upper) to [half, size) and bins [upper, size) to [0, half).
  void write_frame_row(std::size_t frame, std::byte* row) const noexcept {
    float* out = reinterpret_cast<float*>(row);  // rf32 values, or cf32 as interleaved I/Q floats
    const std::size_t half = size_ / 2;
    const std::size_t upper = size_ - half;
    const float* bins = reinterpret_cast<const float*>(frames_.get() + frame * stride_);
    if (output_ == FftOutput::complex) {
      scale_values(bins, 2 * upper, amplitude_scale_, out + 2 * half);
      scale_values(bins + 2 * upper, 2 * half, amplitude_scale_, out);
      return;
    }
    // |X|², scale and (for power_db) dB in one pass from the bins to the fftshifted row; no accumulator.
    const auto values = output_ == FftOutput::power ? power_values : power_decibels_values;
    values(bins, upper, power_scale_, out + half);
    values(bins + 2 * upper, half, power_scale_, out);
  }

  // Adds frame `frame`'s |X|² into the row values [from, to) (fftshifted positions) of `sum`, or stores
  // it there when `first_of_row`. sum[j] = |X[(j + upper) mod size]|²: values [from, to) ∩ [0, half) come
  // from bins upper + j, values ∩ [half, size) from bins j − half.
  void accumulate(std::size_t frame, bool first_of_row, float* sum, std::size_t from, std::size_t to) const noexcept {
    const std::size_t half = size_ / 2;
    const std::size_t upper = size_ - half;
    const std::size_t low_end = std::min(to, half);
    const std::size_t high_start = std::max(from, half);
    const float* bins = reinterpret_cast<const float*>(frames_.get() + frame * stride_);
    const auto power = first_of_row ? store_power : add_power;
    if (from < low_end) power(bins + 2 * (upper + from), low_end - from, sum + from);
    if (high_start < to) power(bins + 2 * (high_start - half), to - high_start, sum + high_start);
  }

  // Values [from, to) of the finished row summed in `sum`, averaged and (power_db) in dB, into `row`.
  void write_sum(const float* sum, std::byte* row, std::size_t from, std::size_t to) const noexcept {
    float* out = reinterpret_cast<float*>(row);
    if (output_ == FftOutput::power) {
      scale_values(sum + from, to - from, average_scale_, out + from);
    } else {
      decibels_values(sum + from, to - from, average_scale_, out + from);
    }
  }

  // Folds frames [first, first + count) into the row values [from, to) of the row being built and of
  // every row they finish; the row being built holds `pending` frames already.
  void fold_bins(std::size_t first, std::size_t count, std::size_t pending, std::byte* rows, std::size_t row_bytes,
                 std::size_t from, std::size_t to) noexcept {
    float* sum = accumulators_[building_].data();
    for (std::size_t frame = first; frame < first + count; ++frame) {
      accumulate(frame, pending == 0, sum, from, to);
      if (++pending == average_) {
        write_sum(sum, rows, from, to);
        rows += row_bytes;
        pending = 0;
      }
    }
  }

  // The same as fold_bins over all values, split by rows: `finished` rows end in these frames, and each
  // is summed by the part whose block holds its first frame (in that part's own accumulator, or the
  // one of the row being built for the first row when it continues one). Frames after the last
  // finished row start the next row in the other accumulator of the pair, which becomes the one the
  // row being built is in: the first row may still be reading the old one.
  void fold_rows(std::size_t first, std::size_t count, std::size_t pending, std::byte* rows, std::size_t row_bytes,
                 std::size_t finished) noexcept {
    const std::size_t end = first + count;
    const std::size_t rest = first + finished * average_ - pending;  // frames [rest, end) start the next row
    const auto row_start = [&](std::size_t row) { return row == 0 ? first : first + row * average_ - pending; };
    float* carried = accumulators_[building_].data();
    float* next = accumulators_[1 - building_].data();
    const auto fold_part = [&](std::size_t part) noexcept {
      for (std::size_t row = 0; row < finished; ++row) {
        const std::size_t from = row_start(row);
        if (from / block_ != part) continue;
        const bool continues = row == 0 && pending > 0;
        float* sum = continues ? carried : part_sums_[part].data();
        const std::size_t to = row_start(row + 1);
        for (std::size_t frame = from; frame < to; ++frame)
          accumulate(frame, frame == from && !continues, sum, 0, size_);
        write_sum(sum, rows + row * row_bytes, 0, size_);
      }
      if (rest < end && rest / block_ == part) {
        for (std::size_t frame = rest; frame < end; ++frame) accumulate(frame, frame == rest, next, 0, size_);
      }
    };
    if (first / block_ == std::max(row_start(finished - 1), rest < end ? rest : first) / block_) {
      fold_part(first / block_);  // every row starts in one block
    } else {
      team_->run(fold_part);
    }
    if (rest < end) building_ = 1 - building_;
  }

  // weights_[2n] = weights_[2n + 1] = w[n] · scale of `format` (ci8 / 128, ci16 / 32768): one multiply per value
  // in convert(). Refilled only when the input format changes, which a stream practically never does.
  void fill_weights(SampleFormat format) noexcept {
    float scale = 1.0F;
    if (format == SampleFormat::ci8) scale = 1.0F / 128.0F;
    if (format == SampleFormat::ci16) scale = 1.0F / 32768.0F;
    for (std::size_t n = 0; n < size_; ++n) {
      const float weight = window_[n] * scale;
      weights_[2 * n] = weight;
      weights_[2 * n + 1] = weight;
    }
    weights_format_ = format;
  }

  std::size_t size_;
  std::size_t stride_;
  std::size_t block_;  // frames per part, and per batched plan: about kBatchSamples, one core's L2 share
  std::size_t threads_;
  std::size_t batch_;  // block_ · threads_
  FftOutput output_;
  std::size_t average_;
  std::vector<float> window_;
  std::vector<float> weights_;  // window × input scale per interleaved I/Q value, for weights_format_
  SampleFormat weights_format_ = SampleFormat::ci16;
  // Power summed over a row's frames, in fftshifted order: the row being built is in
  // accumulators_[building_] (the other is where fold_rows starts the next one), and part_sums_ hold
  // the rows fold_rows sums whole, one per part.
  std::array<std::vector<float>, 2> accumulators_;
  std::size_t building_ = 0;
  std::vector<std::vector<float>> part_sums_;
  float amplitude_scale_ = 1;
  float power_scale_ = 1;
  float average_scale_ = 1;  // power_scale_ / average_: an averaged row's scale
  std::string work_note_;
  // The buffer before the plans made on it, so the plans are destroyed first.
  std::unique_ptr<fftwf_complex, FftwFree> frames_;
  Plan single_;
  Plan batched_;
  // Last: its workers stop before anything they touch goes.
  std::unique_ptr<WorkerTeam> team_;
};

}  // namespace

unsigned fftw_planner_flags(std::size_t size) { return size <= kMeasureLimit ? FFTW_MEASURE : FFTW_ESTIMATE; }

std::unique_ptr<FftBackend> make_fftw_backend(const FftBackendSpec& spec) {
  return std::make_unique<FftwBackend>(spec);
}

}  // namespace sluice
