// tcp link transport: the handshake over several connections, the writer and reader
// threads, credits, and chunks put back in order.
#include "stages/link/tcp_transport.hpp"

#include <stdexcept>
#include <thread>

#include "pipeline/clock.hpp"
#include "pipeline/log.hpp"

namespace sluice {
namespace {
// How long a half whose own write failed waits for its reader to take what the peer sent
// before (its chunks, its error frame): the peer's reason is worth more than "Broken pipe".
constexpr std::chrono::milliseconds kSettle{500};

constexpr std::uint32_t kProtocolVersion = 2;
constexpr std::size_t kMaxHelloBytes = 64 * 1024;
constexpr std::uint32_t kMaxConnections = 64;
// Pinned buffers per connection for device chunks: one being written, one being filled.
constexpr std::size_t kStagingPerConnection = 2;
// How often a writer looks whether the copy of the chunk it writes next has finished.
constexpr auto kCopyPoll = std::chrono::microseconds(20);

}  // namespace

// ---- TcpSender ----

void TcpSender::connect(const TransportSettings& settings, std::uint32_t lane, const std::vector<Pool*>& sources,
                        std::span<const std::byte> hello) {
  if (hello.size() > kMaxHelloBytes) throw std::runtime_error("link hello too large");
  if (settings.connections == 0 || settings.connections > kMaxConnections) {
    throw std::runtime_error("link connections must be 1 to " + std::to_string(kMaxConnections));
  }
  open_streams(settings, lane, hello);
  credits_ = slot_count_;
  for (const Pool* pool : sources) {
    if (pool->memory() != MemoryKind::device || device_sources_) continue;
    device_sources_ = true;
    for (auto& stream : streams_) {
      for (std::size_t i = 0; i < kStagingPerConnection; ++i) {
        stream->staging.emplace_back(MemoryKind::host_pinned, slot_bytes_);
        stream->free_staging.push_back(static_cast<int>(i));
      }
      stream->gpu = GpuStream(pool->region().cuda_device(), kStagingPerConnection + 1);
    }
  }
  heard_ns_ = monotonic_ns();
  for (auto& stream : streams_) {
    stream->queue.resize(slot_count_ + 1);  // every credit, and the job a writer still holds after its credit came back
    stream->reader = std::thread([this, &stream = *stream] { read_loop(stream); });
    stream->writer = std::thread([this, &stream = *stream] { write_loop(stream); });
  }
  log::info("link: lane {} connected over tcp to {} with {} connection(s) ({} landing slots of {} bytes)", lane,
            endpoint_text(settings.endpoint), streams_.size(), slot_count_, slot_bytes_);
}

// The handshake: hello and welcome on the first connection, then a join on each further one.
void TcpSender::open_streams(const TransportSettings& settings, std::uint32_t lane, std::span<const std::byte> hello) {
  const std::string where = endpoint_text(settings.endpoint);
  auto first = std::make_unique<Stream>(failure_);
  first->connection.adopt(connect_link_socket(settings), settings.peer_timeout);
  const std::uint64_t hello_value = (static_cast<std::uint64_t>(lane) << 32) |
                                    (static_cast<std::uint64_t>(settings.connections) << 24) | hello.size();
  if (!first->connection.send({TcpConnection::Frame::hello, kProtocolVersion, hello_value}, hello)) {
    throw std::runtime_error("sending hello to " + where + ": " + failure_.text());
  }
  TcpConnection::Header reply;
  if (!first->connection.read_header(reply, stop_)) {
    throw std::runtime_error("waiting for the receiver at " + where + ": " + failure_.text());
  }
  if (reply.type == TcpConnection::Frame::error) {
    const std::string text = first->connection.read_error_text(reply, stop_);
    throw std::runtime_error("receiver at " + where + " refused the link: " + text);
  }
  if (reply.type != TcpConnection::Frame::welcome || reply.aux == 0 || reply.value == 0) {
    throw std::runtime_error("receiver at " + where +
                             " answered with an unexpected frame (not a sluice link receiver?)");
  }
  slot_count_ = reply.aux;
  slot_bytes_ = static_cast<std::size_t>(reply.value);
  streams_.push_back(std::move(first));
  for (std::uint32_t index = 1; index < settings.connections; ++index) {
    auto stream = std::make_unique<Stream>(failure_);
    stream->connection.adopt(connect_link_socket(settings), settings.peer_timeout);
    if (!stream->connection.send(
            {TcpConnection::Frame::join, kProtocolVersion, (static_cast<std::uint64_t>(lane) << 32) | index})) {
      throw std::runtime_error("joining connection " + std::to_string(index) + " to " + where + ": " + failure_.text());
    }
    streams_.push_back(std::move(stream));
  }
}

void TcpSender::read_loop(Stream& stream) noexcept {
  TcpConnection::Header header;
  while (stream.connection.read_header(header, stop_)) {
    {
      std::lock_guard lock(mutex_);
      heard_ns_ = monotonic_ns();
      if (header.type == TcpConnection::Frame::credit) credits_ += header.value;
      if (header.type == TcpConnection::Frame::end_ack) ++ends_acknowledged_;
    }
    if (header.type == TcpConnection::Frame::end_ack) break;  // this connection is done: its closing is no failure
    if (header.type == TcpConnection::Frame::error) {
      const std::string text = stream.connection.read_error_text(header, stop_);
      failure_.set_peer_error("receiver failed: " + text);
      break;
    }
    if (header.type != TcpConnection::Frame::credit && header.type != TcpConnection::Frame::heartbeat) {
      failure_.set(LinkStatus::error, "protocol error: unexpected frame " +
                                          std::to_string(static_cast<std::uint32_t>(header.type)) + " from receiver");
      break;
    }
    changed_.notify_all();
  }
  {
    std::lock_guard lock(mutex_);
    ++readers_done_;
  }
  changed_.notify_all();
}

void TcpSender::write_loop(Stream& stream) noexcept {
  for (;;) {
    std::size_t queued = 0;
    {
      std::unique_lock lock(mutex_);
      stream.queued.wait(lock, [&] { return stream.count > 0 || closing_; });
      if (stream.count == 0) return;
      queued = stream.count;
    }
    // The jobs from head on stay put while this thread works on them: send() only appends behind.
    start_copies(stream, queued);
    write_job(stream, stream.queue[stream.head]);
    bool emptied = false;
    {
      std::lock_guard lock(mutex_);
      stream.head = (stream.head + 1) % stream.queue.size();
      emptied = --stream.count == 0;
    }
    if (emptied || failure_.failed()) changed_.notify_all();  // what finish() and send() wait for
  }
}

// The one place device bytes leave the GPU for the link: each queued device chunk that finds
// a free pinned buffer is copied into it on this connection's stream, after the producer's
// work on it, while this thread goes on writing the chunks before it.
void TcpSender::start_copies(Stream& stream, std::size_t queued) noexcept {
  for (; stream.prepared < queued; ++stream.prepared) {
    Job& job = stream.queue[(stream.head + stream.prepared) % stream.queue.size()];
    if (job.chunk->memory != MemoryKind::device || job.bytes == 0) continue;
    if (stream.free_staging.empty()) return;
    job.staging = stream.free_staging.back();
    stream.free_staging.pop_back();
    std::byte* staging = stream.staging[static_cast<std::size_t>(job.staging)].data();
    if (stream.gpu.wait_for(*job.chunk) && stream.gpu.copy(staging, job.chunk->data, job.bytes)) {
      job.fence = stream.gpu.fence();
    }
    if (!stream.gpu.error().empty()) failure_.set(LinkStatus::error, "copying a device chunk: " + stream.gpu.error());
  }
}

// Writes the job at the head of the queue (once its copy finished) and lets go of its chunk.
void TcpSender::write_job(Stream& stream, Job& job) noexcept {
  const bool staged = job.staging >= 0;
  if (staged) {
    // Copies finish in order on the stream, and the ones behind this one keep running meanwhile.
    while (!stream.gpu.reached(job.fence)) std::this_thread::sleep_for(kCopyPoll);
    if (!stream.gpu.error().empty()) failure_.set(LinkStatus::error, "copying a device chunk: " + stream.gpu.error());
    job.chunk.reset();  // its bytes are in the pinned copy: the GPU slot is free again
  }
  if (!failure_.failed()) {
    const std::byte* payload = staged ? stream.staging[static_cast<std::size_t>(job.staging)].data() : job.chunk->data;
    const std::uint64_t began = monotonic_ns();
    const std::uint64_t cpu_began = thread_cpu_ns();
    stream.connection.send({TcpConnection::Frame::chunk, job.sequence, job.bytes}, job.metadata,
                           std::span(payload, job.bytes));
    writing_cpu_ns_.fetch_add(thread_cpu_ns() - cpu_began, std::memory_order_relaxed);
    writing_ns_.fetch_add(monotonic_ns() - began, std::memory_order_relaxed);
  }
  job.chunk.reset();  // its bytes are in the kernel's send buffer: the upstream slot is free again
  if (staged) stream.free_staging.push_back(job.staging);
  job.staging = -1;
  if (stream.prepared > 0) --stream.prepared;
}

LinkStatus TcpSender::send(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept {
  if (chunk->memory == MemoryKind::device && !device_sources_) {
    failure_.set(LinkStatus::error, "a device-memory chunk from a pool that was not among the lane's pools at connect");
    return LinkStatus::error;
  }
  {
    std::unique_lock lock(mutex_);
    if (credits_ == 0 && !failure_.failed()) {
      // Backpressure from the receiver: time its stage counts as waiting, not as work.
      const std::uint64_t began = monotonic_ns();
      changed_.wait_for(lock, timeout, [&] { return failure_.failed() || credits_ > 0; });
      credit_wait_ns_ += monotonic_ns() - began;
    }
    if (failure_.failed()) return settled_failure(lock);
    if (credits_ == 0) return LinkStatus::idle;
    --credits_;
  }
  Job job;
  job.sequence = next_sequence_;
  job.bytes = chunk->size;
  encode_chunk_metadata(*chunk, job.metadata);
  job.chunk = std::move(chunk);
  Stream& stream = *streams_[next_sequence_ % streams_.size()];
  ++next_sequence_;
  {
    std::lock_guard lock(mutex_);
    stream.queue[(stream.head + stream.count) % stream.queue.size()] = std::move(job);
    ++stream.count;
  }
  stream.queued.notify_one();
  return LinkStatus::ok;
}

LinkStatus TcpSender::settled_failure(std::unique_lock<std::mutex>& lock) noexcept {
  changed_.wait_for(lock, kSettle,
                    [this] { return failure_.status() == LinkStatus::error || readers_done_ == streams_.size(); });
  return failure_.status();
}

bool TcpSender::queues_empty() const noexcept {
  for (const auto& stream : streams_) {
    if (stream->count > 0) return false;
  }
  return true;
}

LinkStatus TcpSender::finish(std::chrono::milliseconds timeout) noexcept {
  std::unique_lock lock(mutex_);
  // Each writer either makes progress or fails within peer_timeout: this wait ends.
  changed_.wait(lock, [this] { return failure_.failed() || queues_empty(); });
  if (failure_.failed()) return settled_failure(lock);
  lock.unlock();
  for (auto& stream : streams_) {
    if (!stream->connection.send({TcpConnection::Frame::end, 0, 0})) {
      lock.lock();
      return settled_failure(lock);
    }
  }
  // The receiver acknowledges on each connection once it has read every chunk before the
  // end, however long the bytes still in flight take; its heartbeats and credits say it is alive.
  lock.lock();
  heard_ns_ = monotonic_ns();  // silence counts from the end frames on
  const auto done = [this] { return ends_acknowledged_ == streams_.size() || failure_.failed(); };
  while (!done() && monotonic_ns() - heard_ns_ <= to_ns(timeout)) changed_.wait_for(lock, timeout / 4, done);
  if (ends_acknowledged_ == streams_.size()) return LinkStatus::ok;
  if (failure_.failed()) return failure_.status();
  failure_.set(LinkStatus::peer_lost, "receiver silent for " + std::to_string(timeout.count()) +
                                          " ms without acknowledging the end of stream");
  return LinkStatus::peer_lost;
}

void TcpSender::abort(std::string_view reason) noexcept {
  if (!streams_.empty()) streams_.front()->connection.send_error(reason);
}

void TcpSender::close() noexcept {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  for (auto& stream : streams_) stream->queued.notify_all();
  // Writers send what is queued while the link is healthy (each send progresses or fails
  // within peer_timeout); after a failure there is nobody to send to.
  if (failure_.failed()) {
    for (auto& stream : streams_) stream->connection.shutdown();
  }
  for (auto& stream : streams_) {
    if (stream->writer.joinable()) stream->writer.join();
  }
  stop_.store(true, std::memory_order_release);
  for (auto& stream : streams_) stream->connection.shutdown();
  for (auto& stream : streams_) {
    if (stream->reader.joinable()) stream->reader.join();
    stream->connection.close();
  }
}

// ---- TcpReceiver ----

void TcpReceiver::listen(const TransportSettings& settings, std::uint32_t lane, Pool& landing) {
  settings_ = settings;
  lane_ = lane;
  listener_ = listen_link_socket(settings, static_cast<int>(kMaxConnections));
  landing_ = &landing;
  free_slots_.reserve(landing.chunk_count());
  landed_.assign(landing.chunk_count(), nullptr);
  while (ChunkPtr slot = landing.try_acquire()) free_slots_.push_back(slot.release());
  if (free_slots_.size() != landing.chunk_count())
    throw std::runtime_error("landing ring " + landing.name() + " is in use");
  landing.set_release_hook([this](Chunk& chunk) { slot_released(chunk); });
}

std::unique_ptr<TcpReceiver::Stream> TcpReceiver::accept_stream() {
  auto stream = std::make_unique<Stream>(failure_);
  stream->connection.adopt(accept_link_socket(listener_.get(), settings_), settings_.peer_timeout);
  if (landing_->memory() == MemoryKind::device) {
    stream->staging = MemoryRegion(MemoryKind::host_pinned, landing_->chunk_bytes());
    stream->copy_stream = CudaStream(landing_->region().cuda_device());
  }
  return stream;
}

std::vector<std::byte> TcpReceiver::accept() {
  const std::string where = endpoint_text(settings_.endpoint);
  streams_.push_back(accept_stream());
  TcpConnection& first = streams_.front()->connection;
  TcpConnection::Header hello;
  if (!first.read_header(hello, stop_)) throw std::runtime_error("waiting for the sender's hello: " + failure_.text());
  const auto refuse = [&](const std::string& why) {
    first.send({TcpConnection::Frame::error, 0, why.size()}, std::as_bytes(std::span(why.data(), why.size())));
    throw std::runtime_error("refused the sender on " + where + ": " + why);
  };
  if (hello.type != TcpConnection::Frame::hello) refuse("first frame is not a hello (not a sluice link sender?)");
  if (hello.aux != kProtocolVersion) {
    refuse("link protocol version " + std::to_string(hello.aux) + ", this receiver speaks " +
           std::to_string(kProtocolVersion) + " (run the same Sluice version on both nodes)");
  }
  const auto sender_lane = static_cast<std::uint32_t>(hello.value >> 32);
  const auto connections = static_cast<std::uint32_t>((hello.value >> 24) & 0xFF);
  const std::size_t hello_bytes = hello.value & 0xFFFFFF;
  if (sender_lane != lane_) {
    refuse("sender carries lane #" + std::to_string(sender_lane) + " but this receiver is lane #" +
           std::to_string(lane_) + " (two lanes' addresses crossed?)");
  }
  if (connections == 0 || connections > kMaxConnections)
    refuse("connections " + std::to_string(connections) + " out of range");
  if (hello_bytes > kMaxHelloBytes) refuse("hello too large");
  std::vector<std::byte> body(hello_bytes);
  if (!first.read_exact(body, stop_)) throw std::runtime_error("reading the sender's hello: " + failure_.text());
  if (!first.send({TcpConnection::Frame::welcome, static_cast<std::uint32_t>(landing_->chunk_count()),
                   landing_->chunk_bytes()})) {
    throw std::runtime_error("answering the sender: " + failure_.text());
  }
  join_streams(connections);
  listener_.reset();  // one sender per lane: a second one is refused, not interleaved
  for (auto& stream : streams_) stream->reader = std::thread([this, &stream = *stream] { read_loop(stream); });
  log::info("link: lane {} accepted a tcp sender on {} with {} connection(s)", lane_, where, connections);
  return body;
}

// The sender's further connections, each naming its lane and its place in the rotation.
void TcpReceiver::join_streams(std::size_t connections) {
  streams_.resize(connections);
  for (std::size_t joined = 1; joined < connections; ++joined) {
    std::unique_ptr<Stream> stream = accept_stream();
    TcpConnection::Header join;
    if (!stream->connection.read_header(join, stop_))
      throw std::runtime_error("waiting for a join: " + failure_.text());
    const auto index = static_cast<std::size_t>(join.value & 0xFFFFFFFF);
    if (join.type != TcpConnection::Frame::join || join.aux != kProtocolVersion || (join.value >> 32) != lane_ ||
        index == 0 || index >= connections || streams_[index]) {
      const std::string why = "a further connection on lane #" + std::to_string(lane_) + " did not join as expected";
      stream->connection.send({TcpConnection::Frame::error, 0, why.size()},
                              std::as_bytes(std::span(why.data(), why.size())));
      throw std::runtime_error("refused a connection on " + endpoint_text(settings_.endpoint) + ": " + why);
    }
    streams_[index] = std::move(stream);
  }
}

void TcpReceiver::slot_released(Chunk& chunk) noexcept {
  {
    std::lock_guard lock(mutex_);
    free_slots_.push_back(&chunk);
  }
  // A lost connection is reported by the reader; the credit then has nowhere to go.
  if (!failure_.failed() && !stop_.load(std::memory_order_acquire)) {
    streams_.front()->connection.send({TcpConnection::Frame::credit, 0, 1});
  }
}

void TcpReceiver::read_loop(Stream& stream) noexcept {
  TcpConnection::Header header;
  while (stream.connection.read_header(header, stop_)) {
    if (header.type == TcpConnection::Frame::heartbeat) continue;
    if (header.type == TcpConnection::Frame::end) {
      // Acknowledge before receive() can report the end: the stage closes the connection
      // right after, and an acknowledgement sent later would be lost with it.
      stream.connection.send({TcpConnection::Frame::end_ack, 0, 0});
      {
        std::lock_guard lock(mutex_);
        ++ends_;
      }
      break;
    }
    if (header.type == TcpConnection::Frame::error) {
      const std::string text = stream.connection.read_error_text(header, stop_);
      failure_.set_peer_error("sender failed: " + text);
      break;
    }
    if (header.type != TcpConnection::Frame::chunk) {
      failure_.set(LinkStatus::error, "protocol error: unexpected frame " +
                                          std::to_string(static_cast<std::uint32_t>(header.type)) + " from sender");
      break;
    }
    if (!read_chunk(stream, header)) break;
    changed_.notify_all();
  }
  {
    std::lock_guard lock(mutex_);
    ++readers_done_;
  }
  changed_.notify_all();
}

// One chunk frame's body into a free landing slot, filed under its sequence. False ends the reader.
bool TcpReceiver::read_chunk(Stream& stream, const TcpConnection::Header& header) noexcept {
  Chunk* slot = nullptr;
  const std::uint32_t sequence = header.aux;
  {
    std::lock_guard lock(mutex_);
    if (free_slots_.empty()) {
      failure_.set(LinkStatus::error, "protocol error: sender sent a chunk without a credit");
      return false;
    }
    if (sequence - next_sequence_ >= landed_.size() || landed_[sequence % landed_.size()] != nullptr) {
      failure_.set(LinkStatus::error, "protocol error: chunk " + std::to_string(sequence) + " out of order");
      return false;
    }
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  const auto fail = [&](std::string why) {
    if (!why.empty()) failure_.set(LinkStatus::error, std::move(why));
    std::lock_guard lock(mutex_);
    free_slots_.push_back(slot);
    return false;
  };
  std::array<std::byte, kChunkWireBytes> metadata{};
  if (!stream.connection.read_exact(metadata, stop_)) return fail({});
  if (const ChunkWireStatus status = decode_chunk_metadata(metadata, *slot); status != ChunkWireStatus::ok) {
    return fail("chunk from sender: " + std::string(to_string(status)));
  }
  if (slot->size != header.value || slot->size > slot->capacity) {
    return fail("chunk of " + std::to_string(header.value) + " bytes does not fit a " + std::to_string(slot->capacity) +
                "-byte landing slot");
  }
  const bool device = slot->memory == MemoryKind::device;
  if (!stream.connection.read_exact(std::span(device ? stream.staging.data() : slot->data, slot->size), stop_))
    return fail({});
  if (device) {
    if (std::string error = copy_memory(slot->data, slot->memory, stream.staging.data(), MemoryKind::host_pinned,
                                        slot->size, stream.copy_stream.get());
        !error.empty()) {
      return fail(error);
    }
  }
  std::lock_guard lock(mutex_);
  landed_[sequence % landed_.size()] = slot;
  return true;
}

LinkStatus TcpReceiver::receive(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept {
  std::unique_lock lock(mutex_);
  const auto next = [this]() -> Chunk*& { return landed_[next_sequence_ % landed_.size()]; };
  const auto ended = [this] { return ends_ == streams_.size(); };
  changed_.wait_for(lock, timeout, [&] { return next() != nullptr || ended() || failure_.failed(); });
  // A credit write that failed first (peer_lost) may come before the sender's last chunks or its
  // error frame reach the readers: let them take them before reporting.
  if (next() == nullptr && !ended() && failure_.status() == LinkStatus::peer_lost && readers_done_ < streams_.size()) {
    changed_.wait_for(lock, kSettle, [&] { return readers_done_ == streams_.size() || next() != nullptr; });
  }
  if (next() != nullptr) {
    chunk = ChunkPtr(std::exchange(next(), nullptr));
    ++next_sequence_;
    return LinkStatus::ok;
  }
  if (ended()) return LinkStatus::end_of_stream;
  return failure_.failed() ? failure_.status() : LinkStatus::idle;
}

void TcpReceiver::abort(std::string_view reason) noexcept {
  if (!streams_.empty()) streams_.front()->connection.send_error(reason);
}

void TcpReceiver::close() noexcept {
  bool ended = false;
  {
    std::lock_guard lock(mutex_);
    ended = !streams_.empty() && ends_ == streams_.size();
  }
  if (ended) {
    // Every reader stopped at its end frame: let the sender take the acknowledgements and close
    // first, so that closing here never resets a connection whose acknowledgement is in flight.
    for (auto& stream : streams_) {
      if (!stream) continue;
      if (stream->reader.joinable()) stream->reader.join();
      stream->connection.linger();
    }
  }
  stop_.store(true, std::memory_order_release);
  for (auto& stream : streams_) {
    if (stream) stream->connection.shutdown();
  }
  for (auto& stream : streams_) {
    if (!stream) continue;
    if (stream->reader.joinable()) stream->reader.join();
    stream->connection.close();
  }
  listener_.reset();
  if (landing_ == nullptr) return;
  landing_->set_release_hook({});
  std::lock_guard lock(mutex_);
  for (Chunk* slot : free_slots_) landing_->return_to_free_list(*slot);
  free_slots_.clear();
  for (Chunk*& slot : landed_) {
    if (slot != nullptr) landing_->return_to_free_list(*std::exchange(slot, nullptr));
  }
  landing_ = nullptr;
}

}  // namespace sluice
