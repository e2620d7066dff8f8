// `transport: roce`: the link's two halves over rdma-core verbs (stages/link/rdma/). The receiver
// lands in GPU memory where the NIC can write it (dma-buf, then nvidia-peermem), else in a
// host-pinned bounce ring copied to the GPU slot on arrival.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/memory.hpp"
#include "stages/link/rdma/receiver.hpp"
#include "stages/link/rdma/sender.hpp"
#include "stages/link/transport.hpp"

namespace sluice {

class RoceSender final : public LinkSender {
 public:
  ~RoceSender() override { close(); }
  void connect(const TransportSettings& settings, std::uint32_t lane, const std::vector<Pool*>& sources,
               std::span<const std::byte> hello) override;
  [[nodiscard]] std::size_t slot_bytes() const noexcept override { return sender_ ? sender_->slot_bytes() : 0; }
  [[nodiscard]] std::size_t slot_count() const noexcept override { return sender_ ? sender_->slot_count() : 0; }
  LinkStatus send(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept override;
  LinkStatus finish(std::chrono::milliseconds timeout) noexcept override;
  void abort(std::string_view reason) noexcept override;
  [[nodiscard]] const std::string& error() const noexcept override { return error_; }
  [[nodiscard]] LinkSenderTimes times() const noexcept override { return {credit_wait_ns_, 0}; }
  void close() noexcept override;

 private:
  LinkStatus failure() noexcept;  // peer_lost or error from the sender's state
  bool collect() noexcept;        // releases chunks whose writes completed

  std::unique_ptr<rdma::RdmaSender> sender_;
  struct Source {
    Pool* pool = nullptr;
    std::uint32_t lkey = 0;
  };
  std::vector<Source> sources_;
  std::vector<ChunkPtr> in_flight_;  // ring indexed by the send cookie
  std::uint64_t sent_ = 0;
  std::uint64_t credit_wait_ns_ = 0;  // send() without a credit, or waiting for writes to complete
  std::string owner_;                 // "verbs:<device>" registrations recorded on the pools
  std::string error_;
};

class RoceReceiver final : public LinkReceiver {
 public:
  ~RoceReceiver() override { close(); }
  void listen(const TransportSettings& settings, std::uint32_t lane, Pool& landing) override;
  std::vector<std::byte> accept() override;
  LinkStatus receive(ChunkPtr& chunk, std::chrono::microseconds timeout) noexcept override;
  void abort(std::string_view reason) noexcept override;
  [[nodiscard]] const std::string& error() const noexcept override { return error_; }
  void close() noexcept override;

 private:
  TransportSettings settings_;
  std::uint32_t lane_ = 0;
  Pool* landing_ = nullptr;
  // Host-pinned bounce ring when GPU landing memory cannot be registered (copied per chunk).
  MemoryRegion bounce_;
  std::optional<CudaStream> copy_stream_;
  std::unique_ptr<rdma::RdmaReceiver> receiver_;
  std::unique_ptr<std::atomic<bool>[]> downstream_;  // slot handed out and not yet released
  std::string owner_;
  std::string error_;
};

}  // namespace sluice
