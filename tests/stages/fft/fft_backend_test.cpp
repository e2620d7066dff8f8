// Both fft backends through the real stage and runtime against a float64 reference DFT, output pools
// poisoned with NaN. Built twice: fft_reference_test runs FFTW (CI); fft_gpu_test runs cuFFT with
// device-memory chunks and against FFTW (label gpu: skips without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <map>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/config.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/thread_cores.hpp"
#include "stages/fft/fft_stage.hpp"
#include "stages/fft/window.hpp"
#include "tests/stages/stage_test_util.hpp"
#include "tests/support/proc_tasks.hpp"
#include "tests/support/test_stages.hpp"

#ifndef SLUICE_TEST_FFT_BACKEND
#error "define SLUICE_TEST_FFT_BACKEND (fftw or cufft)"
#endif

namespace sluice {
namespace {

const std::string kBackend = SLUICE_TEST_FFT_BACKEND;
#ifdef SLUICE_TEST_FFT_FUSION
// A cuFFT build of this test may force a fusion (kernels); without one, 1024-point power cases
// take the fused path and the others cuFFT with kernels.
const std::string kFusion = SLUICE_TEST_FFT_FUSION;
#else
const std::string kFusion;
#endif

// The shared `feed` and `capture` stages (tests/support), under the names this file uses.
using test_support::FeedChunk;
using Captured = test_support::CapturedChunk;
std::vector<FeedChunk>& g_feed = test_support::feed().chunks;
SampleFormat& g_format = test_support::feed().format;
std::vector<Captured>& g_captured = test_support::current_capture()->chunks;
StreamInfo& g_stream = test_support::current_capture()->stream;
std::vector<std::string> g_notes;

const StageRegistry& test_registry() {
  static const StageRegistry registry =
      testing::builtin_registry_with({test_support::feed_source_type(), test_support::capture_sink_type()});
  return registry;
}

bool gpu_missing(std::string* reason) {
  if (kBackend != "cufft" || cuda_available()) return false;
  *reason = "no GPU for the cuFFT backend: " + cuda_unavailable_reason();
  return true;
}

// source → fft → capture through the real runtime; the fft stage's notes land in g_notes.
void run_fft(const std::string& source, const std::string& fft, const std::string& backend = kBackend,
             const std::string& chunk = "64KiB") {
  g_captured.clear();
  Pipeline pipeline(load_pipeline_text("pipeline: {chunk: " + chunk + ", chunks: 4}\nlanes: [{name: a, stages: [" +
                                           source + ", " + fft.substr(0, fft.size() - 1) + ", backend: " + backend +
                                           (backend == "cufft" && !kFusion.empty() ? ", fusion: " + kFusion : "") +
                                           "}, {type: capture, poison: true}]}]\n",
                                       "test.yaml", {}, test_registry()));
  pipeline.start();
  pipeline.run();
  ASSERT_TRUE(pipeline.failures().empty()) << pipeline.failures()[0].message;
  g_notes = pipeline.metrics_by_lane()[0][1]->notes;
}

std::vector<float> captured_values() {
  std::vector<float> values;
  for (const Captured& chunk : g_captured) {
    const std::size_t count = chunk.bytes.size() / sizeof(float);
    const std::size_t at = values.size();
    values.resize(at + count);
    std::memcpy(values.data() + at, chunk.bytes.data(), chunk.bytes.size());
  }
  return values;
}

// Random samples in `format` (integers across their full range), their exact values as doubles.
struct Input {
  std::vector<std::byte> bytes;
  std::vector<std::complex<double>> values;
};
Input random_input(SampleFormat format, std::size_t count, std::mt19937& random) {
  Input input{std::vector<std::byte>(count * bytes_per_sample(format)), std::vector<std::complex<double>>(count)};
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  for (std::size_t i = 0; i < count; ++i) {
    std::byte* out = input.bytes.data() + i * bytes_per_sample(format);
    if (format == SampleFormat::cf32) {
      const float pair[2] = {uniform(random), uniform(random)};
      std::memcpy(out, pair, sizeof(pair));
      input.values[i] = {pair[0], pair[1]};
    } else if (format == SampleFormat::ci16) {
      std::uniform_int_distribution<int> integer(-32768, 32767);
      const std::int16_t pair[2] = {static_cast<std::int16_t>(integer(random)),
                                    static_cast<std::int16_t>(integer(random))};
      std::memcpy(out, pair, sizeof(pair));
      input.values[i] = {pair[0] / 32768.0, pair[1] / 32768.0};
    } else {
      std::uniform_int_distribution<int> integer(-128, 127);
      const std::int8_t pair[2] = {static_cast<std::int8_t>(integer(random)),
                                   static_cast<std::int8_t>(integer(random))};
      std::memcpy(out, pair, sizeof(pair));
      input.values[i] = {pair[0] / 128.0, pair[1] / 128.0};
    }
  }
  return input;
}

// Rows the stage must produce, computed in double: direct DFT of each windowed frame, normalised by
// N · coherent gain, |X|² averaged over `average` frames, fftshifted, in the output's layout.
std::vector<double> reference_rows(const std::vector<std::complex<double>>& samples, std::size_t size, WindowKind kind,
                                   std::size_t average, const std::string& output) {
  std::vector<float> window(size);
  fill_window(kind, window);
  const double scale = 1.0 / (static_cast<double>(size) * coherent_gain(window));
  const std::size_t rows = samples.size() / (size * average);
  std::vector<std::complex<double>> twiddle(size);  // e^(-2πi m/N): the O(N²) sum then needs no sin or cos
  for (std::size_t m = 0; m < size; ++m) {
    twiddle[m] = std::polar(1.0, -2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(size));
  }
  std::vector<double> out;
  for (std::size_t row = 0; row < rows; ++row) {
    std::vector<double> power(size, 0.0);
    std::vector<std::complex<double>> bins(size);
    for (std::size_t frame = 0; frame < average; ++frame) {
      const std::complex<double>* x = samples.data() + (row * average + frame) * size;
      for (std::size_t k = 0; k < size; ++k) {
        std::complex<double> sum = 0;
        for (std::size_t n = 0; n < size; ++n) sum += x[n] * static_cast<double>(window[n]) * twiddle[k * n % size];
        bins[(k + size / 2) % size] = sum * scale;
        power[(k + size / 2) % size] += std::norm(sum * scale) / static_cast<double>(average);
      }
    }
    for (std::size_t i = 0; i < size; ++i) {
      if (output == "complex") {
        out.push_back(bins[i].real());
        out.push_back(bins[i].imag());
      } else {
        out.push_back(output == "power" ? power[i] : 10.0 * std::log10(power[i]));
      }
    }
  }
  return out;
}

double relative_error(const std::vector<float>& out, const std::vector<double>& reference) {
  if (out.size() != reference.size()) return std::numeric_limits<double>::infinity();
  double error = 0;
  double norm = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double difference = static_cast<double>(out[i]) - reference[i];
    error += std::isnan(out[i]) ? std::numeric_limits<double>::infinity()
                                : difference * difference;  // NaN: the poison was never overwritten
    norm += reference[i] * reference[i];
  }
  return std::sqrt(error / norm);
}

// Cuts `bytes` into chunks of odd sizes (whole samples, up to `most`), so frames straddle chunk boundaries.
std::vector<FeedChunk> odd_chunks(const std::vector<std::byte>& bytes, std::size_t sample_bytes, std::mt19937& random,
                                  std::size_t most = 8191) {
  std::vector<FeedChunk> chunks;
  std::uniform_int_distribution<std::size_t> samples(1, most);
  for (std::size_t at = 0; at < bytes.size();) {
    const std::size_t take = std::min(bytes.size() - at, samples(random) * sample_bytes);
    chunks.push_back(FeedChunk{std::vector<std::byte>(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                                      bytes.begin() + static_cast<std::ptrdiff_t>(at + take)),
                               at / sample_bytes,
                               {}});
    at += take;
  }
  return chunks;
}

struct Case {
  SampleFormat format;
  std::string output;
  std::size_t size;
  WindowKind window;
  std::size_t average;
};

std::string window_name(WindowKind kind) { return std::string(to_string(kind)); }

// Every format × output, sizes a power of two, a mixed radix and a prime, every window, averaging.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const WindowKind windows[] = {WindowKind::none, WindowKind::hann, WindowKind::hamming, WindowKind::blackman};
  const std::size_t sizes[] = {1024, 48, 7};
  std::size_t turn = 0;
  for (const SampleFormat format : {SampleFormat::ci8, SampleFormat::ci16, SampleFormat::cf32}) {
    for (const std::string output : {"complex", "power", "power_db"}) {
      for (const std::size_t average : {1UL, 3UL}) {
        if (output == "complex" && average > 1) continue;
        cases.push_back(Case{format, output, sizes[turn % 3], windows[turn % 4], average});
        ++turn;
      }
    }
  }
  return cases;
}

