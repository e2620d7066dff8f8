// The tcp link transport: LinkSender and LinkReceiver over one or more TCP connections per lane.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pipeline/chunk_wire.hpp"
#include "pipeline/gpu_stream.hpp"
#include "pipeline/memory.hpp"
#include "stages/link/tcp_connection.hpp"
#include "stages/link/transport.hpp"

namespace sluice {

// The tcp link transport: the LinkSender/LinkReceiver contract over one or more TCP
// connections per lane (`connections:`), so that a lane is not bound by what one socket
// and one core can copy. Frames (16-byte little-endian header: u32 type, u32 aux, u64 value, then a body):
//   hello   S->R  first connection; aux protocol version, value lane<<32 | connections<<24 | hello bytes;
//                 body: hello bytes
//   welcome R->S  aux slot count (the first credits), value slot bytes
//   join    S->R  every further connection; aux protocol version, value lane<<32 | connection index
//   chunk   S->R  aux chunk sequence (mod 2^32), value payload bytes;
//                 body: chunk_wire metadata (kChunkWireBytes) + payload
//   credit  R->S  first connection; value credits returned (one per landing slot downstream released)
//   heartbeat     both ways on every connection after peer_timeout/4 without other traffic
//   end     S->R  on every connection after its last chunk;  end_ack R->S  everything before it was read
//   error   both  value text bytes; body: why the peer fails
// Chunk n travels on connection n mod connections and the receiver hands chunks out in
// sequence order. The stage thread only takes a credit and queues the chunk for its
// connection's writer thread. For a device chunk the writer enqueues the copy into one of its
// own pinned buffers on its own GPU stream (after the producer's work, device side) while it
// writes the chunk before, and releases the device chunk once its copy's fence is reached: the
// connections' copies and writes all overlap and no thread waits for a copy it could overlap.
// Each connection has a reader thread on both sides, so a peer that goes silent (killed
// host, pulled cable) is noticed within peer_timeout even while the stage thread waits.
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
  [[nodiscard]] const std::string& error() const noexcept override { return failure_.text(); }
  [[nodiscard]] LinkSenderTimes times() const noexcept override {
    return {credit_wait_ns_, writing_ns_.load(std::memory_order_relaxed),
            writing_cpu_ns_.load(std::memory_order_relaxed)};
  }
  void close() noexcept override;

 private:
  // One chunk on its way out: a host chunk is written from its own bytes; a device chunk from
  // a pinned copy, and released once that copy finished.
  struct Job {
    ChunkPtr chunk;
    int staging = -1;         // the connection's pinned buffer a device chunk's copy goes to, once started
    std::uint64_t fence = 0;  // that copy's fence on the connection's GPU stream
    std::uint32_t sequence = 0;
    std::size_t bytes = 0;
    std::array<std::byte, kChunkWireBytes> metadata{};
  };
  // One connection, its writer's queue (a ring, guarded by mutex_) and its two threads.
  struct Stream {
    explicit Stream(TcpFailure& failure) : connection(failure) {}
    TcpConnection connection;
    std::vector<Job> queue;
    std::size_t head = 0;            // moved by the writer only
    std::size_t count = 0;           // queued jobs, the one being written included
    std::condition_variable queued;  // wakes the writer alone: a job queued, or closing
    // Device lanes: the writer's own pinned buffers and GPU stream, touched by the writer only
    // (the stream after the buffers: its destructor waits for the copies into them).
    std::vector<MemoryRegion> staging;
    GpuStream gpu;
    std::vector<int> free_staging;
    std::size_t prepared = 0;  // queued jobs from head on that are ready to write or being copied
    std::thread reader;
    std::thread writer;
  };

  void open_streams(const TransportSettings& settings, std::uint32_t lane, std::span<const std::byte> hello);
  void read_loop(Stream& stream) noexcept;
  void write_loop(Stream& stream) noexcept;
  void start_copies(Stream& stream, std::size_t queued) noexcept;
  void write_job(Stream& stream, Job& job) noexcept;
  // The failure, once the reader had a moment to take the peer's error frame: the peer's
  // reason is worth more than the "Broken pipe" our own write saw first.
  LinkStatus settled_failure(std::unique_lock<std::mutex>& lock) noexcept;
  [[nodiscard]] bool queues_empty() const noexcept;  // with mutex_ held

  TcpFailure failure_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::size_t slot_bytes_ = 0;
  std::size_t slot_count_ = 0;
  bool device_sources_ = false;       // the writers hold pinned buffers for device chunks
  std::uint32_t next_sequence_ = 0;   // the stage thread's only
  std::uint64_t credit_wait_ns_ = 0;  // the stage thread's only
  std::atomic<std::uint64_t> writing_ns_{0};
  std::atomic<std::uint64_t> writing_cpu_ns_{0};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t credits_ = 0;          // guarded by mutex_
  std::size_t ends_acknowledged_ = 0;  // guarded by mutex_
  std::size_t readers_done_ = 0;       // guarded by mutex_
  bool closing_ = false;               // guarded by mutex_: writers end once their queue is empty
  std::uint64_t heard_ns_ = 0;         // guarded by mutex_: when a reader last took a frame
  std::atomic<bool> stop_{false};
};

class TcpReceiver final : public LinkReceiver {
 public:
  TcpReceiver() = default;
  ~TcpReceiver() override { close(); }
  void listen(const TransportSettings& settings, std::uint32_t lane, Pool& landing) override;
  std::vector<std::byte> accept() override;
  LinkStatus receive(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept override;
  void abort(std::string_view reason) noexcept override;
  [[nodiscard]] const std::string& error() const noexcept override { return failure_.text(); }
  void close() noexcept override;

 private:
  // One connection, its reader thread and, for a device ring, its own pinned staging buffer
  // and copy stream, so that connections land chunks side by side.
  struct Stream {
    explicit Stream(TcpFailure& failure) : connection(failure) {}
    TcpConnection connection;
    MemoryRegion staging;
    CudaStream copy_stream;
    std::thread reader;
  };

  std::unique_ptr<Stream> accept_stream();
  void join_streams(std::size_t connections);
  void read_loop(Stream& stream) noexcept;
  bool read_chunk(Stream& stream, const TcpConnection::Header& header) noexcept;
  void slot_released(Chunk& chunk) noexcept;  // the pool's release hook: a credit for the sender

  TransportSettings settings_;
  std::uint32_t lane_ = 0;
  Pool* landing_ = nullptr;
  wire::UniqueFd listener_;
  TcpFailure failure_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Chunk*> free_slots_;   // guarded by mutex_; reserved for the whole ring
  std::vector<Chunk*> landed_;       // guarded by mutex_; landed chunk n at n mod ring size, null when absent
  std::uint32_t next_sequence_ = 0;  // guarded by mutex_: the chunk receive() hands out next
  std::size_t ends_ = 0;             // guarded by mutex_: connections whose end frame was read
  std::size_t readers_done_ = 0;     // guarded by mutex_
  std::atomic<bool> stop_{false};
};

}  // namespace sluice
