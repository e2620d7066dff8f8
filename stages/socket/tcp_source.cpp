// The tcp source: a header/payload state machine over a blocking socket polled with a
// short timeout, so stop requests are seen promptly.
#include "stages/socket/tcp_source.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "pipeline/config.hpp"
#include "pipeline/log.hpp"
#include "wire/vita49.hpp"

namespace sluice {

TcpSource::TcpSource(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.address =
      reader.string("address", settings_.address, "server: host:port to listen on; client: sender to connect to");
  settings_.mode = reader.choice("mode", TcpMode::server, "server (listen for the sender) or client (connect to it)",
                                 {{"server", TcpMode::server}, {"client", TcpMode::client}});
  settings_.framing =
      reader.choice("framing", TcpFraming::raw_tcp,
                    "raw_tcp (framed: exact loss) or none (bare samples, e.g. GNU Radio network.tcp_sink: "
                    "a loss while disconnected cannot be detected)",
                    {{"raw_tcp", TcpFraming::raw_tcp}, {"none", TcpFraming::none}});
  if (settings_.framing == TcpFraming::none) {
    for (const char* key : {"max_jump", "resync_after"}) {
      if (reader.has(key)) {
        reader.error(key, std::string(key) + " needs frame positions, which framing none does not have",
                     "use framing raw_tcp");
      }
    }
  }
  settings_.format = reader.choice("format", SampleFormat::ci16, "sample format expected in the frames",
                                   {{"ci16", SampleFormat::ci16}, {"cf32", SampleFormat::cf32}});
  settings_.sample_rate =
      reader.frequency("sample_rate", 100e6, "sample rate (whole Hz), for chunk timestamps", 1, 1e11);
  settings_.max_frame =
      reader.bytes("max_frame", settings_.max_frame, "largest frame payload accepted (framing none: bytes per receive)",
                   64, raw_tcp::kMaxPayloadBytes);
  settings_.receive_buffer =
      reader.bytes("receive_buffer", settings_.receive_buffer,
                   "socket receive buffer (SO_RCVBUF, set before listen/connect so it sizes the window)", 4096,
                   wire::kMaxReceiveBuffer);
  settings_.max_jump = reader.duration(
      "max_jump", settings_.max_jump,
      "a frame further than this from the stream (first_sample) is an outlier, unless resync_after agree");
  settings_.resync_after = static_cast<std::size_t>(reader.integer(
      "resync_after", 4, "consecutive agreeing outliers that make a resynchronisation (a new segment)", 1, 64));
  // On by default: raw TCP framing has no end-of-stream marker, so a sensor that dropped its
  // connection and one that finished look the same; ending would lose the rest of the recording.
  settings_.reconnect =
      reader.boolean("reconnect", true,
                     "after the sender closes, wait for it to connect again (the frames in between a gap); "
                     "false: its close ends the stream (raw TCP has no end-of-stream marker, so a drop "
                     "ends it too). A connection without one valid frame never ends it");
  settings_.idle_timeout = reader.duration(
      "idle_timeout", settings_.idle_timeout,
      "server: a connection that sends no valid frame header this long is closed (idle_connection; bytes that are no "
      "header close it at once: garbage_connection); one sender is served at a time: a second one that sends a valid "
      "header waits, is served when the first closes, and is closed after this long otherwise (second_sender)");
  if (settings_.idle_timeout < std::chrono::milliseconds(10) || settings_.idle_timeout > std::chrono::hours(1)) {
    reader.error("idle_timeout", "must be between 10ms and 1h", "e.g. 5s");
  }
  if (settings_.mode == TcpMode::client && reader.has("idle_timeout")) {
    reader.error("idle_timeout", "applies to mode server, which accepts connections", "remove it, or set mode: server");
  }
  if (settings_.max_jump.count() <= 0) reader.error("max_jump", "must be above 0", "e.g. 1s");
  settings_.pool = read_pool_settings(reader, pipeline, PoolWriter::host_writes);
  if (settings_.sample_rate != std::floor(settings_.sample_rate))
    reader.error("sample_rate", "sample rate must be a whole number of Hz");
  if (!wire::parse_endpoint(settings_.address)) reader.error("address", "expected IPv4 host:port", "127.0.0.1:50000");
}

void TcpSource::start(StageContext& context) {
  context_ = &context;
  if (settings_.mode == TcpMode::server) {
    open_listener(context);
  } else {
    // The client's socket is made here so that a buffer the kernel caps is noted at start.
    socket_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!socket_.valid()) throw std::runtime_error(wire::errno_message("socket(AF_INET, SOCK_STREAM)"));
    const std::string note = wire::set_receive_buffer(socket_.get(), settings_.receive_buffer);
    log::info("{}: {}", context.stage_name(), note);
    context.metrics().notes.push_back(note);
  }
  payload_.assign(settings_.max_frame, std::byte{0});
  pending_.start(context.metrics(),
                 {settings_.idle_timeout, settings_.max_frame, settings_.framing == TcpFraming::raw_tcp});
  connections_ = &context.metrics().counter("connections");
  disconnects_ = &context.metrics().counter("disconnects");
  history_.start(context.metrics());
  drop_bad_magic_ = &context.metrics().drop_counter("bad_magic");
  drop_partial_sample_ = &context.metrics().drop_counter("partial_sample");
  drop_bad_header_ = &context.metrics().drop_counter("bad_header");
  drop_wrong_format_ = &context.metrics().drop_counter("wrong_format");
  Pool& pool = context.create_pool("out", settings_.pool.spec(context.cuda_device()));
  assembler_.start(context, pool, settings_.format, static_cast<std::uint64_t>(settings_.sample_rate), false);
  const double jump_samples = std::chrono::duration<double>(settings_.max_jump).count() * settings_.sample_rate;
  guard_.start(context.metrics(), static_cast<std::uint64_t>(std::max(1.0, jump_samples)), settings_.resync_after,
               settings_.max_frame);
  describe_stream(context);
}

