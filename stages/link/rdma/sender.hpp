// The sending half of a RoCE link (RdmaSender).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stages/link/rdma/cm.hpp"
#include "stages/link/rdma/gpu_memory.hpp"
#include "stages/link/rdma/protocol.hpp"

namespace sluice::rdma {

struct SenderOptions {
  std::string address;  // the receiver's address (its RoCE port)
  std::uint16_t port = 7471;
  std::uint32_t metadata_bytes = 1024;               // largest metadata blob per chunk
  std::uint32_t max_outstanding = 16;                // chunk writes in flight, at most the receiver's slots
  std::uint32_t signal_every = 4;                    // one payload write in this many is signalled
  std::chrono::milliseconds timeout{2000};           // address/route resolution and connection
  std::chrono::milliseconds heartbeat = kHeartbeat;  // signalled no-op when otherwise idle
  // A signalled request with no completion at all (not even a failed one) for this long: the
  // transport itself is stuck (a port or route gone where the adapter never reports a failed
  // request), and the link is lost. The RC retries (cm.hpp) report a vanished peer far sooner.
  std::chrono::milliseconds stalled_after{10000};
  std::uint32_t lane = 0;
  std::vector<std::byte> hello;  // first message to the receiver (at most ControlMessage::kTextBytes)
};

enum class SendStatus { posted, no_credit, failed };

// The sending half of a RoCE link: connects to the receiver's address and port, learns its
// ring, and moves each chunk as an RDMA WRITE of its metadata (with a slot header) followed
// by an RDMA WRITE WITH IMMEDIATE of its payload, many outstanding, one in `signal_every`
// signalled. Completions tell the caller, in order, which chunks' sources it may reuse.
// One thread uses it. A new connection (after the receiver restarted) is a new RdmaSender.
class RdmaSender {
 public:
  // Resolves, connects and reads the ring advertisement; throws naming the failed step.
  explicit RdmaSender(SenderOptions options);
  RdmaSender(const RdmaSender&) = delete;
  RdmaSender& operator=(const RdmaSender&) = delete;
  ~RdmaSender();

  // Registers memory chunks will be sent from (once per pool, at start); returns its MR
  // (GPU memory through dma-buf or peermem, as landing buffers are).
  const ibv_mr& register_source(const void* address, std::size_t bytes, bool device = false, int cuda_device = 0);

  // Posts one chunk; `cookie` comes back from completed() once its source may be reused.
  // no_credit: every receiver slot is taken or `max_outstanding` writes are in flight.
  SendStatus send(const void* metadata, std::size_t metadata_bytes, const void* payload, std::size_t payload_bytes,
                  std::uint32_t payload_lkey, std::uint64_t cookie) noexcept;
  // Polls completions and CM events; calls on_done(cookie) for each chunk whose writes
  // completed, in send order. Also signals a lone unsignalled tail and sends heartbeats.
  // False when the connection failed (error() says why).
  template <typename OnDone>
  bool poll(OnDone&& on_done) noexcept {
    if (!progress()) return false;
    while (delivered_ < completed_) on_done(cookies_[delivered_++ % cookies_.size()]);
    return true;
  }
  // Nothing to do after poll() or send() (window full, no credit): sleeps until a completion
  // or a CM event, at most `timeout`. Credits arrive as plain RDMA writes, which raise no
  // event, so while no write is in flight the sleep is short (kCreditPoll). The first call
  // after activity only arms the CQ and returns, so the caller polls once more first.
  void wait(std::chrono::microseconds timeout) noexcept;
  // Sends end of stream after every chunk and waits until all completed; false on failure,
  // or when nothing completed and no credit came back for `timeout`.
  bool finish(std::chrono::milliseconds timeout) noexcept;
  // Tells the receiver the stream failed (best effort), then disconnects.
  void fail(std::string_view message) noexcept;

  [[nodiscard]] const std::string& error() const { return error_; }
  // After a failure: true when the receiver vanished or disconnected (not a reported error).
  [[nodiscard]] bool peer_lost() const { return peer_lost_; }
  [[nodiscard]] std::uint32_t slot_count() const { return advert_.slot_count; }
  [[nodiscard]] std::uint64_t slot_bytes() const { return advert_.slot_bytes; }
  [[nodiscard]] std::uint64_t credits() const noexcept;
  [[nodiscard]] std::uint64_t in_flight() const { return posted_ - completed_; }

 private:
  // The constructor's steps, each throwing with `where` (the peer) and the failed call: route
  // resolved, PD, MR, CQ and QP created with the error receive posted, connected with the
  // ring advertisement read, hello delivered.
  void resolve(const std::string& where);
  void create_queues(const std::string& where);
  void connect(const std::string& where);
  void send_hello(const std::string& where);
  bool progress() noexcept;
  // Reads the completion queue: how many completions, or -1 with error_ set (a failed write, or
  // the receiver's error message).
  int take_completions() noexcept;
  // The text of the receiver's failure message in the receive buffer.
  [[nodiscard]] std::string receiver_failure(std::uint32_t byte_len) const;
  bool post_control(ControlType type, std::string_view text) noexcept;
  bool post_signal() noexcept;
  // A signalled request was posted: the stall watch starts when it is the only one waiting.
  void signal_posted() noexcept;
  void disconnect() noexcept;

  SenderOptions options_;
  std::uint32_t metadata_slot_bytes_ = 0;
  std::vector<std::byte> host_area_;  // metadata staging ring, control message, credit word
  std::vector<std::uint64_t> cookies_;

  // Creation order (destroyed in reverse).
  EventChannelPtr channel_;
  CmIdPtr id_;
  std::optional<CompletionWait> completions_;
  PdPtr pd_;
  MrPtr host_mr_;
  std::vector<LandingRegistration> sources_;
  CqPtr cq_;
  QpOnIdPtr qp_;

  RingAdvert advert_{};
  std::string error_;
  std::uint32_t send_depth_ = 0;
  std::uint64_t posted_ = 0;       // chunks posted on this connection
  std::uint64_t completed_ = 0;    // of those, known complete
  std::uint64_t delivered_ = 0;    // of those, handed back through poll()
  std::uint64_t signalled_ = 0;    // chunk count covered by the last signalled work request
  std::uint64_t work_posted_ = 0;  // work requests of any kind, a bound for draining
  bool finished_ = false;
  bool peer_lost_ = false;
  bool receiver_failed_ = false;  // its failure message came while the hello was in flight
  std::chrono::steady_clock::time_point last_signal_{};
  std::uint64_t signals_posted_ = 0;                       // signalled requests posted
  std::uint64_t signals_completed_ = 0;                    // completions taken (each one a signalled request's)
  std::chrono::steady_clock::time_point waiting_since_{};  // the last completion, or the post it waits for
};

}  // namespace sluice::rdma
