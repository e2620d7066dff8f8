// Latency histogram: bucket arithmetic and percentiles within the promised 12.5%.
#include "pipeline/metrics.hpp"

#include <gtest/gtest.h>

#include <array>

namespace sluice {
namespace {

TEST(LatencyHistogram, BucketsCoverTheirValues) {
  for (std::uint64_t value : {0ULL, 1ULL, 7ULL, 8ULL, 9ULL, 100ULL, 1000ULL, 123456789ULL, 1ULL << 40}) {
    const std::size_t bucket = LatencyHistogram::bucket_of(value);
    EXPECT_GE(LatencyHistogram::bucket_upper_bound(bucket), value);
    if (bucket > 0) {
      EXPECT_LT(LatencyHistogram::bucket_upper_bound(bucket - 1), value);
    }
  }
}

TEST(LatencyHistogram, PercentilesAreWithinOneEighth) {
  LatencyHistogram histogram;
  for (std::uint64_t i = 1; i <= 10000; ++i) histogram.record(i * 1000);  // 1 µs .. 10 ms uniform
  EXPECT_EQ(histogram.count(), 10000U);
  const double p50 = static_cast<double>(histogram.percentile(0.5));
  const double p99 = static_cast<double>(histogram.percentile(0.99));
  EXPECT_NEAR(p50, 5e6, 5e6 * 0.125);
  EXPECT_NEAR(p99, 9.9e6, 9.9e6 * 0.125);
  EXPECT_EQ(histogram.max(), 10'000'000U);
  EXPECT_LE(histogram.percentile(1.0), histogram.max());
}

TEST(LatencyHistogram, EmptyReadsZero) {
  LatencyHistogram histogram;
  EXPECT_EQ(histogram.percentile(0.5), 0U);
}

TEST(StageMetrics, NamedCountersAreRegisteredOnceAndStable) {
  StageMetrics metrics("lane", "stage", "type");
  NamedCounter& truncated = metrics.drop_counter("truncated");
  truncated.add(3);
  metrics.drop_counter("bad_size").add(2);
  EXPECT_EQ(&metrics.drop_counter("truncated"), &truncated);
  EXPECT_EQ(metrics.total_drops(), 5U);
}

TEST(StageRates, FlowCountersStampTheFirstAndLastChunk) {
  FlowCounters flow;
  flow.add(100, 25);
  const std::uint64_t first = flow.first_ns.load();
  EXPECT_GT(first, 0U);
  EXPECT_EQ(flow.first_bytes.load(), 100U);
  flow.add(300, 75);
  EXPECT_EQ(flow.first_ns.load(), first);  // the first stamp stays
  EXPECT_EQ(flow.first_bytes.load(), 100U);
  EXPECT_GE(flow.last_ns.load(), first);
  EXPECT_EQ(flow.bytes.load(), 400U);
  EXPECT_EQ(flow.samples.load(), 100U);
  EXPECT_EQ(flow.chunks.load(), 2U);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST(LatencyHistogram, KeepsTheExactSumForPrometheus) {
  LatencyHistogram histogram;
  std::uint64_t sum = 0;
  for (std::uint64_t i = 1; i <= 1000; ++i) {
    histogram.record(i * 777);
    sum += i * 777;
  }
  EXPECT_EQ(histogram.sum(), sum);
  std::uint64_t counted = 0;
  for (std::size_t bucket = 0; bucket < LatencyHistogram::kBuckets; ++bucket) counted += histogram.bucket_count(bucket);
  EXPECT_EQ(counted, 1000U);
}

// A chunk's last row is published; the next chunk, offered within 100 ms, is not.
TEST(SpectrumSnapshot, PublishesAChunksLastRowAndNothingMoreWithinTheInterval) {
  SpectrumSnapshot snapshot;
  EXPECT_FALSE(snapshot.read());  // nothing configured, nothing published
  snapshot.configure(4, SpectrumScale::linear_power, 1e6, 100e6, 2);
  EXPECT_FALSE(snapshot.read());
  const std::array<float, 8> first{0.5F, 0.5F, 0.5F, 0.5F, 1.0F, 0.1F, 0.01F, 1e-40F};  // two rows
  snapshot.offer(reinterpret_cast<const std::byte*>(first.data()), 2, 16, MemoryKind::host, nullptr);
  const std::array<float, 4> second{0.5F, 0.5F, 0.5F, 0.5F};
  snapshot.offer(reinterpret_cast<const std::byte*>(second.data()), 1, 16, MemoryKind::host, nullptr);
  const auto copy = snapshot.read();
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->sequence, 1U);
  EXPECT_EQ(copy->row, 1U);  // the first chunk's last row
  EXPECT_DOUBLE_EQ(copy->sample_rate, 1e6);
  EXPECT_DOUBLE_EQ(copy->center_frequency, 100e6);
  EXPECT_EQ(copy->averaging, 2U);
  ASSERT_EQ(copy->decibels.size(), 4U);
  EXPECT_FLOAT_EQ(copy->decibels[0], 0.0F);
  EXPECT_FLOAT_EQ(copy->decibels[1], -10.0F);
  EXPECT_FLOAT_EQ(copy->decibels[2], -20.0F);
  EXPECT_FLOAT_EQ(copy->decibels[3], -300.0F);  // floored at 1e-30, never -inf
}

TEST(SpectrumSnapshot, ComplexBinsAreShownAsPowerInDecibels) {
  SpectrumSnapshot snapshot;
  snapshot.configure(2, SpectrumScale::complex_bins, 1e6, 0, 1);
  const std::array<float, 4> row{0.6F, 0.8F, 0.1F, 0.0F};  // |1|², |0.1|²
  snapshot.offer(reinterpret_cast<const std::byte*>(row.data()), 1, 16, MemoryKind::host, nullptr);
  const auto copy = snapshot.read();
  ASSERT_TRUE(copy);
  EXPECT_NEAR(copy->decibels[0], 0.0F, 1e-5);
  EXPECT_NEAR(copy->decibels[1], -20.0F, 1e-5);
}

}  // namespace
}  // namespace sluice
