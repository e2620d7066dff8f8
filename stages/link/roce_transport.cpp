// The roce transport: the seam's LinkSender / LinkReceiver over rdma::RdmaSender /
// rdma::RdmaReceiver, with chunk_wire metadata in each slot's metadata area.
#include "stages/link/roce_transport.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <thread>

#include "pipeline/chunk_wire.hpp"
#include "pipeline/clock.hpp"
#include "pipeline/log.hpp"
#include "stages/link/transport_registry.hpp"

namespace sluice {

namespace {
// Each set-up step (resolve, route, connect, hello) waits at most this long; the sender
// retries whole connections until connect_timeout.
constexpr std::chrono::milliseconds kStepTimeout{2000};
constexpr std::uint32_t kMaxOutstanding = 16;  // chunk writes in flight (see docs/PERFORMANCE.md)
constexpr std::uint32_t kSignalEvery = 4;
// The least time without progress before the link is called lost: a signalled request with
// no completion at all (stalled_after), and the end of stream's answer (finish()).
constexpr std::chrono::milliseconds kPatience{10000};

// Waiting for a credit, a completion or an arrival: poll a few rounds (the next event is often
// microseconds away), then sleep on the CQ's completion channel until the NIC (or the
// kernel's soft RoCE) raises the next completion. Spinning longer takes the CPU from whatever
// moves the data (another lane, or soft RoCE itself) and buys nothing at chunk granularity.
constexpr std::uint32_t kSpinRounds = 64;

std::chrono::microseconds left_until(std::chrono::steady_clock::time_point deadline) {
  return std::max(std::chrono::microseconds(0),
                  std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now()));
}

std::chrono::milliseconds heartbeat_for(const TransportSettings& settings) {
  return std::max(std::chrono::milliseconds(10), settings.peer_timeout / 4);
}
std::string owner_for(const ibv_mr& mr) { return std::string("verbs:") + ibv_get_device_name(mr.context->device); }

std::string roce_unavailable_reason() {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (devices != nullptr) ibv_free_device_list(devices);
  if (count == 0) return "no RDMA device (ibv_get_device_list found none: load a RoCE NIC driver or rdma_rxe)";
  return {};
}
}  // namespace

