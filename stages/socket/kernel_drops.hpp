// The kernel's count of datagrams a UDP socket dropped (SO_RXQ_OVFL, carried on each received
// datagram), and whether it explains a stream jumping ahead: a burst the kernel dropped while
// the receiver was behind is a loss, not a sender that jumped.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "pipeline/stage.hpp"

namespace sluice {

class KernelDrops {
 public:
  // Control-message space one received message needs for the count.
  static constexpr std::size_t kControlBytes = CMSG_SPACE(sizeof(std::uint32_t));
  // Datagrams one counted drop may hold with UDP GRO: the kernel counts a coalesced datagram it
  // drops once, and coalesces at most this many (UDP_GRO_CNT_MAX in net/ipv4/udp_offload.c).
  static constexpr std::uint64_t kGroSegmentsMax = 64;

  // Turns the count on for `fd`; throws naming setsockopt and errno. `gro`: the socket receives
  // coalesced datagrams. Counters: drop reason "socket_overflow", the kernel's count as it is
  // (datagrams dropped; with GRO a coalesced datagram counts once), and of those
  // "dropped_after_last_packet", the ones after the last datagram received (see finish).
  void start(int fd, StageMetrics& metrics, bool gro);
  // At the stream's end, once the socket is drained: the datagrams the kernel dropped after the
  // last one received. No later datagram carries their count and no later packet shows where
  // the stream ended, so they are read off the socket's own drop count (SO_MEMINFO) and counted
  // under both counters. Returns how many (0 where the count cannot be read).
  std::uint64_t finish(int fd) noexcept;
  // Samples in the furthest packet used (0 before any): what one dropped datagram held, at least.
  [[nodiscard]] std::size_t last_packet_samples() const noexcept { return used_samples_; }
  // The most datagrams one counted drop holds: 1, or with GRO kGroSegmentsMax.
  [[nodiscard]] std::uint64_t segments_per_drop() const noexcept { return segments_per_drop_; }
  // Reads the count off one received message (none on it: nothing dropped yet) and counts the
  // datagrams dropped since the previous one. Never allocates.
  void received(const msghdr& header) noexcept;
  // Whether the datagrams dropped since the furthest used packet arrived explain a packet of
  // `samples` samples at `position`: it lies whole packets of its size after that packet's
  // end, those packets are no more than the kernel dropped, and the 4-bit VITA-49 packet
  // count, where there is one, skipped as many.
  [[nodiscard]] bool explains(std::uint64_t position, std::size_t samples,
                              std::optional<std::uint8_t> packet_count) const noexcept;
  // A packet of the stream was used (positions in the sender's index space). The furthest one
  // is where a later gap starts; a late one behind it changes nothing.
  void used(std::uint64_t position, std::size_t samples, std::optional<std::uint8_t> packet_count) noexcept {
    if (have_used_ && position + samples < used_end_) return;
    have_used_ = true;
    used_end_ = position + samples;
    used_samples_ = samples;
    used_packet_count_ = packet_count;
    count_at_used_ = count_;
  }
  // The stream was resynchronised: positions before it say nothing about the next gap.
  void restart() noexcept { have_used_ = false; }
  // Datagrams dropped since the furthest used packet arrived.
  [[nodiscard]] std::uint64_t since_used() const noexcept {
    return static_cast<std::uint32_t>(count_ - count_at_used_);
  }

 private:
  std::uint64_t segments_per_drop_ = 1;
  std::uint32_t count_ = 0;
  std::uint32_t count_at_used_ = 0;
  bool have_used_ = false;
  std::uint64_t used_end_ = 0;
  std::size_t used_samples_ = 0;
  std::optional<std::uint8_t> used_packet_count_;
  NamedCounter* overflow_ = nullptr;
  NamedCounter* after_last_ = nullptr;
};

}  // namespace sluice
