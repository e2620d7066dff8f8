// `tcp` source: the raw TCP framing or bare samples, as server or client.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/stage.hpp"
#include "stages/socket/assembler.hpp"
#include "stages/socket/jump_guard.hpp"
#include "stages/socket/packet_history.hpp"
#include "stages/socket/tcp_pending.hpp"
#include "wire/raw_tcp.hpp"
#include "wire/socket.hpp"

namespace sluice {

enum class TcpMode : std::uint8_t { server, client };
// raw_tcp: wire/raw_tcp.hpp frames; none: a bare byte stream of samples (GNU Radio's
// network.tcp_sink), whose position is the byte count: a loss across a reconnect is unseen.
enum class TcpFraming : std::uint8_t { raw_tcp, none };

struct TcpSourceSettings {
  std::string address = "127.0.0.1:50000";
  TcpMode mode = TcpMode::server;
  TcpFraming framing = TcpFraming::raw_tcp;
  SampleFormat format = SampleFormat::ci16;
  double sample_rate = 100e6;
  std::uint64_t max_frame = 1ULL << 20;  // largest payload accepted
  std::uint64_t receive_buffer = 16ULL << 20;
  std::chrono::nanoseconds max_jump{std::chrono::seconds(1)};  // further from the stream: an outlier
  std::size_t resync_after = 4;  // agreeing outliers in a row that make a resynchronisation
  bool reconnect = true;         // after the sender closes: wait for it again instead of ending
  // server: a connection without a valid frame header this long is closed (idle_connection),
  // as is a second sender still kept out by the served one this long (second_sender)
  std::chrono::nanoseconds idle_timeout{std::chrono::seconds(5)};
  PoolSettings pool;
};

// The raw TCP framing (wire/raw_tcp.hpp), as server (listens, watches every connection and serves
// the one that sends a valid frame) or client (connects to the sender). Every header validated; a
// corrupt header is counted and the stream resynchronised on the next magic; frames dropped,
// repeated or out of order at the sender are accounted like UDP loss from their first_sample field;
// a single stray first_sample never moves the stream (JumpGuard). A connection that closes before
// one valid frame never ends the stream, and with `reconnect` (the default) a sender that comes
// back resumes it, the frames in between a gap.
class TcpSource final : public Stage {
 public:
  TcpSource(SettingsReader& reader, const PipelineSettings& pipeline);
  // A client connects out: the NIC it leaves by is the kernel's route, not an address here.
  [[nodiscard]] std::string receive_address() const override {
    return settings_.mode == TcpMode::server ? settings_.address : std::string();
  }
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;
  [[nodiscard]] std::uint16_t port() const { return port_; }

 private:
  // damaged_payload: the payload of a frame whose magic alone is damaged, read and skipped.
  enum class Reading : std::uint8_t { header, payload, damaged_payload };
  // start()'s steps.
  void open_listener(StageContext& context);
  void describe_stream(StageContext& context);
  bool connect() noexcept;
  // Server: accepts and reads pending connections; serves one that proved itself a sender.
  StageStatus accept_senders() noexcept;
  StageStatus serve(PendingConnections::Sender& sender) noexcept;
  // Waits up to 10 ms for the served socket, the listener or a pending connection; true when
  // the served socket is readable, `status` error when poll failed.
  bool wait_readable(StageStatus& status) noexcept;
  // The connection is readable: the next header or payload bytes (or bare samples), handled.
  StageStatus receive_next() noexcept;
  // At a stop: what the sender sent before it is still taken, the bytes its connection holds up
  // to one receive buffer's worth (a sender that goes on does not keep the stage open), read
  // without waiting; then the stream ends.
  void start_drain() noexcept;
  StageStatus drain_next() noexcept;
  StageStatus disconnected() noexcept;
  StageStatus header_received() noexcept;
  void frame_received() noexcept;
  StageStatus receive_bare() noexcept;
  // recv() into `target`: true when bytes arrived (added to have_); otherwise `status` says
  // what process() returns (idle, the sender closed, or an error).
  bool receive(std::byte* target, std::size_t wanted, StageStatus& status) noexcept;
  void handle_frame() noexcept;
  // JumpGuard::admit's steps: a plausible frame into the stream; the stream onto a confirmed jump.
  void place_samples(const JumpGuard::Packet& packet) noexcept;
  bool move_stream(const JumpGuard::Packet& first) noexcept;
  [[nodiscard]] std::uint64_t frame_epoch() const noexcept;

  TcpSourceSettings settings_;
  StageContext* context_ = nullptr;
  wire::UniqueFd listener_;
  PendingConnections pending_;
  PendingConnections::Clock::time_point next_sweep_{};
  wire::UniqueFd socket_;
  std::uint16_t port_ = 0;
  Reading reading_ = Reading::header;
  std::array<std::byte, raw_tcp::kHeaderBytes> header_bytes_{};
  std::size_t have_ = 0;
  bool resyncing_ = false;
  raw_tcp::FrameHeader frame_;
  std::vector<std::byte> payload_;
  ChunkAssembler assembler_;
  JumpGuard guard_;
  bool have_origin_ = false;
  std::uint64_t origin_ = 0;         // first_sample of stream index 0 (modulo 2^64 after a backward resync)
  std::uint64_t valid_frames_ = 0;   // on the current connection: frames with a valid header
  std::uint64_t placed_frames_ = 0;  // of them, those whose samples are in the stream
  bool connected_ = false;
  bool draining_ = false;         // a stop was asked: what the connection holds is read without waiting
  std::uint64_t drain_left_ = 0;  // bytes the drain may still take (one receive buffer's worth)
  PacketHistory history_;
  NamedCounter* connections_ = nullptr;
  NamedCounter* disconnects_ = nullptr;
  NamedCounter* drop_bad_magic_ = nullptr;
  NamedCounter* drop_partial_sample_ = nullptr;
  NamedCounter* drop_bad_header_ = nullptr;
  NamedCounter* drop_wrong_format_ = nullptr;
};

void register_tcp_source_stage(StageRegistry& registry);

}  // namespace sluice
