// The seam between the link stage and the transports that carry a lane between two
// processes (tcp here, roce through rdma-core). The link stage owns settings, pools and
// the stage contract; a transport owns its sockets / verbs objects and moves chunks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/pool.hpp"

namespace sluice {

// The two halves:
//   sending half (a sink on the upstream node)      receiving half (a source on its own node)
//   connect(): reach the receiver, learn the ring   listen(): bind, hold the landing ring
//   send(): take a credit, move payload + metadata  accept(): one sender, its hello bytes
//   finish(): end of stream, acknowledged           receive(): next landed chunk + metadata
//   abort(): tell the peer why we fail               downstream releases it -> credit back
//
// Credits: the receiver's landing ring (a Pool) has N slots; the sender starts with N
// credits and spends one per chunk; a slot's credit returns when the receiver's
// downstream releases the chunk (the pool's release hook). A sender without credit waits:
// that is the link's backpressure, and no chunk is ever dropped or overwritten.
// Metadata crosses as the chunk_wire header (pipeline/chunk_wire.hpp), byte for byte.
// Peer loss (connection broken, or silence longer than peer_timeout while connected) is
// reported by both halves as LinkStatus::peer_lost within peer_timeout. Silence is what tcp's
// I/O threads hear; over roce the kernel's RC transport answers for a stopped process, so a
// roce peer is lost when its connection breaks (a killed process, a vanished host or port).

enum class LinkTransport : std::uint8_t {
  local,        // in-process copy into the landing ring (no node change)
  tcp,          // a TCP connection between the two halves
  roce,         // RDMA WRITE WITH IMMEDIATE into registered landing buffers (rdma-core)
  auto_select,  // roce where an RDMA device exists, else tcp across nodes; local within one
};
std::string_view to_string(LinkTransport transport);

// Where the receiving half listens and the sending half connects: one per lane.
struct LinkEndpoint {
  std::string address;     // numeric IPv4/IPv6 address or host name
  std::uint16_t port = 0;  // TCP port (tcp) or RDMA-CM port space TCP port (roce)
};

struct TransportSettings {
  LinkEndpoint endpoint;
  std::string device;  // roce: RDMA device to use ("" = the one that routes to the address)
  // Sender: keep retrying the connection this long (the receiver may start later).
  // Receiver: wait this long for a sender at start.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  // Silence after which a connected peer counts as lost; each half sends a heartbeat
  // after a quarter of it without other traffic.
  std::chrono::milliseconds peer_timeout{std::chrono::milliseconds(1500)};
  // tcp: connections per lane, chunks spread over them in turn (one socket's copy work is
  // one core's; several let a lane go past it). The receiver takes what the sender asks.
  std::uint32_t connections = 1;
};

enum class LinkStatus : std::uint8_t {
  ok,             // done (sent / received)
  idle,           // nothing yet after waiting up to the timeout (no credit / nothing landed): call again
  end_of_stream,  // receiver: the sender finished and every chunk it sent has been delivered
  peer_lost,      // the connection broke, or the peer went silent for peer_timeout; error() says how
  error,          // the peer reported a failure, or a local call failed; error() says which
};
std::string_view to_string(LinkStatus status);

// Totals a sender keeps so that its stage reports backpressure as waiting, not as work.
struct LinkSenderTimes {
  std::uint64_t credit_wait_ns = 0;  // inside send(), waiting for a credit or for the transport's room
  std::uint64_t writing_ns = 0;      // tcp: connection threads writing chunks into their sockets, summed
  std::uint64_t writing_cpu_ns = 0;  // tcp: those threads' CPU time in the writes (the kernel's copying)
};

class LinkSender {
 public:
  virtual ~LinkSender() = default;
  // Setup (the link's start()). Connects to `settings.endpoint`, retrying until
  // connect_timeout; sends `hello` (opaque bytes for the receiving stage: the lane's
  // StreamInfo) and learns the receiver's slot size and count (the first credits).
  // `sources` are the lane's pools upstream (register them if the transport reads chunks
  // by key, and record that with Pool::add_registration). Throws naming the failed call.
  virtual void connect(const TransportSettings& settings, std::uint32_t lane, const std::vector<Pool*>& sources,
                       std::span<const std::byte> hello) = 0;
  [[nodiscard]] virtual std::size_t slot_bytes() const noexcept = 0;  // landing slot size (after connect)
  [[nodiscard]] virtual std::size_t slot_count() const noexcept = 0;  // ring depth = initial credits

  // Hot path. Waits up to `timeout` for a credit, then moves chunk->size payload bytes and
  // the chunk_wire metadata. On ok the transport owns `chunk` (null afterwards) and
  // releases it once its bytes have left (RDMA: the write completed); on idle `chunk` is
  // untouched. The caller never passes a chunk larger than slot_bytes().
  virtual LinkStatus send(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept = 0;
  // End of stream: completes every send, tells the receiver and waits for its
  // acknowledgement (ok), so the sending process exits knowing everything arrived. The
  // chunks still in flight take as long as the link needs (a slow link, a busy machine):
  // the wait goes on while the link makes progress or the receiver shows life, and fails
  // once it stays silent for `timeout`.
  virtual LinkStatus finish(std::chrono::milliseconds timeout) noexcept = 0;
  // Tells the receiver (best effort) that this half fails and why; the receiver reports
  // LinkStatus::error with that reason.
  virtual void abort(std::string_view reason) noexcept = 0;
  // Why the last call returned peer_lost or error.
  [[nodiscard]] virtual const std::string& error() const noexcept = 0;
  // Where the sending half's time went since connect (totals; the stage thread reads them).
  [[nodiscard]] virtual LinkSenderTimes times() const noexcept = 0;
  // Teardown: closes the connection and releases every chunk still held; idempotent.
  virtual void close() noexcept = 0;
};

class LinkReceiver {
 public:
  virtual ~LinkReceiver() = default;
  // Setup (the link's start()). Binds and listens at `settings.endpoint` (SO_REUSEADDR, so
  // a restarted receiver gets its port back at once) and takes every slot of `landing`
  // (the ring, registered here if needed) through Pool::set_release_hook. Throws.
  virtual void listen(const TransportSettings& settings, std::uint32_t lane, Pool& landing) = 0;
  // Setup. Waits up to connect_timeout for one sender and returns its hello bytes. Throws
  // when none came or its handshake is wrong (version, lane, slot size).
  virtual std::vector<std::byte> accept() = 0;

  // Hot path. The next landed chunk, in the order sent, with its metadata decoded, or idle
  // after `timeout`. The chunk is a landing slot: when downstream releases it, the slot's
  // credit goes back to the sender. end_of_stream once the sender finished and all its
  // chunks were handed out.
  virtual LinkStatus receive(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept = 0;
  // Tells the sender (best effort) that this half fails and why.
  virtual void abort(std::string_view reason) noexcept = 0;
  [[nodiscard]] virtual const std::string& error() const noexcept = 0;
  // Teardown: closes the connection, clears the release hook and returns every slot it
  // holds to the ring's free list; idempotent. Chunks still downstream return there too.
  virtual void close() noexcept = 0;
};

}  // namespace sluice
