// The SO_RXQ_OVFL count of a UDP socket, read per received message, and the loss-or-jump test.
#include "stages/socket/kernel_drops.hpp"

#include <cstring>
#include <stdexcept>

#include "wire/socket.hpp"

namespace sluice {

void KernelDrops::start(int fd, StageMetrics& metrics, bool gro) {
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)) != 0) {
    throw std::runtime_error(wire::errno_message("setsockopt(SO_RXQ_OVFL)"));
  }
  segments_per_drop_ = gro ? kGroSegmentsMax : 1;
  count_ = 0;
  count_at_used_ = 0;
  have_used_ = false;
  overflow_ = &metrics.drop_counter("socket_overflow");
  after_last_ = &metrics.counter("dropped_after_last_packet");
}

std::uint64_t KernelDrops::finish(int fd) noexcept {
  const std::optional<wire::ReceiveMemory> memory = wire::receive_memory(fd);
  if (!memory || !memory->drops) return 0;
  const std::uint32_t dropped = *memory->drops - count_;  // modulo 2^32, as the kernel counts
  if (dropped == 0) return 0;
  overflow_->add(dropped);
  after_last_->add(dropped);
  count_ = *memory->drops;
  return dropped;
}

void KernelDrops::received(const msghdr& header) noexcept {
  // The kernel attaches the count only once it is above 0; it never goes back.
  std::uint32_t count = 0;
  for (const cmsghdr* control = CMSG_FIRSTHDR(&header); control != nullptr;
       control = CMSG_NXTHDR(const_cast<msghdr*>(&header), const_cast<cmsghdr*>(control))) {
    if (control->cmsg_level == SOL_SOCKET && control->cmsg_type == SO_RXQ_OVFL) {
      std::memcpy(&count, CMSG_DATA(control), sizeof(count));
    }
  }
  const std::uint32_t dropped = count - count_;  // modulo 2^32, as the kernel counts
  if (dropped == 0) return;
  overflow_->add(dropped);
  count_ = count;
}

bool KernelDrops::explains(std::uint64_t position, std::size_t samples,
                           std::optional<std::uint8_t> packet_count) const noexcept {
  if (!have_used_ || samples == 0 || position <= used_end_ || (position - used_end_) % samples != 0) return false;
  const std::uint64_t missing = (position - used_end_) / samples;
  if (missing > since_used() * segments_per_drop_) return false;
  if (packet_count && used_packet_count_) {
    const auto skipped = static_cast<std::uint64_t>((*packet_count - *used_packet_count_ - 1) & 0xF);
    if (skipped != (missing & 0xF)) return false;
  }
  return true;
}

}  // namespace sluice
