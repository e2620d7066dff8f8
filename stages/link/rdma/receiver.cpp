// Receiving half: listener, landing registration, accept with the ring advertisement,
// arrivals from WRITE WITH IMMEDIATE completions, credits written back in ring order.
#include "stages/link/rdma/receiver.hpp"

#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice::rdma {

namespace {
constexpr std::uint32_t kControlReceives = 4;    // EOS / error messages beyond one receive per slot
constexpr std::uint32_t kSendDepth = 64;         // credit writes and heartbeats
constexpr std::uint32_t kSignalEvery = 16;       // credit writes per signalled one
constexpr std::uint64_t kSendTag = 1ull << 63;   // wr_id of sends; receives use the buffer index
constexpr std::uint64_t kAbortTag = 1ull << 62;  // wr_id (with kSendTag) of the error message
constexpr std::size_t kCompletionsPerPoll = 16;  // taken by one poll() before it returns
// How long completions may trail the sender's DISCONNECTED event.
constexpr std::chrono::milliseconds kDisconnectGrace{500};
}  // namespace

RdmaReceiver::RdmaReceiver(ReceiverOptions options, const LandingRing& ring)
    : options_(std::move(options)),
      ring_(ring),
      metadata_slot_bytes_(metadata_slot_size(options_.metadata_bytes)),
      receive_depth_(ring.slot_count + kControlReceives),
      slot_released_(ring.slot_count) {
  if (ring.slot_count == 0 || ring.slot_count > kMaxSlots || ring.slot_bytes == 0 || ring.base == nullptr) {
    throw std::invalid_argument("RoCE landing ring needs 1.." + std::to_string(kMaxSlots) + " slots of non-zero size");
  }
  if (options_.address.empty()) {
    throw std::invalid_argument("the RoCE receiver needs the local address of an RDMA port to listen on");
  }
  // Metadata slots, receive buffers, one control message to send, then the 8-byte credit word.
  host_area_.resize(std::size_t{ring.slot_count} * metadata_slot_bytes_ +
                    (std::size_t{receive_depth_} + 1) * kControlBytes + sizeof(std::uint64_t));

  channel_ = make_event_channel();
  rdma_cm_id* listener = nullptr;
  if (rdma_create_id(channel_.get(), &listener, nullptr, RDMA_PS_TCP) != 0) {
    throw std::runtime_error(errno_message("rdma_create_id"));
  }
  listener_.reset(listener);
  sockaddr_storage address = socket_address(options_.address, options_.port);
  if (rdma_bind_addr(listener_.get(), reinterpret_cast<sockaddr*>(&address)) != 0) {
    throw std::runtime_error(errno_message("rdma_bind_addr") + " on " + describe(options_.address, options_.port));
  }
  if (listener_->verbs == nullptr) {
    throw std::runtime_error("rdma_bind_addr(" + describe(options_.address, options_.port) +
                             ") found no RDMA device for that address; hint: listen on the IP address of a RoCE "
                             "port (rdma link show)");
  }
  if (rdma_listen(listener_.get(), 1) != 0) throw std::runtime_error(errno_message("rdma_listen"));
  completions_.emplace(*listener_->verbs);
  wake_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) throw std::runtime_error(errno_message("eventfd"));
  pd_.reset(ibv_alloc_pd(listener_->verbs));
  if (!pd_) throw std::runtime_error(errno_message("ibv_alloc_pd"));

  std::string why;
  std::optional<LandingRegistration> landing = register_landing(
      *pd_, ring.base, std::size_t{ring.slot_count} * ring.slot_bytes, ring.device, ring.cuda_device, why);
  if (!landing) throw LandingUnregistrable(why);
  landing_ = std::move(*landing);
  landing_path_ = landing_.why;
  host_mr_.reset(
      ibv_reg_mr(pd_.get(), host_area_.data(), host_area_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (!host_mr_) throw std::runtime_error(errno_message("ibv_reg_mr(metadata and control buffers)"));
}

RdmaReceiver::~RdmaReceiver() { close(); }

std::uint16_t RdmaReceiver::port() const { return ntohs(rdma_get_src_port(listener_.get())); }

bool RdmaReceiver::post_receive(std::uint32_t buffer) noexcept {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uint64_t>(control_buffer(buffer));
  sge.length = kControlBytes;
  sge.lkey = host_mr_->lkey;
  ibv_recv_wr request{};
  request.wr_id = buffer;
  request.sg_list = &sge;
  request.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int error = ibv_post_recv(qp_->qp, &request, &bad); error != 0) {
    error_ = errno_message("ibv_post_recv", error);
    return false;
  }
  return true;
}

