// Raw TCP framing, the simple fixed-header stream that first FPGA emulators send: each
// frame is a 48-byte little-endian header followed by `payload_bytes` of samples
// (little-endian, in `format`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "pipeline/chunk.hpp"

namespace sluice::raw_tcp {

// The header, every field little-endian:
//   offset size field
//   0      4    magic          0x54524C53 ("SLRT" as bytes 'S','L','R','T')
//   4      2    version        1
//   6      2    format         0 = ci8, 1 = ci16, 2 = cf32, 3 = rf32 (SampleFormat)
//   8      8    sequence       frame counter from the sender, +1 per frame
//   16     8    first_sample   stream index of the frame's first sample
//   24     4    sample_count   samples in the payload
//   28     4    payload_bytes  = sample_count * bytes per sample
//   32     8    seconds        UTC seconds of the first sample
//   40     8    picoseconds    fraction of that second
inline constexpr std::uint32_t kMagic = 0x54524C53;
inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kHeaderBytes = 48;
// Frames above this are refused as corrupt: a reader must never trust a length blindly.
inline constexpr std::uint32_t kMaxPayloadBytes = 16U << 20;

struct FrameHeader {
  SampleFormat format = SampleFormat::ci16;
  std::uint64_t sequence = 0;
  std::uint64_t first_sample = 0;
  std::uint32_t sample_count = 0;
  std::uint32_t payload_bytes = 0;
  std::uint64_t seconds = 0;
  std::uint64_t picoseconds = 0;
};

enum class DecodeStatus : std::uint8_t {
  ok,
  truncated,  // fewer than kHeaderBytes
  bad_magic,
  bad_version,
  unknown_format,
  bad_size_field,  // payload_bytes != sample_count * bytes per sample, or above kMaxPayloadBytes
};
std::string_view to_string(DecodeStatus status);

void encode_header(const FrameHeader& header, std::span<std::byte, kHeaderBytes> out);
DecodeStatus decode_header(std::span<const std::byte> in, FrameHeader& out);
// decode_header as if the magic were right: `ok` says the other fields describe a frame whose
// magic alone is damaged, so a reader can skip exactly that frame.
DecodeStatus decode_header_past_magic(std::span<const std::byte> in, FrameHeader& out);

}  // namespace sluice::raw_tcp
