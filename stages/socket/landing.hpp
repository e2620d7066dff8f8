// Where recvmmsg puts each datagram when the udp stage receives straight into a chunk: each
// expected datagram's header (and trailer) into small side buffers, its payload into the chunk
// where the stream's next samples go, anything beyond the expected datagrams into the message's
// spill buffer.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <vector>

namespace sluice {

class PayloadLanding {
 public:
  // At most this many datagrams of one GRO message land in the chunk (three iovecs each, and a
  // message may have at most 1024 iovecs).
  static constexpr std::size_t kMaxSlots = 340;
  // Header bytes a landed datagram may have (VITA-49: header, stream and class ID, timestamps).
  static constexpr std::size_t kMaxHeader = 28;
  static constexpr std::size_t kMaxTrailer = 4;

  // Sizes the iovecs and header buffers for `batch` messages (start(), before any receive).
  void allocate(std::size_t batch, bool gro);
  // The datagram shape to expect: `header` bytes, `payload` bytes, `trailer` bytes (0 or 4), and
  // `segments` of them in a GRO message (1 without GRO). False: the shape cannot land (no payload,
  // too many segments), and nothing changes.
  bool expect(std::size_t header, std::size_t payload, std::size_t trailer, std::size_t segments) noexcept;
  [[nodiscard]] bool expecting() const noexcept { return payload_ != 0; }
  [[nodiscard]] std::size_t header_bytes() const noexcept { return header_; }
  [[nodiscard]] std::size_t payload_bytes() const noexcept { return payload_; }
  [[nodiscard]] std::size_t trailer_bytes() const noexcept { return trailer_; }
  [[nodiscard]] std::size_t datagram_bytes() const noexcept { return header_ + payload_ + trailer_; }
  [[nodiscard]] std::size_t segments() const noexcept { return segments_; }
  // Points message `message` at `area` (where the chunk's next payload goes): up to segments()
  // datagrams, and whatever else it holds at `spill`, `spill_bytes` in all (the message's receive
  // buffer). Returns the datagrams that land in the chunk: 0 when `area` holds not one payload.
  std::size_t lay_out(std::size_t message, std::span<std::byte> area, msghdr& header, std::byte* spill,
                      std::size_t spill_bytes) noexcept;
  // The chunk bytes message `message` of `length` bytes filled with payload, when every datagram
  // in it has the expected shape (the last may be shorter) and none went to the spill; else 0,
  // and the message is not one to land another after.
  [[nodiscard]] std::size_t landed_payload(std::size_t message, std::size_t length, std::size_t segment) const noexcept;
  // Datagrams of message i whose payload lands in the chunk (the rest, if any, is in the spill).
  [[nodiscard]] std::size_t slots(std::size_t message) const noexcept { return slots_[message]; }
  [[nodiscard]] const std::byte* header(std::size_t message, std::size_t slot) const noexcept {
    return headers_.data() + (message * kMaxSlots + slot) * header_;
  }
  [[nodiscard]] std::byte* payload(std::size_t message, std::size_t slot) const noexcept {
    return areas_[message] + slot * payload_;
  }
  // Message i's first `length` bytes, as the kernel scattered them, into `out` one after the other
  // (the datagrams as sent). `out` may be the message's own spill buffer.
  void gather(std::size_t message, std::size_t length, std::byte* out) const noexcept;

 private:
  std::size_t header_ = 0;
  std::size_t payload_ = 0;
  std::size_t trailer_ = 0;
  std::size_t segments_ = 1;
  std::size_t per_message_ = 1;  // iovecs per message the storage allows
  std::vector<std::byte> headers_;
  std::vector<std::byte> trailers_;
  std::vector<iovec> iovs_;
  std::vector<std::size_t> slots_;
  std::vector<std::byte*> areas_;
};

}  // namespace sluice
