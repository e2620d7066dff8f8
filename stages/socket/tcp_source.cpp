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
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "pipeline/config.hpp"
#include "wire/vita49.hpp"

namespace sluice {

TcpSource::TcpSource(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.address = reader.string("address", settings_.address, "server: host:port to listen on; client: sender to connect to");
  settings_.mode = reader.choice("mode", TcpMode::server, "server (listen for the sender) or client (connect to it)",
                                 {{"server", TcpMode::server}, {"client", TcpMode::client}});
  settings_.format = reader.choice("format", SampleFormat::ci16, "sample format expected in the frames",
                                   {{"ci16", SampleFormat::ci16}, {"cf32", SampleFormat::cf32}});
  settings_.sample_rate = reader.frequency("sample_rate", 100e6, "sample rate (whole Hz), for chunk timestamps", 1, 1e11);
  settings_.max_frame = reader.bytes("max_frame", settings_.max_frame, "largest frame payload accepted", 64,
                                     raw_tcp::kMaxPayloadBytes);
  settings_.receive_buffer = reader.bytes("receive_buffer", settings_.receive_buffer, "socket receive buffer", 4096, 1ULL << 30);
  settings_.pool = read_pool_settings(reader, pipeline, PoolWriter::host_writes);
  if (settings_.sample_rate != std::floor(settings_.sample_rate)) reader.error("sample_rate", "sample rate must be a whole number of Hz");
  if (!wire::parse_endpoint(settings_.address)) reader.error("address", "expected IPv4 host:port", "127.0.0.1:50000");
}

void TcpSource::start(StageContext& context) {
  context_ = &context;
  const auto address = wire::parse_endpoint(settings_.address);
  if (settings_.mode == TcpMode::server) {
    listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listener_.valid()) throw std::runtime_error(wire::errno_message("socket(AF_INET, SOCK_STREAM)"));
    const int one = 1;
    if (::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
      throw std::runtime_error(wire::errno_message("setsockopt(SO_REUSEADDR)"));
    }
    if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(sockaddr_in)) != 0) {
      throw std::runtime_error(wire::errno_message("bind(" + settings_.address + ")"));
    }
    if (::listen(listener_.get(), 1) != 0) throw std::runtime_error(wire::errno_message("listen"));
    sockaddr_in bound{};
    socklen_t length = sizeof(bound);
    if (::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
      throw std::runtime_error(wire::errno_message("getsockname"));
    }
    port_ = ntohs(bound.sin_port);
  }
  payload_.assign(settings_.max_frame, std::byte{0});
  duplicates_ = &context.metrics().counter("duplicates");
  reordered_ = &context.metrics().counter("reordered");
  drop_bad_magic_ = &context.metrics().drop_counter("bad_magic");
  drop_bad_header_ = &context.metrics().drop_counter("bad_header");
  drop_late_ = &context.metrics().drop_counter("late");
  drop_duplicate_ = &context.metrics().drop_counter("duplicate");
  drop_wrong_format_ = &context.metrics().drop_counter("wrong_format");
  Pool& pool = context.create_pool("out", settings_.pool.spec(context.pipeline().cuda_device));
  assembler_.start(context, pool, settings_.format, static_cast<std::uint64_t>(settings_.sample_rate), false);
  context.stream.sample_rate = settings_.sample_rate;
  context.stream.format = settings_.format;
  context.stream.description = "raw TCP " + std::string(settings_.mode == TcpMode::server ? "from peer of " : "from ") +
                               settings_.address;
}

bool TcpSource::connect_or_accept() noexcept {
  if (settings_.mode == TcpMode::server) {
    pollfd waiting{listener_.get(), POLLIN, 0};
    if (::poll(&waiting, 1, 10) <= 0) return false;
    socket_.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  } else {
    const auto address = wire::parse_endpoint(settings_.address);
    socket_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (socket_.valid() && ::connect(socket_.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(sockaddr_in)) != 0) {
      socket_.reset();
      ::poll(nullptr, 0, 10);  // the sender may not be listening yet
    }
  }
  if (!socket_.valid()) return false;
  const int buffer = static_cast<int>(settings_.receive_buffer);
  (void)::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));  // best effort: a hint only
  return true;
}

