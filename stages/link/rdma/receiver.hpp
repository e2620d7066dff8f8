// The receiving half of a RoCE link: listens on one address and port (one per lane), owns the
// landing slots the sender writes into, hands each arrived chunk to its caller and writes credits
// back as slots are released. One thread calls accept/poll/close; release() may come from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stages/link/rdma/cm.hpp"
#include "stages/link/rdma/gpu_memory.hpp"
#include "stages/link/rdma/protocol.hpp"

namespace sluice::rdma {

struct ReceiverOptions {
  std::string address;  // local address to listen on (the port's RoCE address)
  std::uint16_t port = 7471;
  std::uint32_t metadata_bytes = 1024;               // largest metadata blob per chunk
  std::chrono::milliseconds timeout{2000};           // connection set-up steps
  std::chrono::milliseconds heartbeat = kHeartbeat;  // signalled credit write when otherwise idle
  std::uint32_t lane = 0;                            // senders of another lane are refused
};

// Where the landing slots are: `slot_count` slots of `slot_bytes`, contiguous at `base`.
struct LandingRing {
  std::byte* base = nullptr;
  std::size_t slot_bytes = 0;
  std::uint32_t slot_count = 0;
  bool device = false;  // GPU memory (registered via dma-buf or peermem)
  int cuda_device = 0;
};

struct Arrival {
  std::uint32_t slot = 0;
  std::uint64_t sequence = 0;  // on this connection
  std::size_t payload_bytes = 0;
  const std::byte* metadata = nullptr;  // host memory, valid until release(slot)
  std::size_t metadata_bytes = 0;
  std::byte* payload = nullptr;  // in the landing ring (device memory when device)
};

enum class ReceiveStatus { arrived, idle, end_of_stream, peer_error, disconnected, failed };

class RdmaReceiver {
 public:
  // Binds and listens, registers the ring; throws naming the failed call. When device
  // memory cannot be registered, throws LandingUnregistrable (the caller may retry with
  // a host-pinned ring).
  RdmaReceiver(ReceiverOptions options, const LandingRing& ring);
  RdmaReceiver(const RdmaReceiver&) = delete;
  RdmaReceiver& operator=(const RdmaReceiver&) = delete;
  ~RdmaReceiver();

  // Waits up to `timeout` for a sender and connects it; false when none came.
  // Throws when set-up fails. After a disconnect, call again to take the next sender.
  bool accept(std::chrono::milliseconds timeout);
  // Polls completions and CM events; never throws, never allocates.
  ReceiveStatus poll(Arrival& arrival) noexcept;
  // Nothing to do after poll() said idle: sleeps until a completion, a CM event, a released
  // slot or `timeout` (at most half a heartbeat). The first call after activity only arms
  // the CQ and returns, so the caller polls once more before it really sleeps.
  void wait(std::chrono::microseconds timeout) noexcept;
  // The caller is done with `slot`: its credit goes back (in ring order) at the next poll,
  // and a receiver asleep in wait() wakes for it.
  void release(std::uint32_t slot) noexcept;
  // Tells the sender (best effort, within options.timeout) that this half fails and why, then closes.
  void abort(std::string_view reason) noexcept;
  // Disconnects and tears the connection down (listener and ring stay for accept()).
  void close() noexcept;
  // The sender's hello bytes (after accept()).
  [[nodiscard]] const std::vector<std::byte>& hello() const { return hello_; }

  [[nodiscard]] bool connected() const { return qp_ != nullptr; }
  [[nodiscard]] const std::string& error() const { return error_; }  // after failed / peer_error / disconnected
  [[nodiscard]] const std::string& landing_path() const { return landing_path_; }
  [[nodiscard]] const ibv_mr& landing_mr() const { return *landing_.mr; }
  [[nodiscard]] std::uint64_t arrived() const { return arrived_; }
  [[nodiscard]] std::size_t slot_bytes() const { return ring_.slot_bytes; }
  [[nodiscard]] std::uint16_t port() const;  // the port bound (useful when options.port was 0)

 private:
  bool post_receive(std::uint32_t buffer) noexcept;
  // Receive buffer `index` (0..receive_depth-1); index receive_depth is the one we send from.
  std::byte* control_buffer(std::uint32_t index) noexcept {
    return host_area_.data() + std::size_t{ring_.slot_count} * metadata_slot_bytes_ +
           std::size_t{index} * kControlBytes;
  }
  void return_credits() noexcept;
  [[nodiscard]] bool credit_pending() const noexcept;
  ReceiveStatus fail(std::string text) noexcept;
  // accept()'s steps: why a connect request is refused ("" if it is not; fills `request`),
  // the connection set up and accepted with the ring advertised, the sender's hello taken.
  [[nodiscard]] std::string refusal_of(const CmEvent& event, const rdma_cm_id& id, ConnectRequest& request) const;
  void connect(CmIdPtr id, const ConnectRequest& request);
  [[nodiscard]] RingAdvert ring_advert() const;
  void await_hello();
  // poll()'s cases: a chunk written with its immediate, a control message (end of stream or
  // the sender's error), and, with no completion waiting, a CM event.
  ReceiveStatus take_chunk(const ibv_wc& completion, Arrival& arrival) noexcept;
  ReceiveStatus take_control_message(const ibv_wc& completion) noexcept;
  ReceiveStatus take_cm_event() noexcept;

  ReceiverOptions options_;
  LandingRing ring_;
  std::uint32_t metadata_slot_bytes_ = 0;
  std::uint32_t receive_depth_ = 0;
  std::vector<std::byte> host_area_;  // metadata slots, receive buffers, the credit word
  std::vector<std::atomic<bool>> slot_released_;

  // Creation order (destroyed in reverse): channel, listener, completion channel, PD, MRs,
  // then per connection id, CQ, QP.
  EventChannelPtr channel_;
  CmIdPtr listener_;
  std::optional<CompletionWait> completions_;
  UniqueFd wake_;  // eventfd: release() wakes a receiver asleep in wait()
  std::atomic<bool> sleeping_{false};
  PdPtr pd_;
  LandingRegistration landing_;
  MrPtr host_mr_;
  CmIdPtr id_;
  CqPtr cq_;
  QpOnIdPtr qp_;

  std::string landing_path_;
  std::string error_;
  std::vector<std::byte> hello_;
  ConnectRequest peer_{};
  std::uint64_t arrived_ = 0;   // chunks arrived since the receiver started (all connections)
  std::uint64_t released_ = 0;  // of those, released in ring order
  std::uint64_t credited_ = 0;  // released count last written to the sender
  std::uint64_t connection_sequence_ = 0;
  std::uint64_t sends_posted_ = 0;
  std::uint64_t sends_completed_ = 0;
  std::chrono::steady_clock::time_point last_signal_{};
  std::optional<std::chrono::steady_clock::time_point> peer_gone_at_;  // DISCONNECTED seen
};

// Thrown when GPU landing memory cannot be registered by any path; what() says why.
struct LandingUnregistrable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace sluice::rdma
