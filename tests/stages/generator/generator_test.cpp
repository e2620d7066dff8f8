// Generator: deterministic signals, exact byte counts, metadata that advances with samples.
#include "stages/generator/generator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>

#include "tests/stages/stage_test_util.hpp"
#include "tests/support/test_stages.hpp"

namespace sluice {
namespace {

using testing::read_file;
using testing::run_pipeline;
using testing::TempDir;

TEST(Generator, ToneHasTheRequestedFrequencyAndAmplitude) {
  GeneratorSettings settings;
  settings.format = SampleFormat::cf32;
  settings.sample_rate = 1e6;
  settings.frequency = 125e3;  // exactly 8192 cycles per 65536-sample period
  settings.amplitude = 0.5;
  std::vector<std::byte> bytes(1024 * 8);
  generate_signal(settings, 0, 1024, bytes.data());
  std::vector<std::complex<float>> samples(1024);
  std::memcpy(samples.data(), bytes.data(), bytes.size());
  for (std::size_t n = 0; n < samples.size(); ++n) {
    const double phase = 2 * M_PI * 125e3 * static_cast<double>(n) / 1e6;
    EXPECT_NEAR(samples[n].real(), 0.5 * std::cos(phase), 1e-5);
    EXPECT_NEAR(samples[n].imag(), 0.5 * std::sin(phase), 1e-5);
  }
}

TEST(Generator, SignalDependsOnlyOnTheSampleIndex) {
  GeneratorSettings settings;
  settings.signal = GeneratorSignal::noise;
  settings.seed = 7;
  std::vector<std::byte> whole(5000 * 4);
  std::vector<std::byte> part(1000 * 4);
  generate_signal(settings, 0, 5000, whole.data());
  generate_signal(settings, 3000, 1000, part.data());
  EXPECT_EQ(std::memcmp(whole.data() + 3000 * 4, part.data(), part.size()), 0);
  settings.seed = 8;
  generate_signal(settings, 3000, 1000, part.data());
  EXPECT_NE(std::memcmp(whole.data() + 3000 * 4, part.data(), part.size()), 0);
}

TEST(Generator, WritesExactlyStopAfterBytesOfTheSignal) {
  TempDir dir;
  const auto path = dir.path() / "out.bin";
  // 1 MiB + 4 KiB: the last chunk is partial.
  auto pipeline = run_pipeline(R"(pipeline: {chunk: 256KiB}
lanes:
  - name: a
    stages:
      - {type: generator, signal: ramp, format: ci16, stop_after: 1052672}
      - {type: file, path: )" + path.string() +
                               "}\n");
  ASSERT_TRUE(pipeline->failures().empty());
  const auto actual = read_file(path);
  ASSERT_EQ(actual.size(), 1052672U);
  GeneratorSettings settings;
  settings.signal = GeneratorSignal::ramp;
  std::vector<std::byte> expected(actual.size());
  generate_signal(settings, 0, expected.size() / 4, expected.data());
  EXPECT_EQ(actual, expected);
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_EQ(lanes[0][0]->out.chunks, 5U);
  EXPECT_EQ(lanes[0][0]->out.samples, 1052672U / 4);
}

TEST(Generator, ChunkMetadataAdvancesWithTheSampleCount) {
  const StageRegistry registry = testing::builtin_registry_with({test_support::capture_sink_type()});
  std::vector<test_support::CapturedChunk>& seen = test_support::keyed_capture("generator metadata").chunks;
  Pipeline pipeline(load_pipeline_text(R"(pipeline: {chunk: 64KiB}
lanes: [{name: a, stages: [{type: generator, sample_rate: 3MHz, stop_after: 640KiB}, {type: capture, key: generator metadata}]}]
)",
                                       "test.yaml", {}, registry));
  pipeline.start();
  pipeline.run();
  ASSERT_EQ(seen.size(), 10U);
  const std::uint64_t samples_per_chunk = 64 * 1024 / 4;
  const auto step_of = [](const Timestamp& later, const Timestamp& earlier) {  // exact integer picoseconds
    return static_cast<std::int64_t>(later.seconds - earlier.seconds) * 1'000'000'000'000LL +
           (static_cast<std::int64_t>(later.picoseconds) - static_cast<std::int64_t>(earlier.picoseconds));
  };
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].sequence, i);
    EXPECT_EQ(seen[i].first_sample, i * samples_per_chunk);
    EXPECT_EQ(seen[i].sample_count, samples_per_chunk);
    EXPECT_TRUE(seen[i].timestamp.valid);
    EXPECT_LT(seen[i].timestamp.picoseconds, 1'000'000'000'000ULL);
    if (i > 0) {
      // 16384 samples at 3 MHz = 5461333.33 ps between chunk starts.
      const std::int64_t step = step_of(seen[i].timestamp, seen[i - 1].timestamp);
      EXPECT_NEAR(static_cast<double>(step), 16384.0 / 3e6 * 1e12, 2.0);
    }
  }
}

TEST(Generator, SeedAndFrequencyAreErrorsWhereTheyWouldChangeNothing) {
  // configs once set `seed` on tone and ramp lanes to tell them apart; it changed no byte.
  const auto errors_of = [](const std::string& source) {
    try {
      load_pipeline_text("lanes: [{name: a, stages: [" + source + ", {type: null}]}]\n", "test.yaml", {});
    } catch (const ConfigException& error) {
      return error.errors().all();
    }
    return std::vector<ConfigError>{};
  };
  for (const char* signal : {"tone", "ramp"}) {
    const auto errors = errors_of(std::string("{type: generator, signal: ") + signal + ", seed: 2}");
    ASSERT_EQ(errors.size(), 1U) << signal;
    EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].seed");
    EXPECT_NE(errors[0].hint.find("frequency or amplitude"), std::string::npos) << errors[0].hint;
  }
  for (const char* signal : {"ramp", "noise"}) {
    const auto errors = errors_of(std::string("{type: generator, signal: ") + signal + ", frequency: 1MHz}");
    ASSERT_EQ(errors.size(), 1U) << signal;
    EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].frequency");
  }
  EXPECT_TRUE(errors_of("{type: generator, signal: noise, seed: 2}").empty());
  EXPECT_TRUE(errors_of("{type: generator, signal: tone, frequency: 1MHz}").empty());
}

}  // namespace
}  // namespace sluice
