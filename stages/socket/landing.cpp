// The iovec layout of a receive straight into a chunk, and the way back to whole datagrams.
#include "stages/socket/landing.hpp"

#include <algorithm>
#include <cstring>

namespace sluice {

void PayloadLanding::allocate(std::size_t batch, bool gro) {
  const std::size_t slots = gro ? kMaxSlots : 1;
  per_message_ = 3 * slots + 1;
  headers_.assign(batch * kMaxSlots * kMaxHeader, std::byte{0});
  trailers_.assign(batch * kMaxSlots * kMaxTrailer, std::byte{0});
  iovs_.resize(batch * per_message_);
  slots_.assign(batch, 0);
  areas_.assign(batch, nullptr);
}

bool PayloadLanding::expect(std::size_t header, std::size_t payload, std::size_t trailer,
                            std::size_t segments) noexcept {
  if (payload == 0 || header > kMaxHeader || trailer > kMaxTrailer || segments == 0 || 3 * segments + 1 > per_message_)
    return false;
  header_ = header;
  payload_ = payload;
  trailer_ = trailer;
  segments_ = segments;
  return true;
}

std::size_t PayloadLanding::lay_out(std::size_t message, std::span<std::byte> area, msghdr& header, std::byte* spill,
                                    std::size_t spill_bytes) noexcept {
  // The message holds `spill_bytes` in all, as a receive into buffers_ would: a longer one is
  // truncated (MSG_TRUNC) the same way, and gather() never writes past its buffer.
  const std::size_t slots =
      payload_ == 0 ? 0 : std::min({segments_, area.size() / payload_, spill_bytes / datagram_bytes()});
  slots_[message] = slots;
  areas_[message] = area.data();
  if (slots == 0) return 0;
  iovec* iov = iovs_.data() + message * per_message_;
  const std::size_t first = message * kMaxSlots;
  for (std::size_t k = 0; k < slots; ++k) {
    iov[3 * k] = {headers_.data() + (first + k) * header_, header_};
    iov[3 * k + 1] = {area.data() + k * payload_, payload_};
    iov[3 * k + 2] = {trailers_.data() + (first + k) * trailer_, trailer_};
  }
  // Whatever the message holds beyond the expected datagrams (a longer one, more of them) is
  // kept whole here, so that no shape of message is ever truncated.
  iov[3 * slots] = {spill, spill_bytes - slots * datagram_bytes()};
  header.msg_iov = iov;
  header.msg_iovlen = 3 * slots + 1;
  return slots;
}

std::size_t PayloadLanding::landed_payload(std::size_t message, std::size_t length,
                                           std::size_t segment) const noexcept {
  const std::size_t datagram = datagram_bytes();
  if (length == 0 || segment != datagram || length > slots_[message] * datagram) return 0;
  const std::size_t segments = (length + segment - 1) / segment;
  const std::size_t last = length - (segments - 1) * segment;
  if (last <= header_ + trailer_) return 0;
  return (segments - 1) * payload_ + (last - header_ - trailer_);
}

void PayloadLanding::gather(std::size_t message, std::size_t length, std::byte* out) const noexcept {
  const iovec* iov = iovs_.data() + message * per_message_;
  const std::size_t landed = slots_[message] * datagram_bytes();
  // The spill first, moved up behind where the landed datagrams go (it may be `out` itself).
  if (length > landed) std::memmove(out + landed, iov[3 * slots_[message]].iov_base, length - landed);
  std::size_t done = 0;
  for (std::size_t i = 0; i < 3 * slots_[message] && done < length; ++i) {
    const std::size_t take = std::min(iov[i].iov_len, length - done);
    std::memcpy(out + done, iov[i].iov_base, take);
    done += take;
  }
}

}  // namespace sluice