std::string fft_settings(const Case& test) {
  return "{type: fft, size: " + std::to_string(test.size) + ", window: " + window_name(test.window) +
         ", average: " + std::to_string(test.average) + ", output: " + test.output;
}

std::string case_name(const Case& test) {
  return std::string(to_string(test.format)) + " " + test.output + " size " + std::to_string(test.size) + " " +
         window_name(test.window) + " average " + std::to_string(test.average);
}

// `threads` > 1 (FFTW): chunks up to 2 MiB − 1 sample, so that one chunk fills several threads' blocks of a batch.
void check_case(const Case& test, const std::string& memory, std::mt19937& random, std::size_t threads = 1) {
  g_format = test.format;
  const std::size_t frames = 40 * test.average + 1;  // and a partial frame at the end, which makes no row
  const Input input = random_input(test.format, frames * test.size + test.size / 2, random);
  const std::size_t sample_bytes = bytes_per_sample(test.format);
  g_feed = odd_chunks(input.bytes, sample_bytes, random, threads == 1 ? 8191 : (2U << 20) / sample_bytes - 1);
  const std::string description = case_name(test) + " memory " + memory + " threads " + std::to_string(threads);
  run_fft(
      "{type: feed, memory: " + memory + "}",
      fft_settings(test) + ", memory: " + memory + (threads > 1 ? ", threads: " + std::to_string(threads) : "") + "}",
      kBackend, threads == 1 ? "64KiB" : "2MiB");
  const std::vector<double> reference = reference_rows(input.values, test.size, test.window, test.average, test.output);
  const double error = relative_error(captured_values(), reference);
  // float32 arithmetic over a 1024-point transform lands near 1e-7; the bound leaves room, not slack.
  EXPECT_LT(error, 1e-5) << description;
}

