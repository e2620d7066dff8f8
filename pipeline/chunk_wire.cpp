// Chunk metadata wire form: explicit little-endian stores and loads, so the layout is the
// same whatever the host's byte order and struct padding.
#include "pipeline/chunk_wire.hpp"

#include <bit>

namespace sluice {
namespace {

constexpr std::uint8_t kTimestampValid = 1;
constexpr std::uint8_t kTimeJump = 2;
constexpr std::uint8_t kContextChange = 4;
constexpr std::size_t kContextOffset = kChunkWireFixedBytes + Chunk::kMaxGaps * 16;

}  // namespace

std::string_view to_string(ChunkWireStatus status) {
  switch (status) {
    case ChunkWireStatus::ok:
      return "ok";
    case ChunkWireStatus::too_short:
      return "chunk header too short";
    case ChunkWireStatus::bad_magic:
      return "not a chunk header (bad magic)";
    case ChunkWireStatus::unsupported_version:
      return "unsupported chunk header version (the peer runs another Sluice version: run the same on both nodes)";
    case ChunkWireStatus::bad_size:
      return "chunk header size does not match its version";
    case ChunkWireStatus::bad_format:
      return "unknown sample format in chunk header";
    case ChunkWireStatus::bad_flags:
      return "reserved bits set in chunk header";
    case ChunkWireStatus::too_many_gaps:
      return "more than 32 gaps in chunk header";
  }
  return "?";
}

void encode_chunk_metadata(const Chunk& chunk, std::span<std::byte, kChunkWireBytes> out) noexcept {
  std::byte* p = out.data();
  store_little_endian<std::uint32_t>(p + 0, kChunkWireMagic);
  store_little_endian<std::uint16_t>(p + 4, kChunkWireVersion);
  store_little_endian<std::uint16_t>(p + 6, static_cast<std::uint16_t>(kChunkWireBytes));
  store_little_endian<std::uint32_t>(p + 8, chunk.lane);
  store_little_endian<std::uint8_t>(p + 12, static_cast<std::uint8_t>(chunk.format));
  store_little_endian<std::uint8_t>(p + 13, static_cast<std::uint8_t>((chunk.timestamp.valid ? kTimestampValid : 0) |
                                                                      (chunk.time_jump ? kTimeJump : 0) |
                                                                      (chunk.context_change ? kContextChange : 0)));
  const std::uint32_t gaps = chunk.gap_count < Chunk::kMaxGaps ? chunk.gap_count : Chunk::kMaxGaps;
  store_little_endian<std::uint16_t>(p + 14, static_cast<std::uint16_t>(gaps));
  store_little_endian<std::uint64_t>(p + 16, chunk.sequence);
  store_little_endian<std::uint64_t>(p + 24, chunk.first_sample);
  store_little_endian<std::uint64_t>(p + 32, chunk.sample_count);
  store_little_endian<std::uint64_t>(p + 40, chunk.size);
  store_little_endian<std::uint64_t>(p + 48, chunk.timestamp.seconds);
  store_little_endian<std::uint64_t>(p + 56, chunk.timestamp.picoseconds);
  store_little_endian<std::uint32_t>(p + 64, chunk.packets);
  std::uint32_t in_data_mask = 0;
  for (std::uint32_t i = 0; i < gaps; ++i) {
    if (chunk.gaps[i].in_data) in_data_mask |= 1U << i;
  }
  store_little_endian<std::uint32_t>(p + 68, in_data_mask);
  for (std::size_t i = 0; i < Chunk::kMaxGaps; ++i) {
    const Gap gap = i < gaps ? chunk.gaps[i] : Gap{};
    store_little_endian<std::uint64_t>(p + kChunkWireFixedBytes + 16 * i, gap.first_sample);
    store_little_endian<std::uint64_t>(p + kChunkWireFixedBytes + 16 * i + 8, gap.length);
  }
  const StreamContext& context = chunk.context;
  std::size_t at = kContextOffset;
  for (double value :
       {context.rf_frequency, context.sample_rate, context.bandwidth, context.reference_level_dbm, context.gain_db}) {
    store_little_endian<std::uint64_t>(p + at, std::bit_cast<std::uint64_t>(value));
    at += 8;
  }
}

ChunkWireStatus decode_chunk_metadata(std::span<const std::byte> in, Chunk& chunk) noexcept {
  if (in.size() < kChunkWireFixedBytes) return ChunkWireStatus::too_short;
  const std::byte* p = in.data();
  if (load_little_endian<std::uint32_t>(p) != kChunkWireMagic) return ChunkWireStatus::bad_magic;
  const auto version = load_little_endian<std::uint16_t>(p + 4);
  if (version != kChunkWireVersion) return ChunkWireStatus::unsupported_version;
  if (load_little_endian<std::uint16_t>(p + 6) != kChunkWireBytes) return ChunkWireStatus::bad_size;
  if (in.size() < kChunkWireBytes) return ChunkWireStatus::too_short;
  const auto format = load_little_endian<std::uint8_t>(p + 12);
  if (format > static_cast<std::uint8_t>(SampleFormat::rf32)) return ChunkWireStatus::bad_format;
  const auto flags = load_little_endian<std::uint8_t>(p + 13);
  const auto gap_count = load_little_endian<std::uint16_t>(p + 14);
  if (gap_count > Chunk::kMaxGaps) return ChunkWireStatus::too_many_gaps;
  const auto in_data_mask = load_little_endian<std::uint32_t>(p + 68);
  const std::uint32_t valid_mask = gap_count == 32 ? 0xFFFFFFFFU : (1U << gap_count) - 1U;
  constexpr auto known = static_cast<std::uint8_t>(kTimestampValid | kTimeJump | kContextChange);
  if ((flags & ~known) != 0 || (in_data_mask & ~valid_mask) != 0) return ChunkWireStatus::bad_flags;

  chunk.lane = load_little_endian<std::uint32_t>(p + 8);
  chunk.format = static_cast<SampleFormat>(format);
  chunk.timestamp.valid = (flags & kTimestampValid) != 0;
  chunk.time_jump = (flags & kTimeJump) != 0;
  chunk.context_change = (flags & kContextChange) != 0;
  auto value_at = [p](std::size_t field) {
    return std::bit_cast<double>(load_little_endian<std::uint64_t>(p + kContextOffset + 8 * field));
  };
  chunk.context = StreamContext{value_at(0), value_at(1), value_at(2), value_at(3), value_at(4)};
  chunk.gap_count = gap_count;
  chunk.sequence = load_little_endian<std::uint64_t>(p + 16);
  chunk.first_sample = load_little_endian<std::uint64_t>(p + 24);
  chunk.sample_count = load_little_endian<std::uint64_t>(p + 32);
  chunk.size = static_cast<std::size_t>(load_little_endian<std::uint64_t>(p + 40));
  chunk.timestamp.seconds = load_little_endian<std::uint64_t>(p + 48);
  chunk.timestamp.picoseconds = load_little_endian<std::uint64_t>(p + 56);
  chunk.packets = load_little_endian<std::uint32_t>(p + 64);
  for (std::size_t i = 0; i < Chunk::kMaxGaps; ++i) {
    chunk.gaps[i] = i < gap_count ? Gap{load_little_endian<std::uint64_t>(p + kChunkWireFixedBytes + 16 * i),
                                        load_little_endian<std::uint64_t>(p + kChunkWireFixedBytes + 16 * i + 8),
                                        ((in_data_mask >> i) & 1U) != 0}
                                  : Gap{};
  }
  return ChunkWireStatus::ok;
}

}  // namespace sluice
