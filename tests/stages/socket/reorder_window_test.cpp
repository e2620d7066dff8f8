// ReorderWindow alone: held packets come back by index or oldest first, byte for byte, and a
// full window or an oversized payload holds nothing.
#include "stages/socket/reorder_window.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace sluice {
namespace {

std::vector<std::byte> bytes(std::size_t count, std::uint8_t fill) {
  return std::vector<std::byte>(count, std::byte{fill});
}

TEST(ReorderWindow, TakesBackTheHeldPacketByIndexByteForByte) {
  ReorderWindow window;
  window.start(4, 16);
  const auto first = bytes(16, 7);
  const auto second = bytes(8, 9);
  ASSERT_TRUE(window.hold(300, first, 4));
  ASSERT_TRUE(window.hold(200, second, 2));
  EXPECT_TRUE(window.holds(300));
  EXPECT_FALSE(window.holds(100));
  EXPECT_FALSE(window.take(100).has_value());
  const auto taken = window.take(300);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->samples, 4U);
  EXPECT_EQ(std::vector<std::byte>(taken->payload.begin(), taken->payload.end()), first);
  EXPECT_FALSE(window.holds(300));
  EXPECT_FALSE(window.empty());
}

TEST(ReorderWindow, TakesTheOldestFirst) {
  ReorderWindow window;
  window.start(3, 8);
  ASSERT_TRUE(window.hold(50, bytes(8, 1), 2));
  ASSERT_TRUE(window.hold(10, bytes(8, 2), 2));
  ASSERT_TRUE(window.hold(30, bytes(8, 3), 2));
  std::vector<std::uint64_t> order;
  while (const auto oldest = window.take_oldest()) {
    order.push_back(oldest->index);
    EXPECT_EQ(oldest->payload[0], std::byte{static_cast<std::uint8_t>(oldest->index == 50   ? 1
                                                                      : oldest->index == 10 ? 2
                                                                                            : 3)});
  }
  EXPECT_EQ(order, (std::vector<std::uint64_t>{10, 30, 50}));
  EXPECT_TRUE(window.empty());
}

TEST(ReorderWindow, AFullWindowOrAnOversizedPayloadHoldsNothing) {
  ReorderWindow window;
  window.start(2, 8);
  EXPECT_FALSE(window.hold(1, bytes(9, 1), 2));
  EXPECT_TRUE(window.empty());
  ASSERT_TRUE(window.hold(1, bytes(8, 1), 2));
  ASSERT_TRUE(window.hold(2, bytes(8, 2), 2));
  EXPECT_TRUE(window.full());
  EXPECT_FALSE(window.hold(3, bytes(8, 3), 2));
  EXPECT_FALSE(window.holds(3));
  ASSERT_TRUE(window.take(1).has_value());
  EXPECT_TRUE(window.hold(3, bytes(8, 3), 2));  // the freed slot is used again
  EXPECT_TRUE(window.holds(3));
}

}  // namespace
}  // namespace sluice