TEST(FftBackend, EveryOptionMatchesAFloat64ReferenceDft) {
  if (std::string reason; gpu_missing(&reason)) GTEST_SKIP() << reason;
  std::mt19937 random(std::random_device{}());
  for (const Case& test : all_cases()) check_case(test, "host", random);
}

TEST(FftBackend, DeviceChunksInAndOutMatchTheReference) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU for device-memory chunks: " << cuda_unavailable_reason();
  std::mt19937 random(std::random_device{}());
  for (const Case& test : all_cases()) check_case(test, "device", random);
}

TEST(FftBackend, AToneLandsInItsBinAtItsLevel) {
  if (std::string reason; gpu_missing(&reason)) GTEST_SKIP() << reason;
  // 125 kHz at 1 Msps, 1024 points: bin 128, at index 512 + 128 after fftshift; amplitude 0.5 is -6.02 dB.
  run_fft("{type: generator, format: ci16, sample_rate: 1MHz, frequency: 125kHz, amplitude: 0.5, stop_after: 1MiB}",
          "{type: fft, size: 1024, window: hann, average: 4, output: power_db}");
  const std::vector<float> values = captured_values();
  ASSERT_EQ(values.size(), 1024U * 64);  // 256 Ki samples, 4096 per row
  for (std::size_t row = 0; row < 64; ++row) {
    const float* spectrum = values.data() + row * 1024;
    EXPECT_NEAR(spectrum[640], 20 * std::log10(0.5), 0.1) << "row " << row;
    EXPECT_EQ(std::max_element(spectrum, spectrum + 1024) - spectrum, 640) << "row " << row;
  }
  EXPECT_NE(g_stream.description.find(kBackend == "cufft" ? "cuFFT" : "FFTW"), std::string::npos)
      << g_stream.description;
}

