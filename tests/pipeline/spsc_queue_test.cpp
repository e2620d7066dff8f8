// The SPSC ring between stage threads: FIFO order, bounded capacity, close semantics, and
// no loss or duplication when two threads hammer it (run under TSan in CI).
#include "pipeline/spsc_queue.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace sluice {
namespace {

TEST(SpscQueue, RoundsCapacityUpToAPowerOfTwoAndRefusesWhenFull) {
  SpscQueue<int> queue(5);
  EXPECT_EQ(queue.capacity(), 8U);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(queue.try_push(i));
  EXPECT_FALSE(queue.try_push(99));
  EXPECT_EQ(queue.size(), 8U);
  EXPECT_EQ(queue.try_pop(), 0);
  EXPECT_TRUE(queue.try_push(8));
}

TEST(SpscQueue, IsFirstInFirstOutAcrossWrapAround) {
  SpscQueue<int> queue(4);
  int next_in = 0;
  int next_out = 0;
  for (int round = 0; round < 100; ++round) {
    while (queue.try_push(next_in)) ++next_in;
    for (int i = 0; i < 3; ++i) {
      auto value = queue.try_pop();
      ASSERT_TRUE(value);
      EXPECT_EQ(*value, next_out++);
    }
  }
}

TEST(SpscQueue, FinishedOnlyOnceClosedAndDrained) {
  SpscQueue<int> queue(4);
  EXPECT_TRUE(queue.try_push(1));
  queue.close();
  EXPECT_TRUE(queue.closed());
  EXPECT_FALSE(queue.finished());  // one item still queued
  EXPECT_EQ(queue.try_pop(), 1);
  EXPECT_TRUE(queue.finished());
  EXPECT_FALSE(queue.try_pop());
}

TEST(SpscQueue, RejectsZeroCapacity) { EXPECT_THROW(SpscQueue<int>(0), std::invalid_argument); }

TEST(SpscQueue, TwoThreadsPassEveryItemOnceInOrder) {
  constexpr std::uint64_t kItems = 2'000'000;
  SpscQueue<std::uint64_t> queue(64);
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < kItems; ++i) {
      while (!queue.try_push(i)) std::this_thread::yield();
    }
    queue.close();
  });
  std::uint64_t expected = 0;
  std::uint64_t sum = 0;
  while (!queue.finished()) {
    if (auto value = queue.try_pop()) {
      ASSERT_EQ(*value, expected);
      ++expected;
      sum += *value;
    } else {
      // As the producer does when full: on a busy machine, a consumer that spins through its
      // time slice holds back the producer sharing its core.
      std::this_thread::yield();
    }
  }
  producer.join();
  EXPECT_EQ(expected, kItems);
  EXPECT_EQ(sum, kItems * (kItems - 1) / 2);
}

}  // namespace
}  // namespace sluice
