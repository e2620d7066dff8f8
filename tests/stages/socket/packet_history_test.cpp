// PacketHistory alone: fresh, duplicate and late packets, reordered arrivals, and a restart
// forgetting what came before a resynchronisation.
#include "stages/socket/packet_history.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice {
namespace {

using Verdict = PacketHistory::Verdict;

std::uint64_t value(StageMetrics& metrics, const std::string& name, bool drop) {
  return (drop ? metrics.drop_counter(name) : metrics.counter(name)).get();
}

TEST(PacketHistory, AtOrAfterTheStreamIsFresh) {
  StageMetrics metrics("a", "source", "udp");
  PacketHistory history;
  history.start(metrics);
  EXPECT_EQ(history.sort(100, 100), Verdict::fresh);
  EXPECT_EQ(history.sort(500, 100), Verdict::fresh);
  EXPECT_EQ(metrics.total_drops(), 0U);
}

TEST(PacketHistory, APlacedPacketAgainIsADuplicateAnUnplacedOneIsLate) {
  StageMetrics metrics("a", "source", "udp");
  PacketHistory history;
  history.start(metrics);
  history.placed(0);
  history.placed(10);
  // 20 was never placed (its hole was declared lost); the stream is at 30.
  EXPECT_EQ(history.sort(10, 30), Verdict::duplicate);
  EXPECT_EQ(history.sort(20, 30), Verdict::late);
  EXPECT_EQ(value(metrics, "duplicates", false), 1U);
  EXPECT_EQ(value(metrics, "duplicate", true), 1U);
  EXPECT_EQ(value(metrics, "late", true), 1U);
  EXPECT_EQ(value(metrics, "reordered", false), 1U);  // the late one came after later ones
}

TEST(PacketHistory, OnlyTheLastPlacedPacketsAreRemembered) {
  StageMetrics metrics("a", "source", "udp");
  PacketHistory history;
  history.start(metrics);
  for (std::uint64_t i = 0; i <= PacketHistory::kRemembered; ++i) history.placed(i * 10);
  // The first one has been overwritten: a copy of it can no longer be told from a late packet.
  EXPECT_EQ(history.sort(0, 10'000), Verdict::late);
  EXPECT_EQ(history.sort(10, 10'000), Verdict::duplicate);
}

TEST(PacketHistory, ArrivingBehindALaterPacketCountsReordered) {
  StageMetrics metrics("a", "source", "udp");
  PacketHistory history;
  history.start(metrics);
  history.arrived(0);
  history.arrived(20);
  history.arrived(10);  // swapped with 20
  EXPECT_EQ(value(metrics, "reordered", false), 1U);
  history.reach(100);  // the stream moved on past a kernel drop
  history.arrived(90);
  EXPECT_EQ(value(metrics, "reordered", false), 2U);
  EXPECT_EQ(metrics.total_drops(), 0U);
}

TEST(PacketHistory, ARestartForgetsThePacketsBeforeIt) {
  StageMetrics metrics("a", "source", "udp");
  PacketHistory history;
  history.start(metrics);
  history.placed(5);
  history.arrived(1'000);
  history.restart(50);
  EXPECT_EQ(history.sort(5, 50), Verdict::late);  // no longer remembered
  history.arrived(60);
  EXPECT_EQ(value(metrics, "reordered", false), 1U);  // only the late one: 60 is not behind 1000 any more
  history.count_late();
  history.count_duplicate();
  EXPECT_EQ(value(metrics, "late", true), 2U);
  EXPECT_EQ(value(metrics, "duplicate", true), 1U);
}

}  // namespace
}  // namespace sluice
