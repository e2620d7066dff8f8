// PayloadLanding on a real loopback socket: datagrams sent with UDP GSO arrive as one GRO message
// whose payloads lie in the landing area one after another, headers and trailers beside them,
// and gather() gives back the datagrams exactly as sent.
#include "stages/socket/landing.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "wire/socket.hpp"

namespace sluice {
namespace {

constexpr std::size_t kHeader = 28;
constexpr std::size_t kPayload = 1000;
constexpr std::size_t kTrailer = 4;
constexpr std::size_t kDatagram = kHeader + kPayload + kTrailer;

struct Loopback {
  wire::UniqueFd receiver{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  wire::UniqueFd sender{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  sockaddr_in address = *wire::parse_endpoint("127.0.0.1:0");
  bool gro = false;
  Loopback() {
    const int one = 1;
    gro = ::setsockopt(receiver.get(), SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    EXPECT_EQ(::bind(receiver.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::getsockname(receiver.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  }
  // `count` datagrams in one send, segmented by the kernel (GSO); each byte says its datagram and place.
  std::vector<std::byte> send(std::size_t count, std::size_t last_bytes) {
    std::vector<std::byte> bytes((count - 1) * kDatagram + last_bytes);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 7 + i / kDatagram) & 0xFF);
    const int segment = static_cast<int>(kDatagram);
    if (::setsockopt(sender.get(), SOL_UDP, UDP_SEGMENT, &segment, sizeof(segment)) != 0) return {};
    EXPECT_EQ(::sendto(sender.get(), bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&address),
                       sizeof(address)),
              static_cast<ssize_t>(bytes.size()));
    return bytes;
  }
  int receive(mmsghdr& message) {
    pollfd readable{receiver.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&readable, 1, 5000), 1);
    return ::recvmmsg(receiver.get(), &message, 1, MSG_DONTWAIT, nullptr);
  }
};

TEST(PayloadLanding, GroSegmentsLandOneAfterAnotherAndGatherBackAsSent) {
  Loopback loopback;
  PayloadLanding landing;
  landing.allocate(1, true);
  ASSERT_TRUE(landing.expect(kHeader, kPayload, kTrailer, 5));
  std::vector<std::byte> area(10 * kPayload, std::byte{0xEE});
  std::vector<std::byte> spill(65536);
  mmsghdr message{};
  ASSERT_EQ(landing.lay_out(0, area, message.msg_hdr, spill.data(), spill.size()), 5U);
  // Four datagrams, the last 400 bytes short: what a GRO message of a stream's end looks like.
  const std::vector<std::byte> sent = loopback.send(4, kDatagram - 400);
  if (sent.empty() || !loopback.gro) GTEST_SKIP() << "kernel without UDP GSO/GRO";
  ASSERT_EQ(loopback.receive(message), 1);
  ASSERT_EQ(message.msg_len, sent.size());
  // Payloads back to back in the area, the short one last; headers beside.
  EXPECT_EQ(landing.landed_payload(0, message.msg_len, kDatagram), 3 * kPayload + kPayload - 400);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(std::memcmp(landing.header(0, k), sent.data() + k * kDatagram, kHeader), 0) << k;
    const std::size_t payload = k < 3 ? kPayload : kPayload - 400;
    EXPECT_EQ(landing.payload(0, k), area.data() + k * kPayload);
    EXPECT_EQ(std::memcmp(landing.payload(0, k), sent.data() + k * kDatagram + kHeader, payload), 0) << k;
  }
  EXPECT_EQ(area[4 * kPayload], std::byte{0xEE});  // nothing past them
  std::vector<std::byte> gathered(65536);
  landing.gather(0, message.msg_len, gathered.data());
  EXPECT_EQ(std::memcmp(gathered.data(), sent.data(), sent.size()), 0);
}

TEST(PayloadLanding, MoreDatagramsThanTheLayoutGoToTheSpillAndGatherBackAsSent) {
  Loopback loopback;
  PayloadLanding landing;
  landing.allocate(1, true);
  ASSERT_TRUE(landing.expect(kHeader, kPayload, kTrailer, 8));
  std::vector<std::byte> area(2 * kPayload + 10);  // room for two payloads only
  std::vector<std::byte> spill(65536);
  mmsghdr message{};
  ASSERT_EQ(landing.lay_out(0, area, message.msg_hdr, spill.data(), spill.size()), 2U);
  const std::vector<std::byte> sent = loopback.send(5, kDatagram);
  if (sent.empty() || !loopback.gro) GTEST_SKIP() << "kernel without UDP GSO/GRO";
  ASSERT_EQ(loopback.receive(message), 1);
  ASSERT_EQ(message.msg_len, sent.size());
  EXPECT_EQ(landing.landed_payload(0, message.msg_len, kDatagram), 0U);  // not all landed: nothing lands after it
  // The three beyond the layout are whole in the spill.
  EXPECT_EQ(std::memcmp(spill.data(), sent.data() + 2 * kDatagram, 3 * kDatagram), 0);
  landing.gather(0, message.msg_len, spill.data());  // into the spill itself, as the stage does
  EXPECT_EQ(std::memcmp(spill.data(), sent.data(), sent.size()), 0);
}

TEST(PayloadLanding, AMessageHoldsNoMoreThanItsReceiveBufferSoALongerOneIsTruncated) {
  PayloadLanding landing;
  landing.allocate(1, false);
  ASSERT_TRUE(landing.expect(kHeader, kPayload, kTrailer, 1));
  std::vector<std::byte> area(4 * kPayload);
  std::vector<std::byte> spill(kDatagram + 100);
  mmsghdr message{};
  ASSERT_EQ(landing.lay_out(0, area, message.msg_hdr, spill.data(), spill.size()), 1U);
  std::size_t capacity = 0;
  for (std::size_t i = 0; i < message.msg_hdr.msg_iovlen; ++i) capacity += message.msg_hdr.msg_iov[i].iov_len;
  EXPECT_EQ(capacity, spill.size());
  // A receive buffer smaller than one datagram: nothing lands.
  std::vector<std::byte> small(kDatagram - 1);
  EXPECT_EQ(landing.lay_out(0, area, message.msg_hdr, small.data(), small.size()), 0U);
}

}  // namespace
}  // namespace sluice
