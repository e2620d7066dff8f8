// StageRates: the rates and busy shares the report, /metrics and the dashboard show, over the
// time data flowed rather than the whole run.
#include "monitor/report.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

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
