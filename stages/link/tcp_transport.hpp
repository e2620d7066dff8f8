// The tcp link transport: the LinkSender/LinkReceiver contract over one TCP connection.
// Frames (16-byte little-endian header: u32 type, u32 aux, u64 value, then a body):
//   hello   S->R  aux protocol version, value lane<<32 | hello bytes; body: hello bytes
//   welcome R->S  aux slot count (the first credits), value slot bytes
//   chunk   S->R  value payload bytes; body: chunk_wire metadata (kChunkWireBytes, 624 in version 3) + payload
//   credit  R->S  value credits returned (one per landing slot downstream released)
//   heartbeat     both ways after peer_timeout/4 without other traffic
//   end     S->R  end of stream;  end_ack R->S  everything before it was read
//   error   both  value text bytes; body: why the peer fails
// Each half has one I/O thread that reads the peer's frames and sends heartbeats, so a
// peer that goes silent (killed host, pulled cable) is noticed within peer_timeout even
// while the stage thread waits for credits or for downstream.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pipeline/memory.hpp"
#include "stages/link/transport.hpp"
#include "wire/socket.hpp"

namespace sluice {

// One connected TCP socket with framed writes from any thread, reads with a silence limit,
// and the failure it ended with. Shared by both halves.
class TcpConnection {
 public:
  enum class Frame : std::uint32_t { hello = 1, welcome, chunk, credit, heartbeat, end, end_ack, error };
  struct Header {
    Frame type = Frame::heartbeat;
    std::uint32_t aux = 0;
    std::uint64_t value = 0;
  };
  static constexpr std::size_t kHeaderBytes = 16;

  TcpConnection() = default;
  void adopt(wire::UniqueFd fd, std::chrono::milliseconds peer_timeout);
  [[nodiscard]] bool connected() const noexcept { return fd_.valid(); }

  // Sends a header and up to two bodies in one sendmsg loop. False (and failure set) when
  // the peer is gone or nothing moved for peer_timeout.
  bool send(const Header& header, std::span<const std::byte> first = {}, std::span<const std::byte> second = {}) noexcept;
  // Sends a heartbeat when nothing was sent for peer_timeout/4 (skips when a send is under way).
  void heartbeat_if_due() noexcept;
  // Reads exactly out.size() bytes; false on peer loss, silence beyond peer_timeout, or stop.
  bool read_exact(std::span<std::byte> out, const std::atomic<bool>& stop) noexcept;
  bool read_header(Header& header, const std::atomic<bool>& stop) noexcept;
  // Tells the peer why this side fails (an error frame) and records it as our failure.
  void send_error(std::string_view reason) noexcept;
  // The body of an error frame whose header was just read.
  std::string read_error_text(const Header& header, const std::atomic<bool>& stop) noexcept;

  // The first failure seen ("" while healthy), and whether it was peer loss.
  void set_failure(LinkStatus status, std::string message) noexcept;
  // The peer's own report of why it failed (its error frame). It wins over a local failure
  // seen first: a write into a connection the failing peer just closed ("Broken pipe") often
  // comes before the reader has taken the frame that says why.
  void set_peer_error(std::string message) noexcept;
  [[nodiscard]] LinkStatus failure_status() const noexcept {
    if (peer_error_set_.load(std::memory_order_acquire)) return LinkStatus::error;
    return failure_status_.load(std::memory_order_acquire);
  }
  // Each text is written once, before its flag is published: safe to read from any thread after.
  [[nodiscard]] const std::string& failure() const noexcept {
    static const std::string kNone;
    if (peer_error_set_.load(std::memory_order_acquire)) return peer_error_;
    return failure_status_.load(std::memory_order_acquire) == LinkStatus::ok ? kNone : failure_;
  }
  void shutdown() noexcept;
  void close() noexcept { fd_.reset(); }

 private:
  wire::UniqueFd fd_;
  std::chrono::milliseconds peer_timeout_{1500};
  std::mutex write_mutex_;
  std::atomic<std::uint64_t> last_sent_ns_{0};
  std::atomic<LinkStatus> failure_status_{LinkStatus::ok};
  std::mutex failure_mutex_;
  std::string failure_;
  std::atomic<bool> peer_error_set_{false};
  std::string peer_error_;
};

class TcpSender final : public LinkSender {
 public:
  TcpSender() = default;
  ~TcpSender() override { close(); }
  void connect(const TransportSettings& settings, std::uint32_t lane, const std::vector<Pool*>& sources,
               std::span<const std::byte> hello) override;
  [[nodiscard]] std::size_t slot_bytes() const noexcept override { return slot_bytes_; }
  [[nodiscard]] std::size_t slot_count() const noexcept override { return slot_count_; }
  LinkStatus send(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept override;
  LinkStatus finish(std::chrono::milliseconds timeout) noexcept override;
  void abort(std::string_view reason) noexcept override;
  [[nodiscard]] const std::string& error() const noexcept override { return connection_.failure(); }
  void close() noexcept override;

 private:
  void read_loop() noexcept;

  TcpConnection connection_;
  std::size_t slot_bytes_ = 0;
  std::size_t slot_count_ = 0;
  MemoryRegion staging_;  // host copy of device-memory chunks (TCP reads host memory only)
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t credits_ = 0;  // guarded by mutex_
  bool end_acknowledged_ = false;
  bool reader_done_ = false;  // guarded by mutex_
  std::uint64_t heard_ns_ = 0;  // guarded by mutex_: when the reader last took a frame
  std::atomic<bool> stop_{false};
  std::thread reader_;
};

class TcpReceiver final : public LinkReceiver {
 public:
  TcpReceiver() = default;
  ~TcpReceiver() override { close(); }
  void listen(const TransportSettings& settings, std::uint32_t lane, Pool& landing) override;
  std::vector<std::byte> accept() override;
  LinkStatus receive(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept override;
  void abort(std::string_view reason) noexcept override;
  [[nodiscard]] const std::string& error() const noexcept override { return connection_.failure(); }
  void close() noexcept override;

 private:
  void read_loop() noexcept;
  void slot_released(Chunk& chunk) noexcept;  // the pool's release hook: a credit for the sender

  TransportSettings settings_;
  std::uint32_t lane_ = 0;
  Pool* landing_ = nullptr;
  wire::UniqueFd listener_;
  TcpConnection connection_;
  MemoryRegion staging_;  // host bytes for a device-memory ring, copied up on arrival
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Chunk*> free_slots_;  // guarded by mutex_; reserved for the whole ring
  std::vector<Chunk*> landed_;      // guarded by mutex_; a ring buffer of landed chunks in order
  std::size_t landed_head_ = 0;
  std::size_t landed_count_ = 0;
  bool ended_ = false;  // the sender's end frame was read
  bool reader_done_ = false;  // guarded by mutex_
  std::atomic<bool> stop_{false};
  std::thread reader_;
};

}  // namespace sluice
