// tcp link connections: set-up, framed sends, reads with a silence limit, heartbeats.
#include "stages/link/tcp_connection.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <stdexcept>
#include <thread>

#include "pipeline/chunk_wire.hpp"
#include "pipeline/clock.hpp"

namespace sluice {
namespace {

constexpr std::size_t kMaxErrorBytes = 4096;

// Every address `endpoint` resolves to (numeric or by name), for connect or bind.
struct AddressList {
  addrinfo* head = nullptr;
  AddressList(const LinkEndpoint& endpoint, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    const std::string port = std::to_string(endpoint.port);
    if (int error =
            ::getaddrinfo(endpoint.address.empty() ? nullptr : endpoint.address.c_str(), port.c_str(), &hints, &head);
        error != 0) {
      throw std::runtime_error("getaddrinfo " + endpoint_text(endpoint) + ": " + ::gai_strerror(error));
    }
  }
  AddressList(const AddressList&) = delete;
  AddressList& operator=(const AddressList&) = delete;
  ~AddressList() {
    if (head != nullptr) ::freeaddrinfo(head);
  }
};

void set_option(int fd, int level, int name, const void* value, socklen_t size, std::string_view what) {
  if (::setsockopt(fd, level, name, value, size) != 0) throw std::runtime_error(wire::errno_message(what));
}

// Socket options both halves use: no Nagle delay for credits and heartbeats, and a
// kernel-side bound on unacknowledged data so a dead peer fails sends too.
void tune(int fd, std::chrono::milliseconds peer_timeout) {
  const int one = 1;
  set_option(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one), "setsockopt TCP_NODELAY");
  const unsigned user_timeout = static_cast<unsigned>(peer_timeout.count());
  set_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout), "setsockopt TCP_USER_TIMEOUT");
}

}  // namespace

// ---- TcpFailure ----

void TcpFailure::set(LinkStatus status, std::string message) noexcept {
  std::lock_guard lock(mutex_);
  if (status_.load(std::memory_order_relaxed) != LinkStatus::ok) return;
  text_ = std::move(message);
  status_.store(status, std::memory_order_release);
}

void TcpFailure::set_peer_error(std::string message) noexcept {
  std::lock_guard lock(mutex_);
  if (peer_error_set_.load(std::memory_order_relaxed)) return;
  peer_error_ = std::move(message);
  peer_error_set_.store(true, std::memory_order_release);
}

const std::string& TcpFailure::text() const noexcept {
  static const std::string kNone;
  if (peer_error_set_.load(std::memory_order_acquire)) return peer_error_;
  return status_.load(std::memory_order_acquire) == LinkStatus::ok ? kNone : text_;
}

// ---- TcpConnection ----

void TcpConnection::adopt(wire::UniqueFd fd, std::chrono::milliseconds peer_timeout) {
  fd_ = std::move(fd);
  peer_timeout_ = peer_timeout;
  last_sent_ns_.store(monotonic_ns(), std::memory_order_relaxed);
}