// Runs the same input with gaps through `backend` and returns what came out.
std::vector<Captured> gapped_run(const std::string& backend, const Input& input, std::size_t size) {
  std::mt19937 cuts(5);  // the same chunk boundaries for both backends
  g_feed = odd_chunks(input.bytes, bytes_per_sample(g_format), cuts);
  g_feed[1].gaps = {Gap{g_feed[1].first_sample + 3, 100}};
  g_feed[3].gaps = {Gap{g_feed[3].first_sample, 2 * size}};
  run_fft("{type: feed}", "{type: fft, size: " + std::to_string(size) + ", average: 2, output: power}", backend);
  return g_captured;
}

TEST(FftBackend, GpuAndFftwAgreeOnValuesTimeAndGaps) {
  if (!cuda_available()) GTEST_SKIP() << "no GPU to compare cuFFT with FFTW: " << cuda_unavailable_reason();
  std::mt19937 random(std::random_device{}());
  g_format = SampleFormat::ci16;
  const Input input = random_input(g_format, 60000, random);
  const std::vector<Captured> gpu = gapped_run("cufft", input, 1024);
  const std::vector<Captured> cpu = gapped_run("fftw", input, 1024);
  ASSERT_EQ(gpu.size(), cpu.size());
  std::size_t gap_rows = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    EXPECT_EQ(gpu[i].first_sample, cpu[i].first_sample);
    EXPECT_EQ(gpu[i].sample_count, cpu[i].sample_count);
    EXPECT_EQ(gpu[i].timestamp.seconds, cpu[i].timestamp.seconds);
    EXPECT_EQ(gpu[i].timestamp.picoseconds, cpu[i].timestamp.picoseconds);
    ASSERT_EQ(gpu[i].gaps.size(), cpu[i].gaps.size());
    for (std::size_t g = 0; g < gpu[i].gaps.size(); ++g) {
      EXPECT_EQ(gpu[i].gaps[g].first_sample, cpu[i].gaps[g].first_sample);
      EXPECT_EQ(gpu[i].gaps[g].length, cpu[i].gaps[g].length);
      gap_rows += gpu[i].gaps[g].length / 1024;
    }
    std::vector<float> a(gpu[i].bytes.size() / 4);
    std::vector<float> b(a.size());
    std::memcpy(a.data(), gpu[i].bytes.data(), gpu[i].bytes.size());
    std::memcpy(b.data(), cpu[i].bytes.data(), cpu[i].bytes.size());
    EXPECT_LT(relative_error(a, std::vector<double>(b.begin(), b.end())), 1e-5) << "chunk " << i;
  }
  EXPECT_GE(gap_rows, 2U);  // both gaps marked a row
}

TEST(FftBackend, AutoPicksCufftWithAGpuAndSaysSo) {
  g_format = SampleFormat::cf32;
  std::mt19937 random(1);
  g_feed = {FeedChunk{random_input(g_format, 4096, random).bytes, 0, {}}};
  run_fft("{type: feed}", "{type: fft, size: 1024}", "auto");
  // With a GPU a second note says how the work around the transform is fused.
  ASSERT_EQ(g_notes.size(), cuda_available() ? 2U : 1U);
  EXPECT_NE(g_notes[0].find(cuda_available() ? "cuFFT" : "FFTW"), std::string::npos) << g_notes[0];
  // 1024 points, power_db: the fused path, whenever the fusion is left to auto.
  if (cuda_available()) {
    EXPECT_NE(g_notes[1].find("fused"), std::string::npos) << g_notes[1];
  }
  EXPECT_NE(g_stream.description.find(cuda_available() ? "cuFFT" : "FFTW"), std::string::npos) << g_stream.description;
}

