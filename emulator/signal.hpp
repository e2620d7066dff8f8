// Sample sources for the emulator. SampleSource is the seam for what the emulated
// digitizer sends: SignalSource synthesises test signals; a capture-file-backed source
// (replay) can implement the same interface later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "pipeline/chunk.hpp"

namespace sluice::emulator {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  [[nodiscard]] virtual SampleFormat format() const = 0;
  // Writes samples first_sample, first_sample + 1, ... (little-endian, format()) into `out`
  // until it is full (whole samples) or the source ends; returns the bytes written.
  virtual std::size_t fill(std::uint64_t first_sample, std::span<std::byte> out) = 0;
  // Samples after which the source repeats exactly (lets the emulator pre-swap one
  // period to wire order), or 0 when it does not repeat.
  [[nodiscard]] virtual std::size_t period() const { return 0; }
};

struct Tone {
  double frequency = 0;  // Hz, may be negative (complex baseband)
  double amplitude = 0;  // of full scale
};

struct SignalSettings {
  double sample_rate = 100e6;
  SampleFormat format = SampleFormat::ci16;
  std::vector<Tone> tones;  // complex exponentials
  double chirp_start = 0;   // Hz
  double chirp_stop = 0;    // Hz; chirp off when start == stop == 0
  double chirp_amplitude = 0;
  double noise_snr_db = std::numeric_limits<double>::quiet_NaN();  // NaN: no noise
  std::uint64_t seed = 1;
  std::size_t period = 1 << 18;  // samples in the repeating table
};

// Tones, a linear chirp and Gaussian noise, summed. One period of `settings.period`
// samples is computed at construction: tone frequencies are rounded to a whole number of
// cycles per period (resolution sample_rate / period), the chirp sweeps start → stop once
// per period, and noise is drawn from a generator seeded with `seed`, so every sample index
// has one defined value. Noise power is set from the signal power and the SNR; with no
// tone or chirp the SNR is relative to a full-scale tone.
class SignalSource final : public SampleSource {
 public:
  explicit SignalSource(const SignalSettings& settings);
  [[nodiscard]] SampleFormat format() const override { return settings_.format; }
  std::size_t fill(std::uint64_t first_sample, std::span<std::byte> out) override;
  [[nodiscard]] std::size_t period() const override { return settings_.period; }
  // The complex value (before quantisation) of sample `index`, for tests.
  [[nodiscard]] std::pair<double, double> value(std::uint64_t index) const;
  // The tone frequency actually produced for a requested one (after rounding).
  [[nodiscard]] double actual_frequency(double requested) const;

 private:
  SignalSettings settings_;
  std::vector<std::pair<double, double>> values_;
  std::vector<std::byte> table_;  // one period in the output format
};

}  // namespace sluice::emulator