void TcpConnection::shutdown() noexcept {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

void TcpConnection::linger() noexcept {
  if (!fd_.valid() || ::shutdown(fd_.get(), SHUT_WR) != 0) return;
  const std::uint64_t deadline = monotonic_ns() + to_ns(peer_timeout_);
  std::array<std::byte, 4096> unread{};
  for (;;) {
    const ssize_t got = ::recv(fd_.get(), unread.data(), unread.size(), MSG_DONTWAIT);
    if (got == 0) return;  // the peer closed: nothing is left unread
    if (got > 0 || errno == EINTR) continue;
    const std::uint64_t now = monotonic_ns();
    if (errno != EAGAIN || now >= deadline) return;
    pollfd wait{fd_.get(), POLLIN, 0};
    ::poll(&wait, 1, static_cast<int>(std::max<std::uint64_t>(1, (deadline - now) / 1'000'000)));
  }
}

bool TcpConnection::send(const Header& header, std::span<const std::byte> first,
                         std::span<const std::byte> second) noexcept {
  std::array<std::byte, kHeaderBytes> head{};
  store_little_endian<std::uint32_t>(head.data(), static_cast<std::uint32_t>(header.type));
  store_little_endian<std::uint32_t>(head.data() + 4, header.aux);
  store_little_endian<std::uint64_t>(head.data() + 8, header.value);
  std::array<iovec, 3> parts{iovec{head.data(), head.size()}, iovec{const_cast<std::byte*>(first.data()), first.size()},
                             iovec{const_cast<std::byte*>(second.data()), second.size()}};
  std::lock_guard lock(write_mutex_);
  std::size_t part = 0;
  std::uint64_t progress_ns = monotonic_ns();
  while (part < parts.size()) {
    if (parts[part].iov_len == 0) {
      ++part;
      continue;
    }
    msghdr message{};
    message.msg_iov = &parts[part];
    message.msg_iovlen = parts.size() - part;
    const ssize_t sent = ::sendmsg(fd_.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // The peer is not reading: wait for room, but not past peer_timeout without progress.
        if (monotonic_ns() - progress_ns > to_ns(peer_timeout_)) {
          failure_.set(LinkStatus::peer_lost, "peer took no data for " + std::to_string(peer_timeout_.count()) + " ms");
          return false;
        }
        pollfd wait{fd_.get(), POLLOUT, 0};
        ::poll(&wait, 1, 50);
        continue;
      }
      failure_.set(LinkStatus::peer_lost, wire::errno_message("sendmsg", errno));
      return false;
    }
    progress_ns = monotonic_ns();
    auto left = static_cast<std::size_t>(sent);
    while (part < parts.size() && left >= parts[part].iov_len) left -= parts[part++].iov_len;
    if (part < parts.size()) {
      parts[part].iov_base = static_cast<std::byte*>(parts[part].iov_base) + left;
      parts[part].iov_len -= left;
    }
  }
  last_sent_ns_.store(monotonic_ns(), std::memory_order_relaxed);
  return true;
}

