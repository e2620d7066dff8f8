// A bare UDP receive loop: recvmmsg with GRO into fixed buffers, counting datagrams and bytes and
// nothing else. The one baseline the udp stage is held against: `sluice bench`'s udp ceiling,
// bench/stages/socket_bench and bench/stages/udp_receive_loops all run it.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wire/socket.hpp"

namespace sluice::bench {

// The datagrams one received message holds: its GRO segments (the UDP_GRO control message's
// segment size), or 1 without one.
[[nodiscard]] std::size_t datagrams_in(const mmsghdr& message) noexcept;

class BareUdpReceiver {
 public:
  // Binds `endpoint` ("127.0.0.1:0" for any free port) with the udp stage's socket settings:
  // receive_buffer bytes (SO_RCVBUFFORCE, else SO_RCVBUF), UDP_GRO where the kernel has it, the
  // kernel's drop count on every message (SO_RXQ_OVFL) and the stage's control space for it, and
  // a batch of `batch` messages per recvmmsg (0: the stage's default_udp_batch). Throws on failure.
  BareUdpReceiver(const std::string& endpoint, int receive_buffer, std::size_t batch);

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  // The bound socket, for a receive thread of the udp stage's own (udp_receive_loops --handoff).
  [[nodiscard]] int fd() const noexcept { return socket_.get(); }
  [[nodiscard]] bool gro() const noexcept { return gro_; }
  [[nodiscard]] std::size_t batch() const noexcept { return messages_.size(); }

  // One recvmmsg: waits at most 10 ms for the first datagram (or, `wait` false, returns at once
  // when there is none). Returns the datagrams (GRO segments counted one by one) it received,
  // and adds them to packets()/bytes().
  std::size_t receive_once(bool wait = true);

  // Slot `i` of the batch's receive buffers (each slot_bytes() long), as the last call left it.
  [[nodiscard]] const std::byte* slot(std::size_t i) const noexcept { return buffers_.data() + i * slot_; }
  [[nodiscard]] std::size_t slot_bytes() const noexcept { return slot_; }

  [[nodiscard]] std::uint64_t packets() const noexcept { return packets_; }
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }
  void reset_counts() noexcept { packets_ = bytes_ = 0; }

 private:
  wire::UniqueFd socket_;
  std::uint16_t port_ = 0;
  bool gro_ = false;
  std::size_t slot_ = 0;
  std::vector<std::byte> buffers_;
  std::vector<iovec> iovs_;
  std::vector<mmsghdr> messages_;
  std::vector<std::byte> controls_;
  std::uint64_t packets_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace sluice::bench
