// Test signal synthesis: one exact period computed once, then served by memcpy.
#include "emulator/signal.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

namespace sluice::emulator {

double SignalSource::actual_frequency(double requested) const {
  const double period = static_cast<double>(settings_.period);
  return std::round(requested / settings_.sample_rate * period) * settings_.sample_rate / period;
}

SignalSource::SignalSource(const SignalSettings& settings) : settings_(settings) {
  const std::size_t period = settings_.period;
  const double length = static_cast<double>(period);
  values_.assign(period, {0.0, 0.0});
  double signal_power = 0;
  for (const Tone& tone : settings_.tones) {
    const double cycles = std::round(tone.frequency / settings_.sample_rate * length);
    signal_power += tone.amplitude * tone.amplitude;
    for (std::size_t i = 0; i < period; ++i) {
      // Phase from an exact integer product modulo the period: no drift over any length.
      const auto turns = static_cast<double>((static_cast<std::int64_t>(cycles) * static_cast<std::int64_t>(i)) %
                                             static_cast<std::int64_t>(period));
      const double phase = 2.0 * std::numbers::pi * turns / length;
      values_[i].first += tone.amplitude * std::cos(phase);
      values_[i].second += tone.amplitude * std::sin(phase);
    }
  }
  if (settings_.chirp_start != 0 || settings_.chirp_stop != 0) {
    signal_power += settings_.chirp_amplitude * settings_.chirp_amplitude;
    const double duration = length / settings_.sample_rate;
    const double slope = (settings_.chirp_stop - settings_.chirp_start) / duration;
    for (std::size_t i = 0; i < period; ++i) {
      const double t = static_cast<double>(i) / settings_.sample_rate;
      const double phase = 2.0 * std::numbers::pi * (settings_.chirp_start * t + 0.5 * slope * t * t);
      values_[i].first += settings_.chirp_amplitude * std::cos(phase);
      values_[i].second += settings_.chirp_amplitude * std::sin(phase);
    }
  }
  if (!std::isnan(settings_.noise_snr_db)) {
    const double reference = signal_power > 0 ? signal_power : 1.0;
    const double noise_power = reference / std::pow(10.0, settings_.noise_snr_db / 10.0);
    std::mt19937_64 random(settings_.seed);
    std::normal_distribution<double> gaussian(0.0, std::sqrt(noise_power / 2.0));
    for (auto& value : values_) {
      value.first += gaussian(random);
      value.second += gaussian(random);
    }
  }
  const std::size_t size = bytes_per_sample(settings_.format);
  table_.resize(period * size);
  for (std::size_t i = 0; i < period; ++i)
    quantise_sample(settings_.format, values_[i].first, values_[i].second, &table_[i * size]);
}

std::pair<double, double> SignalSource::value(std::uint64_t index) const { return values_[index % settings_.period]; }

std::size_t SignalSource::fill(std::uint64_t first_sample, std::span<std::byte> out) {
  const std::size_t size = bytes_per_sample(settings_.format);
  const std::size_t total = out.size() / size * size;
  std::size_t offset = static_cast<std::size_t>(first_sample % settings_.period) * size;
  std::size_t written = 0;
  while (written < total) {
    const std::size_t take = std::min(total - written, table_.size() - offset);
    std::memcpy(out.data() + written, table_.data() + offset, take);
    written += take;
    offset = 0;
  }
  return total;
}

}  // namespace sluice::emulator
