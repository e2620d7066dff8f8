// Window functions for the fft stage. Computed in double and stored as float once at start.
#include "stages/fft/window.hpp"

#include <cmath>
#include <numbers>

namespace sluice {

std::string_view to_string(WindowKind kind) {
  switch (kind) {
    case WindowKind::none:
      return "none";
    case WindowKind::hann:
      return "hann";
    case WindowKind::hamming:
      return "hamming";
    case WindowKind::blackman:
      return "blackman";
  }
  return "?";
}

void fill_window(WindowKind kind, std::span<float> out) {
  const double points = static_cast<double>(out.size());
  for (std::size_t n = 0; n < out.size(); ++n) {
    const double phase = 2.0 * std::numbers::pi * static_cast<double>(n) / points;
    double value = 1.0;
    switch (kind) {
      case WindowKind::none:
        value = 1.0;
        break;
      case WindowKind::hann:
        value = 0.5 - 0.5 * std::cos(phase);
        break;
      case WindowKind::hamming:
        value = 0.54 - 0.46 * std::cos(phase);
        break;
      case WindowKind::blackman:
        value = 0.42 - 0.5 * std::cos(phase) + 0.08 * std::cos(2.0 * phase);
        break;
    }
    out[n] = static_cast<float>(value);
  }
}

double coherent_gain(std::span<const float> window) {
  if (window.empty()) return 1.0;
  double sum = 0;
  for (const float value : window) sum += static_cast<double>(value);
  return sum / static_cast<double>(window.size());
}

}  // namespace sluice