bool RdmaReceiver::accept(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!qp_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::optional<CmEvent> event = next_event(*channel_, std::max(left, std::chrono::milliseconds(0)));
    if (!event) return false;
    if (event->type != RDMA_CM_EVENT_CONNECT_REQUEST) continue;  // late events of an earlier connection
    CmIdPtr id(event->id);
    ConnectRequest request{};
    if (const std::string refusal = refusal_of(*event, *id, request); !refusal.empty()) {
      log::warn("RoCE receiver {}: refused a sender: {}", describe(options_.address, options_.port), refusal);
      if (rdma_reject(id.get(), nullptr, 0) != 0) log::warn("{}", errno_message("rdma_reject"));
      continue;
    }
    connect(std::move(id), request);
    await_hello();
  }
  return true;
}

std::string RdmaReceiver::refusal_of(const CmEvent& event, const rdma_cm_id& id, ConnectRequest& request) const {
  if (event.private_data.size() < sizeof request) return "connect request without Sluice private data";
  std::memcpy(&request, event.private_data.data(), sizeof request);
  if (request.magic != kMagic || request.version != kProtocolVersion) {
    return "connect request of another protocol or version";
  }
  if (request.lane != options_.lane) {
    return "sender carries lane " + std::to_string(request.lane) + ", this receiver lane " +
           std::to_string(options_.lane);
  }
  if (request.metadata_bytes > options_.metadata_bytes) {
    return "sender's metadata (" + std::to_string(request.metadata_bytes) + " bytes) exceeds the receiver's " +
           std::to_string(options_.metadata_bytes);
  }
  if (id.verbs != pd_->context) return "connection arrived on another RDMA device than the one listened on";
  return "";
}

void RdmaReceiver::connect(CmIdPtr id, const ConnectRequest& request) {
  set_ack_timeout(*id);
  cq_.reset(
      ibv_create_cq(id->verbs, static_cast<int>(receive_depth_ + kSendDepth), nullptr, completions_->channel(), 0));
  if (!cq_) throw std::runtime_error(errno_message("ibv_create_cq"));
  qp_ = create_qp(*id, *pd_, *cq_, kSendDepth, receive_depth_);
  id_ = std::move(id);
  peer_ = request;
  connection_sequence_ = 0;
  sends_posted_ = sends_completed_ = 0;
  credited_ = released_;
  for (std::uint32_t buffer = 0; buffer < receive_depth_; ++buffer) {
    if (!post_receive(buffer)) throw std::runtime_error(error_);
  }
  RingAdvert advert = ring_advert();
  rdma_conn_param parameters = connection_parameters(&advert, sizeof advert);
  if (rdma_accept(id_.get(), &parameters) != 0) throw std::runtime_error(errno_message("rdma_accept"));
  expect_event(*channel_, RDMA_CM_EVENT_ESTABLISHED, options_.timeout,
               "RoCE receiver " + describe(options_.address, options_.port));
  last_signal_ = std::chrono::steady_clock::now();
  peer_gone_at_.reset();
  error_.clear();
}

RingAdvert RdmaReceiver::ring_advert() const {
  RingAdvert advert;
  advert.slot_count = ring_.slot_count;
  advert.metadata_slot_bytes = metadata_slot_bytes_;
  advert.slot_bytes = ring_.slot_bytes;
  advert.payload_address = reinterpret_cast<std::uint64_t>(ring_.base);
  advert.metadata_address = reinterpret_cast<std::uint64_t>(host_area_.data());
  advert.payload_rkey = landing_.mr->rkey;
  advert.metadata_rkey = host_mr_->rkey;
  advert.arrived = arrived_;
  advert.released = released_;
  return advert;
}