// A retune upstream (Chunk::context_change at input sample 5000): the first row made wholly
// from input after it (row 5 of 1024-sample rows, 256 bins averaged over 4) starts an output
// chunk that carries the change, so the recorder starts a segment there; the row over the
// change (row 4, 4096..5119) stays with the old values; nothing is skipped or repeated.
TEST(FftBackend, AContextChangeStartsTheOutputChunkOfTheFirstRowAfterIt) {
  std::string reason;
  if (gpu_missing(&reason)) GTEST_SKIP() << reason;
  g_format = SampleFormat::cf32;
  std::mt19937 random(5);
  const Input input = random_input(g_format, 12000, random);
  const auto part = [&](std::size_t from, std::size_t to) {
    return std::vector<std::byte>(input.bytes.begin() + static_cast<std::ptrdiff_t>(from * 8),
                                  input.bytes.begin() + static_cast<std::ptrdiff_t>(to * 8));
  };
  StreamContext retuned;
  retuned.rf_frequency = 2.5e9;
  retuned.sample_rate = 1e6;
  g_feed = {FeedChunk{part(0, 5000), 0, {}}, FeedChunk{part(5000, 12000), 5000, {}, true, retuned}};
  run_fft("{type: feed}", "{type: fft, size: 256, average: 4, output: power}");
  std::size_t changes = 0;
  std::uint64_t expected_first = 0;
  for (const Captured& chunk : g_captured) {
    EXPECT_EQ(chunk.first_sample, expected_first);  // contiguous rows: none skipped or repeated
    expected_first += chunk.sample_count;
    if (!chunk.context_change) continue;
    ++changes;
    EXPECT_EQ(chunk.first_sample, 5U * 256U) << "the change belongs to row 5, the first wholly after sample 5000";
    EXPECT_EQ(chunk.context.rf_frequency, 2.5e9);
    EXPECT_TRUE(std::isnan(chunk.context.sample_rate)) << "the input's rate is not the spectra's";
  }
  EXPECT_EQ(changes, 1U);
  EXPECT_EQ(expected_first, 11U * 256U);  // 12000 samples: 11 whole rows of 1024
}

TEST(FftBackend, CufftWithoutAGpuIsAnErrorWithAHint) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present: the cuFFT backend runs instead (fft_gpu_test)";
  g_format = SampleFormat::cf32;
  g_feed = {};
  Pipeline pipeline(
      load_pipeline_text("lanes: [{name: a, stages: [{type: feed}, {type: fft, backend: cufft}, {type: capture}]}]\n",
                         "test.yaml", {}, test_registry()));
  try {
    pipeline.start();
    FAIL() << "backend: cufft started without a GPU";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("backend: fftw"), std::string::npos) << error.what();
  }
}

TEST(FftBackend, FusionIsRefusedWhereItCannotApply) {
  g_format = SampleFormat::cf32;
  g_feed = {};
  try {
    load_pipeline_text(
        "lanes: [{name: a, stages: [{type: feed}, {type: fft, backend: fftw, fusion: kernels}, {type: capture}]}]\n",
        "test.yaml", {}, test_registry());
    FAIL() << "fusion: kernels with backend: fftw validated";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("fusion"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("cuFFT"), std::string::npos) << error.what();
  }
  if (cuda_available()) return;  // auto takes cuFFT there, and the fusion applies
  Pipeline pipeline(
      load_pipeline_text("lanes: [{name: a, stages: [{type: feed}, {type: fft, fusion: fused}, {type: capture}]}]\n",
                         "test.yaml", {}, test_registry()));
  try {
    pipeline.start();
    FAIL() << "fusion: fused started on FFTW";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("remove fusion"), std::string::npos) << error.what();
  }
}