void TcpConnection::heartbeat_if_due() noexcept {
  if (monotonic_ns() - last_sent_ns_.load(std::memory_order_relaxed) < to_ns(peer_timeout_) / 4) return;
  std::unique_lock lock(write_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // a send is under way: the peer hears from us anyway
  std::array<std::byte, kHeaderBytes> head{};
  store_little_endian<std::uint32_t>(head.data(), static_cast<std::uint32_t>(Frame::heartbeat));
  // Sixteen bytes into an otherwise idle socket: fits unless the peer stopped reading, in
  // which case the silence check on its side (or our data sends) reports it.
  if (::send(fd_.get(), head.data(), head.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(head.size())) {
    last_sent_ns_.store(monotonic_ns(), std::memory_order_relaxed);
  }
}

bool TcpConnection::read_exact(std::span<std::byte> out, const std::atomic<bool>& stop) noexcept {
  std::size_t done = 0;
  std::uint64_t heard_ns = monotonic_ns();
  while (done < out.size()) {
    if (stop.load(std::memory_order_acquire)) return false;
    heartbeat_if_due();
    const ssize_t got = ::recv(fd_.get(), out.data() + done, out.size() - done, MSG_DONTWAIT);
    if (got > 0) {
      done += static_cast<std::size_t>(got);
      heard_ns = monotonic_ns();
      continue;
    }
    if (got == 0) {
      failure_.set(LinkStatus::peer_lost, "peer closed the connection");
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      failure_.set(LinkStatus::peer_lost, wire::errno_message("recv", errno));
      return false;
    }
    if (monotonic_ns() - heard_ns > to_ns(peer_timeout_)) {
      failure_.set(LinkStatus::peer_lost, "peer silent for " + std::to_string(peer_timeout_.count()) + " ms");
      return false;
    }
    pollfd wait{fd_.get(), POLLIN, 0};
    const int wait_ms = static_cast<int>(std::max<std::int64_t>(1, peer_timeout_.count() / 8));
    ::poll(&wait, 1, wait_ms);
  }
  return true;
}

void TcpConnection::send_error(std::string_view reason) noexcept {
  if (!connected()) return;
  send({Frame::error, 0, reason.size()}, std::as_bytes(std::span(reason.data(), reason.size())));
  failure_.set(LinkStatus::error, std::string(reason));
}

std::string TcpConnection::read_error_text(const Header& header, const std::atomic<bool>& stop) noexcept {
  std::string text(std::min<std::uint64_t>(header.value, kMaxErrorBytes), '\0');
  if (!read_exact(std::as_writable_bytes(std::span(text)), stop)) text = "(reason lost: " + failure_.text() + ")";
  return text;
}

bool TcpConnection::read_header(Header& header, const std::atomic<bool>& stop) noexcept {
  std::array<std::byte, kHeaderBytes> head{};
  if (!read_exact(head, stop)) return false;
  header.type = static_cast<Frame>(load_little_endian<std::uint32_t>(head.data()));
  header.aux = load_little_endian<std::uint32_t>(head.data() + 4);
  header.value = load_little_endian<std::uint64_t>(head.data() + 8);
  return true;
}

// ---- sockets ----

std::string endpoint_text(const LinkEndpoint& endpoint) {
  return endpoint.address + ":" + std::to_string(endpoint.port);
}

wire::UniqueFd connect_link_socket(const TransportSettings& settings) {
  const std::string where = endpoint_text(settings.endpoint);
  const std::uint64_t deadline = monotonic_ns() + to_ns(settings.connect_timeout);
  std::string last_error;
  for (;;) {
    AddressList addresses(settings.endpoint, false);
    for (addrinfo* address = addresses.head; address != nullptr; address = address->ai_next) {
      wire::UniqueFd attempt(::socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (!attempt.valid()) throw std::runtime_error(wire::errno_message("socket"));
      if (::connect(attempt.get(), address->ai_addr, address->ai_addrlen) == 0) {
        tune(attempt.get(), settings.peer_timeout);
        return attempt;
      }
      last_error = wire::errno_message("connect " + where);
    }
    // The receiver may not be up yet (nodes start in any order): retry until the deadline.
    if (monotonic_ns() > deadline) {
      throw std::runtime_error(last_error + " (gave up after " + std::to_string(settings.connect_timeout.count()) +
                               " ms; is the receiving node running?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

wire::UniqueFd listen_link_socket(const TransportSettings& settings, int backlog) {
  const std::string where = endpoint_text(settings.endpoint);
  AddressList addresses(settings.endpoint, true);
  std::string last_error = "no address";
  for (addrinfo* address = addresses.head; address != nullptr; address = address->ai_next) {
    wire::UniqueFd fd(::socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw std::runtime_error(wire::errno_message("socket"));
    const int one = 1;
    set_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one), "setsockopt SO_REUSEADDR");
    if (::bind(fd.get(), address->ai_addr, address->ai_addrlen) != 0) {
      last_error = wire::errno_message("bind " + where);
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) throw std::runtime_error(wire::errno_message("listen " + where));
    return fd;
  }
  throw std::runtime_error(last_error);
}

wire::UniqueFd accept_link_socket(int listener, const TransportSettings& settings) {
  pollfd wait{listener, POLLIN, 0};
  const int ready = ::poll(&wait, 1, static_cast<int>(settings.connect_timeout.count()));
  if (ready < 0) throw std::runtime_error(wire::errno_message("poll"));
  if (ready == 0) {
    throw std::runtime_error("no sender connected to " + endpoint_text(settings.endpoint) + " within " +
                             std::to_string(settings.connect_timeout.count()) +
                             " ms (is the sending node running, and does its link name this address?)");
  }
  wire::UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) throw std::runtime_error(wire::errno_message("accept4"));
  tune(fd.get(), settings.peer_timeout);
  return fd;
}

}  // namespace sluice