void RdmaReceiver::await_hello() {
  hello_.clear();
  const auto hello_deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (bool have_hello = false; !have_hello;) {
    if (std::chrono::steady_clock::now() > hello_deadline) {
      close();
      throw std::runtime_error("RoCE receiver " + describe(options_.address, options_.port) +
                               ": the sender sent no hello within " + std::to_string(options_.timeout.count()) + " ms");
    }
    ibv_wc completion{};
    const int count = ibv_poll_cq(cq_.get(), 1, &completion);
    if (count < 0) throw std::runtime_error("ibv_poll_cq failed while waiting for the hello");
    if (count == 0 || (completion.wr_id & kSendTag)) continue;
    const auto buffer = static_cast<std::uint32_t>(completion.wr_id);
    ControlMessage message{};
    std::memcpy(&message, control_buffer(buffer), std::min<std::size_t>(completion.byte_len, sizeof message));
    if (completion.status != IBV_WC_SUCCESS || completion.opcode != IBV_WC_RECV || message.type != ControlType::hello ||
        !post_receive(buffer)) {
      close();
      throw std::runtime_error("RoCE receiver " + describe(options_.address, options_.port) +
                               ": the sender's first message was not a hello");
    }
    const auto* text = reinterpret_cast<const std::byte*>(message.text);
    hello_.assign(text, text + std::min<std::size_t>(message.text_bytes, ControlMessage::kTextBytes));
    have_hello = true;
  }
}

ReceiveStatus RdmaReceiver::fail(std::string text) noexcept {
  error_ = std::move(text);
  return ReceiveStatus::failed;
}

void RdmaReceiver::release(std::uint32_t slot) noexcept {
  if (slot >= slot_released_.size()) return;
  // Sequentially consistent with wait(): either this sees the receiver asleep and wakes it,
  // or the receiver, about to sleep, sees this release and stays up.
  slot_released_[slot].store(true, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const std::uint64_t one = 1;
    static_cast<void>(::write(wake_.get(), &one, sizeof one));  // a full counter still wakes
  }
}

bool RdmaReceiver::credit_pending() const noexcept {
  return released_ < arrived_ && slot_released_[released_ % ring_.slot_count].load(std::memory_order_seq_cst);
}

void RdmaReceiver::wait(std::chrono::microseconds timeout) noexcept {
  if (!qp_) {
    std::this_thread::sleep_for(std::min<std::chrono::microseconds>(timeout, std::chrono::milliseconds(1)));
    return;
  }
  if (!completions_->armed()) {
    if (!completions_->arm(*cq_)) std::this_thread::sleep_for(std::chrono::microseconds(50));  // poll on
    return;
  }
  sleeping_.store(true, std::memory_order_seq_cst);
  if (!credit_pending()) {
    // Never past the next heartbeat, nor past a disconnect's grace period.
    const auto limit = std::chrono::duration_cast<std::chrono::microseconds>(
        std::min<std::chrono::milliseconds>(options_.heartbeat / 2, kDisconnectGrace / 4));
    completions_->sleep({channel_->fd, wake_.get()}, std::min(timeout, limit));
  }
  sleeping_.store(false, std::memory_order_seq_cst);
  std::uint64_t count = 0;
  static_cast<void>(::read(wake_.get(), &count, sizeof count));
}