void RoceSender::connect(const TransportSettings& settings, std::uint32_t lane, const std::vector<Pool*>& sources,
                         std::span<const std::byte> hello) {
  rdma::SenderOptions options;
  options.address = settings.endpoint.address;
  options.port = settings.endpoint.port;
  options.metadata_bytes = kChunkWireBytes;
  options.max_outstanding = kMaxOutstanding;
  options.signal_every = kSignalEvery;
  options.timeout = std::min(kStepTimeout, settings.connect_timeout);
  options.heartbeat = heartbeat_for(settings);
  options.stalled_after = std::max(kPatience, 4 * settings.peer_timeout);
  options.lane = lane;
  options.hello.assign(hello.begin(), hello.end());
  // The receiver may start later than the sender: retry whole connections until the deadline.
  const auto deadline = std::chrono::steady_clock::now() + settings.connect_timeout;
  for (;;) {
    try {
      sender_ = std::make_unique<rdma::RdmaSender>(options);
      break;
    } catch (const std::exception& error) {
      if (std::chrono::steady_clock::now() >= deadline) {
        throw std::runtime_error("roce link, lane " + std::to_string(lane) + ": no receiver reached within " +
                                 std::to_string(settings.connect_timeout.count()) +
                                 " ms; last attempt: " + error.what());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  for (Pool* pool : sources) {
    const MemoryRegion& region = pool->region();
    const ibv_mr& mr = sender_->register_source(region.data(), region.size(), region.kind() == MemoryKind::device,
                                                region.cuda_device());
    owner_ = owner_for(mr);
    pool->add_registration(PoolRegistration{owner_, mr.lkey, mr.rkey, -1});
    sources_.push_back(Source{pool, mr.lkey});
  }
  in_flight_.resize(kMaxOutstanding);
  log::info("link: lane {} connected over roce to {} ({} landing slots of {} bytes)", lane,
            rdma::describe(options.address, options.port), sender_->slot_count(), sender_->slot_bytes());
}

bool RoceSender::collect() noexcept {
  return sender_->poll([this](std::uint64_t cookie) { in_flight_[cookie].reset(); });
}

LinkStatus RoceSender::failure() noexcept {
  error_ = sender_ ? sender_->error() : "not connected";
  return sender_ && sender_->peer_lost() ? LinkStatus::peer_lost : LinkStatus::error;
}

LinkStatus RoceSender::send(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept {
  if (!sender_) return failure();
  std::uint32_t lkey = 0;
  bool registered = false;
  for (const Source& source : sources_) {
    if (source.pool == chunk->pool) {
      lkey = source.lkey;
      registered = true;
    }
  }
  if (!registered) {
    error_ = "chunk from pool " + (chunk->pool ? chunk->pool->name() : std::string("?")) +
             ", which was not among the sources registered at connect";
    return LinkStatus::error;
  }
  std::array<std::byte, kChunkWireBytes> metadata{};
  encode_chunk_metadata(*chunk, std::span<std::byte, kChunkWireBytes>(metadata));
  const auto entered = std::chrono::steady_clock::now();
  const auto deadline = entered + timeout;
  // Time without a credit, or waiting for writes to complete, is backpressure: its stage counts it as waiting.
  const auto waited_since = [this](std::chrono::steady_clock::time_point since) {
    credit_wait_ns_ += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
  };
  for (std::uint32_t idle_rounds = 0;;) {
    if (!collect()) return failure();
    const std::uint64_t cookie = sent_ % in_flight_.size();
    switch (sender_->send(metadata.data(), metadata.size(), chunk->data, chunk->size, lkey, cookie)) {
      case rdma::SendStatus::posted: {
        if (idle_rounds > 0) waited_since(entered);
        Pool* pool = chunk->pool;
        in_flight_[cookie] = std::move(chunk);
        ++sent_;
        // In-flight chunks go back to their pool only while this sender polls, and it polls
        // only when called with the next chunk: never return with the upstream pool empty
        // because of us, or upstream would wait for a chunk we wait to be given.
        const auto posted = std::chrono::steady_clock::now();
        const auto give_back_by = posted + kStepTimeout;  // a live peer completes far sooner
        while (pool->available() == 0 && sender_->in_flight() > 0 && std::chrono::steady_clock::now() < give_back_by) {
          if (!collect()) return failure();
          if (++idle_rounds > kSpinRounds) sender_->wait(left_until(give_back_by));
        }
        waited_since(posted);
        return LinkStatus::ok;
      }
      case rdma::SendStatus::failed:
        return failure();
      case rdma::SendStatus::no_credit:
        break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      waited_since(entered);
      return LinkStatus::idle;
    }
    ++idle_rounds;
    if (idle_rounds > kSpinRounds) sender_->wait(left_until(deadline));
  }
}

LinkStatus RoceSender::finish(std::chrono::milliseconds timeout) noexcept {
  if (!sender_) return failure();
  // The end of stream waits for the receiver to drain its ring and answer: over RC a stopped or
  // starved receiver process still acknowledges writes, so only its answer is slow, and a slow
  // answer is given at least kPatience before the link is called lost.
  if (!collect() || !sender_->finish(std::max(timeout, kPatience))) return failure();
  for (ChunkPtr& chunk : in_flight_) chunk.reset();  // finish() saw every write complete
  return LinkStatus::ok;
}

void RoceSender::abort(std::string_view reason) noexcept {
  if (sender_) sender_->fail(reason);
}

void RoceSender::close() noexcept {
  for (const Source& source : sources_) source.pool->remove_registration(owner_);
  sources_.clear();
  sender_.reset();  // the QP is gone: no write can still read a chunk released below
  for (ChunkPtr& chunk : in_flight_) chunk.reset();
}

void RoceReceiver::listen(const TransportSettings& settings, std::uint32_t lane, Pool& landing) {
  settings_ = settings;
  lane_ = lane;
  rdma::ReceiverOptions options;
  options.address = settings.endpoint.address;
  options.port = settings.endpoint.port;
  options.metadata_bytes = kChunkWireBytes;
  options.timeout = std::min(kStepTimeout, settings.connect_timeout);
  options.heartbeat = heartbeat_for(settings);
  options.lane = lane;
  const MemoryRegion& region = landing.region();
  rdma::LandingRing ring;
  ring.base = region.data();
  ring.slot_bytes = landing.chunk_bytes();
  ring.slot_count = static_cast<std::uint32_t>(landing.chunk_count());
  ring.device = region.kind() == MemoryKind::device;
  ring.cuda_device = region.cuda_device();
  std::string path;
  try {
    receiver_ = std::make_unique<rdma::RdmaReceiver>(options, ring);
    path = receiver_->landing_path();
  } catch (const rdma::LandingUnregistrable& why) {
    // The NIC cannot write GPU memory here: land in host-pinned memory, copy to the GPU slot.
    bounce_ = MemoryRegion(MemoryKind::host_pinned, ring.slot_bytes * ring.slot_count, ring.cuda_device);
    copy_stream_.emplace(ring.cuda_device);
    ring.base = bounce_.data();
    ring.device = false;
    receiver_ = std::make_unique<rdma::RdmaReceiver>(options, ring);
    path = std::string("landing in host-pinned memory, copied to GPU ") + std::to_string(ring.cuda_device) +
           " per chunk, because " + why.what();
  }
  log::info("roce link, lane {}, {}: {}", lane, rdma::describe(options.address, options.port), path);
  landing_ = &landing;
  if (!bounce_.data()) {
    const ibv_mr& mr = receiver_->landing_mr();
    owner_ = owner_for(mr);
    landing.add_registration(PoolRegistration{owner_, mr.lkey, mr.rkey, -1});
  }
  // Every slot belongs to the ring; a slot downstream releases becomes a credit.
  downstream_ = std::make_unique<std::atomic<bool>[]>(landing.chunk_count());
  while (ChunkPtr slot = landing.try_acquire()) static_cast<void>(slot.release());
  landing.set_release_hook([this](Chunk& slot) {
    downstream_[slot.index].store(false, std::memory_order_relaxed);
    receiver_->release(slot.index);
  });
}

std::vector<std::byte> RoceReceiver::accept() {
  if (!receiver_->accept(settings_.connect_timeout)) {
    throw std::runtime_error("roce link: no sender connected within " +
                             std::to_string(settings_.connect_timeout.count()) + " ms");
  }
  log::info("link: lane {} accepted a roce sender on {}", lane_,
            rdma::describe(settings_.endpoint.address, settings_.endpoint.port));
  return receiver_->hello();
}

LinkStatus RoceReceiver::receive(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (std::uint32_t idle_rounds = 0;;) {
    rdma::Arrival arrival;
    switch (receiver_->poll(arrival)) {
      case rdma::ReceiveStatus::arrived: {
        Chunk& slot = landing_->chunk(arrival.slot);
        const ChunkWireStatus status =
            decode_chunk_metadata(std::span<const std::byte>(arrival.metadata, arrival.metadata_bytes), slot);
        if (status != ChunkWireStatus::ok || slot.size != arrival.payload_bytes) {
          error_ = "chunk " + std::to_string(arrival.sequence) +
                   " arrived with bad metadata: " + std::string(to_string(status));
          return LinkStatus::error;
        }
        if (bounce_.data()) {
          if (std::string failed = copy_memory(slot.data, MemoryKind::device, arrival.payload, MemoryKind::host_pinned,
                                               slot.size, copy_stream_->get());
              !failed.empty()) {
            error_ = failed;
            return LinkStatus::error;
          }
        }
        slot.created_ns = monotonic_ns();
        downstream_[arrival.slot].store(true, std::memory_order_relaxed);
        chunk = ChunkPtr(&slot);
        return LinkStatus::ok;
      }
      case rdma::ReceiveStatus::idle:
        break;
      case rdma::ReceiveStatus::end_of_stream:
        return LinkStatus::end_of_stream;
      case rdma::ReceiveStatus::peer_error:
        error_ = "the sender failed: " + receiver_->error();
        return LinkStatus::error;
      case rdma::ReceiveStatus::disconnected:
        error_ = receiver_->error();
        return LinkStatus::peer_lost;
      case rdma::ReceiveStatus::failed:
        error_ = receiver_->error();
        return LinkStatus::error;
    }
    if (std::chrono::steady_clock::now() >= deadline) return LinkStatus::idle;
    if (++idle_rounds > kSpinRounds) receiver_->wait(left_until(deadline));
  }
}

void RoceReceiver::abort(std::string_view reason) noexcept {
  if (receiver_) receiver_->abort(reason);
}

void RoceReceiver::close() noexcept {
  if (landing_ == nullptr) return;
  landing_->set_release_hook({});  // from here on, released slots go to the free list
  for (std::size_t index = 0; index < landing_->chunk_count(); ++index) {
    if (!downstream_[index].load(std::memory_order_relaxed)) landing_->return_to_free_list(landing_->chunk(index));
  }
  if (!owner_.empty()) landing_->remove_registration(owner_);
  receiver_.reset();
  landing_ = nullptr;
}

void register_roce_transport(std::vector<TransportKind>& kinds) {
  kinds.push_back(TransportKind{LinkTransport::roce, [] { return std::make_unique<RoceSender>(); },
                                [] { return std::make_unique<RoceReceiver>(); }, roce_unavailable_reason});
}

}  // namespace sluice
