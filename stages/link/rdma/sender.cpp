// Sending half: resolve and connect, then metadata WRITE + payload WRITE WITH IMMEDIATE per
// chunk, selective signalling, credits read from the word the receiver writes into.
#include "stages/link/rdma/sender.hpp"

#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice::rdma {

namespace {
constexpr std::uint64_t kControlTag = 1ull << 63;  // wr_id of the control SEND; others carry a chunk count
constexpr std::uint64_t kReceiveTag = 1ull << 62;  // wr_id of the one receive (the receiver's error message)
constexpr std::size_t kPollBatch = 16;
constexpr std::uint32_t kExtraWork = 8;  // control message and zero-length signals beyond two per chunk
// How often a sender with nothing in flight looks at the credit word: credits are RDMA
// writes into it, which raise no completion here.
constexpr std::chrono::microseconds kCreditPoll{50};
}  // namespace

RdmaSender::RdmaSender(SenderOptions options)
    : options_(std::move(options)), metadata_slot_bytes_(metadata_slot_size(options_.metadata_bytes)) {
  if (options_.max_outstanding == 0 || options_.signal_every == 0 || options_.signal_every > options_.max_outstanding) {
    throw std::invalid_argument("RoCE sender: max_outstanding must be >= 1 and signal_every in 1..max_outstanding");
  }
  const std::string where = "RoCE sender to " + describe(options_.address, options_.port);
  resolve(where);
  create_queues(where);
  connect(where);
  send_hello(where);
}

void RdmaSender::resolve(const std::string& where) {
  channel_ = make_event_channel();
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_.get(), &id, nullptr, RDMA_PS_TCP) != 0)
    throw std::runtime_error(errno_message("rdma_create_id"));
  id_.reset(id);
  sockaddr_storage destination = socket_address(options_.address, options_.port);
  const int timeout_ms = static_cast<int>(options_.timeout.count());
  if (rdma_resolve_addr(id_.get(), nullptr, reinterpret_cast<sockaddr*>(&destination), timeout_ms) != 0) {
    throw std::runtime_error(where + ": " + errno_message("rdma_resolve_addr"));
  }
  expect_event(*channel_, RDMA_CM_EVENT_ADDR_RESOLVED, options_.timeout + std::chrono::milliseconds(500), where);
  if (rdma_resolve_route(id_.get(), timeout_ms) != 0)
    throw std::runtime_error(where + ": " + errno_message("rdma_resolve_route"));
  expect_event(*channel_, RDMA_CM_EVENT_ROUTE_RESOLVED, options_.timeout + std::chrono::milliseconds(500), where);
  set_ack_timeout(*id_);
}