void RdmaReceiver::return_credits() noexcept {
  while (released_ < arrived_ && slot_released_[released_ % ring_.slot_count].load(std::memory_order_acquire)) {
    slot_released_[released_ % ring_.slot_count].store(false, std::memory_order_relaxed);
    ++released_;
  }
  const auto now = std::chrono::steady_clock::now();
  const bool heartbeat = now - last_signal_ >= options_.heartbeat;
  if ((released_ == credited_ && !heartbeat) || sends_posted_ - sends_completed_ >= kSendDepth - 1) return;
  auto* word = reinterpret_cast<std::uint64_t*>(host_area_.data() + host_area_.size() - sizeof(std::uint64_t));
  std::atomic_ref<std::uint64_t>(*word).store(released_, std::memory_order_relaxed);
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uint64_t>(word);
  sge.length = sizeof *word;
  sge.lkey = host_mr_->lkey;
  ibv_send_wr request{};
  request.wr_id = kSendTag | (sends_posted_ + 1);
  request.opcode = IBV_WR_RDMA_WRITE;
  request.sg_list = &sge;
  request.num_sge = 1;
  // Signalled every kSignalEvery writes (so the send queue empties) and as the heartbeat:
  // a write to a sender that vanished fails after the retries instead of going unnoticed.
  const bool signalled = heartbeat || (sends_posted_ + 1) % kSignalEvery == 0;
  request.send_flags = signalled ? IBV_SEND_SIGNALED : 0;
  request.wr.rdma.remote_addr = peer_.credit_address;
  request.wr.rdma.rkey = peer_.credit_rkey;
  ibv_send_wr* bad = nullptr;
  if (int error = ibv_post_send(qp_->qp, &request, &bad); error != 0) {
    error_ = errno_message("ibv_post_send(credit write)", error);
    return;
  }
  ++sends_posted_;
  credited_ = released_;
  if (signalled) last_signal_ = now;
}

ReceiveStatus RdmaReceiver::poll(Arrival& arrival) noexcept {
  if (!qp_) return ReceiveStatus::disconnected;
  return_credits();
  std::array<ibv_wc, 1> completions{};
  // One completion at a time keeps Arrival simple; the CQ itself batches in the provider.
  for (std::size_t polled = 0; polled < kCompletionsPerPoll; ++polled) {
    const int count = ibv_poll_cq(cq_.get(), 1, completions.data());
    if (count < 0) return fail("ibv_poll_cq failed");
    if (count == 0) break;
    const ibv_wc& completion = completions[0];
    if (completion.wr_id & kSendTag) {
      if (completion.status != IBV_WC_SUCCESS) {
        error_ = std::string("credit write to the sender failed: ") + ibv_wc_status_str(completion.status) +
                 " (the sender vanished)";
        return ReceiveStatus::disconnected;
      }
      sends_completed_ = completion.wr_id & ~kSendTag;
      continue;
    }
    if (completion.status == IBV_WC_WR_FLUSH_ERR) {
      // The QP went to error: the sender disconnected or vanished (its DISCONNECTED follows).
      if (!peer_gone_at_) error_ = "sender disconnected (receives flushed)";
      return ReceiveStatus::disconnected;
    }
    if (completion.status != IBV_WC_SUCCESS) {
      return fail(std::string("receive failed: ") + ibv_wc_status_str(completion.status));
    }
    if (completion.opcode == IBV_WC_RECV_RDMA_WITH_IMM) return take_chunk(completion, arrival);
    if (completion.opcode == IBV_WC_RECV) return take_control_message(completion);
    return fail("unexpected completion opcode " + std::to_string(completion.opcode));
  }
  if (peer_gone_at_ && std::chrono::steady_clock::now() - *peer_gone_at_ > kDisconnectGrace) {
    return ReceiveStatus::disconnected;
  }
  return take_cm_event();
}

