// fft stage: real FFTW through the real runtime against a direct DFT, tone levels, averaging,
// carry-over across chunk boundaries, gaps mapped to rows, settings validation, input scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <numbers>
#include <random>

#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
#include "stages/fft/fft_stage.hpp"
#include "stages/fft/window.hpp"
#include "tests/stages/stage_test_util.hpp"
#include "tests/support/test_stages.hpp"

namespace sluice {
namespace {

// The shared `feed` and `capture` stages (tests/support), under the names this file uses.
using test_support::FeedChunk;
using Captured = test_support::CapturedChunk;
std::vector<FeedChunk>& g_feed = test_support::feed().chunks;
SampleFormat& g_feed_format = test_support::feed().format;
std::vector<Captured>& g_captured = test_support::current_capture()->chunks;
StreamInfo& g_stream = test_support::current_capture()->stream;

const StageRegistry& test_registry() {
  static const StageRegistry registry =
      testing::builtin_registry_with({test_support::feed_source_type(), test_support::capture_sink_type()});
  return registry;
}

// Runs `source` → `fft` → capture; returns the pipeline for its metrics.
std::unique_ptr<Pipeline> run_fft(const std::string& source, const std::string& fft,
                                  const std::string& chunk = "64KiB") {
  g_captured.clear();
  auto pipeline = std::make_unique<Pipeline>(load_pipeline_text("pipeline: {chunk: " + chunk +
                                                                    ", chunks: 8}\nlanes: [{name: a, stages: [" +
                                                                    source + ", " + fft + ", {type: capture}]}]\n",
                                                                "test.yaml", {}, test_registry()));
  pipeline->start();
  pipeline->run();
  EXPECT_TRUE(pipeline->failures().empty()) << pipeline->failures()[0].message;
  return pipeline;
}

// A counter of the fft stage (the second stage of lane 0); fails the test when it is missing.
std::uint64_t counter_value(const Pipeline& pipeline, const std::string& name) {
  for (const auto& counter : pipeline.metrics_by_lane()[0][1]->counters()) {
    if (counter.name == name) return counter.get();
  }
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

// Every output row, in order, as floats (rf32: size values; cf32: 2·size).
std::vector<std::vector<float>> captured_rows(std::size_t floats_per_row) {
  std::vector<std::vector<float>> rows;
  for (const Captured& chunk : g_captured) {
    const std::size_t count = chunk.bytes.size() / sizeof(float);
    EXPECT_EQ(count % floats_per_row, 0U);
    for (std::size_t at = 0; at + floats_per_row <= count; at += floats_per_row) {
      std::vector<float> row(floats_per_row);
      std::memcpy(row.data(), chunk.bytes.data() + at * sizeof(float), floats_per_row * sizeof(float));
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::vector<std::complex<float>> random_samples(std::size_t count, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  std::vector<std::complex<float>> samples(count);
  for (auto& sample : samples) sample = {uniform(random), uniform(random)};
  return samples;
}

std::vector<std::byte> as_bytes(const std::vector<std::complex<float>>& samples) {
  std::vector<std::byte> bytes(samples.size() * sizeof(samples[0]));
  std::memcpy(bytes.data(), samples.data(), bytes.size());
  return bytes;
}

// The trusted reference: a direct O(N²) DFT in double of the windowed frame, normalised by
// N · coherent gain and fftshifted (bin k at index (k + N/2) mod N).
std::vector<std::complex<double>> reference_spectrum(const std::complex<float>* frame, std::size_t size,
                                                     WindowKind kind) {
  std::vector<float> window(size);
  fill_window(kind, window);
  const double scale = 1.0 / (static_cast<double>(size) * coherent_gain(window));
  std::vector<std::complex<double>> shifted(size);
  for (std::size_t k = 0; k < size; ++k) {
    std::complex<double> sum = 0;
    for (std::size_t n = 0; n < size; ++n) {
      const double angle = -2.0 * std::numbers::pi * static_cast<double>(k * n % size) / static_cast<double>(size);
      sum += std::complex<double>(frame[n]) * static_cast<double>(window[n]) * std::polar(1.0, angle);
    }
    shifted[(k + size / 2) % size] = sum * scale;
  }
  return shifted;
}

TEST(Fft, ComplexAndPowerMatchADirectDftForRandomInput) {
  for (const std::size_t size : {64UL, 48UL, 7UL}) {  // a power of two, a mixed radix, a prime
    g_feed_format = SampleFormat::cf32;
    const auto samples = random_samples(size * 5, 11);
    g_feed = {FeedChunk{as_bytes(samples), 0, {}}};
    const std::string common = "size: " + std::to_string(size) + ", window: blackman";
    run_fft("{type: feed}", "{type: fft, " + common + ", output: complex}");
    const auto complex_rows = captured_rows(2 * size);
    run_fft("{type: feed}", "{type: fft, " + common + ", output: power}");
    const auto power_rows = captured_rows(size);
    ASSERT_EQ(complex_rows.size(), 5U);
    ASSERT_EQ(power_rows.size(), 5U);
    for (std::size_t row = 0; row < 5; ++row) {
      const auto expected = reference_spectrum(samples.data() + row * size, size, WindowKind::blackman);
      for (std::size_t i = 0; i < size; ++i) {
        EXPECT_NEAR(complex_rows[row][2 * i], expected[i].real(), 1e-5)
            << "size " << size << " row " << row << " index " << i;
        EXPECT_NEAR(complex_rows[row][2 * i + 1], expected[i].imag(), 1e-5)
            << "size " << size << " row " << row << " index " << i;
        EXPECT_NEAR(power_rows[row][i], std::norm(expected[i]), 1e-5 + 1e-4 * std::norm(expected[i]));
      }
    }
  }
}

TEST(Fft, GeneratorToneLandsInItsBinAtItsLevelWithRowMetadata) {
  // 125 kHz at 1 Msps with 1024 points: bin 128, which fftshift puts at index 512 + 128.
  run_fft("{type: generator, format: cf32, sample_rate: 1MHz, frequency: 125kHz, amplitude: 0.5, stop_after: 256KiB}",
          "{type: fft, size: 1024, window: hann, average: 2, output: power_db}");
  EXPECT_EQ(g_stream.format, SampleFormat::rf32);
  EXPECT_EQ(g_stream.fft_size, 1024U);
  EXPECT_EQ(g_stream.averaging, 2U);
  EXPECT_EQ(g_stream.window, "hann");
  // Values (rows × size) per second: 1 Msps averaged over 2 frames makes 0.5 M values/s, so
  // values / rate is the input's duration.
  EXPECT_EQ(g_stream.sample_rate, 1e6 / 2);
  EXPECT_NE(g_stream.description.find("DC at index size/2"), std::string::npos) << g_stream.description;
  const auto rows = captured_rows(1024);
  ASSERT_EQ(rows.size(), 256U * 1024 / 8 / 2048);  // 32768 samples, 2048 per row
  for (const auto& row : rows) {
    EXPECT_NEAR(row[640], 20 * std::log10(0.5), 0.01);
    EXPECT_NEAR(row[639], 20 * std::log10(0.25), 0.01);  // hann: each neighbour holds half the amplitude
    for (std::size_t i = 0; i < 1024; ++i) {
      if (i < 638 || i > 642) {
        EXPECT_LT(row[i], -90.0F) << i;
      }
    }
  }
  // Convention: first_sample / sample_count count output values (rows × size); timestamps step by size × average
  // samples.
  std::uint64_t values = 0;
  for (std::size_t i = 0; i < g_captured.size(); ++i) {
    EXPECT_EQ(g_captured[i].sequence, i);
    EXPECT_EQ(g_captured[i].first_sample, values);
    EXPECT_EQ(g_captured[i].sample_count * sizeof(float), g_captured[i].bytes.size());
    values += g_captured[i].sample_count;
    if (i > 0) {
      const auto& previous = g_captured[i - 1];
      const double step = static_cast<double>(g_captured[i].timestamp.seconds - previous.timestamp.seconds) +
                          (static_cast<double>(g_captured[i].timestamp.picoseconds) -
                           static_cast<double>(previous.timestamp.picoseconds)) *
                              1e-12;
      EXPECT_NEAR(step, static_cast<double>(previous.sample_count / 1024 * 2048) / 1e6, 1e-9);
      // The row times and the stream's rate tell the same story: a chunk lasts its values / rate.
      EXPECT_NEAR(step, static_cast<double>(previous.sample_count) / g_stream.sample_rate, 1e-9);
    }
  }
}

TEST(Fft, IntegerInputIsScaledToUnitFullScale) {
  // A constant I/Q value is pure DC (index size/2): ci16 16384 and ci8 64 are half scale (-6.02 dB),
  // ci16 -32768 is full scale (0 dB).
  struct Case {
    SampleFormat format;
    int value;
    double decibels;
  };
  for (const Case& c : {Case{SampleFormat::ci16, 16384, 20 * std::log10(0.5 * std::sqrt(2.0))},
                        Case{SampleFormat::ci16, -32768, 20 * std::log10(std::sqrt(2.0))},
                        Case{SampleFormat::ci8, 64, 20 * std::log10(0.5 * std::sqrt(2.0))}}) {
    g_feed_format = c.format;
    std::vector<std::byte> bytes(256 * bytes_per_sample(c.format));
    for (std::size_t i = 0; i < 512; ++i) {
      if (c.format == SampleFormat::ci16) {
        const auto value = static_cast<std::int16_t>(c.value);
        std::memcpy(bytes.data() + i * 2, &value, 2);
      } else {
        const auto value = static_cast<std::int8_t>(c.value);
        std::memcpy(bytes.data() + i, &value, 1);
      }
    }
    g_feed = {FeedChunk{bytes, 0, {}}};
    run_fft("{type: feed}", "{type: fft, size: 256, window: hamming}");
    const auto rows = captured_rows(256);
    ASSERT_EQ(rows.size(), 1U);
    // I = Q = v: amplitude |v + iv| = v·√2.
    EXPECT_NEAR(rows[0][128], c.decibels, 0.001) << to_string(c.format) << " " << c.value;
  }
}

TEST(Fft, AveragingReducesTheVarianceOfANoiseSpectrum) {
  const auto relative_variance = [](std::size_t average) {
    run_fft("{type: generator, signal: noise, format: cf32, amplitude: 0.9, stop_after: 512KiB}",
            "{type: fft, size: 256, output: power, average: " + std::to_string(average) + "}");
    const auto rows = captured_rows(256);
    EXPECT_EQ(rows.size(), 65536U / 256 / average);
    double sum = 0;
    double squares = 0;
    std::size_t count = 0;
    for (const auto& row : rows) {
      for (std::size_t i = 8; i < 248; ++i) {  // away from the band edges
        sum += static_cast<double>(row[i]);
        squares += static_cast<double>(row[i]) * static_cast<double>(row[i]);
        ++count;
      }
    }
    const double mean = sum / static_cast<double>(count);
    return (squares / static_cast<double>(count) - mean * mean) / (mean * mean);
  };
  const double single = relative_variance(1);
  const double averaged = relative_variance(16);
  // Power of one bin of white noise is exponential (relative variance 1); a mean of 16 has 1/16.
  EXPECT_NEAR(single, 1.0, 0.1);
  EXPECT_NEAR(averaged, 1.0 / 16, 0.02);
}

TEST(Fft, AveragedRowsAreTheMeanOfSingleFrameRowsInPowerAndDecibels) {
  // average: 1 takes |X|² straight from the bins to the row; average > 1 sums frames in an
  // accumulator first. Both must agree: a row of average 2 is the mean power of two single rows.
  g_feed_format = SampleFormat::ci16;
  std::mt19937 random(7);
  std::uniform_int_distribution<int> uniform(-32768, 32767);
  std::vector<std::byte> bytes(128 * 8 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 2) {
    const auto value = static_cast<std::int16_t>(uniform(random));
    std::memcpy(bytes.data() + i, &value, 2);
  }
  g_feed = {FeedChunk{bytes, 0, {}}};
  for (const std::string output : {"power", "power_db"}) {
    run_fft("{type: feed}", "{type: fft, size: 128, window: hann, output: " + output + "}");
    const auto single = captured_rows(128);
    run_fft("{type: feed}", "{type: fft, size: 128, window: hann, average: 2, output: " + output + "}");
    const auto averaged = captured_rows(128);
    ASSERT_EQ(single.size(), 8U);
    ASSERT_EQ(averaged.size(), 4U);
    const bool decibels = output == "power_db";
    const auto linear = [decibels](float value) {
      return decibels ? std::pow(10.0, static_cast<double>(value) / 10.0) : static_cast<double>(value);
    };
    for (std::size_t row = 0; row < 4; ++row) {
      for (std::size_t i = 0; i < 128; ++i) {
        const double mean = (linear(single[2 * row][i]) + linear(single[2 * row + 1][i])) / 2;
        EXPECT_NEAR(linear(averaged[row][i]), mean, 1e-5 * mean) << output << " row " << row << " index " << i;
      }
    }
  }
}

TEST(Fft, FramesCarryAcrossChunkBoundariesWithoutSkippingSamples) {
  g_feed_format = SampleFormat::cf32;
  const auto samples = random_samples(10000, 5);
  g_feed = {FeedChunk{as_bytes(samples), 0, {}}};
  run_fft("{type: feed}", "{type: fft, size: 200, average: 3}", "128KiB");  // one 80000-byte chunk
  const auto expected = captured_rows(200);
  ASSERT_EQ(expected.size(), 10000U / 600);
  // The same samples in pieces that split frames everywhere (1, 199, 601, ... samples).
  g_feed.clear();
  std::size_t at = 0;
  for (const std::size_t piece : {1UL, 199UL, 601UL, 1000UL, 3UL, 4000UL, 777UL, 3419UL}) {
    std::vector<std::complex<float>> part(samples.begin() + static_cast<std::ptrdiff_t>(at),
                                          samples.begin() + static_cast<std::ptrdiff_t>(at + piece));
    g_feed.push_back(FeedChunk{as_bytes(part), at, {}});
    at += piece;
  }
  ASSERT_EQ(at, samples.size());
  auto pieces = run_fft("{type: feed}", "{type: fft, size: 200, average: 3}", "128KiB");
  const auto actual = captured_rows(200);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t row = 0; row < actual.size(); ++row) {
    for (std::size_t i = 0; i < 200; ++i) EXPECT_NEAR(actual[row][i], expected[row][i], 1e-4) << row << " " << i;
  }
  // 10000 = 16 rows × 600 + 400 left over at the end of the stream, counted, not hidden.
  EXPECT_EQ(counter_value(*pieces, "tail_samples_unused"), 400U);
  EXPECT_EQ(counter_value(*pieces, "rows"), 16U);
}

TEST(Fft, InputGapsMarkTheRowsHoldingLostSamples) {
  g_feed_format = SampleFormat::cf32;
  // Chunk 0: samples 0..4095 (zero-filled where lost), gaps at 1000+10 (row 3) and 2040+20 (rows 7, 8).
  // Chunk 1: starts at 5000: samples 4096..4999 never arrived and fall between rows 15 and 16,
  // so row 16 (the first after them) carries the mark.
  g_feed = {FeedChunk{as_bytes(random_samples(4096, 1)), 0, {Gap{1000, 10}, Gap{2040, 20}}},
            FeedChunk{as_bytes(random_samples(1024, 2)), 5000, {Gap{4096, 904}}}};
  auto pipeline = run_fft("{type: feed, chunk: 64KiB}", "{type: fft, size: 256}", "4KiB");  // 4 rows per output chunk
  std::vector<Gap> gaps;
  for (const Captured& chunk : g_captured) {
    for (const Gap& gap : chunk.gaps) {
      // A gap lies inside the chunk that reports it.
      EXPECT_GE(gap.first_sample, chunk.first_sample);
      EXPECT_LE(gap.first_sample + gap.length, chunk.first_sample + chunk.sample_count);
      gaps.push_back(gap);
    }
  }
  // Rows 7 and 8 straddle an output chunk boundary (rows 4..7 | 8..11): one gap in each.
  ASSERT_EQ(gaps.size(), 4U);
  EXPECT_EQ(gaps[0].first_sample, 3U * 256);
  EXPECT_EQ(gaps[0].length, 256U);
  EXPECT_EQ(gaps[1].first_sample, 7U * 256);
  EXPECT_EQ(gaps[2].first_sample, 8U * 256);
  EXPECT_EQ(gaps[3].first_sample, 16U * 256);
  EXPECT_EQ(gaps[3].length, 256U);
  EXPECT_EQ(counter_value(*pipeline, "rows_with_gaps"), 4U);
  EXPECT_EQ(counter_value(*pipeline, "rows"), 20U);
}

TEST(Fft, ContiguousGapRowsMergeIntoOneOutputGap) {
  g_feed_format = SampleFormat::cf32;
  g_feed = {FeedChunk{as_bytes(random_samples(4096, 3)), 0, {Gap{300, 600}}}};  // rows 1, 2, 3
  run_fft("{type: feed}", "{type: fft, size: 256}");
  ASSERT_EQ(g_captured.size(), 1U);
  ASSERT_EQ(g_captured[0].gaps.size(), 1U);
  EXPECT_EQ(g_captured[0].gaps[0].first_sample, 256U);
  EXPECT_EQ(g_captured[0].gaps[0].length, 3U * 256);
}

TEST(Fft, ComplexOutputWithAveragingIsRejectedAtItsKey) {
  try {
    load_pipeline_text(R"(lanes:
  - name: a
    stages:
      - {type: generator}
      - {type: fft, output: complex, average: 4}
      - {type: null}
)",
                       "test.yaml");
    FAIL() << "complex output with average 4 must not load";
  } catch (const ConfigException& error) {
    const auto& errors = error.errors().all();
    ASSERT_EQ(errors.size(), 1U) << error.what();
    EXPECT_EQ(errors[0].location, "test.yaml:5:47");
    EXPECT_EQ(errors[0].key_path, "lanes.a.stages[1].average");
    EXPECT_NE(errors[0].message.find("impossible with output: complex"), std::string::npos) << errors[0].message;
  }
}

TEST(Fft, RefusesRealInputAndRowsLargerThanItsChunks) {
  try {
    load_pipeline_text(
        "lanes: [{name: a, stages: [{type: generator}, {type: fft, size: 4096, chunk: 8KiB}, {type: null}]}]\n");
    FAIL() << "a 16 KiB row cannot fit an 8 KiB chunk";
  } catch (const ConfigException& error) {
    EXPECT_NE(std::string(error.what()).find("cannot hold one spectrum row"), std::string::npos) << error.what();
  }
  // Spectra into a second fft: rf32 has no I/Q pairs.
  Pipeline pipeline(load_pipeline_text(
      "lanes: [{name: a, stages: [{type: generator}, {type: fft}, {name: again, type: fft}, {type: null}]}]\n"));
  try {
    pipeline.start();
    FAIL() << "an fft of rf32 spectra must not start";
  } catch (const PipelineError& error) {
    EXPECT_NE(std::string(error.what()).find("needs complex samples"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace sluice
