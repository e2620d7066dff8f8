// Signal models: exact tone frequency and amplitude, chirp sweep, noise power at the SNR
// asked for, and the same samples from the same seed.
#include "emulator/signal.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <vector>

namespace sluice::emulator {
namespace {

SignalSettings base() {
  SignalSettings settings;
  settings.sample_rate = 1e6;
  settings.period = 1 << 14;
  settings.format = SampleFormat::cf32;
  return settings;
}

TEST(SignalSource, ToneHasItsAmplitudeAndAdvancesByItsFrequency) {
  SignalSettings settings = base();
  settings.tones = {{125e3, 0.25}};
  const SignalSource source(settings);
  const double frequency = source.actual_frequency(125e3);
  EXPECT_NEAR(frequency, 125e3, settings.sample_rate / static_cast<double>(settings.period));
  for (std::uint64_t i : {0ULL, 1ULL, 777ULL, 16383ULL, 16384ULL, 1'000'001ULL}) {
    const auto [in_phase, quadrature] = source.value(i);
    EXPECT_NEAR(std::hypot(in_phase, quadrature), 0.25, 1e-12);
    const double expected_phase = 2 * std::numbers::pi * frequency * static_cast<double>(i) / settings.sample_rate;
    EXPECT_NEAR(std::remainder(std::atan2(quadrature, in_phase) - expected_phase, 2 * std::numbers::pi), 0.0, 1e-6)
        << i;
  }
}

TEST(SignalSource, ChirpSweepsFromStartToStop) {
  SignalSettings settings = base();
  settings.chirp_start = 10e3;
  settings.chirp_stop = 200e3;
  settings.chirp_amplitude = 0.5;
  const SignalSource source(settings);
  auto instantaneous = [&](std::uint64_t i) {
    const auto [a_re, a_im] = source.value(i);
    const auto [b_re, b_im] = source.value(i + 1);
    const std::complex<double> step = std::complex<double>(b_re, b_im) * std::conj(std::complex<double>(a_re, a_im));
    return std::arg(step) / (2 * std::numbers::pi) * settings.sample_rate;
  };
  EXPECT_NEAR(instantaneous(0), 10e3, 200);
  EXPECT_NEAR(instantaneous(settings.period / 2), 105e3, 200);
  EXPECT_NEAR(instantaneous(settings.period - 2), 200e3, 200);
}

TEST(SignalSource, NoisePowerFollowsTheSnr) {
  SignalSettings settings = base();
  settings.tones = {{50e3, 0.5}};
  settings.noise_snr_db = 10;
  settings.seed = 7;
  const SignalSource noisy(settings);
  settings.noise_snr_db = std::numeric_limits<double>::quiet_NaN();
  const SignalSource clean(settings);
  double noise_power = 0;
  for (std::size_t i = 0; i < settings.period; ++i) {
    const auto [a, b] = noisy.value(i);
    const auto [c, d] = clean.value(i);
    noise_power += (a - c) * (a - c) + (b - d) * (b - d);
  }
  noise_power /= static_cast<double>(settings.period);
  EXPECT_NEAR(10 * std::log10(0.25 / noise_power), 10.0, 0.2);
}

TEST(SignalSource, SameSeedSameSamplesOtherSeedOtherSamples) {
  SignalSettings settings = base();
  settings.format = SampleFormat::ci16;
  settings.tones = {{1e3, 0.3}, {-40e3, 0.2}};
  settings.noise_snr_db = 20;
  settings.seed = 3;
  SignalSource first(settings);
  SignalSource second(settings);
  settings.seed = 4;
  SignalSource other(settings);
  std::vector<std::byte> a(4000 * 4);
  std::vector<std::byte> b(a.size());
  std::vector<std::byte> c(a.size());
  // Across the period boundary, from an arbitrary absolute index.
  EXPECT_EQ(first.fill(16384ULL * 5 - 100, a), a.size());
  EXPECT_EQ(second.fill(16384ULL * 5 - 100, b), b.size());
  EXPECT_EQ(other.fill(16384ULL * 5 - 100, c), c.size());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Index i and i + period are the same sample.
  std::vector<std::byte> shifted(a.size());
  second.fill(16384ULL * 6 - 100, shifted);
  EXPECT_EQ(a, shifted);
}

}  // namespace
}  // namespace sluice::emulator