void RdmaSender::create_queues(const std::string& where) {
  completions_.emplace(*id_->verbs);
  pd_.reset(ibv_alloc_pd(id_->verbs));
  if (!pd_) throw std::runtime_error(errno_message("ibv_alloc_pd"));
  if (options_.hello.size() > ControlMessage::kTextBytes) {
    throw std::invalid_argument(where + ": hello of " + std::to_string(options_.hello.size()) + " bytes exceeds " +
                                std::to_string(ControlMessage::kTextBytes));
  }
  // Metadata staging slots, a control message to send, one to receive, then the credit word.
  host_area_.resize(std::size_t{options_.max_outstanding} * metadata_slot_bytes_ + 2 * kControlBytes +
                    sizeof(std::uint64_t));
  host_mr_.reset(
      ibv_reg_mr(pd_.get(), host_area_.data(), host_area_.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (!host_mr_) throw std::runtime_error(errno_message("ibv_reg_mr(metadata staging and credit word)"));
  send_depth_ = 2 * options_.max_outstanding + kExtraWork;
  cq_.reset(ibv_create_cq(id_->verbs, static_cast<int>(send_depth_ + 1), nullptr, completions_->channel(), 0));
  if (!cq_) throw std::runtime_error(errno_message("ibv_create_cq"));
  qp_ = create_qp(*id_, *pd_, *cq_, send_depth_, 1);
  ibv_sge receive_sge{
      reinterpret_cast<std::uint64_t>(host_area_.data() + host_area_.size() - sizeof(std::uint64_t) - kControlBytes),
      static_cast<std::uint32_t>(kControlBytes), host_mr_->lkey};
  ibv_recv_wr receive{};
  receive.wr_id = kReceiveTag;
  receive.sg_list = &receive_sge;
  receive.num_sge = 1;
  ibv_recv_wr* bad_receive = nullptr;
  if (int error = ibv_post_recv(qp_->qp, &receive, &bad_receive); error != 0) {
    throw std::runtime_error(errno_message("ibv_post_recv", error));
  }
}

void RdmaSender::connect(const std::string& where) {
  ConnectRequest request;
  request.credit_address =
      reinterpret_cast<std::uint64_t>(host_area_.data() + host_area_.size() - sizeof(std::uint64_t));
  request.credit_rkey = host_mr_->rkey;
  request.metadata_bytes = options_.metadata_bytes;
  request.lane = options_.lane;
  rdma_conn_param parameters = connection_parameters(&request, sizeof request);
  if (rdma_connect(id_.get(), &parameters) != 0) throw std::runtime_error(where + ": " + errno_message("rdma_connect"));
  CmEvent established = expect_event(*channel_, RDMA_CM_EVENT_ESTABLISHED, options_.timeout, where);
  if (established.private_data.size() < sizeof advert_)
    throw std::runtime_error(where + ": the peer sent no ring advertisement");
  std::memcpy(&advert_, established.private_data.data(), sizeof advert_);
  if (advert_.magic != kMagic || advert_.version != kProtocolVersion || advert_.slot_count == 0 ||
      advert_.metadata_slot_bytes < sizeof(SlotHeader) + options_.metadata_bytes) {
    throw std::runtime_error(where + ": the peer's ring advertisement is not one this version understands");
  }
  options_.max_outstanding = std::min(options_.max_outstanding, advert_.slot_count);
  options_.signal_every = std::min(options_.signal_every, options_.max_outstanding);
  cookies_.resize(options_.max_outstanding);
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(request.credit_address))
      .store(advert_.released, std::memory_order_release);
  last_signal_ = std::chrono::steady_clock::now();
}

void RdmaSender::send_hello(const std::string& where) {
  const std::string_view hello(reinterpret_cast<const char*>(options_.hello.data()), options_.hello.size());
  if (!post_control(ControlType::hello, hello)) throw std::runtime_error(where + ": " + error_);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (bool sent = false; !sent;) {
    ibv_wc completion{};
    const int count = ibv_poll_cq(cq_.get(), 1, &completion);
    if (count < 0 || std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error(where + ": hello not delivered");
    if (count == 0) continue;
    // A receiver that fails as soon as it has the hello may say why before the hello's
    // acknowledgement completes here: the connection was made, so keep its reason for the
    // first send instead of retrying a receiver that is no longer accepting.
    if (completion.wr_id == kReceiveTag && completion.status == IBV_WC_SUCCESS) {
      error_ = receiver_failure(completion.byte_len);
      receiver_failed_ = true;
      continue;
    }
    if (completion.status != IBV_WC_SUCCESS) {
      if (receiver_failed_) return;
      throw std::runtime_error(where + ": hello not delivered: " + ibv_wc_status_str(completion.status));
    }
    sent = (completion.wr_id & kControlTag) != 0;
  }
}

std::string RdmaSender::receiver_failure(std::uint32_t byte_len) const {
  ControlMessage message{};
  std::memcpy(&message, host_area_.data() + host_area_.size() - sizeof(std::uint64_t) - kControlBytes,
              std::min<std::size_t>(byte_len, sizeof message));
  return "the receiver failed: " +
         std::string(message.text, std::min<std::size_t>(message.text_bytes, ControlMessage::kTextBytes));
}

RdmaSender::~RdmaSender() { disconnect(); }

const ibv_mr& RdmaSender::register_source(const void* address, std::size_t bytes, bool device, int cuda_device) {
  std::string why;
  std::optional<LandingRegistration> registration =
      register_landing(*pd_, const_cast<void*>(address), bytes, device, cuda_device, why);
  if (!registration) throw std::runtime_error("RoCE sender cannot register its source chunks: " + why);
  sources_.push_back(std::move(*registration));
  return *sources_.back().mr;
}

std::uint64_t RdmaSender::credits() const noexcept {
  auto* word = reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(host_area_.data()) + host_area_.size() -
                                                sizeof(std::uint64_t));
  const std::uint64_t released = std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire);
  const std::uint64_t occupied = advert_.arrived + posted_ - released;
  return occupied >= advert_.slot_count ? 0 : advert_.slot_count - occupied;
}

