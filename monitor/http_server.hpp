// The live metrics endpoint, off unless asked for: `/metrics`, the dashboard page and the JSON it
// polls, served by cpp-httplib on its own threads, which only read the stages' relaxed atomics
// and spectrum snapshots, so the lanes never wait for a scrape.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "pipeline/http_endpoint.hpp"

namespace httplib {
class Server;
}

namespace sluice {

class Pipeline;

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

// The dashboard page, monitor/dashboard.html embedded at build time: one self-contained HTML
// document (inline CSS, JS and SVG; no network). It polls /api/status and /api/spectrum twice a
// second; rates are differences of the counters over the server's own clock (time_ns), so a
// throttled or virtual-time browser still shows true rates.
std::string_view dashboard_page();

}  // namespace sluice
