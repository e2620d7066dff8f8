// What the socket queue's note advises, from what the stage's readers did over the stream.
#include "stages/socket/socket_backlog.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice {
namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Without a receive thread the stage's own thread receives: a receive thread of its own is the advice.
TEST(BehindSenderAdvice, WithoutAReceiveThreadItAdvisesOne) {
  const std::string advice = behind_sender_advice(ReceiveWork{});
  EXPECT_TRUE(has(advice, "a receive thread on a core of its own")) << advice;
}

// A receive thread that worked through the flow is the bound: more of them, or a better core,
// not the receive thread it already has.
TEST(BehindSenderAdvice, AReceiveThreadThatWorkedThroughTheFlowIsTheBound) {
  const std::string advice = behind_sender_advice(
      ReceiveWork{.threads = 1, .cpu_ns = 30 * kSecond, .spin_ns = 0, .waits = 0, .flow_ns = 30 * kSecond});
  EXPECT_TRUE(has(advice, "worked 100% of the flow")) << advice;
  EXPECT_TRUE(has(advice, "the receive core could not keep up")) << advice;
  EXPECT_TRUE(has(advice, "receive_threads")) << advice;
  EXPECT_FALSE(has(advice, "a receive thread on a core of its own")) << advice;
}

// Polling an empty socket is not work: a thread busy all the flow that spent most of it spinning
// had time to spare, and one that waited for ring slots was held up by the stage's own thread.
TEST(BehindSenderAdvice, SpinIsNotWorkAndRingWaitsNameThePlacingThread) {
  const std::string advice = behind_sender_advice(ReceiveWork{
      .threads = 1, .cpu_ns = 30 * kSecond, .spin_ns = 12 * kSecond, .waits = 417, .flow_ns = 30 * kSecond});
  EXPECT_FALSE(has(advice, "could not keep up")) << advice;
  EXPECT_TRUE(has(advice, "its receive thread, worked 60% of the flow, waited 417 times for a free ring slot"))
      << advice;
  EXPECT_TRUE(has(advice, "cpu:")) << advice;
  const std::string once = behind_sender_advice(ReceiveWork{.threads = 1, .cpu_ns = kSecond, .waits = 1});
  EXPECT_TRUE(has(once, "its receive thread waited once for a free ring slot")) << once;
}

// Several receive threads share the work: three threads with 2.4 cores' worth over the flow
// worked 80% each, short of the bound; none waited, so the core was taken or a burst came.
TEST(BehindSenderAdvice, SeveralThreadsShareTheFlow) {
  const std::string advice = behind_sender_advice(
      ReceiveWork{.threads = 3, .cpu_ns = 24 * kSecond, .spin_ns = 0, .waits = 0, .flow_ns = 10 * kSecond});
  EXPECT_TRUE(has(advice, "its receive threads, worked 80% of the flow, never waited")) << advice;
  EXPECT_TRUE(has(advice, "core-wait and steal notes")) << advice;
  const std::string bound = behind_sender_advice(
      ReceiveWork{.threads = 3, .cpu_ns = 28 * kSecond, .spin_ns = 0, .waits = 0, .flow_ns = 10 * kSecond});
  EXPECT_TRUE(has(bound, "worked 93% of the flow")) << bound;
  EXPECT_TRUE(has(bound, "could not keep up")) << bound;
}

// Standby threads relieve the thread that always receives: their work counts toward its core,
// so a first thread near the bound with a standby thread's help is still the bound, and the
// advice names them.
TEST(BehindSenderAdvice, StandbyThreadsWorkCountsTowardTheReceivingThread) {
  const std::string bound = behind_sender_advice(ReceiveWork{
      .threads = 2, .cpu_ns = 19 * kSecond, .spin_ns = 0, .waits = 0, .flow_ns = 20 * kSecond, .standby = 1});
  EXPECT_TRUE(has(bound, "its receive threads (1 standing by) worked 95% of the flow")) << bound;
  EXPECT_TRUE(has(bound, "could not keep up")) << bound;
  const std::string short_of_it = behind_sender_advice(ReceiveWork{
      .threads = 2, .cpu_ns = 12 * kSecond, .spin_ns = 0, .waits = 0, .flow_ns = 20 * kSecond, .standby = 1});
  EXPECT_TRUE(has(short_of_it, "(1 standing by), worked 60% of the flow, never waited")) << short_of_it;
  // Without standby threads the same advice names them as a way out.
  const std::string one = behind_sender_advice(
      ReceiveWork{.threads = 1, .cpu_ns = 19 * kSecond, .spin_ns = 0, .waits = 0, .flow_ns = 20 * kSecond});
  EXPECT_TRUE(has(one, "receive_standby")) << one;
}

// A stream too short to have a span (fewer than two chunks) gives no share to quote.
TEST(BehindSenderAdvice, NoSpanQuotesNoShare) {
  const std::string advice = behind_sender_advice(ReceiveWork{.threads = 1, .cpu_ns = kSecond});
  EXPECT_FALSE(has(advice, "%")) << advice;
  EXPECT_TRUE(has(advice, "its receive thread never waited for a ring slot")) << advice;
}

}  // namespace
}  // namespace sluice
