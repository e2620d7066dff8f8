// PacketHistory alone: fresh, duplicate and late packets, reordered arrivals, and a restart
// forgetting what came before a resynchronisation.
#include "stages/socket/packet_history.hpp"

#include <gtest/gtest.h>

#include <optional>
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

TEST(PacketHistory, APositionIsItsStreamIndexUnlessItIsBeforeTheStreamOrBehindIt) {
  StageMetrics metrics("a", "source", "udp");
  PacketHistory history;
  history.start(metrics);
  // Stream index 0 is the sender's sample 1'000; the stream goes on at index 100.
  EXPECT_EQ(history.fresh_index(1'100, 1'000, 100), std::optional<std::uint64_t>(100));
  EXPECT_EQ(history.fresh_index(1'250, 1'000, 100), std::optional<std::uint64_t>(250));
  EXPECT_EQ(metrics.total_drops(), 0U);
  EXPECT_EQ(history.fresh_index(999, 1'000, 100), std::nullopt);    // before the stream's first sample
  EXPECT_EQ(history.fresh_index(1'050, 1'000, 100), std::nullopt);  // behind it, never placed
  EXPECT_EQ(value(metrics, "late", true), 2U);
  history.placed(60);
  EXPECT_EQ(history.fresh_index(1'060, 1'000, 100), std::nullopt);
  EXPECT_EQ(value(metrics, "duplicate", true), 1U);
}

TEST(PacketHistory, AnOriginWrappedByABackwardJumpStillGivesTheStreamIndex) {
  StageMetrics metrics("a", "source", "udp");
  PacketHistory history;
  history.start(metrics);
  // The sender restarted at sample 10 while the stream stood at index 500: origin 10 - 500.
  const std::uint64_t origin = 10 - std::uint64_t{500};
  EXPECT_EQ(history.fresh_index(10, origin, 500), std::optional<std::uint64_t>(500));
  EXPECT_EQ(history.fresh_index(40, origin, 500), std::optional<std::uint64_t>(530));
  EXPECT_EQ(history.fresh_index(5, origin, 500), std::nullopt);
  EXPECT_EQ(value(metrics, "late", true), 1U);
}

}  // namespace
}  // namespace sluice
