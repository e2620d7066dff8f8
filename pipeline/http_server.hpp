// The live metrics endpoint, off unless asked for: `/metrics` (Prometheus text), `/` (the
// dashboard page) and the JSON the page polls (`/api/status`, `/api/spectrum`). cpp-httplib
// serves on its own threads and only reads the stages' relaxed atomics and the fft stages'
// spectrum snapshots, so the lanes never wait for a scrape.
#pragma once

#include <atomic>
#include <charconv>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace httplib {
class Server;
}

namespace sluice {

class Pipeline;

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
    if (host.find(':') != std::string_view::npos && text.front() != '[') return std::nullopt;  // bare IPv6 needs brackets
    if (!host.empty()) endpoint.host = std::string(host);
  }
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), endpoint.port);
  if (port.empty() || error != std::errc{} || end != port.data() + port.size() || endpoint.port < 0 || endpoint.port > 65535) {
    return std::nullopt;
  }
  return endpoint;
}

class MetricsServer {
 public:
  // Binds and starts serving `pipeline` (which must outlive the server). Throws
  // std::runtime_error naming the address when it cannot bind.
  MetricsServer(const Pipeline& pipeline, const HttpEndpoint& endpoint);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();  // stops serving and joins

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string url() const;  // http://HOST:PORT/

 private:
  const Pipeline* pipeline_;
  HttpEndpoint endpoint_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::atomic<bool> listen_returned_{false};
  std::thread thread_;

  void wait_until_listening() const;
};

// The dashboard page, pipeline/dashboard.html embedded at build time: one self-contained HTML
// document (inline CSS, JS and SVG; no network). It polls /api/status and /api/spectrum twice a
// second; rates are differences of the counters over the server's own clock (time_ns), so a
// throttled or virtual-time browser still shows true rates.
std::string_view dashboard_page();

}  // namespace sluice
