// 10·log10 of power for the fft stage's power_db rows: a branch-free float log that the compiler
// vectorises (glibc's scalar log2f, one call a bin, would dominate a power_db row).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace sluice {

// A row of zero power would read -inf dB; powers below this floor (-300 dB) read -300 dB so files stay finite.
inline constexpr float kPowerFloorLinear = 1e-30F;

// 10·log10(power) in dB, power clamped to kPowerFloorLinear; +inf stays +inf and NaN stays NaN.
// Method: power = 2^e · m with m in [√½, √2) (exponent split by integer arithmetic on the bits),
// ln m = 2·atanh(t) = 2·(t + t³/3 + t⁵/5 + t⁷/7 + …) with t = (m−1)/(m+1), |t| ≤ 3−2√2 ≈ 0.1716.
// Truncation after t⁷ leaves ≤ 2·|t|⁹/9 / (1−t²) ≈ 3.0e-8 in ln m, i.e. 1.3e-7 dB; float rounding of
// the final sum adds at most half an ulp of the result (1.5e-5 dB at |300| dB). fft_decibels_test
// checks |error| ≤ 1e-4 dB against double log10, exhaustively over one octave of mantissas and
// across the whole range above the floor.
// Vectorises in an `omp simd` loop when built with -fno-trapping-math (see stages/CMakeLists.txt).
inline float power_to_decibels(float power) noexcept {
  constexpr float kDecibelsPerOctave = 3.0102999566398120F;                     // 10·log10(2)
  constexpr float kDecibelsPerNeper = 4.3429448190325183F;                      // 10/ln(10)
  constexpr std::uint32_t kSqrtHalfBits = 0x3f3504f3U;                          // bits of √½
  const float clamped = power < kPowerFloorLinear ? kPowerFloorLinear : power;  // NaN is not below: it stays NaN
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(clamped);
  // Exponent relative to √½ so that the mantissa lands in [√½, √2): arithmetic shift of the signed difference.
  const std::int32_t exponent = std::bit_cast<std::int32_t>(bits - kSqrtHalfBits) >> 23;
  const float mantissa = std::bit_cast<float>(bits - (std::bit_cast<std::uint32_t>(exponent) << 23));
  const float t = (mantissa - 1.0F) / (mantissa + 1.0F);
  const float t2 = t * t;
  const float series = t * (2.0F + t2 * (2.0F / 3.0F + t2 * (2.0F / 5.0F + t2 * (2.0F / 7.0F))));  // ln m
  const float decibels = kDecibelsPerOctave * static_cast<float>(exponent) + kDecibelsPerNeper * series;
  // +inf (and NaN) pass through as they are; the bit arithmetic above only holds for finite powers.
  return clamped < std::numeric_limits<float>::infinity() ? decibels : clamped;
}

}  // namespace sluice
