// `tcp` source: the raw TCP framing (wire/raw_tcp.hpp), as server (listens, takes one
// sender) or client (connects to the sender). Every header validated; a corrupt header is
// counted and the stream resynchronised on the next magic; frames dropped, repeated or out
// of order at the sender are accounted like UDP loss from their first_sample field.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/stage.hpp"
#include "stages/socket/assembler.hpp"
#include "wire/raw_tcp.hpp"
#include "wire/socket.hpp"

namespace sluice {

enum class TcpMode : std::uint8_t { server, client };

struct TcpSourceSettings {
  std::string address = "127.0.0.1:50000";
  TcpMode mode = TcpMode::server;
  SampleFormat format = SampleFormat::ci16;
  double sample_rate = 100e6;
  std::uint64_t max_frame = 1ULL << 20;  // largest payload accepted
  std::uint64_t receive_buffer = 16ULL << 20;
  PoolSettings pool;
};

class TcpSource final : public Stage {
 public:
  TcpSource(SettingsReader& reader, const PipelineSettings& pipeline);
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;
  [[nodiscard]] std::uint16_t port() const { return port_; }

 private:
  enum class Reading : std::uint8_t { header, payload };
  bool connect_or_accept() noexcept;
  void handle_frame() noexcept;

  TcpSourceSettings settings_;
  StageContext* context_ = nullptr;
  wire::UniqueFd listener_;
  wire::UniqueFd socket_;
  std::uint16_t port_ = 0;
  Reading reading_ = Reading::header;
  std::array<std::byte, raw_tcp::kHeaderBytes> header_bytes_{};
  std::size_t have_ = 0;
  bool resyncing_ = false;
  raw_tcp::FrameHeader frame_;
  std::vector<std::byte> payload_;
  ChunkAssembler assembler_;
  bool have_origin_ = false;
  std::uint64_t origin_ = 0;
  std::uint64_t highest_seen_ = 0;
  std::array<std::uint64_t, 64> history_{};
  std::size_t history_count_ = 0;
  NamedCounter* duplicates_ = nullptr;
  NamedCounter* reordered_ = nullptr;
  NamedCounter* drop_bad_magic_ = nullptr;
  NamedCounter* drop_bad_header_ = nullptr;
  NamedCounter* drop_late_ = nullptr;
  NamedCounter* drop_duplicate_ = nullptr;
  NamedCounter* drop_wrong_format_ = nullptr;
};

void register_tcp_source_stage(StageRegistry& registry);

}  // namespace sluice
