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

// A udp stage with receive threads (StageMetrics is neither copied nor moved) that took
// `datagrams` datagrams for `cpu_ns` of their CPU time, `spin_ns` of it polling.
struct Receiving {
  Receiving(std::uint64_t datagrams, std::uint64_t cpu_ns, std::uint64_t spin_ns) {
    metrics.packets = datagrams;
    metrics.counter("receive_thread_cpu_ns").set(cpu_ns);
    metrics.counter("receive_thread_spin_ns").set(spin_ns);
  }
  StageMetrics metrics{"lane", "source", "udp"};
};

// Work a datagram is the receive threads' CPU time less their spin; a stage without receive
// threads, or without datagrams, has none.
TEST(ReceiveWork, IsCpuTimeLessSpinADatagram) {
  const Receiving lane(1'000'000, 30'000'000'000, 10'000'000'000);
  ASSERT_TRUE(receive_ns_per_datagram(lane.metrics));
  EXPECT_DOUBLE_EQ(*receive_ns_per_datagram(lane.metrics), 20'000.0);
  EXPECT_FALSE(receive_ns_per_datagram(StageMetrics("lane0", "source", "udp")));
  EXPECT_FALSE(receive_ns_per_datagram(Receiving(0, 1'000'000, 0).metrics));
}

// Lanes at one rate do the same work a datagram: the one whose receive core took 1.5 times the
// others' median is named, with its figure and the median; the others, a stage without receive
// threads and one whose threads hardly worked are not, and the last two are not in the median.
TEST(ReceiveWork, ALaneFarAboveTheMedianIsNamed) {
  const Receiving a(1'000'000, 1'300'000'000, 0);
  const Receiving b(1'000'000, 1'400'000'000, 0);
  const Receiving c(1'000'000, 1'350'000'000, 0);
  const Receiving slow(1'000'000, 2'600'000'000, 600'000'000);  // 2.0 µs of work
  const StageMetrics fft("lane0", "fft", "fft");
  // 50 µs a datagram, but 50 ms of work in all: its threads' start, not a stream, set it.
  const Receiving brief(1'000, 50'000'000, 0);
  const auto notes =
      slower_receive_core_notes({&a.metrics, &fft, &b.metrics, &slow.metrics, &c.metrics, &brief.metrics});
  ASSERT_EQ(notes.size(), 6U);
  for (const std::size_t quiet : {0U, 1U, 2U, 4U, 5U}) EXPECT_TRUE(notes[quiet].empty()) << notes[quiet];
  // The median of 1.30, 1.35, 1.40 and 2.00 µs is 1.375.
  EXPECT_NE(notes[3].find("2.00 µs a datagram, is 1.45× the median of the run's 4 udp stages"), std::string::npos)
      << notes[3];
  EXPECT_NE(notes[3].find("(1.38 µs)"), std::string::npos) << notes[3];
}

// Below 1.25 times the median nothing is named, and two stages give no median to go by.
TEST(ReceiveWork, NothingIsNamedBelowTheBoundOrWithFewerThanThreeStages) {
  const Receiving a(1'000'000, 1'000'000'000, 0);
  const Receiving b(1'000'000, 1'000'000'000, 0);
  const Receiving c(1'000'000, 1'240'000'000, 0);
  for (const auto& note : slower_receive_core_notes({&a.metrics, &b.metrics, &c.metrics}))
    EXPECT_TRUE(note.empty()) << note;
  const Receiving d(1'000'000, 3'000'000'000, 0);
  for (const auto& note : slower_receive_core_notes({&a.metrics, &d.metrics})) EXPECT_TRUE(note.empty()) << note;
}

// What the note says of a slower receive core's interrupts: its count, the compared cores' median,
// and the source of most, where there is one.
TEST(ReceiveWork, TheInterruptsTextGivesTheCountTheMedianAndTheSource) {
  EXPECT_EQ(receive_interrupts_text(120'000, 2'500, "57 mlx5_comp3 (118000)"),
            "; its receive core took 120000 interrupts over the run, the compared cores' median 2500, the most "
            "from 57 mlx5_comp3 (118000)");
  EXPECT_EQ(receive_interrupts_text(0, 0, ""),
            "; its receive core took 0 interrupts over the run, the compared "
            "cores' median 0");
}

}  // namespace
}  // namespace sluice
