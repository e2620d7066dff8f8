// The fused complex kernel itself, for every input format: every output row against a float64
// reference DFT of the converted, windowed input, scaled and fftshifted, output poisoned first;
// and the fence it writes when it starts.
#include "stages/fft/fft_kernels.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "pipeline/memory.hpp"

namespace sluice {
namespace {

constexpr unsigned kSize = fft_kernels::kFusedSize;

void check(cudaError_t error, const char* call) {
  ASSERT_EQ(error, cudaSuccess) << call << ": " << cudaGetErrorString(error);
}

struct KernelRun {
  SampleFormat format;
  const char* name;
};

class FusedComplexKernel : public ::testing::TestWithParam<KernelRun> {};

// Batch positions below kCarried come converted from the batch (a partial frame carried from the
// previous chunk: frame 1 straddles the border); the rest are read raw from the input chunk.
TEST_P(FusedComplexKernel, EveryRowMatchesAFloat64ReferenceDft) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU for the fused kernels: " << cuda_unavailable_reason();
  const KernelRun run = GetParam();
  constexpr unsigned kFrames = 40;
  constexpr unsigned kFirst = 3;  // rows for frames [3, 40): a fold that starts past the batch's first frame
  constexpr unsigned kCarried = 1500;
  const std::size_t sample_bytes = bytes_per_sample(run.format);
  const double full_scale = run.format == SampleFormat::ci8 ? 128.0 : run.format == SampleFormat::ci16 ? 32768.0 : 1.0;

  std::mt19937 random(20261125);
  std::vector<std::complex<double>> input(kFrames * kSize);  // the converted, windowed samples
  std::vector<std::byte> raw((kFrames * kSize - kCarried) * sample_bytes);
  std::vector<float> window(kSize);
  for (unsigned n = 0; n < kSize; ++n)
    window[n] = static_cast<float>(0.5 - 0.5 * std::cos(2 * std::numbers::pi * n / kSize));
  std::vector<float> carried(2 * kCarried);
  std::uniform_int_distribution<int> value(-100, 100);
  for (unsigned p = 0; p < kFrames * kSize; ++p) {
    const int re = value(random);
    const int im = value(random);
    const double weight = window[p % kSize];
    if (p < kCarried) {  // already converted, as the backend's load kernel leaves it
      carried[2 * p] = static_cast<float>(re / 100.0 * weight);
      carried[2 * p + 1] = static_cast<float>(im / 100.0 * weight);
      input[p] = {carried[2 * p], carried[2 * p + 1]};
      continue;
    }
    std::byte* at = raw.data() + (p - kCarried) * sample_bytes;
    if (run.format == SampleFormat::cf32) {
      const float pair[2] = {static_cast<float>(re / 100.0), static_cast<float>(im / 100.0)};
      std::memcpy(at, pair, sizeof(pair));
      input[p] = {static_cast<double>(pair[0]) * weight, static_cast<double>(pair[1]) * weight};
    } else if (run.format == SampleFormat::ci16) {
      const std::int16_t pair[2] = {static_cast<std::int16_t>(re * 300), static_cast<std::int16_t>(im * 300)};
      std::memcpy(at, pair, sizeof(pair));
      input[p] = {pair[0] / full_scale * weight, pair[1] / full_scale * weight};
    } else {
      const std::int8_t pair[2] = {static_cast<std::int8_t>(re), static_cast<std::int8_t>(im)};
      std::memcpy(at, pair, sizeof(pair));
      input[p] = {pair[0] / full_scale * weight, pair[1] / full_scale * weight};
    }
  }

