// Loopback ports nobody uses right now, for tests that start a listener later (a link's
// receiving half, a udp source). Bound to port 0 and released: another process could take it
// in between, which on a test machine's ephemeral range is rare enough.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <stdexcept>

#include "wire/socket.hpp"

namespace sluice::testing {

// A loopback port of `type` (SOCK_STREAM, SOCK_DGRAM) nobody uses right now.
inline std::uint16_t free_port(int type) {
  wire::UniqueFd fd(::socket(AF_INET, type, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    throw std::runtime_error(wire::errno_message("bind/getsockname for a free port"));
  }
  return ntohs(address.sin_port);
}

inline std::uint16_t free_tcp_port() { return free_port(SOCK_STREAM); }
inline std::uint16_t free_udp_port() { return free_port(SOCK_DGRAM); }

}  // namespace sluice::testing