// FFTW's threads split each batch: the options against the float64 reference on 3 threads (chunks
// big enough that one fills several threads' blocks; the sizes whose reference is cheap, since the
// next test ties every case to one thread's output bit for bit), then 2 and 3 threads against 1 on
// the same input with gaps: the same bytes, first samples, times and gaps.
TEST(FftBackend, FftwThreadsMatchTheReference) {
  if (kBackend != "fftw") GTEST_SKIP() << "threads is an FFTW setting: fft_reference_test checks it";
  std::mt19937 random(std::random_device{}());
  for (const Case& test : all_cases()) {
    if (test.size < 1024) check_case(test, "host", random, 3);
  }
}

std::vector<Captured> threaded_run(const Case& test, std::size_t threads) {
  const std::string fft = fft_settings(test) + ", chunk: 24KiB" +  // rows split across many output chunks
                          (threads > 1 ? ", threads: " + std::to_string(threads) : "") + "}";
  run_fft("{type: feed}", fft, "fftw", "1MiB");
  return g_captured;
}

// A run's output as a stream, apart from where the stage cut it into chunks: the stage hands on
// the rows it has whenever its input pauses, so chunk boundaries follow timing, never the values.
struct OutputStream {
  std::vector<std::byte> bytes;                                          // every value, in order
  std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;             // contiguous values: first, count
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;             // first value, length (touching ones merged)
  std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> times;  // a chunk's first value: its time
};

OutputStream as_stream(const std::vector<Captured>& chunks) {
  OutputStream stream;
  for (const Captured& chunk : chunks) {
    stream.bytes.insert(stream.bytes.end(), chunk.bytes.begin(), chunk.bytes.end());
    if (!stream.runs.empty() && stream.runs.back().first + stream.runs.back().second == chunk.first_sample) {
      stream.runs.back().second += chunk.sample_count;
    } else {
      stream.runs.emplace_back(chunk.first_sample, chunk.sample_count);
    }
    for (const Gap& gap : chunk.gaps) {  // a gap that a chunk boundary cut in two is one gap
      if (!stream.gaps.empty() && stream.gaps.back().first + stream.gaps.back().second == gap.first_sample) {
        stream.gaps.back().second += gap.length;
      } else {
        stream.gaps.emplace_back(gap.first_sample, gap.length);
      }
    }
    stream.times[chunk.first_sample] = {static_cast<std::int64_t>(chunk.timestamp.seconds),
                                        static_cast<std::int64_t>(chunk.timestamp.picoseconds)};
  }
  return stream;
}

