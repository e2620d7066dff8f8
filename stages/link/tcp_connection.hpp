// One TCP connection of the tcp link: framed writes from any thread, reads with a silence
// limit, heartbeats, and the first failure, which every connection of one half shares.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "stages/link/transport.hpp"
#include "wire/socket.hpp"

namespace sluice {

// The first failure one half saw on any of its connections, and the peer's own report.
class TcpFailure {
 public:
  // Keeps the first local failure ("" while healthy) and whether it was peer loss.
  void set(LinkStatus status, std::string message) noexcept;
  // The peer's own report of why it failed (its error frame). It wins over a local failure
  // seen first: a write into a connection the failing peer just closed ("Broken pipe") often
  // comes before the reader has taken the frame that says why.
  void set_peer_error(std::string message) noexcept;
  [[nodiscard]] LinkStatus status() const noexcept {
    if (peer_error_set_.load(std::memory_order_acquire)) return LinkStatus::error;
    return status_.load(std::memory_order_acquire);
  }
  [[nodiscard]] bool failed() const noexcept { return status() != LinkStatus::ok; }
  // Each text is written once, before its flag is published: safe to read from any thread after.
  [[nodiscard]] const std::string& text() const noexcept;

 private:
  std::atomic<LinkStatus> status_{LinkStatus::ok};
  std::mutex mutex_;
  std::string text_;
  std::atomic<bool> peer_error_set_{false};
  std::string peer_error_;
};

class TcpConnection {
 public:
  enum class Frame : std::uint32_t { hello = 1, welcome, chunk, credit, heartbeat, end, end_ack, error, join };
  struct Header {
    Frame type = Frame::heartbeat;
    std::uint32_t aux = 0;
    std::uint64_t value = 0;
  };
  static constexpr std::size_t kHeaderBytes = 16;

  explicit TcpConnection(TcpFailure& failure) : failure_(failure) {}
  void adopt(wire::UniqueFd fd, std::chrono::milliseconds peer_timeout);
  [[nodiscard]] bool connected() const noexcept { return fd_.valid(); }

  // Sends a header and up to two bodies in one sendmsg loop. False (and failure set) when
  // the peer is gone or nothing moved for peer_timeout.
  bool send(const Header& header, std::span<const std::byte> first = {},
            std::span<const std::byte> second = {}) noexcept;
  // Sends a heartbeat when nothing was sent for peer_timeout/4 (skips when a send is under way).
  void heartbeat_if_due() noexcept;
  // Reads exactly out.size() bytes; false on peer loss, silence beyond peer_timeout, or stop.
  // Heartbeats go out meanwhile, also while bytes keep coming, so that a peer which only
  // writes on this connection still hears from it.
  bool read_exact(std::span<std::byte> out, const std::atomic<bool>& stop) noexcept;
  bool read_header(Header& header, const std::atomic<bool>& stop) noexcept;
  // Tells the peer why this side fails (an error frame) and records it as our failure.
  void send_error(std::string_view reason) noexcept;
  // The body of an error frame whose header was just read.
  std::string read_error_text(const Header& header, const std::atomic<bool>& stop) noexcept;
  void shutdown() noexcept;
  // After the stream's end was read and acknowledged: sends our FIN and reads (discarding) what
  // the peer still sends until it closes too, for up to peer_timeout. Closing with anything
  // unread (a heartbeat) would make the kernel reset the connection, and a reset discards an
  // acknowledgement not yet delivered (one a lossy path must send again).
  void linger() noexcept;
  void close() noexcept { fd_.reset(); }

 private:
  TcpFailure& failure_;
  wire::UniqueFd fd_;
  std::chrono::milliseconds peer_timeout_{1500};
  std::mutex write_mutex_;
  std::atomic<std::uint64_t> last_sent_ns_{0};
};

// "address:port", for messages.
std::string endpoint_text(const LinkEndpoint& endpoint);
// A connected socket to `settings.endpoint`, retried until connect_timeout (the receiving
// node may start later), tuned for the link. Throws naming connect and the endpoint.
wire::UniqueFd connect_link_socket(const TransportSettings& settings);
// A socket listening at `settings.endpoint` (SO_REUSEADDR) with room for `backlog` senders.
wire::UniqueFd listen_link_socket(const TransportSettings& settings, int backlog);
// The next sender on `listener`, tuned for the link; throws when none came in connect_timeout.
wire::UniqueFd accept_link_socket(int listener, const TransportSettings& settings);

}  // namespace sluice
