// power_to_decibels (the fft stage's vectorised 10·log10) against double-precision std::log10:
// the documented 1e-4 dB bound over every mantissa and the whole range, the floor, inf and NaN.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "stages/fft/decibels.hpp"

namespace sluice {
namespace {

constexpr double kMaxErrorDecibels = 1e-4;

double exact_decibels(float power) { return 10.0 * std::log10(static_cast<double>(power)); }

TEST(FftDecibels, EveryMantissaOfAnOctaveIsWithinTheBound) {
  // Every float in [0.5, 2): the exponent only adds an exact multiple of log10(2), so this covers
  // every mantissa the approximation can see, both sides of the √½ / √2 split.
  double worst = 0;
  float worst_at = 0;
  for (std::uint32_t bits = std::bit_cast<std::uint32_t>(0.5F); bits < std::bit_cast<std::uint32_t>(2.0F); ++bits) {
    const float power = std::bit_cast<float>(bits);
    const double error = std::fabs(static_cast<double>(power_to_decibels(power)) - exact_decibels(power));
    if (error > worst) {
      worst = error;
      worst_at = power;
    }
  }
  EXPECT_LE(worst, kMaxErrorDecibels) << "at " << worst_at;
}

TEST(FftDecibels, WholeRangeAboveTheFloorIsWithinTheBound) {
  // From the floor (-300 dB) to the largest float, every 257th bit pattern (odd stride: all mantissa bits vary).
  double worst = 0;
  float worst_at = 0;
  const std::uint32_t last = std::bit_cast<std::uint32_t>(std::numeric_limits<float>::max());
  for (std::uint32_t bits = std::bit_cast<std::uint32_t>(kPowerFloorLinear); bits <= last - 257; bits += 257) {
    const float power = std::bit_cast<float>(bits);
    const double error = std::fabs(static_cast<double>(power_to_decibels(power)) - exact_decibels(power));
    if (error > worst) {
      worst = error;
      worst_at = power;
    }
  }
  EXPECT_LE(worst, kMaxErrorDecibels) << "at " << worst_at;
  EXPECT_NEAR(power_to_decibels(std::numeric_limits<float>::max()), exact_decibels(std::numeric_limits<float>::max()),
              kMaxErrorDecibels);
}

TEST(FftDecibels, PowersOfTenAndTwoReadTheirLevels) {
  EXPECT_EQ(power_to_decibels(1.0F), 0.0F);
  EXPECT_NEAR(power_to_decibels(0.25F), -6.0205999, 1e-5);
  EXPECT_NEAR(power_to_decibels(1e-3F), -30.0, 1e-4);
  EXPECT_NEAR(power_to_decibels(1e12F), 120.0, 1e-4);
}

TEST(FftDecibels, BelowTheFloorReadsTheFloorAndNonFiniteValuesPassThrough) {
  const double floor = exact_decibels(kPowerFloorLinear);
  for (const float power : {0.0F, -0.0F, -1.0F, 1e-31F, std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::infinity()}) {
    EXPECT_NEAR(power_to_decibels(power), floor, kMaxErrorDecibels) << power;
  }
  EXPECT_EQ(power_to_decibels(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(power_to_decibels(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace sluice
