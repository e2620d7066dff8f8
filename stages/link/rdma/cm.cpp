// RDMA CM helpers shared by the sender and the receiver.
#include "stages/link/rdma/cm.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice::rdma {

int post_control_message(ibv_qp& qp, ControlMessage& message, std::uint32_t lkey, std::uint64_t wr_id, ControlType type,
                         std::uint64_t chunks, std::string_view text) noexcept {
  message = ControlMessage{};
  message.type = type;
  message.chunks = chunks;
  message.text_bytes = static_cast<std::uint32_t>(std::min(text.size(), ControlMessage::kTextBytes));
  std::memcpy(message.text, text.data(), message.text_bytes);
  ibv_sge sge{reinterpret_cast<std::uint64_t>(&message), static_cast<std::uint32_t>(sizeof message), lkey};
  ibv_send_wr request{};
  request.wr_id = wr_id;
  request.opcode = IBV_WR_SEND;
  request.sg_list = &sge;
  request.num_sge = 1;
  request.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(&qp, &request, &bad);
}

EventChannelPtr make_event_channel() {
  EventChannelPtr channel(rdma_create_event_channel());
  if (!channel) {
    throw std::runtime_error(errno_message("rdma_create_event_channel") +
                             " (is rdma_ucm loaded and /dev/infiniband/rdma_cm accessible?)");
  }
  const int flags = ::fcntl(channel->fd, F_GETFL);
  if (flags < 0 || ::fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    throw std::runtime_error(errno_message("fcntl(rdma_cm channel, O_NONBLOCK)"));
  }
  return channel;
}

std::optional<CmEvent> next_event(rdma_event_channel& channel, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(&channel, &event) == 0) {
      CmEvent copy;
      copy.type = event->event;
      copy.status = event->status;
      copy.id = event->id;
      const auto& conn = event->param.conn;
      if (conn.private_data != nullptr && conn.private_data_len > 0 &&
          (event->event == RDMA_CM_EVENT_CONNECT_REQUEST || event->event == RDMA_CM_EVENT_ESTABLISHED)) {
        const auto* bytes = static_cast<const std::byte*>(conn.private_data);
        copy.private_data.assign(bytes, bytes + conn.private_data_len);
      }
      if (rdma_ack_cm_event(event) != 0) throw std::runtime_error(errno_message("rdma_ack_cm_event"));
      return copy;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw std::runtime_error(errno_message("rdma_get_cm_event"));
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd descriptor{channel.fd, POLLIN, 0};
    if (::poll(&descriptor, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      throw std::runtime_error(errno_message("poll(rdma_cm channel)"));
    }
  }
}

CmEvent expect_event(rdma_event_channel& channel, rdma_cm_event_type expected, std::chrono::milliseconds timeout,
                     const std::string& what) {
  std::optional<CmEvent> event = next_event(channel, timeout);
  if (!event) {
    throw std::runtime_error(what + ": no " + rdma_event_str(expected) + " within " + std::to_string(timeout.count()) +
                             " ms");
  }
  if (event->type != expected) {
    std::string text = what + ": expected " + rdma_event_str(expected) + ", got " + rdma_event_str(event->type);
    if (event->status != 0) text += " (status " + std::to_string(event->status) + ")";
    if (event->type == RDMA_CM_EVENT_REJECTED) text += ": the peer refused the connection (is the receiver listening?)";
    if (event->type == RDMA_CM_EVENT_ADDR_ERROR) text += ": no RDMA device has a route to that address";
    throw std::runtime_error(text);
  }
  return std::move(*event);
}