SendStatus RdmaSender::send(const void* metadata, std::size_t metadata_bytes, const void* payload,
                            std::size_t payload_bytes, std::uint32_t payload_lkey, std::uint64_t cookie) noexcept {
  if (!qp_ || finished_ || receiver_failed_) {
    if (error_.empty()) error_ = "send after the connection ended";
    return SendStatus::failed;
  }
  if (metadata_bytes > options_.metadata_bytes || payload_bytes > advert_.slot_bytes) {
    error_ = "chunk of " + std::to_string(payload_bytes) + " bytes (metadata " + std::to_string(metadata_bytes) +
             ") exceeds the receiver's slots of " + std::to_string(advert_.slot_bytes);
    return SendStatus::failed;
  }
  if (in_flight() >= options_.max_outstanding || credits() == 0) return SendStatus::no_credit;

  const std::uint64_t slot = (advert_.arrived + posted_) % advert_.slot_count;
  std::byte* staging = host_area_.data() + (posted_ % options_.max_outstanding) * metadata_slot_bytes_;
  const SlotHeader header{posted_, payload_bytes, static_cast<std::uint32_t>(metadata_bytes), kMagic};
  std::memcpy(staging, &header, sizeof header);
  if (metadata_bytes > 0) std::memcpy(staging + sizeof header, metadata, metadata_bytes);

  std::array<ibv_sge, 2> sges{};
  sges[0] = {reinterpret_cast<std::uint64_t>(staging), static_cast<std::uint32_t>(sizeof header + metadata_bytes),
             host_mr_->lkey};
  sges[1] = {reinterpret_cast<std::uint64_t>(payload), static_cast<std::uint32_t>(payload_bytes), payload_lkey};
  std::array<ibv_send_wr, 2> work{};
  work[0].wr_id = posted_;
  work[0].opcode = IBV_WR_RDMA_WRITE;
  work[0].sg_list = &sges[0];
  work[0].num_sge = 1;
  work[0].wr.rdma.remote_addr = advert_.metadata_address + slot * advert_.metadata_slot_bytes;
  work[0].wr.rdma.rkey = advert_.metadata_rkey;
  work[0].next = &work[1];
  // Signalled every signal_every chunks, and when this write fills the window (else the
  // sender would wait for a completion nobody asked for).
  const bool signalled = (posted_ + 1) % options_.signal_every == 0 || in_flight() + 1 >= options_.max_outstanding;
  work[1].wr_id = posted_ + 1;
  work[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  work[1].imm_data = htonl(make_immediate(static_cast<std::uint32_t>(slot), posted_));
  work[1].sg_list = payload_bytes > 0 ? &sges[1] : nullptr;
  work[1].num_sge = payload_bytes > 0 ? 1 : 0;
  work[1].send_flags = signalled ? IBV_SEND_SIGNALED : 0;
  work[1].wr.rdma.remote_addr = advert_.payload_address + slot * advert_.slot_bytes;
  work[1].wr.rdma.rkey = advert_.payload_rkey;
  ibv_send_wr* bad = nullptr;
  if (int error = ibv_post_send(qp_->qp, work.data(), &bad); error != 0) {
    error_ = errno_message("ibv_post_send(chunk write)", error);
    return SendStatus::failed;
  }
  cookies_[posted_ % cookies_.size()] = cookie;
  ++posted_;
  work_posted_ += 2;
  if (signalled) {
    signalled_ = posted_;
    last_signal_ = std::chrono::steady_clock::now();
    signal_posted();
  }
  return SendStatus::posted;
}

void RdmaSender::signal_posted() noexcept {
  if (signals_posted_ == signals_completed_) waiting_since_ = std::chrono::steady_clock::now();
  ++signals_posted_;
}

bool RdmaSender::post_signal() noexcept {
  // A zero-length RDMA WRITE, signalled: its completion covers every chunk before it (RC
  // completes in order), and when the receiver is gone it fails after the retries.
  ibv_send_wr request{};
  request.wr_id = posted_;
  request.opcode = IBV_WR_RDMA_WRITE;
  request.send_flags = IBV_SEND_SIGNALED;
  request.wr.rdma.remote_addr = advert_.metadata_address;
  request.wr.rdma.rkey = advert_.metadata_rkey;
  ibv_send_wr* bad = nullptr;
  if (int error = ibv_post_send(qp_->qp, &request, &bad); error != 0) {
    error_ = errno_message("ibv_post_send(signal)", error);
    return false;
  }
  ++work_posted_;
  signalled_ = posted_;
  last_signal_ = std::chrono::steady_clock::now();
  signal_posted();
  return true;
}

bool RdmaSender::post_control(ControlType type, std::string_view text) noexcept {
  auto* message = reinterpret_cast<ControlMessage*>(host_area_.data() +
                                                    std::size_t{options_.max_outstanding} * metadata_slot_bytes_);
  if (int error = post_control_message(*qp_->qp, *message, host_mr_->lkey, kControlTag | posted_, type, posted_, text);
      error != 0) {
    error_ = errno_message("ibv_post_send(control message)", error);
    return false;
  }
  ++work_posted_;
  signalled_ = posted_;
  signal_posted();
  return true;
}

int RdmaSender::take_completions() noexcept {
  std::array<ibv_wc, kPollBatch> completions{};
  const int count = ibv_poll_cq(cq_.get(), static_cast<int>(completions.size()), completions.data());
  if (count < 0) {
    error_ = "ibv_poll_cq failed";
    return -1;
  }
  for (int index = 0; index < count; ++index) {
    const ibv_wc& completion = completions[static_cast<std::size_t>(index)];
    if (completion.status != IBV_WC_SUCCESS) {
      error_ = std::string("write to the receiver failed: ") + ibv_wc_status_str(completion.status) +
               (completion.status == IBV_WC_RETRY_EXC_ERR ? " (the receiver vanished)" : "");
      peer_lost_ = completion.status == IBV_WC_RETRY_EXC_ERR || completion.status == IBV_WC_WR_FLUSH_ERR;
      return -1;
    }
    if (completion.wr_id == kReceiveTag) {  // the receiver failed and says why
      error_ = receiver_failure(completion.byte_len);
      return -1;
    }
    completed_ = std::max(completed_, completion.wr_id & ~kControlTag);
    ++signals_completed_;
    waiting_since_ = std::chrono::steady_clock::now();
  }
  return count;
}

bool RdmaSender::progress() noexcept {
  if (!qp_) {
    if (error_.empty()) error_ = "not connected";
    return false;
  }
  if (receiver_failed_) return false;  // error_ holds the reason it sent during the hello
  const int count = take_completions();
  if (count < 0) return false;
  if (count > 0) return true;
  std::optional<CmEvent> event;
  try {
    event = next_event(*channel_, std::chrono::milliseconds(0));
  } catch (const std::exception& error) {
    error_ = error.what();
    return false;
  }
  if (event && (event->type == RDMA_CM_EVENT_DISCONNECTED || event->type == RDMA_CM_EVENT_DEVICE_REMOVAL)) {
    // A receiver that fails sends why before it disconnects: its message may have come in since
    // the completion queue was last read, and says more than the disconnect.
    if (take_completions() < 0 && !peer_lost_) return false;
    error_ = std::string("receiver ") + (event->type == RDMA_CM_EVENT_DISCONNECTED ? "disconnected" : "device removed");
    peer_lost_ = true;
    return false;
  }
  if (signals_posted_ > signals_completed_ &&
      std::chrono::steady_clock::now() - waiting_since_ > options_.stalled_after) {
    error_ = "no completion from the link for " + std::to_string(options_.stalled_after.count()) +
             " ms, not even a failed one: its port or route is gone";
    peer_lost_ = true;
    return false;
  }
  // Nothing signalled is outstanding: cover an unsignalled tail, or send a heartbeat.
  if (completed_ == signalled_ && !finished_ &&
      (posted_ > signalled_ || std::chrono::steady_clock::now() - last_signal_ >= options_.heartbeat)) {
    return post_signal();
  }
  return true;
}

void RdmaSender::wait(std::chrono::microseconds timeout) noexcept {
  if (!qp_) return;
  if (!completions_->armed()) {
    if (!completions_->arm(*cq_)) std::this_thread::sleep_for(kCreditPoll);  // poll on
    return;
  }
  // With writes in flight a completion is coming (at most signal_every chunks away, or the
  // signal covering an unsignalled tail); never sleep past the next heartbeat.
  auto limit =
      in_flight() > 0 ? std::chrono::duration_cast<std::chrono::microseconds>(options_.heartbeat / 2) : kCreditPoll;
  completions_->sleep({channel_->fd}, std::min(timeout, limit));
}

bool RdmaSender::finish(std::chrono::milliseconds timeout) noexcept {
  if (!qp_ || finished_ || receiver_failed_) return false;
  if (!post_control(ControlType::end_of_stream, {})) return false;
  finished_ = true;
  // The end of stream completes after every write before it (RC keeps the order), however
  // long those take on a slow link or a busy machine. A receiver that vanished fails a
  // completion after the retries (cm.hpp), one that disconnected flushes them; `timeout`
  // only bounds a stretch in which nothing completes and no credit comes back.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::uint64_t credits_seen = credits();
  bool acknowledged = false;
  while (completed_ < posted_ || !acknowledged) {
    std::array<ibv_wc, kPollBatch> completions{};
    const int count = ibv_poll_cq(cq_.get(), static_cast<int>(completions.size()), completions.data());
    for (int index = 0; index < count; ++index) {
      const ibv_wc& completion = completions[static_cast<std::size_t>(index)];
      if (completion.status != IBV_WC_SUCCESS) {
        error_ = std::string("end of stream not delivered: ") + ibv_wc_status_str(completion.status);
        peer_lost_ = completion.status == IBV_WC_RETRY_EXC_ERR || completion.status == IBV_WC_WR_FLUSH_ERR;
        disconnect();
        return false;
      }
      completed_ = std::max(completed_, completion.wr_id & ~kControlTag);
      acknowledged = acknowledged || (completion.wr_id & kControlTag) != 0;
    }
    const auto now = std::chrono::steady_clock::now();
    if (count > 0 || credits() != credits_seen) {
      credits_seen = credits();
      deadline = now + timeout;
    }
    if (count < 0 || now > deadline) {
      error_ = count < 0
                   ? std::string("ibv_poll_cq failed at the end of stream")
                   : "end of stream not acknowledged: nothing completed for " + std::to_string(timeout.count()) + " ms";
      peer_lost_ = count >= 0;
      disconnect();
      return false;
    }
    if (count == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  disconnect();
  return true;
}

void RdmaSender::fail(std::string_view message) noexcept {
  if (qp_ && !finished_ && post_control(ControlType::error, message)) {
    finished_ = true;
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    std::array<ibv_wc, kPollBatch> completions{};
    bool sent = false;
    while (!sent && std::chrono::steady_clock::now() < deadline) {
      const int count = ibv_poll_cq(cq_.get(), static_cast<int>(completions.size()), completions.data());
      if (count < 0) break;
      for (int index = 0; index < count; ++index)
        sent = sent || (completions[static_cast<std::size_t>(index)].wr_id & kControlTag);
    }
  }
  disconnect();
}

void RdmaSender::disconnect() noexcept {
  if (!qp_) return;
  if (rdma_disconnect(id_.get()) != 0 && errno != EINVAL) log::debug("{}", errno_message("rdma_disconnect"));
  drain(*id_, *cq_, work_posted_, std::chrono::milliseconds(200));
  qp_.reset();
  completions_->release(*cq_);
  cq_.reset();
}

}  // namespace sluice::rdma