// Server: the listener, non-blocking, so that connections are accepted whenever the stage
// looks, never waited for.
void TcpSource::open_listener(StageContext& context) {
  const auto address = wire::parse_endpoint(settings_.address);
  listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener_.valid()) throw std::runtime_error(wire::errno_message("socket(AF_INET, SOCK_STREAM)"));
  const int one = 1;
  if (::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    throw std::runtime_error(wire::errno_message("setsockopt(SO_REUSEADDR)"));
  }
  // Accepted sockets inherit the listener's buffer, and the window scale is fixed in the
  // handshake: set later, a large buffer could not open the window.
  const std::string note = wire::set_receive_buffer(listener_.get(), settings_.receive_buffer);
  log::info("{}: {}", context.stage_name(), note);
  context.metrics().notes.push_back(note);
  if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(sockaddr_in)) != 0) {
    throw std::runtime_error(wire::errno_message("bind(" + settings_.address + ")"));
  }
  if (::listen(listener_.get(), static_cast<int>(PendingConnections::kCapacity)) != 0) {
    throw std::runtime_error(wire::errno_message("listen"));
  }
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  if (::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    throw std::runtime_error(wire::errno_message("getsockname"));
  }
  port_ = ntohs(bound.sin_port);
}

// The stream's rate, format and description, and the notes on what a close or a loss means.
void TcpSource::describe_stream(StageContext& context) {
  context.stream.sample_rate = settings_.sample_rate;
  context.stream.format = settings_.format;
  context.metrics().notes.push_back(
      settings_.reconnect
          ? "reconnect: a sender that closes is waited for again (raw TCP has no end-of-stream marker); "
            "the run ends on Ctrl-C, duration, or reconnect: false"
          : "reconnect: false: the sender's first close after valid frames ends the stream, also a drop");
  const std::string from =
      std::string(settings_.mode == TcpMode::server ? "from peer of " : "from ") + settings_.address;
  if (settings_.framing == TcpFraming::raw_tcp) {
    context.stream.description = "raw TCP " + from;
  } else {
    context.stream.description = "bare " + std::string(to_string(settings_.format)) + " samples over TCP " + from +
                                 ": no timestamps, and a loss while disconnected cannot be detected";
    context.metrics().notes.push_back(
        "framing none: samples lost while the sender was disconnected cannot be detected");
  }
}

