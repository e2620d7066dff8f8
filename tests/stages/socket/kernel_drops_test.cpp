// KernelDrops on real UDP sockets: the kernel really drops datagrams at a receiver whose
// buffer is full, and the count the stage reads off received datagrams equals the kernel's own
// (/proc/net/udp); a gap is a loss only when those drops can hold it.
#include "stages/socket/kernel_drops.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <vector>

#include "loopback_pair.hpp"
#include "proc_net_udp.hpp"
#include "wire/socket.hpp"

namespace sluice {
namespace {

// A receiver with the smallest receive buffer the kernel grants, and a sender aimed at it.
struct Overflowing : test_support::LoopbackPair {
  std::uint64_t sent = 0;

  Overflowing() {
    const int smallest = 1;  // raised to the kernel's minimum
    EXPECT_EQ(::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUF, &smallest, sizeof(smallest)), 0);
    bind_receiver();
  }
  void send(std::size_t count) {
    const std::array<std::byte, 1400> datagram{};
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(::sendto(sender.get(), datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&address),
                         sizeof(address)),
                static_cast<ssize_t>(datagram.size()));
      ++sent;
    }
  }
  // Overflows the buffer (nobody reads while 200 datagrams come), drains it, and receives one
  // more datagram, which carries the kernel's count of what it dropped.
  void overflow(KernelDrops& drops) {
    send(200);
    drain(drops);
    send(1);
    drain(drops);
  }
  // Receives everything queued, each message's control data handed to `drops`. Returns the count.
  std::uint64_t drain(KernelDrops& drops) {
    std::uint64_t received = 0;
    std::array<std::byte, 2048> data{};
    alignas(cmsghdr) std::array<std::byte, KernelDrops::kControlBytes> control{};
    while (true) {
      iovec iov{data.data(), data.size()};
      msghdr header{};
      header.msg_iov = &iov;
      header.msg_iovlen = 1;
      header.msg_control = control.data();
      header.msg_controllen = control.size();
      if (::recvmsg(receiver.get(), &header, MSG_DONTWAIT) < 0) {
        EXPECT_EQ(errno, EAGAIN);
        return received;
      }
      drops.received(header);
      ++received;
    }
  }
};

TEST(KernelDrops, CountsWhatTheKernelDroppedAsTheKernelDoes) {
  Overflowing socket;
  StageMetrics metrics("a", "source", "udp");
  KernelDrops drops;
  drops.start(socket.receiver.get(), metrics, false);
  socket.send(200);  // nobody reads: the buffer fills and the kernel drops the rest
  std::uint64_t received = socket.drain(drops);
  const std::uint64_t dropped = test_support::proc_udp_drops(socket.port).value();
  ASSERT_GT(dropped, 0U);
  EXPECT_EQ(dropped, 200 - received);
  // The queued datagrams arrived before the drops; the next one carries the count.
  EXPECT_EQ(metrics.drop_counter("socket_overflow").get(), 0U);
  socket.send(1);
  received += socket.drain(drops);
  EXPECT_EQ(received, 200 - dropped + 1);
  EXPECT_EQ(metrics.drop_counter("socket_overflow").get(), dropped);
  EXPECT_EQ(drops.since_used(), dropped);
}

// Packets of 100 samples; the stream used packet 0 (count 0), then the kernel dropped `dropped`.
TEST(KernelDrops, AGapIsALossOnlyWhenTheDropsCanHoldIt) {
  Overflowing socket;
  StageMetrics metrics("a", "source", "udp");
  KernelDrops drops;
  drops.start(socket.receiver.get(), metrics, false);
  drops.used(0, 100, 0);
  EXPECT_FALSE(drops.explains(200, 100, 2)) << "no drops yet: a gap is not theirs";
  socket.overflow(drops);
  const std::uint64_t dropped = drops.since_used();
  ASSERT_GT(dropped, 1U);
  const auto count_after = [](std::uint64_t missing) { return static_cast<std::uint8_t>((missing + 1) & 0xF); };
  const std::uint64_t next = 100 + dropped * 100;  // right after `dropped` missing packets
  EXPECT_TRUE(drops.explains(next, 100, count_after(dropped)));
  EXPECT_TRUE(drops.explains(next - 100, 100, count_after(dropped - 1)));
  EXPECT_TRUE(drops.explains(next, 100, std::nullopt)) << "a framing without a packet count";
  EXPECT_FALSE(drops.explains(next + 100, 100, count_after(dropped + 1))) << "more missing than dropped: a jump";
  EXPECT_FALSE(drops.explains(next, 100, count_after(dropped + 1))) << "the packet count says otherwise";
  EXPECT_FALSE(drops.explains(next + 50, 100, count_after(dropped))) << "not whole packets";
  EXPECT_FALSE(drops.explains(100, 100, 1)) << "no gap";
  // Once a packet after the drops is used, they are spent.
  drops.used(next, 100, count_after(dropped));
  EXPECT_FALSE(drops.explains(next + 200, 100, std::nullopt));
  // More drops; a late packet behind the furthest one does not move where the next gap starts.
  socket.overflow(drops);
  const std::uint64_t again = drops.since_used();
  ASSERT_GT(again, 0U);
  drops.used(next - 100, 100, std::nullopt);
  EXPECT_EQ(drops.since_used(), again);
  EXPECT_TRUE(drops.explains(next + 100 + again * 100, 100, std::nullopt));
  // After a resynchronisation nothing before it counts.
  drops.restart();
  EXPECT_FALSE(drops.explains(next + 100 + again * 100, 100, std::nullopt));
}

TEST(KernelDrops, WithGroOneCountedDropMayHoldACoalescedDatagram) {
  Overflowing socket;
  StageMetrics metrics("a", "source", "udp");
  KernelDrops drops;
  drops.start(socket.receiver.get(), metrics, true);
  drops.used(0, 100, std::nullopt);
  socket.overflow(drops);
  const std::uint64_t most = drops.since_used() * KernelDrops::kGroSegmentsMax;
  EXPECT_TRUE(drops.explains(100 + most * 100, 100, std::nullopt));
  EXPECT_FALSE(drops.explains(100 + (most + 1) * 100, 100, std::nullopt));
}

}  // namespace
}  // namespace sluice
