// Units as people write them: sizes, rates (bytes and bits), frequencies, durations.
#include "pipeline/units.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(Units, SizesUseBinaryAndDecimalPrefixes) {
  EXPECT_EQ(parse_bytes("4MiB"), 4ULL << 20);
  EXPECT_EQ(parse_bytes("4 MiB"), 4ULL << 20);
  EXPECT_EQ(parse_bytes("1.5GB"), 1'500'000'000ULL);
  EXPECT_EQ(parse_bytes("1472"), 1472ULL);
  EXPECT_EQ(parse_bytes("64KiB"), 65536ULL);
  EXPECT_EQ(parse_bytes("0"), 0ULL);
}

TEST(Units, SizesRejectGarbageFractionsOfBytesAndNegatives) {
  EXPECT_FALSE(parse_bytes("four MiB"));
  EXPECT_FALSE(parse_bytes("4 MiBs"));
  EXPECT_FALSE(parse_bytes("1.5"));  // not a whole byte
  EXPECT_FALSE(parse_bytes("-4MiB"));
  EXPECT_FALSE(parse_bytes(""));
}

TEST(Units, RatesInBytesAndBitsPerSecond) {
  EXPECT_DOUBLE_EQ(*parse_byte_rate("2.5GB/s"), 2.5e9);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("25Gb/s"), 25e9 / 8);  // a 25GbE port moves 3.125 GB/s
  EXPECT_DOUBLE_EQ(*parse_byte_rate("100MiB/s"), 100.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("10Gbps"), 10e9 / 8);
  EXPECT_DOUBLE_EQ(*parse_byte_rate("0"), 0);
  EXPECT_FALSE(parse_byte_rate("fast"));
  EXPECT_FALSE(parse_byte_rate("3 GB"));  // a size, not a rate
}

TEST(Units, FrequenciesAndSampleRates) {
  EXPECT_DOUBLE_EQ(*parse_frequency("100MHz"), 100e6);
  EXPECT_DOUBLE_EQ(*parse_frequency("250Msps"), 250e6);
  EXPECT_DOUBLE_EQ(*parse_frequency("1.2GS/s"), 1.2e9);
  EXPECT_DOUBLE_EQ(*parse_frequency("1e6"), 1e6);
  EXPECT_FALSE(parse_frequency("100 MB"));
}

TEST(Units, Durations) {
  EXPECT_EQ(parse_duration("10s"), std::chrono::seconds(10));
  EXPECT_EQ(parse_duration("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(parse_duration("2m"), std::chrono::minutes(2));
  EXPECT_EQ(parse_duration("1.5h"), std::chrono::minutes(90));
  EXPECT_EQ(parse_duration("3"), std::chrono::seconds(3));
  EXPECT_FALSE(parse_duration("soon"));
}

TEST(Units, FormattingRoundTripsThroughTheParsers) {
  EXPECT_EQ(format_bytes(4 << 20), "4.00 MiB");
  EXPECT_EQ(format_byte_rate(2.5e9), "2.50 GB/s");
  EXPECT_EQ(format_frequency(100e6), "100 MHz");
  EXPECT_DOUBLE_EQ(*parse_byte_rate("2.50GB/s"), 2.5e9);
}

}  // namespace
}  // namespace sluice