bool TcpSource::connect() noexcept {
  const auto address = wire::parse_endpoint(settings_.address);
  if (!socket_.valid()) {
    // After a failed connect or a closed connection: a fresh socket, its buffer set first.
    socket_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!socket_.valid()) return false;
    try {
      (void)wire::set_receive_buffer(socket_.get(), settings_.receive_buffer);  // noted at start
    } catch (const std::exception& error) {
      log::warn("{}: {}", context_->stage_name(), error.what());
    }
  }
  if (::connect(socket_.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(sockaddr_in)) != 0) {
    socket_.reset();
    ::poll(nullptr, 0, 10);  // the sender may not be listening yet
    return false;
  }
  valid_frames_ = 0;
  placed_frames_ = 0;
  connected_ = true;
  connections_->add();
  log::debug("{}: connected ({})", context_->stage_name(), settings_.address);
  return true;
}

StageStatus TcpSource::accept_senders() noexcept {
  const auto now = PendingConnections::Clock::now();
  // While a sender is served, the others are looked at every few milliseconds.
  next_sweep_ = now + std::chrono::milliseconds(5);
  pending_.service(listener_.get(), now, connected_);
  if (connected_) return StageStatus::ok;
  PendingConnections::Sender sender;
  if (pending_.take_sender(sender)) return serve(sender);
  StageStatus status = StageStatus::idle;
  (void)wait_readable(status);
  return status;
}

StageStatus TcpSource::serve(PendingConnections::Sender& sender) noexcept {
  socket_ = std::move(sender.socket);
  connected_ = true;
  valid_frames_ = 0;
  placed_frames_ = 0;
  reading_ = Reading::header;
  resyncing_ = false;
  log::debug("{}: serving a sender on {}", context_->stage_name(), settings_.address);
  if (settings_.framing == TcpFraming::none) {
    valid_frames_ = 1;  // any bytes are samples: this sender is the sensor
    std::copy_n(sender.bytes.begin(), sender.have, payload_.begin());
    have_ = sender.have;
    return StageStatus::ok;
  }
  std::copy(sender.bytes.begin(), sender.bytes.end(), header_bytes_.begin());
  have_ = sender.have;
  return header_received();
}

bool TcpSource::wait_readable(StageStatus& status) noexcept {
  std::array<pollfd, PendingConnections::kCapacity + 2> waiting{};
  std::size_t count = 0;
  if (connected_) waiting[count++] = pollfd{socket_.get(), POLLIN, 0};
  if (listener_.valid()) {
    waiting[count++] = pollfd{listener_.get(), POLLIN, 0};
    count += pending_.poll_set(std::span<pollfd>(waiting).subspan(count));
  }
  int ready = 0;
  {
    // Nothing to read yet: wait for it, timed as the stage's wait rather than its busy time.
    const WaitTimer timer(context_->metrics());
    ready = ::poll(waiting.data(), count, 10);
  }
  if (ready < 0 && errno != EINTR) {
    context_->fail(wire::errno_message("poll"));
    status = StageStatus::error;
    return false;
  }
  const std::size_t others = connected_ ? 1 : 0;
  for (std::size_t i = others; ready > 0 && i < count; ++i) {
    if (waiting[i].revents != 0) next_sweep_ = {};  // a new or pending connection: look at it now
  }
  return connected_ && ready > 0 && waiting[0].revents != 0;
}

StageStatus TcpSource::disconnected() noexcept {
  if (settings_.framing == TcpFraming::none && have_ != 0) drop_partial_sample_->add();  // the sender cut a sample
  socket_.reset();
  connected_ = false;
  reading_ = Reading::header;
  have_ = 0;
  resyncing_ = false;
  disconnects_->add();
  assembler_.flush();
  if (valid_frames_ > 0 && !settings_.reconnect) return StageStatus::end_of_stream;  // the sender closed the stream
  if (settings_.framing == TcpFraming::none) {
    log::warn("{}: connection closed; waiting for the sender", context_->stage_name());
  } else {
    log::warn(
        "{}: connection closed after {} frame(s) with a valid header, {} of them placed in the stream (the "
        "others are drops: duplicate, late, outlier, wrong_format); waiting for the sender",
        context_->stage_name(), valid_frames_, placed_frames_);
  }
  return StageStatus::idle;
}

void TcpSource::start_drain() noexcept {
  draining_ = true;
  drain_left_ = connected_ ? wire::receive_buffer_bytes(socket_.get()).value_or(0) : 0;
}