ReceiveStatus RdmaReceiver::take_chunk(const ibv_wc& completion, Arrival& arrival) noexcept {
  const std::uint32_t immediate = ntohl(completion.imm_data);
  const std::uint32_t slot = immediate_slot(immediate);
  const std::byte* meta = host_area_.data() + std::size_t{slot} * metadata_slot_bytes_;
  SlotHeader header{};
  if (slot < ring_.slot_count) std::memcpy(&header, meta, sizeof header);
  if (slot != arrived_ % ring_.slot_count || immediate_sequence(immediate) != (connection_sequence_ & 0xffffu) ||
      header.magic != kMagic || header.sequence != connection_sequence_ || header.payload_bytes > ring_.slot_bytes ||
      header.metadata_bytes > options_.metadata_bytes) {
    return fail("out-of-order or malformed chunk: slot " + std::to_string(slot) + " (expected " +
                std::to_string(arrived_ % ring_.slot_count) + "), sequence " + std::to_string(header.sequence) +
                " (expected " + std::to_string(connection_sequence_) + ")");
  }
  if (!post_receive(static_cast<std::uint32_t>(completion.wr_id))) return ReceiveStatus::failed;
  arrival.slot = slot;
  arrival.sequence = connection_sequence_;
  arrival.payload_bytes = header.payload_bytes;
  arrival.metadata = meta + sizeof(SlotHeader);
  arrival.metadata_bytes = header.metadata_bytes;
  arrival.payload = ring_.base + std::size_t{slot} * ring_.slot_bytes;
  ++arrived_;
  ++connection_sequence_;
  return ReceiveStatus::arrived;
}

ReceiveStatus RdmaReceiver::take_control_message(const ibv_wc& completion) noexcept {
  const auto buffer = static_cast<std::uint32_t>(completion.wr_id);
  ControlMessage message{};
  std::memcpy(&message, control_buffer(buffer), std::min<std::size_t>(completion.byte_len, sizeof message));
  if (!post_receive(buffer)) return ReceiveStatus::failed;
  if (message.type == ControlType::end_of_stream) {
    if (message.chunks != connection_sequence_) {
      return fail("end of stream after " + std::to_string(message.chunks) + " chunks, but " +
                  std::to_string(connection_sequence_) + " arrived");
    }
    return ReceiveStatus::end_of_stream;
  }
  error_.assign(message.text, std::min<std::size_t>(message.text_bytes, ControlMessage::kTextBytes));
  return ReceiveStatus::peer_error;
}

ReceiveStatus RdmaReceiver::take_cm_event() noexcept {
  std::optional<CmEvent> event;
  try {
    event = next_event(*channel_, std::chrono::milliseconds(0));
  } catch (const std::exception& error) {
    return fail(error.what());
  }
  if (!event) return ReceiveStatus::idle;
  if (event->type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    CmIdPtr extra(event->id);
    if (rdma_reject(extra.get(), nullptr, 0) != 0) log::warn("{}", errno_message("rdma_reject"));
    return ReceiveStatus::idle;
  }
  if (event->type == RDMA_CM_EVENT_DISCONNECTED || event->type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
    // The event can overtake completions still on their way into the CQ: keep taking them
    // until the receives flush (which follows every real completion) or a grace period ends.
    error_ = std::string("sender ") + (event->type == RDMA_CM_EVENT_DISCONNECTED ? "disconnected" : "device removed");
    peer_gone_at_ = std::chrono::steady_clock::now();
  }
  return ReceiveStatus::idle;
}

void RdmaReceiver::abort(std::string_view reason) noexcept {
  if (qp_) {
    // The control buffer after the receive buffers.
    auto* message = reinterpret_cast<ControlMessage*>(control_buffer(receive_depth_));
    if (post_control_message(*qp_->qp, *message, host_mr_->lkey, kSendTag | kAbortTag, ControlType::error,
                             connection_sequence_, reason) == 0) {
      ++sends_posted_;
      const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
      for (bool sent = false; !sent && std::chrono::steady_clock::now() < deadline;) {
        ibv_wc completion{};
        const int count = ibv_poll_cq(cq_.get(), 1, &completion);
        if (count < 0) break;
        sent = count == 1 && completion.wr_id == (kSendTag | kAbortTag);
      }
    }
  }
  close();
}

void RdmaReceiver::close() noexcept {
  if (!qp_) return;
  if (rdma_disconnect(id_.get()) != 0 && errno != EINVAL) log::debug("{}", errno_message("rdma_disconnect"));
  drain(*id_, *cq_, receive_depth_ + (sends_posted_ - sends_completed_), std::chrono::milliseconds(200));
  qp_.reset();
  completions_->release(*cq_);
  cq_.reset();
  id_.reset();
}

}  // namespace sluice::rdma
