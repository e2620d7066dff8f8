// The wire form of a chunk's metadata: a fixed-layout, versioned, little-endian header that
// every link transport (tcp, roce) carries with each chunk's payload, so the receiving half
// rebuilds the chunk exactly as the sender's upstream filled it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "pipeline/chunk.hpp"

namespace sluice {

// Layout, version 3 (624 bytes, every field little-endian). Versions 1 and 2 (584 bytes, no
// context block) are refused as unsupported_version: the peer runs an older Sluice.
//   offset size field
//        0    4 magic          "SLCK" (0x4B434C53 read as a little-endian u32)
//        4    2 version        kChunkWireVersion
//        6    2 header_bytes   kChunkWireBytes; a reader rejects any other size for its version
//        8    4 lane           the sender's lane index
//       12    1 format         SampleFormat (0 ci8, 1 ci16, 2 cf32, 3 rf32)
//       13    1 flags          bit 0: timestamp valid; bit 1: time base restarts here
//                              (Chunk::time_jump); bit 2: the stream context changes here
//                              (Chunk::context_change); other bits zero
//       14    2 gap_count      0..32
//       16    8 sequence       per-lane chunk counter from the source
//       24    8 first_sample   absolute stream index of the first sample
//       32    8 sample_count
//       40    8 payload_bytes  valid bytes of the chunk (Chunk::size)
//       48    8 seconds        timestamp of the first sample: UTC seconds
//       56    8 picoseconds    and fractional picoseconds
//       64    4 packets        network packets that filled it
//       68    4 in_data_mask   bit i: gap i's values are present but computed from lost input
//                              (Gap::in_data, e.g. spectra rows over a hole); bits >= gap_count zero
//       72  512 gaps           32 x {u64 first_sample, u64 length}; entries past gap_count zero
//      584   40 context        5 x IEEE-754 binary64 (the u64 of its bits): rf_frequency,
//                              sample_rate, bandwidth, reference_level_dbm, gain_db
//                              (Chunk::context; NaN where absent)
// created_ns is not carried: it is a steady-clock value of the sending host.

inline constexpr std::uint32_t kChunkWireMagic = 0x4B434C53;  // "SLCK" in memory order
inline constexpr std::uint16_t kChunkWireVersion = 3;
inline constexpr std::size_t kChunkWireFixedBytes = 72;
inline constexpr std::size_t kChunkWireContextBytes = 5 * 8;
inline constexpr std::size_t kChunkWireBytes =
    kChunkWireFixedBytes + Chunk::kMaxGaps * 16 + kChunkWireContextBytes;  // 624

enum class ChunkWireStatus : std::uint8_t {
  ok,
  too_short,            // fewer bytes than the header needs
  bad_magic,            // not a chunk header (stream out of step, or another protocol)
  unsupported_version,  // a version this build does not read
  bad_size,             // header_bytes does not match the version's size
  bad_format,           // unknown sample format
  bad_flags,            // reserved flag bits or reserved field set
  too_many_gaps,        // gap_count above 32
};
std::string_view to_string(ChunkWireStatus status);

// An integer to and from little-endian bytes, as the wire forms (this one, the tcp link's frames) write them.
template <typename Integer>
void store_little_endian(std::byte* out, Integer value) noexcept {
  for (std::size_t i = 0; i < sizeof(Integer); ++i)
    out[i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFF);
}
template <typename Integer>
Integer load_little_endian(const std::byte* in) noexcept {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(Integer); ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return static_cast<Integer>(value);
}

// Writes chunk's metadata (not its payload) into `out`. Never fails.
void encode_chunk_metadata(const Chunk& chunk, std::span<std::byte, kChunkWireBytes> out) noexcept;

// Reads a header into `chunk`'s metadata (lane, sequence, first_sample, sample_count,
// format, timestamp, time_jump, context_change and context, packets, gaps, size = payload_bytes); pool fields and
// created_ns are left alone. On any status but ok, `chunk` is unchanged. The caller checks size against the landing
// slot's capacity.
ChunkWireStatus decode_chunk_metadata(std::span<const std::byte> in, Chunk& chunk) noexcept;

}  // namespace sluice
