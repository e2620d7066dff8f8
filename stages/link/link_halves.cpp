// Link halves: transport choice, the StreamInfo hello, and the two stages' hot loops.
#include "stages/link/link_halves.hpp"

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/gpu_stream.hpp"
#include "pipeline/log.hpp"

namespace sluice {
namespace {
constexpr int kHelloVersion = 1;
constexpr auto kPoll = std::chrono::milliseconds(10);

std::string endpoint_text(const LinkSettings& settings) {
  return settings.connection.endpoint.address + ":" + std::to_string(settings.connection.endpoint.port);
}
}  // namespace

ResolvedTransport resolve_transport(LinkTransport requested) {
  const TransportKind* roce = find_transport(LinkTransport::roce);
  if (requested == LinkTransport::roce) {
    if (roce == nullptr)
      throw std::runtime_error("this build has no roce transport (configure with -DSLUICE_WITH_RDMA=ON and rdma-core)");
    if (std::string why = roce->unavailable_reason(); !why.empty()) {
      throw std::runtime_error("transport roce cannot run here: " + why + " (transport: tcp works without RDMA)");
    }
    return {roce, "requested"};
  }
  if (requested == LinkTransport::auto_select) {
    if (roce == nullptr) return {find_transport(LinkTransport::tcp), "auto: this build has no roce transport"};
    if (std::string why = roce->unavailable_reason(); !why.empty())
      return {find_transport(LinkTransport::tcp), "auto: " + why};
    return {roce, "auto: an RDMA device is available"};
  }
  return {find_transport(LinkTransport::tcp), "requested"};
}

std::vector<std::byte> encode_stream_info(const StreamInfo& stream) {
  const nlohmann::json json{
      {"version", kHelloVersion},
      {"sample_rate", stream.sample_rate},
      {"format", std::string(to_string(stream.format))},
      {"center_frequency", stream.center_frequency},
      {"description", stream.description},
      {"fft_size", stream.fft_size},
      {"window", stream.window},
      {"averaging", stream.averaging},
      {"start_time", {stream.start_time.seconds, stream.start_time.picoseconds, stream.start_time.valid}},
  };
  const std::string text =
      json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // descriptions may hold non-UTF-8 bytes
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  return {begin, begin + text.size()};
}

StreamInfo decode_stream_info(std::span<const std::byte> bytes) {
  try {
    const auto json =
        nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (json.at("version").get<int>() != kHelloVersion) {
      throw std::runtime_error("stream description version " + json.at("version").dump() + ", expected " +
                               std::to_string(kHelloVersion));
    }
    StreamInfo stream;
    stream.sample_rate = json.at("sample_rate").get<double>();
    const auto format = sample_format_from_string(json.at("format").get<std::string>());
    if (!format) throw std::runtime_error("unknown sample format " + json.at("format").dump());
    stream.format = *format;
    stream.center_frequency = json.at("center_frequency").get<double>();
    stream.description = json.at("description").get<std::string>();
    stream.fft_size = json.at("fft_size").get<std::size_t>();
    stream.window = json.at("window").get<std::string>();
    stream.averaging = json.at("averaging").get<std::size_t>();
    const auto& start = json.at("start_time");
    stream.start_time =
        Timestamp{start.at(0).get<std::uint64_t>(), start.at(1).get<std::uint64_t>(), start.at(2).get<bool>()};
    return stream;
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(std::string("malformed stream description from the sender: ") + error.what());
  }
}

// ---- sending half ----

void LinkSendingHalf::start(StageContext& context) {
  context_ = &context;
  const ResolvedTransport transport = resolve_transport(settings_.transport);
  log::info("link: lane {} sends to {} over {} ({})", context.lane_name(), endpoint_text(settings_),
            to_string(transport.kind->transport), transport.reason);
  if (transport.kind->transport != LinkTransport::tcp && settings_.connection.connections > 1) {
    throw std::runtime_error("link connections: " + std::to_string(settings_.connection.connections) +
                             " applies to tcp, but " + transport.reason + " chose " +
                             std::string(to_string(transport.kind->transport)) +
                             " (set transport: tcp, or drop connections)");
  }
  sender_ = transport.kind->make_sender();
  try {
    sender_->connect(settings_.connection, context.lane_index(), context.lane_pools(),
                     encode_stream_info(context.stream));
  } catch (...) {
    // A stage whose start throws is never stopped, and the lane's pools go before it: let go
    // of every registration on them now.
    sender_->close();
    sender_.reset();
    throw;
  }
  oversize_ = &context.metrics().drop_counter("larger_than_landing_buffer");
  credit_wait_us_ = &context.metrics().counter("credit_wait_us");
  writing_us_ = &context.metrics().counter("connections_writing_us");
  writing_cpu_us_ = &context.metrics().counter("connections_writing_cpu_us");
}

StageStatus LinkSendingHalf::fail(std::string_view what) noexcept {
  context_->fail("link to " + endpoint_text(settings_) + ": " + std::string(what) + ": " + sender_->error());
  return StageStatus::error;
}

StageStatus LinkSendingHalf::process() {
  if (!pending_) {
    pending_ = context_->input().pop(kPoll);
    if (!pending_) {
      if (!context_->input().finished()) return StageStatus::idle;
      if (std::string failure = context_->lane_failure(); !failure.empty()) {
        // The stream ended because a stage before this one failed: the receiving node must
        // not take it for a clean end of stream, so the failure crosses the link instead.
        log::info("link: lane {} tells {} that stage {} failed", context_->lane_name(), endpoint_text(settings_),
                  failure);
        sender_->abort("stage " + failure + " on the sending node");
        return StageStatus::end_of_stream;
      }
      const LinkStatus status = sender_->finish(settings_.connection.peer_timeout * 2);
      return status == LinkStatus::ok ? StageStatus::end_of_stream : fail("end of stream");
    }
    if (pending_->size > sender_->slot_bytes()) {
      oversize_->add();
      pending_.reset();
      return StageStatus::ok;
    }
  }
  if (std::string error; !chunk_written(*pending_, error)) {
    // The NIC or the transport's copy reads the bytes: they must be final, and this thread polls
    // for the producer's GPU work on them rather than wait for it.
    std::this_thread::sleep_for(std::chrono::microseconds(10));
    return StageStatus::idle;
  } else if (!error.empty()) {
    return fail(error);
  }
  const std::uint64_t bytes = pending_->size;
  const std::uint64_t samples = pending_->sample_count;
  const std::uint64_t created_ns = pending_->created_ns;
  const LinkStatus status = sender_->send(pending_, kPoll);
  count_times();
  if (status == LinkStatus::idle) return StageStatus::idle;
  if (status != LinkStatus::ok) return fail(to_string(status));
  FlowCounters& out = context_->metrics().out;
  out.bytes.fetch_add(bytes, std::memory_order_relaxed);
  out.chunks.fetch_add(1, std::memory_order_relaxed);
  out.samples.fetch_add(samples, std::memory_order_relaxed);
  context_->metrics().latency.record(monotonic_ns() - created_ns);
  return StageStatus::ok;
}

// The transport's waits for credits are backpressure, not work: the stage's busy share leaves them out.
void LinkSendingHalf::count_times() noexcept {
  const LinkSenderTimes now = sender_->times();
  context_->metrics().wait_ns.fetch_add(now.credit_wait_ns - counted_.credit_wait_ns, std::memory_order_relaxed);
  credit_wait_us_->add(now.credit_wait_ns / 1000 - counted_.credit_wait_ns / 1000);
  writing_us_->add(now.writing_ns / 1000 - counted_.writing_ns / 1000);
  writing_cpu_us_->add(now.writing_cpu_ns / 1000 - counted_.writing_cpu_ns / 1000);
  counted_ = now;
}

void LinkSendingHalf::stop() noexcept {
  pending_.reset();
  if (!sender_) return;
  if (!context_->failure().empty() && sender_->error().empty()) sender_->abort(context_->failure());
  sender_->close();
}

// ---- receiving half ----

void LinkReceivingHalf::start(StageContext& context) {
  context_ = &context;
  const ResolvedTransport transport = resolve_transport(settings_.transport);
  Pool& landing = context.create_pool("landing", settings_.landing.spec(context.cuda_device()));
  receiver_ = transport.kind->make_receiver();
  try {
    receiver_->listen(settings_.connection, context.lane_index(), landing);
    log::info("link: lane {} listens on {} over {} ({}); {} landing slots of {} bytes in {} memory",
              context.lane_name(), endpoint_text(settings_), to_string(transport.kind->transport), transport.reason,
              landing.chunk_count(), landing.chunk_bytes(), to_string(landing.memory()));
    context.stream = decode_stream_info(receiver_->accept());
  } catch (...) {
    // A stage whose start throws is never stopped, and the lane's pools go before it: give
    // the landing ring back (slots, release hook, registration) while it still exists.
    receiver_->close();
    receiver_.reset();
    throw;
  }
}

StageStatus LinkReceivingHalf::process() {
  if (context_->stop_requested()) {
    // This node stops (signal, duration, or a failure downstream). When the sending node
    // stops too (the same duration in both), its end of stream arrives within moments:
    // take it for up to peer_timeout. Otherwise tell the sender, whose chunks are no
    // longer being taken, and end here.
    if (stop_seen_ns_ == 0) stop_seen_ns_ = monotonic_ns();
    const auto grace = static_cast<std::uint64_t>(std::chrono::nanoseconds(settings_.connection.peer_timeout).count());
    if (monotonic_ns() - stop_seen_ns_ > grace) {
      receiver_->abort("receiving node stopped");
      return StageStatus::end_of_stream;
    }
  }
  ChunkPtr chunk;
  switch (receiver_->receive(chunk, kPoll)) {
    case LinkStatus::ok:
      chunk->created_ns = monotonic_ns();  // latency on this node starts at landing
      context_->emit(std::move(chunk));
      return StageStatus::ok;
    case LinkStatus::idle:
      return StageStatus::idle;
    case LinkStatus::end_of_stream:
      return StageStatus::end_of_stream;
    case LinkStatus::peer_lost:
    case LinkStatus::error:
      break;
  }
  context_->fail("link from the sender of " + endpoint_text(settings_) + ": " + receiver_->error());
  return StageStatus::error;
}

void LinkReceivingHalf::stop() noexcept {
  if (receiver_) receiver_->close();
}

}  // namespace sluice
