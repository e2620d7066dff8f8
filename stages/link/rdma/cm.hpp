// RDMA CM plumbing both halves share: a non-blocking event channel, waiting for one event
// with a deadline, address parsing, the QP shape and the timeouts that make a vanished peer
// show up as a failed completion within about half a second.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stages/link/rdma/protocol.hpp"
#include "stages/link/rdma/verbs_owners.hpp"

namespace sluice::rdma {

// Local ACK timeout exponent: 4.096 us * 2^14 = 67 ms per try; with kRetryCount retries a
// write to a peer that vanished fails after about 8 * 67 ms = 0.54 s.
inline constexpr std::uint8_t kAckTimeout = 14;
inline constexpr std::uint8_t kRetryCount = 7;
inline constexpr std::uint8_t kRnrRetryCount = 7;  // 7 = retry forever; receives are always posted ahead
// Either side posts a signalled no-op this often when otherwise idle, so a dead peer fails
// a completion even when no data is moving.
inline constexpr std::chrono::milliseconds kHeartbeat{250};

// One CM event, copied out and acknowledged.
struct CmEvent {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  int status = 0;
  rdma_cm_id* id = nullptr;  // the id it concerns (a new one for CONNECT_REQUEST)
  std::vector<std::byte> private_data;
};

// A channel whose fd is non-blocking, so that events can be polled on the data path.
EventChannelPtr make_event_channel();
// The next event, or nullopt when none arrives within `timeout` (0 = just look).
std::optional<CmEvent> next_event(rdma_event_channel& channel, std::chrono::milliseconds timeout);
// Waits for `expected`; any other event (or none within `timeout`) throws naming `what`.
CmEvent expect_event(rdma_event_channel& channel, rdma_cm_event_type expected, std::chrono::milliseconds timeout,
                     const std::string& what);

// "192.0.2.1" + 7471 -> sockaddr; throws naming getaddrinfo.
sockaddr_storage socket_address(const std::string& address, std::uint16_t port);
std::string describe(const std::string& address, std::uint16_t port);

// Sets the ACK timeout on `id` (before its QP connects).
void set_ack_timeout(rdma_cm_id& id);
// RC QP on `id` with one CQ for sends and receives; throws naming rdma_create_qp.
QpOnIdPtr create_qp(rdma_cm_id& id, ibv_pd& pd, ibv_cq& cq, std::uint32_t send_depth, std::uint32_t receive_depth);
// Connection parameters with the retry counts above and `private_data`.
rdma_conn_param connection_parameters(const void* private_data, std::uint8_t private_bytes);

// Moves the QP to the error state and polls `cq` until `outstanding` flushed completions
// came back or `limit` passed: what must happen before the QP and CQ are destroyed.
void drain(rdma_cm_id& id, ibv_cq& cq, std::uint64_t outstanding, std::chrono::milliseconds limit) noexcept;

// How a half that found its CQ empty goes to sleep instead of spinning: through the CQ's
// completion channel, so the kernel (soft RoCE) or the NIC wakes it at the next completion.
// The protocol is verbs' own: arm() asks for an event at the next completion; the caller then
// polls the CQ once more (a completion that arrived before the request raises no event) and
// calls sleep() only when that poll found nothing. Create the CQ with channel().
class CompletionWait {
 public:
  explicit CompletionWait(ibv_context& context);  // throws naming ibv_create_comp_channel
  [[nodiscard]] ibv_comp_channel* channel() const { return channel_.get(); }
  [[nodiscard]] bool armed() const { return armed_; }
  // Requests an event at the next completion of `cq`; false (errno set) when that failed.
  bool arm(ibv_cq& cq) noexcept;
  // Waits until the armed CQ raises its event, one of `also` is readable, or `timeout`
  // passes; takes the event (the CQ must be armed again before the next sleep).
  void sleep(std::initializer_list<int> also, std::chrono::microseconds timeout) noexcept;
  // Acknowledges every event taken; must run before `cq` is destroyed (ibv_destroy_cq
  // waits for that). Leaves the wait disarmed, ready for another CQ.
  void release(ibv_cq& cq) noexcept;

 private:
  void take_events() noexcept;
  CompChannelPtr channel_;
  ibv_cq* cq_ = nullptr;  // the CQ armed last
  unsigned unacknowledged_ = 0;
  bool armed_ = false;
};

// Fills `message` (in registered memory under `lkey`) and posts it as a signalled SEND;
// returns ibv_post_send's error (0 on success).
int post_control_message(ibv_qp& qp, ControlMessage& message, std::uint32_t lkey, std::uint64_t wr_id, ControlType type,
                         std::uint64_t chunks, std::string_view text) noexcept;

}  // namespace sluice::rdma
