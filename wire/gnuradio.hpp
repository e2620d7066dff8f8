// GNU Radio gr-network framing (network.udp_sink, GNU Radio 3.9+): its optional datagram headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sluice::gnuradio {

inline constexpr std::size_t kSeqHeaderBytes = 8;
inline constexpr std::size_t kSeqSizeHeaderBytes = 16;  // sizeof(header_seq_plus_size) on LP64

enum class DecodeStatus : std::uint8_t { ok, truncated, bad_size_field };

// GNU Radio gr-network framing (network.udp_sink, GNU Radio 3.9+): each datagram is an
// optional header followed by the stream's bytes in the host's byte order (little-endian
// here). Header types, copied by the sink as C structs:
//   seq        (HEADERTYPE_SEQNUM)      offset 0: uint64 sequence number, 1 for the first datagram
//   seq_size   (HEADERTYPE_SEQPLUSSIZE) offset 0: uint64 sequence number; offset 8: int16 datagram
//              size in bytes (header included); offsets 10..15: the struct's padding (any value)
// The sink sends only full datagrams, so every one of a stream carries the same byte count.
struct Header {
  std::uint64_t sequence = 0;
  std::size_t header_bytes = 0;
};

// `with_size`: the seq_size header; otherwise seq. Never throws.
DecodeStatus decode(std::span<const std::byte> datagram, bool with_size, Header& out) noexcept;
// Writes the header for a datagram of `datagram_bytes` (header included) to `out`.
void encode(std::uint64_t sequence, bool with_size, std::size_t datagram_bytes, std::span<std::byte> out) noexcept;

}  // namespace sluice::gnuradio
