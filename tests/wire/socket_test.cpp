// set_receive_buffer on real UDP sockets: what the kernel grants, and a note that says whether it
// capped the ask and, where the cap is net.core.rmem_max, how to lift it. The second test takes
// CAP_NET_ADMIN from one thread (capabilities are per thread), as a process run without it has.
// wait_for_arrival_timestamps: once it says yes, a socket's queued datagrams carry the times they
// arrived.
#include "wire/socket.hpp"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"

namespace sluice::wire {
namespace {

UniqueFd udp_socket() { return UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)); }

std::uint64_t rmem_max() {
  std::ifstream file("/proc/sys/net/core/rmem_max");
  std::uint64_t value = 0;
  file >> value;
  return value;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The most the kernel holds (1 GiB less one byte, twice in its own count) is a full grant.
TEST(ReceiveBuffer, TheKernelsCeilingIsAFullGrant) {
  const UniqueFd socket = udp_socket();
  ASSERT_TRUE(socket.valid());
  const std::string note = set_receive_buffer(socket.get(), kMaxReceiveBuffer);
  const std::uint64_t granted = receive_buffer_bytes(socket.get()).value() / 2;
  if (contains(note, "via SO_RCVBUFFORCE")) {
    EXPECT_EQ(granted, kMaxReceiveBuffer - 1) << note;
    EXPECT_FALSE(contains(note, "capped")) << note;
    EXPECT_TRUE(contains(note, "receive buffer 1024.00 MiB")) << note;
  } else {  // no CAP_NET_ADMIN: net.core.rmem_max caps it, and the note says how to lift that
    ASSERT_TRUE(contains(note, "via SO_RCVBUF")) << note;
    EXPECT_EQ(granted, std::min(rmem_max(), kMaxReceiveBuffer - 1)) << note;
    EXPECT_EQ(contains(note, "net.core.rmem_max"), granted + 1 < kMaxReceiveBuffer) << note;
  }
}

// Without CAP_NET_ADMIN a size above net.core.rmem_max gets rmem_max, and the note names it.
TEST(ReceiveBuffer, ACapAtRmemMaxIsNamedWithTheSysctlThatLiftsIt) {
  const std::uint64_t limit = rmem_max();
  ASSERT_GT(limit, 0U);
  if (limit >= kMaxReceiveBuffer / 2) GTEST_SKIP() << "net.core.rmem_max is " << limit << ": no size above it to ask";
  const std::uint64_t asked = limit * 2 + 4096;
  std::string note;
  std::uint64_t granted = 0;
  std::thread([&] {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    ASSERT_EQ(::syscall(SYS_capget, &header, data), 0);
    data[CAP_TO_INDEX(CAP_NET_ADMIN)].effective &= ~CAP_TO_MASK(CAP_NET_ADMIN);
    ASSERT_EQ(::syscall(SYS_capset, &header, data), 0);
    const UniqueFd socket = udp_socket();
    ASSERT_TRUE(socket.valid());
    note = set_receive_buffer(socket.get(), asked);
    granted = receive_buffer_bytes(socket.get()).value() / 2;
  }).join();
  EXPECT_EQ(granted, limit) << note;
  EXPECT_TRUE(contains(note, "via SO_RCVBUF (asked")) << note;
  EXPECT_TRUE(contains(note, "capped by the kernel at net.core.rmem_max")) << note;
  EXPECT_TRUE(contains(note, "sysctl -w net.core.rmem_max=" + std::to_string(asked))) << note;
}

// A socket that asks for SO_TIMESTAMPNS and then waits: a burst queued at once and taken 5 ms
// later carries stamps from before the receive calls, in the order the datagrams were queued
// (until the kernel's stamps are on, a datagram is stamped as a call takes it).
TEST(ArrivalTimestamps, OnceOnQueuedDatagramsCarryTheTimesTheyArrived) {
  UniqueFd receiver = udp_socket();
  UniqueFd sender = udp_socket();
  const int one = 1;
  ASSERT_EQ(::setsockopt(receiver.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)), 0);
  sockaddr_in address = *parse_endpoint("127.0.0.1:0");
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(receiver.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::getsockname(receiver.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  ASSERT_EQ(::connect(sender.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_TRUE(wait_for_arrival_timestamps(std::chrono::seconds(1)));
  constexpr int kBurst = 32;
  for (int i = 0; i < kBurst; ++i) ASSERT_EQ(::send(sender.get(), &i, sizeof(i), 0), static_cast<ssize_t>(sizeof(i)));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const std::uint64_t taken_after = to_ns(now);
  std::vector<std::uint64_t> stamps;
  for (int i = 0; i < kBurst; ++i) {
    int value = -1;
    std::uint64_t stamp = 0;
    ASSERT_EQ(receive_stamped(receiver.get(), &value, sizeof(value), stamp), static_cast<ssize_t>(sizeof(value)));
    EXPECT_EQ(value, i);
    ASSERT_NE(stamp, 0) << "datagram " << i << " came without a stamp";
    stamps.push_back(stamp);
  }
  for (int i = 0; i < kBurst; ++i) {
    EXPECT_LT(stamps[static_cast<std::size_t>(i)], taken_after) << "datagram " << i << " was stamped when it was taken";
    if (i > 0) {
      EXPECT_LE(stamps[static_cast<std::size_t>(i) - 1], stamps[static_cast<std::size_t>(i)]);
    }
  }
}

}  // namespace
}  // namespace sluice::wire