StageStatus TcpSource::process() {
  if (context_->stop_requested()) {
    assembler_.flush();
    return StageStatus::end_of_stream;
  }
  if (!socket_.valid()) return connect_or_accept() ? StageStatus::ok : StageStatus::idle;
  pollfd readable{socket_.get(), POLLIN, 0};
  const int ready = ::poll(&readable, 1, 10);
  if (ready < 0 && errno != EINTR) {
    context_->fail(wire::errno_message("poll"));
    return StageStatus::error;
  }
  if (ready <= 0) return StageStatus::idle;

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
  const ssize_t got = ::recv(socket_.get(), target, wanted, 0);
  if (got == 0) {
    assembler_.flush();
    return StageStatus::end_of_stream;  // the sender closed the stream
  }
  if (got < 0) {
    if (errno == EINTR || errno == EAGAIN) return StageStatus::idle;
    context_->fail(wire::errno_message("recv"));
    return StageStatus::error;
  }
  have_ += static_cast<std::size_t>(got);
  if (reading_ == Reading::header) {
    if (have_ < raw_tcp::kHeaderBytes) return StageStatus::ok;
    const raw_tcp::DecodeStatus status = raw_tcp::decode_header(header_bytes_, frame_);
    if (status != raw_tcp::DecodeStatus::ok || frame_.payload_bytes > settings_.max_frame) {
      if (!resyncing_) {
        (status == raw_tcp::DecodeStatus::bad_magic ? drop_bad_magic_ : drop_bad_header_)->add();
        resyncing_ = true;
      }
      std::memmove(header_bytes_.data(), header_bytes_.data() + 1, raw_tcp::kHeaderBytes - 1);
      have_ = raw_tcp::kHeaderBytes - 1;
      return StageStatus::ok;
    }
    resyncing_ = false;
    reading_ = Reading::payload;
    have_ = 0;
    if (frame_.payload_bytes != 0) return StageStatus::ok;
  } else if (have_ < frame_.payload_bytes) {
    return StageStatus::ok;
  }
  context_->metrics().packets.fetch_add(1, std::memory_order_relaxed);
  handle_frame();
  reading_ = Reading::header;
  have_ = 0;
  return StageStatus::ok;
}

void TcpSource::handle_frame() noexcept {
  if (frame_.format != settings_.format) {
    drop_wrong_format_->add();
    return;
  }
  if (frame_.sample_count == 0) return;
  if (!have_origin_) {
    have_origin_ = true;
    origin_ = frame_.first_sample;
    const auto rate = static_cast<std::uint64_t>(settings_.sample_rate);
    // Chunk timestamps count from the first frame's time, whatever its first_sample was.
    const std::uint64_t epoch = vita49::sample_index(frame_.seconds, frame_.picoseconds, rate);
    assembler_.set_origin(epoch, frame_.seconds != 0);
  }
  if (frame_.first_sample < origin_) {
    drop_late_->add();
    return;
  }
  const std::uint64_t index = frame_.first_sample - origin_;
  if (index < assembler_.expected()) {
    const std::size_t count = std::min(history_count_, history_.size());
    if (std::find(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(count), index) !=
        history_.begin() + static_cast<std::ptrdiff_t>(count)) {
      duplicates_->add();
      drop_duplicate_->add();
    } else {
      reordered_->add();
      drop_late_->add();
    }
    return;
  }
  if (index < highest_seen_) reordered_->add();
  highest_seen_ = std::max(highest_seen_, index);
  if (assembler_.append(index, payload_.data(), frame_.sample_count)) {
    history_[history_count_++ % history_.size()] = index;
  }
}

void TcpSource::stop() noexcept { assembler_.flush(); }

void register_tcp_source_stage(StageRegistry& registry) {
  registry.add(StageType{"tcp", StageRole::source, "raw TCP frames (fixed header + samples), as server or client",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<TcpSource>(reader, pipeline);
                         }});
}

}  // namespace sluice
