// One lane of a SigMF capture as the emulator sends it back out: packet by packet in stream
// order, each inside one recorded segment with its recorded timestamp; the capture's gaps are
// never sent, so the receiver sees the holes the recorder saw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipeline/chunk.hpp"
#include "recorder/capture_reader.hpp"

namespace sluice::emulator {

struct PacketSpan {
  std::uint64_t first_sample = 0;  // stream index of the packet's first sample
  std::size_t count = 0;           // samples in the packet
  Timestamp time;                  // of the first sample (invalid when the capture has no times)
  bool after_gap = false;          // samples before it are missing from the capture
};

class CaptureStream {
 public:
  // Throws std::runtime_error when the lane holds nothing to send or needs `capture repair`.
  explicit CaptureStream(recorder::CaptureLane lane);

  // The next packet of at most `max_samples` samples, without consuming it; false at the end.
  bool peek(std::size_t max_samples, PacketSpan& span) const;
  // Consumes `span` (the last peek) and, when `out` is not null, copies its samples there
  // (little-endian, as recorded). Throws std::runtime_error naming the file on a read error.
  void take(const PacketSpan& span, std::byte* out);
  // Seconds from the capture's first sample to `span`'s: when it is due at the recorded pace.
  [[nodiscard]] double seconds_until(const PacketSpan& span) const;

  [[nodiscard]] const recorder::CaptureLane& lane() const { return lane_; }

 private:
  // Moves past segments that have nothing left to send, so segment_ is the next packet's.
  void skip_ended_segments() noexcept;

  recorder::CaptureLane lane_;
  std::size_t segment_ = 0;   // segment of the next packet (past the end: all sent)
  std::uint64_t offset_ = 0;  // samples of that segment already sent
  std::uint64_t origin_ = 0;  // stream index of the first sample
  // Read-ahead: a block of the current segment, so that a packet is a memcpy, not a pread.
  std::vector<std::byte> buffer_;
  std::size_t buffer_segment_ = 0;
  std::uint64_t buffer_offset_ = 0;  // sample offset within that segment
  std::uint64_t buffer_samples_ = 0;
};

}  // namespace sluice::emulator
