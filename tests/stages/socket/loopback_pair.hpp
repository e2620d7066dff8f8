// Test support: a UDP receiver on a free loopback port and a sender aimed at it.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

#include "wire/socket.hpp"

namespace sluice::test_support {

struct LoopbackPair {
  wire::UniqueFd receiver{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  wire::UniqueFd sender{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  sockaddr_in address{};  // the receiver's, once bound
  std::uint16_t port = 0;

  // Binds the receiver to a free loopback port (after its options are set).
  void bind_receiver() {
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(receiver.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::getsockname(receiver.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
    port = ntohs(address.sin_port);
  }
};

}  // namespace sluice::test_support