  check(fft_kernels::prepare_fused(), "prepare_fused");
  MemoryRegion raw_memory(MemoryKind::device, raw.size());
  MemoryRegion batch_memory(MemoryKind::device, carried.size() * sizeof(float));
  MemoryRegion window_memory(MemoryKind::device, kSize * sizeof(float));
  const std::size_t out_values = static_cast<std::size_t>(kFrames - kFirst) * kSize * 2;
  MemoryRegion out_memory(MemoryKind::device, out_values * sizeof(float));
  check(cudaMemcpy(raw_memory.data(), raw.data(), raw.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(batch_memory.data(), carried.data(), batch_memory.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(window_memory.data(), window.data(), window_memory.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  const std::vector<float> poison(out_values, std::numeric_limits<float>::quiet_NaN());
  check(cudaMemcpy(out_memory.data(), poison.data(), out_memory.size(), cudaMemcpyHostToDevice), "cudaMemcpy");

  fft_kernels::FusedArgs args{};
  args.batch = reinterpret_cast<const float2*>(batch_memory.data());
  args.raw = raw_memory.data();
  args.raw_begin = kCarried;
  args.raw_end = kFrames * kSize;
  args.format = run.format;
  args.window = reinterpret_cast<const float*>(window_memory.data());
  args.frames = kFrames;
  const float amplitude = 1.0F / kSize;
  // The kernel's fence: its first thread writes the value it is given when it starts (the value
  // stands for the work before it). Two launches, two values: each must land.
  unsigned long long* word = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&word), sizeof(*word), cudaHostAllocMapped), "cudaHostAlloc");
  *word = 0;
  void* device_word = nullptr;
  check(cudaHostGetDevicePointer(&device_word, word, 0), "cudaHostGetDevicePointer");
  for (unsigned long long fence : {41ULL, 42ULL}) {
    const fft_kernels::Signal signal{static_cast<unsigned long long*>(device_word), fence};
    check(fft_kernels::fused_complex(args, kFirst, kFrames - kFirst, amplitude,
                                     reinterpret_cast<float2*>(out_memory.data()), nullptr, signal),
          "fused_complex");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    EXPECT_EQ(*word, fence) << run.name;
  }
  check(cudaFreeHost(word), "cudaFreeHost");
  std::vector<float> out(out_values);
  check(cudaMemcpy(out.data(), out_memory.data(), out_memory.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");

  std::vector<std::complex<double>> twiddle(kSize);
  for (unsigned m = 0; m < kSize; ++m) twiddle[m] = std::polar(1.0, -2 * std::numbers::pi * m / kSize);
  double error = 0;
  double norm = 0;
  for (unsigned row = 0; row < kFrames - kFirst; ++row) {
    const std::complex<double>* frame = input.data() + static_cast<std::size_t>(kFirst + row) * kSize;
    for (unsigned k = 0; k < kSize; ++k) {
      std::complex<double> sum = 0;
      for (unsigned n = 0; n < kSize; ++n) sum += frame[n] * twiddle[(k * n) % kSize];
      sum *= amplitude;
      const std::size_t at = (static_cast<std::size_t>(row) * kSize + (k + kSize / 2) % kSize) * 2;
      const double re = out[at];
      const double im = out[at + 1];
      error += std::isnan(re) || std::isnan(im) ? std::numeric_limits<double>::infinity()
                                                : std::norm(std::complex<double>(re, im) - sum);
      norm += std::norm(sum);
    }
  }
  EXPECT_LT(std::sqrt(error / norm), 1e-5) << run.name;
}

// A batch larger than the grid: each block transforms several frames in turn (the loop the small
// batch above never takes). Every row must equal, bit for bit, the row of a launch over that frame
// alone (one frame per block, checked against the reference above).
TEST(FusedComplexKernel, ABlockThatTransformsManyFramesWritesTheRowsOfOneFrameLaunches) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU for the fused kernels: " << cuda_unavailable_reason();
  constexpr unsigned kFrames = 8192;  // more than any current GPU holds resident (132 SMs × 7 blocks at most)
  constexpr unsigned kSingles = 97;   // frames checked one by one, spread over the batch
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-1.0F, 1.0F);
  std::vector<float> samples(static_cast<std::size_t>(kFrames) * kSize * 2);
  for (float& sample : samples) sample = value(random);
  std::vector<float> window(kSize, 1.0F);
  check(fft_kernels::prepare_fused(), "prepare_fused");
  MemoryRegion raw(MemoryKind::device, samples.size() * sizeof(float));
  MemoryRegion window_memory(MemoryKind::device, kSize * sizeof(float));
  MemoryRegion all(MemoryKind::device, raw.size());
  MemoryRegion one(MemoryKind::device, kSize * sizeof(float2));
  check(cudaMemcpy(raw.data(), samples.data(), raw.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(window_memory.data(), window.data(), window_memory.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemset(all.data(), 0xff, all.size()), "cudaMemset");  // NaN everywhere until written
  fft_kernels::FusedArgs args{};
  args.raw = raw.data();
  args.raw_end = kFrames * kSize;
  args.format = SampleFormat::cf32;
  args.window = reinterpret_cast<const float*>(window_memory.data());
  args.frames = kFrames;
  check(fft_kernels::fused_complex(args, 0, kFrames, 1.0F / kSize, reinterpret_cast<float2*>(all.data()), nullptr),
        "fused_complex");
  std::vector<float> rows(samples.size());
  check(cudaMemcpy(rows.data(), all.data(), all.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::size_t unwritten = 0;
  for (float x : rows) {
    if (std::isnan(x)) ++unwritten;
  }
  EXPECT_EQ(unwritten, 0U);
  std::vector<float> single(kSize * 2);
  unsigned mismatched = 0;
  for (unsigned k = 0; k < kSingles; ++k) {
    const unsigned frame = k * (kFrames / kSingles) + k % 7;
    check(fft_kernels::fused_complex(args, frame, 1, 1.0F / kSize, reinterpret_cast<float2*>(one.data()), nullptr),
          "fused_complex");
    check(cudaMemcpy(single.data(), one.data(), one.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (std::memcmp(single.data(), rows.data() + static_cast<std::size_t>(frame) * kSize * 2,
                    single.size() * sizeof(float)) != 0) {
      ++mismatched;
    }
  }
  EXPECT_EQ(mismatched, 0U) << "of " << kSingles << " frames";
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, FusedComplexKernel,
                         ::testing::Values(KernelRun{SampleFormat::cf32, "cf32"}, KernelRun{SampleFormat::ci16, "ci16"},
                                           KernelRun{SampleFormat::ci8, "ci8"}),
                         [](const ::testing::TestParamInfo<KernelRun>& param) {
                           return std::string(param.param.name);
                         });

}  // namespace
}  // namespace sluice
