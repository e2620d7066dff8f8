// MetricsServer: cpp-httplib with a small thread pool of its own; every handler builds its
// answer from the metrics at the moment of the request (nothing is cached or locked but the
// spectrum snapshots, whose lock the fft stage only ever try_locks).
#include "monitor/http_server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <stdexcept>

#include "monitor/prometheus_text.hpp"
#include "monitor/report.hpp"
#include "pipeline/log.hpp"
#include "pipeline/runtime.hpp"

namespace sluice {

MetricsServer::MetricsServer(const Pipeline& pipeline, const HttpEndpoint& endpoint)
    : pipeline_(&pipeline), endpoint_(endpoint), server_(std::make_unique<httplib::Server>()) {
  // Two workers are plenty for a browser and a Prometheus scraper, and keep the cores for the lanes.
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  // httplib's default also sets SO_REUSEPORT, which would let a second sluice share the
  // port and split the scrapes between two pipelines silently; a port in use must be an error.
  server_->set_socket_options([](int socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(prometheus_text(*pipeline_), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/api/status", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(live_status_json(*pipeline_).dump(), "application/json");
  });
  server_->Get("/api/spectrum", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(live_spectra_json(*pipeline_).dump(), "application/json");
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(std::string(dashboard_page()), "text/html; charset=utf-8");
  });
  if (endpoint.port == 0) {
    port_ = server_->bind_to_any_port(endpoint.host);
  } else if (server_->bind_to_port(endpoint.host, endpoint.port)) {
    port_ = endpoint.port;
  } else {
    port_ = -1;
  }
  if (port_ <= 0) {
    throw std::runtime_error("http: cannot listen on " + endpoint.host + ":" + std::to_string(endpoint.port) +
                             " (bind failed: address in use, not local, or not an address)");
  }
  thread_ = std::thread([this] {
    if (!server_->listen_after_bind()) log::warn("http: the server on {} stopped with an error", url());
    listen_returned_.store(true, std::memory_order_release);
  });
  wait_until_listening();
  log::info("http: dashboard at {} (Prometheus metrics at {}metrics)", url(), url());
}

// httplib's stop() only acts once the accept loop runs, so stopping waits for it to start.
void MetricsServer::wait_until_listening() const {
  while (!server_->is_running() && !listen_returned_.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

MetricsServer::~MetricsServer() {
  wait_until_listening();
  if (server_->is_running()) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string MetricsServer::url() const {
  const bool v6 = endpoint_.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + endpoint_.host + "]" : endpoint_.host) + ":" + std::to_string(port_) + "/";
}

}  // namespace sluice