StageStatus TcpSource::drain_next() noexcept {
  pollfd readable{socket_.get(), POLLIN, 0};
  if (!connected_ || drain_left_ == 0 || ::poll(&readable, 1, 0) <= 0) {
    assembler_.flush();
    return StageStatus::end_of_stream;
  }
  return receive_next();
}

StageStatus TcpSource::process() {
  if (context_->stop_requested() && !draining_) start_drain();
  if (draining_) return drain_next();
  if (settings_.mode == TcpMode::server) {
    if (!connected_ || PendingConnections::Clock::now() >= next_sweep_) {
      const StageStatus status = accept_senders();
      if (!connected_ || status != StageStatus::ok) return status;
    }
  } else if (!connected_) {
    return connect() ? StageStatus::ok : StageStatus::idle;
  }
  pollfd readable{socket_.get(), POLLIN, 0};
  const int ready = ::poll(&readable, 1, 0);
  if (ready < 0 && errno != EINTR) {
    context_->fail(wire::errno_message("poll"));
    return StageStatus::error;
  }
  if (ready <= 0) {
    StageStatus status = StageStatus::idle;
    if (!wait_readable(status)) return status;
  }
  return receive_next();
}

StageStatus TcpSource::receive_next() noexcept {
  if (settings_.framing == TcpFraming::none) return receive_bare();

  std::byte* target = nullptr;
  std::size_t wanted = 0;
  if (reading_ == Reading::header) {
    target = header_bytes_.data() + have_;
    // While hunting for the next magic, read byte by byte so nothing past it is consumed.
    wanted = resyncing_ ? 1 : raw_tcp::kHeaderBytes - have_;
  } else {
    target = payload_.data() + have_;
    wanted = frame_.payload_bytes - have_;
  }
  StageStatus outcome = StageStatus::ok;
  if (!receive(target, wanted, outcome)) return outcome;
  if (reading_ == Reading::header) return header_received();
  if (have_ < frame_.payload_bytes) return StageStatus::ok;
  if (reading_ == Reading::payload) frame_received();
  reading_ = Reading::header;
  have_ = 0;
  return StageStatus::ok;
}

void TcpSource::frame_received() noexcept {
  context_->metrics().packets.fetch_add(1, std::memory_order_relaxed);
  handle_frame();
}

StageStatus TcpSource::header_received() noexcept {
  if (have_ < raw_tcp::kHeaderBytes) return StageStatus::ok;
  const raw_tcp::DecodeStatus status = raw_tcp::decode_header(header_bytes_, frame_);
  if (status == raw_tcp::DecodeStatus::ok && frame_.payload_bytes <= settings_.max_frame) {
    resyncing_ = false;
    reading_ = Reading::payload;
  } else if (!resyncing_ && status == raw_tcp::DecodeStatus::bad_magic &&
             raw_tcp::decode_header_past_magic(header_bytes_, frame_) == raw_tcp::DecodeStatus::ok &&
             frame_.payload_bytes <= settings_.max_frame) {
    // Where a header was due, one whose magic alone is damaged: that frame is skipped whole,
    // so each damaged frame is one bad_magic drop, also when several follow each other.
    drop_bad_magic_->add();
    reading_ = Reading::damaged_payload;
  } else {
    // Not a header: hunt for the next magic; the bytes up to it are one drop.
    if (!resyncing_) {
      (status == raw_tcp::DecodeStatus::bad_magic ? drop_bad_magic_ : drop_bad_header_)->add();
      resyncing_ = true;
    }
    std::memmove(header_bytes_.data(), header_bytes_.data() + 1, raw_tcp::kHeaderBytes - 1);
    have_ = raw_tcp::kHeaderBytes - 1;
    return StageStatus::ok;
  }
  have_ = 0;
  if (frame_.payload_bytes != 0) return StageStatus::ok;
  if (reading_ == Reading::payload) frame_received();
  reading_ = Reading::header;
  return StageStatus::ok;
}

bool TcpSource::receive(std::byte* target, std::size_t wanted, StageStatus& status) noexcept {
  const ssize_t got = ::recv(socket_.get(), target, wanted, draining_ ? MSG_DONTWAIT : 0);
  if (got > 0) {
    have_ += static_cast<std::size_t>(got);
    drain_left_ -= std::min(drain_left_, static_cast<std::uint64_t>(got));
    return true;
  }
  if (got == 0 || errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT) {
    status = disconnected();
  } else if (errno == EINTR || errno == EAGAIN) {
    status = StageStatus::idle;
  } else {
    context_->fail(wire::errno_message("recv"));
    status = StageStatus::error;
  }
  return false;
}

