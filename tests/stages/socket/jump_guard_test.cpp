// JumpGuard alone: which packets are plausible, held, confirmed or discarded as outliers,
// and that held payloads come back byte for byte.
#include "stages/socket/jump_guard.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace sluice {
namespace {

using Verdict = JumpGuard::Verdict;

std::uint64_t value(StageMetrics& metrics, const std::string& name, bool drop) {
  return (drop ? metrics.drop_counter(name) : metrics.counter(name)).get();
}

std::array<std::byte, 8> payload(std::uint8_t fill) {
  std::array<std::byte, 8> bytes{};
  bytes.fill(std::byte{fill});
  return bytes;
}

TEST(JumpGuard, WithinTheBoundIsPlausibleEitherWay) {
  StageMetrics metrics("a", "source", "udp");
  JumpGuard guard;
  guard.start(metrics, 1000, 3, 8);
  const auto bytes = payload(1);
  EXPECT_EQ(guard.check(11'000, 10, 10'000, bytes), Verdict::plausible);
  EXPECT_EQ(guard.check(9'000, 10, 10'000, bytes), Verdict::plausible);
  EXPECT_EQ(guard.check(11'001, 10, 10'000, bytes), Verdict::held);
  EXPECT_EQ(guard.held_count(), 1U);
}

TEST(JumpGuard, ALoneOutlierIsDiscardedByTheNextPlausiblePacket) {
  StageMetrics metrics("a", "source", "udp");
  JumpGuard guard;
  guard.start(metrics, 1000, 3, 8);
  const auto bytes = payload(2);
  EXPECT_EQ(guard.check(1ULL << 40, 10, 10'000, bytes), Verdict::held);
  EXPECT_EQ(value(metrics, "outlier", true), 0U);
  EXPECT_EQ(guard.check(10'000, 10, 10'000, bytes), Verdict::plausible);
  EXPECT_EQ(guard.held_count(), 0U);
  EXPECT_EQ(value(metrics, "outlier", true), 1U);
  EXPECT_EQ(value(metrics, "resyncs", false), 0U);
}

TEST(JumpGuard, OutliersThatDisagreeNeverConfirm) {
  StageMetrics metrics("a", "source", "udp");
  JumpGuard guard;
  guard.start(metrics, 1000, 2, 8);
  const auto bytes = payload(3);
  EXPECT_EQ(guard.check(1'000'000, 10, 0, bytes), Verdict::held);
  EXPECT_EQ(guard.check(9'000'000, 10, 0, bytes), Verdict::held);  // far from the first: starts over
  EXPECT_EQ(value(metrics, "outlier", true), 1U);
  EXPECT_EQ(guard.check(2'000'000, 10, 0, bytes), Verdict::held);
  EXPECT_EQ(value(metrics, "outlier", true), 2U);
  guard.discard();
  EXPECT_EQ(value(metrics, "outlier", true), 3U);
}

TEST(JumpGuard, AgreeingOutliersConfirmAJumpAndKeepTheirPayloads) {
  StageMetrics metrics("a", "source", "udp");
  JumpGuard guard;
  guard.start(metrics, 1000, 3, 8);
  // The new segment arrives slightly out of order: it still agrees.
  EXPECT_EQ(guard.check(5'000'010, 10, 100, payload(0xA1), 7), Verdict::held);
  EXPECT_EQ(guard.check(5'000'000, 10, 100, payload(0xA0), 6), Verdict::held);
  EXPECT_EQ(guard.check(5'000'020, 10, 100, payload(0xA2), 8), Verdict::confirmed);
  ASSERT_EQ(guard.held_count(), 3U);
  EXPECT_EQ(guard.held(guard.lowest()).position, 5'000'000U);
  EXPECT_EQ(guard.held(guard.lowest()).tag, 6U);
  for (std::size_t i = 0; i < 3; ++i) {
    const JumpGuard::Packet held = guard.held(i);
    ASSERT_EQ(held.payload.size(), 8U);
    const auto expected = std::byte{static_cast<std::uint8_t>(0xA0 + (held.position - 5'000'000) / 10)};
    for (std::byte byte : held.payload) EXPECT_EQ(byte, expected);
  }
  guard.resynchronised();
  EXPECT_EQ(guard.held_count(), 0U);
  EXPECT_EQ(value(metrics, "resyncs", false), 1U);
  EXPECT_EQ(value(metrics, "outlier", true), 0U);
}

TEST(JumpGuard, APayloadTooLargeToHoldIsAnOutlierAtOnce) {
  StageMetrics metrics("a", "source", "udp");
  JumpGuard guard;
  guard.start(metrics, 1000, 2, 4);
  const auto bytes = payload(4);
  EXPECT_EQ(guard.check(1'000'000, 2, 0, bytes), Verdict::held);
  EXPECT_EQ(guard.held_count(), 0U);
  EXPECT_EQ(value(metrics, "outlier", true), 1U);
}

// A guard (1000 samples, 2 agreeing packets make a jump) and what admit() hands its caller: each
// packet it places, and the first of a jump it moves onto.
struct Admitting {
  StageMetrics metrics{"a", "source", "udp"};
  JumpGuard guard;
  std::array<std::byte, 8> bytes = payload(5);
  std::vector<std::uint64_t> placed;
  std::vector<std::uint64_t> moved_to;
  bool can_move = true;
  Admitting() { guard.start(metrics, 1000, 2, 8); }
  bool admit(std::uint64_t position, std::uint64_t expected) {
    return guard.admit(
        JumpGuard::Packet{position, 10, 0, bytes}, expected,
        [this](const JumpGuard::Packet& packet) { placed.push_back(packet.position); },
        [this](const JumpGuard::Packet& first) {
          moved_to.push_back(first.position);
          return can_move;
        });
  }
};

TEST(JumpGuard, AdmitPlacesPlausiblePacketsThenTheHeldOnesOfAConfirmedJump) {
  Admitting run;
  EXPECT_TRUE(run.admit(100, 100));
  EXPECT_FALSE(run.admit(5'000'010, 110));
  EXPECT_FALSE(run.admit(5'000'000, 110));
  EXPECT_EQ(run.moved_to, std::vector<std::uint64_t>{5'000'000});
  EXPECT_EQ(run.placed, (std::vector<std::uint64_t>{100, 5'000'010, 5'000'000}));
  EXPECT_EQ(run.guard.held_count(), 0U);
  EXPECT_EQ(value(run.metrics, "resyncs", false), 1U);
}

TEST(JumpGuard, AJumpTheCallerCannotMoveOntoDiscardsItsPacketsAndStartsOver) {
  Admitting run;
  run.can_move = false;  // no chunk to be had
  EXPECT_FALSE(run.admit(5'000'000, 0));
  EXPECT_FALSE(run.admit(5'000'010, 0));
  EXPECT_EQ(run.guard.held_count(), 0U);
  EXPECT_EQ(value(run.metrics, "outlier", true), 2U);
  // The sender's next packets agree again: held from the start, never past the guard's room.
  run.can_move = true;
  EXPECT_FALSE(run.admit(5'000'020, 0));
  EXPECT_EQ(run.guard.held_count(), 1U);
  EXPECT_FALSE(run.admit(5'000'030, 0));
  EXPECT_EQ(run.moved_to, (std::vector<std::uint64_t>{5'000'000, 5'000'020}));
  EXPECT_EQ(run.placed, (std::vector<std::uint64_t>{5'000'020, 5'000'030}));
  EXPECT_EQ(value(run.metrics, "resyncs", false), 1U);
}

}  // namespace
}  // namespace sluice
