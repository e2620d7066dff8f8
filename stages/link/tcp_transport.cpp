// tcp link transport: connection set-up, framed sends, the I/O threads, credits.
#include "stages/link/tcp_transport.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "pipeline/chunk_wire.hpp"
#include "pipeline/clock.hpp"

namespace sluice {
namespace {
// How long a half whose own write failed waits for its reader to take what the peer sent
// before (its chunks, its error frame): the peer's reason is worth more than "Broken pipe".
constexpr std::chrono::milliseconds kSettle{500};

constexpr std::uint32_t kProtocolVersion = 1;
constexpr std::size_t kMaxHelloBytes = 64 * 1024;
constexpr std::size_t kMaxErrorBytes = 4096;

template <typename Integer>
void store(std::byte* out, Integer value) noexcept {
  for (std::size_t i = 0; i < sizeof(Integer); ++i) out[i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFF);
}
template <typename Integer>
Integer load(const std::byte* in) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(Integer); ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return static_cast<Integer>(value);
}


std::string endpoint_text(const LinkEndpoint& endpoint) { return endpoint.address + ":" + std::to_string(endpoint.port); }

// Every address `endpoint` resolves to (numeric or by name), for connect or bind.
struct AddressList {
  addrinfo* head = nullptr;
  AddressList(const LinkEndpoint& endpoint, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    const std::string port = std::to_string(endpoint.port);
    if (int error = ::getaddrinfo(endpoint.address.empty() ? nullptr : endpoint.address.c_str(), port.c_str(), &hints, &head);
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

std::uint64_t to_ns(std::chrono::milliseconds duration) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count());
}

}  // namespace

// ---- TcpConnection ----

void TcpConnection::adopt(wire::UniqueFd fd, std::chrono::milliseconds peer_timeout) {
  fd_ = std::move(fd);
  peer_timeout_ = peer_timeout;
  last_sent_ns_.store(monotonic_ns(), std::memory_order_relaxed);
}

void TcpConnection::set_failure(LinkStatus status, std::string message) noexcept {
  std::lock_guard lock(failure_mutex_);
  if (failure_status_.load(std::memory_order_relaxed) != LinkStatus::ok) return;
  failure_ = std::move(message);
  failure_status_.store(status, std::memory_order_release);
}

void TcpConnection::set_peer_error(std::string message) noexcept {
  std::lock_guard lock(failure_mutex_);
  if (peer_error_set_.load(std::memory_order_relaxed)) return;
  peer_error_ = std::move(message);
  peer_error_set_.store(true, std::memory_order_release);
}

void TcpConnection::shutdown() noexcept {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

bool TcpConnection::send(const Header& header, std::span<const std::byte> first, std::span<const std::byte> second) noexcept {
  std::array<std::byte, kHeaderBytes> head{};
  store<std::uint32_t>(head.data(), static_cast<std::uint32_t>(header.type));
  store<std::uint32_t>(head.data() + 4, header.aux);
  store<std::uint64_t>(head.data() + 8, header.value);
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
          set_failure(LinkStatus::peer_lost, "peer took no data for " + std::to_string(peer_timeout_.count()) + " ms");
          return false;
        }
        pollfd wait{fd_.get(), POLLOUT, 0};
        ::poll(&wait, 1, 50);
        continue;
      }
      set_failure(LinkStatus::peer_lost, wire::errno_message("sendmsg", errno));
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
  store<std::uint32_t>(head.data(), static_cast<std::uint32_t>(Frame::heartbeat));
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
    const ssize_t got = ::recv(fd_.get(), out.data() + done, out.size() - done, MSG_DONTWAIT);
    if (got > 0) {
      done += static_cast<std::size_t>(got);
      heard_ns = monotonic_ns();
      continue;
    }
    if (got == 0) {
      set_failure(LinkStatus::peer_lost, "peer closed the connection");
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      set_failure(LinkStatus::peer_lost, wire::errno_message("recv", errno));
      return false;
    }
    heartbeat_if_due();
    if (monotonic_ns() - heard_ns > to_ns(peer_timeout_)) {
      set_failure(LinkStatus::peer_lost, "peer silent for " + std::to_string(peer_timeout_.count()) + " ms");
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
  set_failure(LinkStatus::error, std::string(reason));
}

std::string TcpConnection::read_error_text(const Header& header, const std::atomic<bool>& stop) noexcept {
  std::string text(std::min<std::uint64_t>(header.value, kMaxErrorBytes), '\0');
  if (!read_exact(std::as_writable_bytes(std::span(text)), stop)) text = "(reason lost: " + failure() + ")";
  return text;
}

bool TcpConnection::read_header(Header& header, const std::atomic<bool>& stop) noexcept {
  std::array<std::byte, kHeaderBytes> head{};
  if (!read_exact(head, stop)) return false;
  header.type = static_cast<Frame>(load<std::uint32_t>(head.data()));
  header.aux = load<std::uint32_t>(head.data() + 4);
  header.value = load<std::uint64_t>(head.data() + 8);
  return true;
}

// ---- TcpSender ----

void TcpSender::connect(const TransportSettings& settings, std::uint32_t lane, const std::vector<Pool*>& sources,
                        std::span<const std::byte> hello) {
  if (hello.size() > kMaxHelloBytes) throw std::runtime_error("link hello too large");
  const std::string where = endpoint_text(settings.endpoint);
  const std::uint64_t deadline = monotonic_ns() + to_ns(settings.connect_timeout);
  std::string last_error;
  wire::UniqueFd fd;
  while (!fd.valid()) {
    AddressList addresses(settings.endpoint, false);
    for (addrinfo* address = addresses.head; address != nullptr && !fd.valid(); address = address->ai_next) {
      wire::UniqueFd attempt(::socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (!attempt.valid()) throw std::runtime_error(wire::errno_message("socket"));
      if (::connect(attempt.get(), address->ai_addr, address->ai_addrlen) == 0) {
        fd = std::move(attempt);
      } else {
        last_error = wire::errno_message("connect " + where);
      }
    }
    if (fd.valid()) break;
    // The receiver may not be up yet (nodes start in any order): retry until the deadline.
    if (monotonic_ns() > deadline) {
      throw std::runtime_error(last_error + " (gave up after " + std::to_string(settings.connect_timeout.count()) +
                               " ms; is the receiving node running?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  tune(fd.get(), settings.peer_timeout);
  connection_.adopt(std::move(fd), settings.peer_timeout);

  const std::uint64_t lane_and_size = (static_cast<std::uint64_t>(lane) << 32) | hello.size();
  if (!connection_.send({TcpConnection::Frame::hello, kProtocolVersion, lane_and_size}, hello)) {
    throw std::runtime_error("sending hello to " + where + ": " + connection_.failure());
  }
  TcpConnection::Header reply;
  if (!connection_.read_header(reply, stop_)) throw std::runtime_error("waiting for the receiver at " + where + ": " + connection_.failure());
  if (reply.type == TcpConnection::Frame::error) {
    const std::string text = connection_.read_error_text(reply, stop_);
    throw std::runtime_error("receiver at " + where + " refused the link: " + text);
  }
  if (reply.type != TcpConnection::Frame::welcome || reply.aux == 0 || reply.value == 0) {
    throw std::runtime_error("receiver at " + where + " answered with an unexpected frame (not a sluice link receiver?)");
  }
  slot_count_ = reply.aux;
  slot_bytes_ = static_cast<std::size_t>(reply.value);
  credits_ = slot_count_;
  for (const Pool* pool : sources) {
    if (pool->memory() == MemoryKind::device && !staging_.data()) staging_ = MemoryRegion(MemoryKind::host_pinned, slot_bytes_);
  }
  reader_ = std::thread([this] { read_loop(); });
  spdlog::info("link: lane {} connected over tcp to {} ({} landing slots of {} bytes)", lane, where, slot_count_, slot_bytes_);
}

void TcpSender::read_loop() noexcept {
  TcpConnection::Header header;
  while (connection_.read_header(header, stop_)) {
    {
      std::lock_guard lock(mutex_);
      heard_ns_ = monotonic_ns();
    }
    if (header.type == TcpConnection::Frame::credit) {
      std::lock_guard lock(mutex_);
      credits_ += header.value;
    } else if (header.type == TcpConnection::Frame::end_ack) {
      std::lock_guard lock(mutex_);
      end_acknowledged_ = true;
    } else if (header.type == TcpConnection::Frame::error) {
      const std::string text = connection_.read_error_text(header, stop_);
      connection_.set_peer_error("receiver failed: " + text);
      break;
    } else if (header.type != TcpConnection::Frame::heartbeat) {
      connection_.set_failure(LinkStatus::error, "protocol error: unexpected frame " +
                                                     std::to_string(static_cast<std::uint32_t>(header.type)) + " from receiver");
      break;
    }
    changed_.notify_all();
  }
  {
    std::lock_guard lock(mutex_);
    reader_done_ = true;
  }
  changed_.notify_all();
}

LinkStatus TcpSender::send(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept {
  {
    std::unique_lock lock(mutex_);
    const bool ready = changed_.wait_for(lock, timeout, [this] {
      return credits_ > 0 || connection_.failure_status() != LinkStatus::ok;
    });
    if (connection_.failure_status() != LinkStatus::ok) return connection_.failure_status();
    if (!ready) return LinkStatus::idle;
    --credits_;
  }
  std::array<std::byte, kChunkWireBytes> metadata{};
  encode_chunk_metadata(*chunk, metadata);
  const std::byte* payload = chunk->data;
  if (chunk->memory == MemoryKind::device) {
    if (std::string error = copy_memory(staging_.data(), MemoryKind::host_pinned, chunk->data, chunk->memory, chunk->size);
        !error.empty()) {
      connection_.set_failure(LinkStatus::error, error);
      return LinkStatus::error;
    }
    payload = staging_.data();
  }
  if (!connection_.send({TcpConnection::Frame::chunk, 0, chunk->size}, metadata, std::span(payload, chunk->size))) {
    // The write failed: a receiver that fails says why in a frame that may still be unread.
    // Let the reader take it (it ends at the frame or the connection's end) before reporting.
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, kSettle, [this] { return reader_done_; });
    return connection_.failure_status();
  }
  chunk.reset();  // its bytes are in the kernel's send buffer: the upstream slot is free again
  return LinkStatus::ok;
}

LinkStatus TcpSender::finish(std::chrono::milliseconds timeout) noexcept {
  if (connection_.failure_status() != LinkStatus::ok) return connection_.failure_status();
  if (!connection_.send({TcpConnection::Frame::end, 0, 0})) return connection_.failure_status();
  // The receiver acknowledges once it has read every chunk before the end, however long the
  // bytes still in flight take; meanwhile its heartbeats and credits say it is alive.
  std::unique_lock lock(mutex_);
  heard_ns_ = monotonic_ns();  // silence counts from the end frame on
  const auto done = [this] { return end_acknowledged_ || reader_done_ || connection_.failure_status() != LinkStatus::ok; };
  while (!done() && monotonic_ns() - heard_ns_ <= to_ns(timeout)) changed_.wait_for(lock, timeout / 4, done);
  if (end_acknowledged_) return LinkStatus::ok;
  if (connection_.failure_status() != LinkStatus::ok) return connection_.failure_status();
  connection_.set_failure(LinkStatus::peer_lost, "receiver silent for " + std::to_string(timeout.count()) +
                                                     " ms without acknowledging the end of stream");
  return LinkStatus::peer_lost;
}

void TcpSender::abort(std::string_view reason) noexcept { connection_.send_error(reason); }

void TcpSender::close() noexcept {
  stop_.store(true, std::memory_order_release);
  connection_.shutdown();
  if (reader_.joinable()) reader_.join();
  connection_.close();
}

// ---- TcpReceiver ----

void TcpReceiver::listen(const TransportSettings& settings, std::uint32_t lane, Pool& landing) {
  settings_ = settings;
  lane_ = lane;
  const std::string where = endpoint_text(settings.endpoint);
  AddressList addresses(settings.endpoint, true);
  std::string last_error = "no address";
  for (addrinfo* address = addresses.head; address != nullptr && !listener_.valid(); address = address->ai_next) {
    wire::UniqueFd fd(::socket(address->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw std::runtime_error(wire::errno_message("socket"));
    const int one = 1;
    set_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one), "setsockopt SO_REUSEADDR");
    if (::bind(fd.get(), address->ai_addr, address->ai_addrlen) != 0) {
      last_error = wire::errno_message("bind " + where);
      continue;
    }
    if (::listen(fd.get(), 1) != 0) throw std::runtime_error(wire::errno_message("listen " + where));
    listener_ = std::move(fd);
  }
  if (!listener_.valid()) throw std::runtime_error(last_error);

  landing_ = &landing;
  free_slots_.reserve(landing.chunk_count());
  landed_.assign(landing.chunk_count(), nullptr);
  while (ChunkPtr slot = landing.try_acquire()) free_slots_.push_back(slot.release());
  if (free_slots_.size() != landing.chunk_count()) throw std::runtime_error("landing ring " + landing.name() + " is in use");
  if (landing.memory() == MemoryKind::device) staging_ = MemoryRegion(MemoryKind::host_pinned, landing.chunk_bytes());
  landing.set_release_hook([this](Chunk& chunk) { slot_released(chunk); });
}

std::vector<std::byte> TcpReceiver::accept() {
  const std::string where = endpoint_text(settings_.endpoint);
  pollfd wait{listener_.get(), POLLIN, 0};
  const int ready = ::poll(&wait, 1, static_cast<int>(settings_.connect_timeout.count()));
  if (ready < 0) throw std::runtime_error(wire::errno_message("poll"));
  if (ready == 0) {
    throw std::runtime_error("no sender connected to " + where + " within " + std::to_string(settings_.connect_timeout.count()) +
                             " ms (is the sending node running, and does its link name this address?)");
  }
  wire::UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) throw std::runtime_error(wire::errno_message("accept4"));
  listener_.reset();  // one sender per lane: a second one is refused, not interleaved
  tune(fd.get(), settings_.peer_timeout);
  connection_.adopt(std::move(fd), settings_.peer_timeout);

  TcpConnection::Header hello;
  if (!connection_.read_header(hello, stop_)) throw std::runtime_error("waiting for the sender's hello: " + connection_.failure());
  const auto refuse = [&](const std::string& why) {
    connection_.send({TcpConnection::Frame::error, 0, why.size()}, std::as_bytes(std::span(why.data(), why.size())));
    throw std::runtime_error("refused the sender on " + where + ": " + why);
  };
  if (hello.type != TcpConnection::Frame::hello) refuse("first frame is not a hello (not a sluice link sender?)");
  if (hello.aux != kProtocolVersion) {
    refuse("link protocol version " + std::to_string(hello.aux) + ", this receiver speaks " + std::to_string(kProtocolVersion));
  }
  const auto sender_lane = static_cast<std::uint32_t>(hello.value >> 32);
  const std::size_t hello_bytes = hello.value & 0xFFFFFFFFU;
  if (sender_lane != lane_) {
    refuse("sender carries lane #" + std::to_string(sender_lane) + " but this receiver is lane #" + std::to_string(lane_) +
           " (two lanes' addresses crossed?)");
  }
  if (hello_bytes > kMaxHelloBytes) refuse("hello too large");
  std::vector<std::byte> body(hello_bytes);
  if (!connection_.read_exact(body, stop_)) throw std::runtime_error("reading the sender's hello: " + connection_.failure());
  if (!connection_.send({TcpConnection::Frame::welcome, static_cast<std::uint32_t>(landing_->chunk_count()), landing_->chunk_bytes()})) {
    throw std::runtime_error("answering the sender: " + connection_.failure());
  }
  reader_ = std::thread([this] { read_loop(); });
  spdlog::info("link: lane {} accepted a tcp sender on {}", lane_, where);
  return body;
}

void TcpReceiver::slot_released(Chunk& chunk) noexcept {
  {
    std::lock_guard lock(mutex_);
    free_slots_.push_back(&chunk);
  }
  // A lost connection is reported by the reader; the credit then has nowhere to go.
  if (connection_.failure_status() == LinkStatus::ok && !stop_.load(std::memory_order_acquire)) {
    connection_.send({TcpConnection::Frame::credit, 0, 1});
  }
}

void TcpReceiver::read_loop() noexcept {
  TcpConnection::Header header;
  std::array<std::byte, kChunkWireBytes> metadata{};
  while (connection_.read_header(header, stop_)) {
    if (header.type == TcpConnection::Frame::heartbeat) continue;
    if (header.type == TcpConnection::Frame::end) {
      // Acknowledge before receive() can report the end: the stage closes the connection
      // right after, and an acknowledgement sent later would be lost with it.
      connection_.send({TcpConnection::Frame::end_ack, 0, 0});
      {
        std::lock_guard lock(mutex_);
        ended_ = true;
      }
      break;
    }
    if (header.type == TcpConnection::Frame::error) {
      const std::string text = connection_.read_error_text(header, stop_);
      connection_.set_peer_error("sender failed: " + text);
      break;
    }
    if (header.type != TcpConnection::Frame::chunk) {
      connection_.set_failure(LinkStatus::error, "protocol error: unexpected frame " +
                                                     std::to_string(static_cast<std::uint32_t>(header.type)) + " from sender");
      break;
    }
    Chunk* slot = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
      }
    }
    if (slot == nullptr) {
      connection_.set_failure(LinkStatus::error, "protocol error: sender sent a chunk without a credit");
      break;
    }
    const auto give_back = [&] {
      std::lock_guard lock(mutex_);
      free_slots_.push_back(slot);
    };
    if (!connection_.read_exact(metadata, stop_)) {
      give_back();
      break;
    }
    if (const ChunkWireStatus status = decode_chunk_metadata(metadata, *slot); status != ChunkWireStatus::ok) {
      give_back();
      connection_.set_failure(LinkStatus::error, "chunk from sender: " + std::string(to_string(status)));
      break;
    }
    if (slot->size != header.value || slot->size > slot->capacity) {
      give_back();
      connection_.set_failure(LinkStatus::error, "chunk of " + std::to_string(header.value) + " bytes does not fit a " +
                                                     std::to_string(slot->capacity) + "-byte landing slot");
      break;
    }
    std::byte* target = slot->memory == MemoryKind::device ? staging_.data() : slot->data;
    if (!connection_.read_exact(std::span(target, slot->size), stop_)) {
      give_back();
      break;
    }
    if (slot->memory == MemoryKind::device) {
      if (std::string error = copy_memory(slot->data, slot->memory, staging_.data(), MemoryKind::host_pinned, slot->size);
          !error.empty()) {
        give_back();
        connection_.set_failure(LinkStatus::error, error);
        break;
      }
    }
    {
      std::lock_guard lock(mutex_);
      landed_[(landed_head_ + landed_count_) % landed_.size()] = slot;
      ++landed_count_;
    }
    changed_.notify_all();
  }
  {
    std::lock_guard lock(mutex_);
    reader_done_ = true;
  }
  changed_.notify_all();
}

LinkStatus TcpReceiver::receive(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [this] {
    return landed_count_ > 0 || ended_ || connection_.failure_status() != LinkStatus::ok;
  });
  // A credit write that failed first (peer_lost) may come before the sender's last chunks or its
  // error frame reach the reader: let it take them before reporting.
  if (landed_count_ == 0 && !ended_ && connection_.failure_status() == LinkStatus::peer_lost && !reader_done_) {
    changed_.wait_for(lock, kSettle, [this] { return reader_done_ || landed_count_ > 0; });
  }
  if (landed_count_ > 0) {
    chunk = ChunkPtr(landed_[landed_head_]);
    landed_head_ = (landed_head_ + 1) % landed_.size();
    --landed_count_;
    return LinkStatus::ok;
  }
  if (ended_) return LinkStatus::end_of_stream;
  return connection_.failure_status() != LinkStatus::ok ? connection_.failure_status() : LinkStatus::idle;
}

void TcpReceiver::abort(std::string_view reason) noexcept { connection_.send_error(reason); }

void TcpReceiver::close() noexcept {
  stop_.store(true, std::memory_order_release);
  connection_.shutdown();
  if (reader_.joinable()) reader_.join();
  connection_.close();
  listener_.reset();
  if (landing_ == nullptr) return;
  landing_->set_release_hook({});
  std::lock_guard lock(mutex_);
  for (Chunk* slot : free_slots_) landing_->return_to_free_list(*slot);
  free_slots_.clear();
  for (; landed_count_ > 0; --landed_count_) {
    landing_->return_to_free_list(*landed_[landed_head_]);
    landed_head_ = (landed_head_ + 1) % landed_.size();
  }
  landing_ = nullptr;
}

}  // namespace sluice