sockaddr_storage socket_address(const std::string& address, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_NUMERICSERV | (address.empty() ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (int error = ::getaddrinfo(address.empty() ? nullptr : address.c_str(), service.c_str(), &hints, &result);
      error != 0) {
    throw std::runtime_error("getaddrinfo(" + describe(address, port) + "): " + ::gai_strerror(error));
  }
  sockaddr_storage storage{};
  std::memcpy(&storage, result->ai_addr, result->ai_addrlen);
  ::freeaddrinfo(result);
  return storage;
}

std::string describe(const std::string& address, std::uint16_t port) {
  return (address.empty() ? std::string("*") : address) + ":" + std::to_string(port);
}

void set_ack_timeout(rdma_cm_id& id) {
  std::uint8_t timeout = kAckTimeout;
  if (rdma_set_option(&id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout) != 0) {
    throw std::runtime_error(errno_message("rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)"));
  }
}

QpOnIdPtr create_qp(rdma_cm_id& id, ibv_pd& pd, ibv_cq& cq, std::uint32_t send_depth, std::uint32_t receive_depth) {
  ibv_qp_init_attr attributes{};
  attributes.send_cq = &cq;
  attributes.recv_cq = &cq;
  attributes.qp_type = IBV_QPT_RC;
  attributes.sq_sig_all = 0;  // selective signalling: only WRs marked IBV_SEND_SIGNALED complete
  attributes.cap.max_send_wr = send_depth;
  attributes.cap.max_recv_wr = receive_depth;
  attributes.cap.max_send_sge = 1;
  attributes.cap.max_recv_sge = 1;
  if (rdma_create_qp(&id, &pd, &attributes) != 0) {
    throw std::runtime_error(errno_message("rdma_create_qp") + " (send depth " + std::to_string(send_depth) +
                             ", receive depth " + std::to_string(receive_depth) + ")");
  }
  return QpOnIdPtr(&id);
}

rdma_conn_param connection_parameters(const void* private_data, std::uint8_t private_bytes) {
  rdma_conn_param parameters{};
  parameters.private_data = private_data;
  parameters.private_data_len = private_bytes;
  parameters.responder_resources = 1;
  parameters.initiator_depth = 1;
  parameters.retry_count = kRetryCount;
  parameters.rnr_retry_count = kRnrRetryCount;
  return parameters;
}

void drain(rdma_cm_id& id, ibv_cq& cq, std::uint64_t outstanding, std::chrono::milliseconds limit) noexcept {
  if (id.qp == nullptr) return;
  ibv_qp_attr attributes{};
  attributes.qp_state = IBV_QPS_ERR;
  if (int error = ibv_modify_qp(id.qp, &attributes, IBV_QP_STATE); error != 0) {
    log::warn("{}", errno_message("ibv_modify_qp(IBV_QPS_ERR)", error));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::array<ibv_wc, 32> completions{};
  std::uint64_t seen = 0;
  // Flushed completions come asynchronously; unsignalled sends may never produce one, so
  // a quiet CQ for kQuiet also ends the wait.
  constexpr auto kQuiet = std::chrono::milliseconds(20);
  auto last_seen = std::chrono::steady_clock::now();
  while (seen < outstanding) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || now - last_seen >= kQuiet) break;
    const int count = ibv_poll_cq(&cq, static_cast<int>(completions.size()), completions.data());
    if (count < 0) return;
    if (count == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    } else {
      last_seen = now;
    }
    seen += static_cast<std::uint64_t>(count);
  }
}

CompletionWait::CompletionWait(ibv_context& context) : channel_(ibv_create_comp_channel(&context)) {
  if (!channel_) throw std::runtime_error(errno_message("ibv_create_comp_channel"));
  // Non-blocking: events are taken only when poll says there are some, never waited for twice.
  const int flags = ::fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || ::fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    throw std::runtime_error(errno_message("fcntl(completion channel, O_NONBLOCK)"));
  }
}

bool CompletionWait::arm(ibv_cq& cq) noexcept {
  if (armed_ && cq_ == &cq) return true;
  if (int error = ibv_req_notify_cq(&cq, 0); error != 0) {
    errno = error;
    return false;
  }
  cq_ = &cq;
  armed_ = true;
  return true;
}

void CompletionWait::take_events() noexcept {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(channel_.get(), &cq, &context) == 0) {
    ++unacknowledged_;
    cq_ = cq;
    armed_ = false;
  }
  // Acknowledging takes a lock in the provider: do it in batches.
  if (unacknowledged_ >= 64 && cq_ != nullptr) {
    ibv_ack_cq_events(cq_, unacknowledged_);
    unacknowledged_ = 0;
  }
}

void CompletionWait::sleep(std::initializer_list<int> also, std::chrono::microseconds timeout) noexcept {
  std::array<pollfd, 4> descriptors{};
  std::size_t count = 0;
  descriptors[count++] = pollfd{channel_->fd, POLLIN, 0};
  for (int fd : also) {
    if (fd >= 0 && count < descriptors.size()) descriptors[count++] = pollfd{fd, POLLIN, 0};
  }
  const auto micros = std::max<std::int64_t>(0, timeout.count());
  const timespec limit{static_cast<time_t>(micros / 1'000'000), static_cast<long>(micros % 1'000'000) * 1000};
  if (::ppoll(descriptors.data(), count, &limit, nullptr) > 0 && (descriptors[0].revents & POLLIN) != 0) take_events();
}

void CompletionWait::release(ibv_cq& cq) noexcept {
  take_events();
  if (unacknowledged_ > 0) ibv_ack_cq_events(&cq, unacknowledged_);
  unacknowledged_ = 0;
  armed_ = false;
  cq_ = nullptr;
}

}  // namespace sluice::rdma
