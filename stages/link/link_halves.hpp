// The two halves of a link that joins two nodes (LinkSendingHalf, LinkReceivingHalf).
#pragma once

#include <memory>

#include "pipeline/stage.hpp"
#include "stages/link/link_settings.hpp"
#include "stages/link/transport_registry.hpp"

namespace sluice {

// The transport a half uses: `auto` resolved to roce or tcp, with the reason for the log.
struct ResolvedTransport {
  const TransportKind* kind = nullptr;
  std::string reason;
};
// Throws when the requested transport cannot run here (roce without a device).
ResolvedTransport resolve_transport(LinkTransport requested);

// StreamInfo <-> the hello bytes the sender passes to connect() (JSON, versioned).
std::vector<std::byte> encode_stream_info(const StreamInfo& stream);
StreamInfo decode_stream_info(std::span<const std::byte> bytes);  // throws on malformed input

// The two halves of a link that joins two nodes. The sending half ends the lane on the
// upstream node (a sink: each chunk goes to the transport, which releases it once sent);
// the receiving half starts it on the next node (a source: landed chunks go downstream,
// and each one's credit returns to the sender when downstream releases it). The lane's
// StreamInfo crosses at connection time, so downstream stages start knowing the stream.

class LinkSendingHalf final : public Stage {
 public:
  explicit LinkSendingHalf(LinkSettings settings) : settings_(std::move(settings)) {}
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;

 private:
  StageStatus fail(std::string_view what) noexcept;
  void count_times() noexcept;

  LinkSettings settings_;
  StageContext* context_ = nullptr;
  std::unique_ptr<LinkSender> sender_;
  ChunkPtr pending_;  // popped, waiting for a credit
  NamedCounter* oversize_ = nullptr;
  NamedCounter* credit_wait_us_ = nullptr;  // send() waiting for a credit: the receiver holds the lane back
  NamedCounter* writing_us_ = nullptr;      // tcp: the connections' threads writing chunks, summed
  NamedCounter* writing_cpu_us_ = nullptr;  // tcp: their CPU time in those writes
  LinkSenderTimes counted_;                 // the sender's totals already added to the metrics
};

class LinkReceivingHalf final : public Stage {
 public:
  explicit LinkReceivingHalf(LinkSettings settings) : settings_(std::move(settings)) {}
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;

 private:
  LinkSettings settings_;
  StageContext* context_ = nullptr;
  std::unique_ptr<LinkReceiver> receiver_;
  std::uint64_t stop_seen_ns_ = 0;  // when this node's stop request was first seen
};

}  // namespace sluice
