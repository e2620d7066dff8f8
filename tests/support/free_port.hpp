// A loopback TCP port nobody listens on right now, for tests that start a listener later
// (a link's receiving half). Bound to port 0 and released: another process could take it
// in between, which on a test machine's ephemeral range is rare enough.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <stdexcept>

#include "wire/socket.hpp"

namespace sluice::testing {

inline std::uint16_t free_tcp_port() {
  wire::UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
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

}  // namespace sluice::testing
