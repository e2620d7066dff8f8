// Latency histogram: bucket arithmetic and percentiles within the promised 12.5%.
#include "pipeline/metrics.hpp"
#include "pipeline/report.hpp"

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

TEST(StageRates, RateIsOverTheTimeDataFlowedNotTheWholeRun) {
  // The case: a lane that moved 1 GB/s for 10 s of a 14 s run. Its first chunk (1 GB)
  // was made before the first stamp, so the 10 s span carries the other 10 GB.
  StageMetrics metrics("lane", "source", "generator");
  metrics.started_ns = 1'000'000'000;
  metrics.stopped_ns = 15'000'000'000;
  metrics.out.first_ns = 4'000'000'000;
  metrics.out.last_ns = 14'000'000'000;
  metrics.out.first_bytes = 1'000'000'000;
  metrics.out.bytes = 11'000'000'000;
  metrics.out.samples = 2'750'000'000;
  metrics.out.chunks = 11;
  const StageRates rates = stage_rates(metrics);
  EXPECT_DOUBLE_EQ(rates.seconds, 14.0);
  EXPECT_DOUBLE_EQ(rates.flow_seconds, 10.0);
  EXPECT_DOUBLE_EQ(rates.bytes_per_second, 1e9);  // not 11 GB / 14 s = 0.79 GB/s
  EXPECT_DOUBLE_EQ(rates.samples_per_second, 2.5e8);
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

namespace sluice {
namespace {

// A stage that waited 4 s for its sender, then was busy all the 5.5 s it had data (11 chunks,
// the first finished at 4.5 s): its busy share over its life is 0.55, over the flow 1.0.
TEST(StageRates, BusyShareWhileDataFlowedIgnoresTheWaitForTheSender) {
  StageMetrics saturated("lane", "source", "udp");
  saturated.started_ns = 1'000'000'000;
  saturated.stopped_ns = 11'000'000'000;
  saturated.busy_ns = 5'500'000'000;
  saturated.out.chunks = 11;
  saturated.out.bytes = 11 << 20;
  saturated.out.samples = 11 << 18;
  saturated.out.first_bytes = 1 << 20;
  saturated.out.first_ns = 5'500'000'000;
  saturated.out.last_ns = 10'500'000'000;
  const StageRates rates = stage_rates(saturated);
  EXPECT_DOUBLE_EQ(rates.flow_seconds, 5.0);
  EXPECT_NEAR(rates.busy_fraction, 0.55, 1e-12);
  EXPECT_NEAR(rates.busy_flowing_fraction, 1.0, 1e-12);

  // Half as busy over the same flow reads half; a stage with one chunk has no span to go by.
  saturated.busy_ns = 2'750'000'000;
  EXPECT_NEAR(stage_rates(saturated).busy_flowing_fraction, 0.5, 1e-12);
  StageMetrics single("lane", "sink", "null");
  single.started_ns = 1'000'000'000;
  single.stopped_ns = 3'000'000'000;
  single.busy_ns = 500'000'000;
  single.in.chunks = 1;
  single.in.bytes = 1 << 20;
  single.in.first_bytes = 1 << 20;
  single.in.first_ns = 2'000'000'000;
  single.in.last_ns = 2'000'000'000;
  single.queue_capacity = 4;  // a consumer: its flow is what it took in
  EXPECT_NEAR(stage_rates(single).busy_flowing_fraction, stage_rates(single).busy_fraction, 1e-12);
  EXPECT_NEAR(stage_rates(single).busy_fraction, 0.25, 1e-12);
}

}  // namespace
}  // namespace sluice