TEST(FftBackend, FftwThreadsGiveTheSameRowsGapsAndTimesAsOneThread) {
  if (kBackend != "fftw") GTEST_SKIP() << "threads is an FFTW setting: fft_reference_test checks it";
  std::mt19937 random(std::random_device{}());
  std::vector<Case> cases = all_cases();
  cases.push_back(Case{SampleFormat::ci16, "power_db", 1024, WindowKind::hann, 16});  // the mission's lane
  cases.push_back(Case{SampleFormat::ci16, "power", 1024, WindowKind::hann, 100});    // rows longer than a batch
  for (std::size_t turn = 0; turn < cases.size(); ++turn) {
    const Case& test = cases[turn];
    g_format = test.format;
    const std::size_t sample_bytes = bytes_per_sample(test.format);
    const std::size_t samples = std::max<std::size_t>(300 * test.size, 200'000 / sample_bytes);
    const Input input = random_input(test.format, samples, random);
    // Chunks from one sample to a quarter of the input or 1 MiB (several batches), a gap in every fourth of them.
    g_feed =
        odd_chunks(input.bytes, sample_bytes, random, std::min<std::size_t>(samples / 4, (1U << 20) / sample_bytes));
    for (std::size_t i = 1; i < g_feed.size(); i += 4) {
      const std::uint64_t length = g_feed[i].bytes.size() / sample_bytes;
      const std::uint64_t at = std::uniform_int_distribution<std::uint64_t>(0, length - 1)(random);
      g_feed[i].gaps = {
          Gap{g_feed[i].first_sample + at, std::min<std::uint64_t>(length - at, 1 + at % (3 * test.size))}};
    }
    const std::vector<Captured> one = threaded_run(test, 1);
    ASSERT_FALSE(one.empty()) << case_name(test);
    std::size_t gaps = 0;
    for (const Captured& chunk : one) gaps += chunk.gaps.size();
    EXPECT_GT(gaps, 0U) << case_name(test);
    // Two threads (even halves) and three (a third thread that often gets a partial block or none)
    // in turns, both on the last two cases: each run costs the runtime's 50 ms poll.
    std::vector<std::size_t> thread_counts = {turn % 2 == 0 ? 2UL : 3UL};
    if (turn + 2 >= cases.size()) thread_counts = {2, 3};
    for (const std::size_t threads : thread_counts) {
      const std::vector<Captured> many = threaded_run(test, threads);
      const std::string description = case_name(test) + ", threads " + std::to_string(threads);
      const OutputStream a = as_stream(one);
      const OutputStream b = as_stream(many);
      EXPECT_EQ(b.runs, a.runs) << description;
      EXPECT_EQ(b.gaps, a.gaps) << description;
      ASSERT_EQ(b.bytes.size(), a.bytes.size()) << description;
      EXPECT_EQ(std::memcmp(b.bytes.data(), a.bytes.data(), a.bytes.size()), 0) << description << ": values differ";
      // Where both runs start a chunk at the same value, that chunk's time is the same.
      std::size_t compared = 0;
      for (const auto& [first, time] : b.times) {
        const auto same = a.times.find(first);
        if (same == a.times.end()) continue;
        EXPECT_EQ(time, same->second) << description << ", chunk at value " << first;
        ++compared;
      }
      EXPECT_GE(compared, a.runs.size()) << description << ": every run's first chunk is compared";
    }
  }
}

std::string config_error(const std::string& fft) {
  try {
    load_pipeline_text("lanes: [{name: a, stages: [{type: feed}, " + fft + ", {type: capture}]}]\n", "test.yaml", {},
                       test_registry());
  } catch (const std::exception& error) {
    return error.what();
  }
  return "(validated)";
}

std::string start_error(const std::string& fft) {
  Pipeline pipeline(load_pipeline_text("lanes: [{name: a, stages: [{type: feed}, " + fft + ", {type: capture}]}]\n",
                                       "test.yaml", {}, test_registry()));
  try {
    pipeline.start();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "(started)";
}

TEST(FftBackend, FftwThreadsAreRefusedWhereTheyCannotApply) {
  g_format = SampleFormat::cf32;
  g_feed = {};
  std::string error = config_error("{type: fft, backend: cufft, threads: 2}");
  EXPECT_NE(error.find("threads applies to the FFTW backend only"), std::string::npos) << error;
  EXPECT_NE(error.find("backend: fftw"), std::string::npos) << error;
  error = config_error("{type: fft, backend: fftw, threads: 0}");
  EXPECT_NE(error.find("threads"), std::string::npos) << error;
  error = config_error("{type: fft, backend: fftw, threads: 2, worker_cpus: [0, 1]}");
  EXPECT_NE(error.find("worker_cpus names 2 cores, and threads: 2 starts 1 workers"), std::string::npos) << error;
  error = config_error("{type: fft, backend: fftw, worker_cpus: [1]}");
  EXPECT_NE(error.find("threads: 1 starts 0 workers"), std::string::npos) << error;
  error = config_error("{type: fft, backend: fftw, threads: 3, worker_cpus: [1, 1]}");
  EXPECT_NE(error.find("core 1 twice"), std::string::npos) << error;
  error = config_error("{type: fft, backend: fftw, threads: 2, worker_cpus: [1.5]}");
  EXPECT_NE(error.find("not a core number"), std::string::npos) << error;
  // A worker on the stage's own core would only take turns with it.
  error = start_error("{type: fft, backend: fftw, cpu: 0, threads: 2, worker_cpus: [0]}");
  EXPECT_NE(error.find("worker_cpus includes core 0"), std::string::npos) << error;
  if (cuda_available()) {
    error = start_error("{type: fft, size: 48, threads: 2}");
    EXPECT_NE(error.find("auto chose cuFFT"), std::string::npos) << error;
  } else {
    EXPECT_EQ(start_error("{type: fft, size: 48, threads: 2}"),
              "(started)");  // auto takes FFTW here, and the threads apply
  }
}

TEST(FftBackend, FftwWorkersArePinnedAndSleepWhenIdle) {
  const std::vector<int> allowed = allowed_cores();
  const auto usable = [&](int core) { return std::find(allowed.begin(), allowed.end(), core) != allowed.end(); };
  if (!usable(0) || !usable(1)) GTEST_SKIP() << "needs cores 0 and 1";
  g_format = SampleFormat::ci16;
  std::mt19937 random(3);
  g_feed = {FeedChunk{random_input(g_format, 200'000, random).bytes, 0, {}}};
  ASSERT_TRUE(test::tasks_named("fftw worker 1").empty());
  {
    // Named cores: the worker runs on core 1 only, and says so in the stage's note.
    Pipeline pipeline(
        load_pipeline_text("lanes: [{name: a, stages: [{type: feed}, {type: fft, backend: fftw, size: 64, cpu: 0, "
                           "threads: 2, worker_cpus: [1]}, "
                           "{type: capture}]}]\n",
                           "test.yaml", {}, test_registry()));
    pipeline.start();
    const std::vector<std::string> workers = test::tasks_named("fftw worker 1");
    ASSERT_EQ(workers.size(), 1U);
    EXPECT_EQ(test::status_field(workers[0], "Cpus_allowed_list"), "1");
    g_captured.clear();
    pipeline.run();
    ASSERT_TRUE(pipeline.failures().empty()) << pipeline.failures()[0].message;
    EXPECT_EQ(g_captured.size(), 1U);
    const std::vector<std::string> notes = pipeline.metrics_by_lane()[0][1]->notes;
    ASSERT_EQ(notes.size(), 1U);
    EXPECT_NE(notes[0].find("FFTW on 2 threads"), std::string::npos) << notes[0];
    EXPECT_NE(notes[0].find("on cores 1"), std::string::npos) << notes[0];
    // Idle (the stream ended, the stage is kept until the pipeline goes): asleep, not spinning.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(test::status_field(workers[0], "State").substr(0, 1), "S") << test::status_field(workers[0], "State");
  }
  // Joined with the stage (the kernel drops a joined thread's /proc entry a moment after the join returns).
  for (int poll = 0; poll < 100 && !test::tasks_named("fftw worker 1").empty(); ++poll) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(test::tasks_named("fftw worker 1").empty());
  {
    // No worker_cpus: the workers keep off the stage's own core.
    Pipeline pipeline(
        load_pipeline_text("lanes: [{name: a, stages: [{type: feed}, {type: fft, backend: fftw, size: 64, cpu: 1, "
                           "threads: 3}, {type: capture}]}]\n",
                           "test.yaml", {}, test_registry()));
    pipeline.start();
    std::vector<int> expected = allowed;
    std::erase(expected, 1);
    for (const char* name : {"fftw worker 1", "fftw worker 2"}) {
      const std::vector<std::string> workers = test::tasks_named(name);
      ASSERT_EQ(workers.size(), 1U) << name;
      EXPECT_EQ(parse_core_list(test::status_field(workers[0], "Cpus_allowed_list")), expected) << name;
    }
  }
}

}  // namespace
}  // namespace sluice
