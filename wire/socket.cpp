// Endpoint parsing and error text for socket setup.
#include "wire/socket.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace sluice::wire {

std::optional<sockaddr_in> parse_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port > 65535) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.empty() ? "0.0.0.0" : host.c_str(), &address.sin_addr) != 1) return std::nullopt;
  return address;
}

std::string to_string(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

std::string errno_message(std::string_view call) { return std::string(call) + ": " + std::strerror(errno); }

}  // namespace sluice::wire