StageStatus TcpSource::receive_bare() noexcept {
  StageStatus outcome = StageStatus::ok;
  if (!receive(payload_.data() + have_, payload_.size() - have_, outcome)) return outcome;
  valid_frames_ = 1;  // any bytes are samples: this sender is the sensor
  const std::size_t sample_bytes = bytes_per_sample(settings_.format);
  const std::size_t whole = have_ / sample_bytes;
  if (whole > 0) {
    context_->metrics().packets.fetch_add(1, std::memory_order_relaxed);
    (void)assembler_.append(assembler_.expected(), payload_.data(), whole);
  }
  // A sample cut by the receive boundary waits for its other bytes.
  const std::size_t rest = have_ - whole * sample_bytes;
  if (rest != 0) std::memmove(payload_.data(), payload_.data() + whole * sample_bytes, rest);
  have_ = rest;
  return StageStatus::ok;
}

std::uint64_t TcpSource::frame_epoch() const noexcept {
  return frame_.seconds == 0 ? 0
                             : vita49::sample_index(frame_.seconds, frame_.picoseconds,
                                                    static_cast<std::uint64_t>(settings_.sample_rate));
}

void TcpSource::handle_frame() noexcept {
  if (frame_.format != settings_.format) {
    drop_wrong_format_->add();
    return;
  }
  ++valid_frames_;
  if (frame_.sample_count == 0) return;
  if (!have_origin_) {
    have_origin_ = true;
    origin_ = frame_.first_sample;
    // Chunk timestamps count from the first frame's time, whatever its first_sample was.
    assembler_.set_origin(frame_epoch(), frame_.seconds != 0);
  }
  const JumpGuard::Packet packet{frame_.first_sample, frame_.sample_count, frame_epoch(),
                                 std::span<const std::byte>(payload_.data(), frame_.payload_bytes)};
  guard_.admit(
      packet, origin_ + assembler_.expected(), [this](const JumpGuard::Packet& placed) { place_samples(placed); },
      [this](const JumpGuard::Packet& first) { return move_stream(first); });
}

void TcpSource::place_samples(const JumpGuard::Packet& packet) noexcept {
  const std::optional<std::uint64_t> index = history_.fresh_index(packet.position, origin_, assembler_.expected());
  if (!index) return;
  history_.arrived(*index);
  if (assembler_.append(*index, packet.payload.data(), packet.samples)) {
    ++placed_frames_;
    history_.placed(*index);
  }
}

bool TcpSource::move_stream(const JumpGuard::Packet& first) noexcept {
  const std::uint64_t expected = assembler_.expected();
  const std::uint64_t old_position = origin_ + expected;
  const bool forward = first.position > old_position;
  // The new segment starts a chunk of its own, so that its timestamp is the sender's.
  assembler_.flush();
  // Forward, the stream index keeps counting the sender's samples and the skipped span is a
  // gap; back (a restarted sensor), the stream index goes on from here.
  if (!forward) {
    origin_ = first.position - expected;
    assembler_.mark_time_jump();  // the same stream index, a new time: a new capture segment
  }
  const std::uint64_t start = first.position - origin_;
  if (first.tag != 0) assembler_.set_origin(first.tag - start, true);
  if (forward && !assembler_.skip_to(start)) return false;
  history_.restart(assembler_.expected());
  const std::uint64_t jump = forward ? first.position - old_position : old_position - first.position;
  log::warn("{}: stream resynchronised at sample {}: first_sample jumped {} by {}, confirmed by {} frames",
            context_->stage_name(), assembler_.expected(), forward ? "ahead" : "back", jump, guard_.held_count());
  return true;
}

void TcpSource::stop() noexcept {
  pending_.clear();
  guard_.discard();  // never confirmed: outliers
  assembler_.flush();
}

void register_tcp_source_stage(StageRegistry& registry) {
  registry.add(StageType{"tcp", StageRole::source,
                         "raw TCP frames (fixed header + samples) or bare samples, as server or client",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<TcpSource>(reader, pipeline);
                         }});
}

}  // namespace sluice
