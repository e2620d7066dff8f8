// Latency histogram: bucket arithmetic and percentiles within the promised 12.5%.
#include "pipeline/metrics.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sluice
