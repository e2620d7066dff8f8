// Where the live metrics server listens (the `pipeline.http` setting and `--http`), parsed
// here so that the configuration can reject a bad address before anything starts.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

struct HttpEndpoint {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (the server says which)
};

// "ADDR:PORT", "[V6ADDR]:PORT", ":PORT" or "PORT" (host 127.0.0.1). Nothing when malformed.
inline std::optional<HttpEndpoint> parse_http_endpoint(std::string_view text) {
  HttpEndpoint endpoint;
  std::string_view port = text;
  if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    std::string_view host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.find(':') != std::string_view::npos && text.front() != '[')
      return std::nullopt;  // bare IPv6 needs brackets
    if (!host.empty()) endpoint.host = std::string(host);
  }
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), endpoint.port);
  if (port.empty() || error != std::errc{} || end != port.data() + port.size() || endpoint.port < 0 ||
      endpoint.port > 65535) {
    return std::nullopt;
  }
  return endpoint;
}

}  // namespace sluice
