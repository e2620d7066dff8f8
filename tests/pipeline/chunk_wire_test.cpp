// Chunk metadata wire form against byte vectors written out by hand from the layout table
// in chunk_wire.hpp (not produced by the encoder), and every rejection path of the decoder.
#include "pipeline/chunk_wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace sluice {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int value : values) out.push_back(static_cast<std::byte>(value));
  return out;
}

// The fixed 72 bytes for the chunk built in sample_chunk(), field by field.
// The 40-byte context block at 584 for sample_chunk(): binary64 bit patterns worked out by hand.
//   2.5e9   = 1.1641532182693481 × 2^31: exponent 1023 + 31 = 0x41E, mantissa 0x2A05F200 << 22
//             → 0x41E2A05F20000000
//   12.5e6  = 1.4901161193847656 × 2^23: exponent 0x416, mantissa 0x7D784 << 32 → 0x4167D78400000000
//   NaN     = 0x7FF8000000000000 (quiet NaN, what std::numeric_limits gives)
//   -1.5    = sign 1, exponent 0x3FF, mantissa 0x8000000000000 → 0xBFF8000000000000
std::vector<std::byte> expected_context_part() {
  return bytes({
      0x00, 0x00, 0x00, 0x20, 0x5F, 0xA0, 0xE2, 0x41,  // rf_frequency 2.5 GHz
      0x00, 0x00, 0x00, 0x00, 0x84, 0xD7, 0x67, 0x41,  // sample_rate 12.5 MHz
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8, 0x7F,  // bandwidth absent (NaN)
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8, 0x7F,  // reference level absent (NaN)
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8, 0xBF,  // gain -1.5 dB
  });
}

std::vector<std::byte> expected_fixed_part() {
  return bytes({
      0x53, 0x4C, 0x43, 0x4B,                          // magic "SLCK"
      0x03, 0x00,                                      // version 3
      0x70, 0x02,                                      // header_bytes 624 = 0x0270
      0x03, 0x00, 0x00, 0x00,                          // lane 3
      0x01,                                            // format ci16
      0x07,                                            // flags: timestamp valid, time base restarts, context changes
      0x02, 0x00,                                      // gap_count 2
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // sequence 0x0102030405060708
      0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // first_sample 4096
      0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // sample_count 1024
      0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // payload_bytes 4096
      0x80, 0x96, 0x98, 0x00, 0x00, 0x00, 0x00, 0x00,  // seconds 10000000 = 0x989680
      0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00, 0x00, 0x00,  // picoseconds 0x1FFFFFFFF
      0x07, 0x00, 0x00, 0x00,                          // packets 7
      0x00, 0x00, 0x00, 0x00,                          // in_data_mask: neither gap derived
  });
}

Chunk sample_chunk() {
  Chunk chunk;
  chunk.lane = 3;
  chunk.format = SampleFormat::ci16;
  chunk.sequence = 0x0102030405060708ULL;
  chunk.first_sample = 4096;
  chunk.time_jump = true;
  chunk.context_change = true;
  chunk.context.rf_frequency = 2.5e9;  // the sender retuned; bandwidth, level and gain stay absent (NaN)
  chunk.context.sample_rate = 12.5e6;
  chunk.context.gain_db = -1.5;
  chunk.sample_count = 1024;
  chunk.size = 4096;
  chunk.timestamp = Timestamp{10000000, 0x1FFFFFFFFULL, true};
  chunk.packets = 7;
  chunk.created_ns = 123;  // not carried
  EXPECT_TRUE(chunk.add_gap(100, 5));
  EXPECT_TRUE(chunk.add_gap(0xFFFFFFFFFFFFFFFFULL, 0x8000000000000000ULL));
  return chunk;
}

TEST(ChunkWire, EncodesTheDocumentedLayout) {
  std::array<std::byte, kChunkWireBytes> wire{};
  wire.fill(std::byte{0xEE});
  encode_chunk_metadata(sample_chunk(), wire);
  const auto fixed = expected_fixed_part();
  ASSERT_EQ(fixed.size(), kChunkWireFixedBytes);
  for (std::size_t i = 0; i < fixed.size(); ++i) EXPECT_EQ(wire[i], fixed[i]) << "byte " << i;
  const auto gaps = bytes({
      0x64, 0,    0,    0,    0,    0,    0,    0,     // gap 0 first_sample 100
      0x05, 0,    0,    0,    0,    0,    0,    0,     // gap 0 length 5
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,  // gap 1 first_sample max
      0,    0,    0,    0,    0,    0,    0,    0x80,  // gap 1 length 2^63
  });
  for (std::size_t i = 0; i < gaps.size(); ++i) EXPECT_EQ(wire[72 + i], gaps[i]) << "gap byte " << i;
  for (std::size_t i = 72 + gaps.size(); i < 584; ++i) EXPECT_EQ(wire[i], std::byte{0}) << "byte " << i;
  const auto context = expected_context_part();
  ASSERT_EQ(584 + context.size(), kChunkWireBytes);
  for (std::size_t i = 0; i < context.size(); ++i) EXPECT_EQ(wire[584 + i], context[i]) << "context byte " << i;
}

TEST(ChunkWire, DecodesHandWrittenBytes) {
  std::vector<std::byte> wire = expected_fixed_part();
  wire.resize(kChunkWireBytes);
  wire[72] = std::byte{0x64};
  wire[80] = std::byte{0x05};
  for (std::size_t i = 0; i < 8; ++i) wire[88 + i] = std::byte{0xFF};
  wire[96 + 7] = std::byte{0x80};
  const auto context = expected_context_part();
  std::copy(context.begin(), context.end(), wire.begin() + 584);
  Chunk chunk;
  chunk.created_ns = 55;
  ASSERT_EQ(decode_chunk_metadata(wire, chunk), ChunkWireStatus::ok);
  EXPECT_EQ(chunk.lane, 3U);
  EXPECT_EQ(chunk.format, SampleFormat::ci16);
  EXPECT_EQ(chunk.sequence, 0x0102030405060708ULL);
  EXPECT_TRUE(chunk.time_jump);
  EXPECT_TRUE(chunk.context_change);
  EXPECT_EQ(chunk.context.rf_frequency, 2.5e9);
  EXPECT_EQ(chunk.context.sample_rate, 12.5e6);
  EXPECT_TRUE(std::isnan(chunk.context.bandwidth));
  EXPECT_TRUE(std::isnan(chunk.context.reference_level_dbm));
  EXPECT_EQ(chunk.context.gain_db, -1.5);
  EXPECT_EQ(chunk.first_sample, 4096U);
  EXPECT_EQ(chunk.sample_count, 1024U);
  EXPECT_EQ(chunk.size, 4096U);
  EXPECT_TRUE(chunk.timestamp.valid);
  EXPECT_EQ(chunk.timestamp.seconds, 10000000U);
  EXPECT_EQ(chunk.timestamp.picoseconds, 0x1FFFFFFFFULL);
  EXPECT_EQ(chunk.packets, 7U);
  ASSERT_EQ(chunk.gap_count, 2U);
  EXPECT_EQ(chunk.gaps[0].first_sample, 100U);
  EXPECT_EQ(chunk.gaps[0].length, 5U);
  EXPECT_EQ(chunk.gaps[1].first_sample, 0xFFFFFFFFFFFFFFFFULL);
  EXPECT_EQ(chunk.gaps[1].length, 0x8000000000000000ULL);
  EXPECT_EQ(chunk.created_ns, 55U);  // receiver's own clock, untouched
}

TEST(ChunkWire, FullGapTableRoundTrips) {
  Chunk chunk;
  // Every third gap is a derived one (values present, computed from lost input).
  for (std::uint64_t i = 0; i < Chunk::kMaxGaps; ++i) ASSERT_TRUE(chunk.add_gap(i * 1000 + 1, i + 1, i % 3 == 0));
  std::array<std::byte, kChunkWireBytes> wire{};
  encode_chunk_metadata(chunk, wire);
  EXPECT_EQ(wire[14], std::byte{32});
  EXPECT_EQ(wire[68], std::byte{0x49});  // gaps 0, 3, 6: 0b01001001
  Chunk back;
  ASSERT_EQ(decode_chunk_metadata(wire, back), ChunkWireStatus::ok);
  ASSERT_EQ(back.gap_count, Chunk::kMaxGaps);
  for (std::uint64_t i = 0; i < Chunk::kMaxGaps; ++i) {
    EXPECT_EQ(back.gaps[i].first_sample, i * 1000 + 1);
    EXPECT_EQ(back.gaps[i].length, i + 1);
    EXPECT_EQ(back.gaps[i].in_data, i % 3 == 0) << "gap " << i;
  }
}

TEST(ChunkWire, RejectsBadHeadersAndLeavesTheChunkAlone) {
  std::array<std::byte, kChunkWireBytes> good{};
  encode_chunk_metadata(sample_chunk(), good);
  const auto check = [&](std::size_t offset, std::byte value, ChunkWireStatus expected) {
    auto wire = good;
    wire[offset] = value;
    Chunk chunk;
    chunk.sequence = 99;
    EXPECT_EQ(decode_chunk_metadata(wire, chunk), expected) << "offset " << offset;
    EXPECT_EQ(chunk.sequence, 99U);
  };
  check(0, std::byte{0x54}, ChunkWireStatus::bad_magic);
  check(4, std::byte{0x04}, ChunkWireStatus::unsupported_version);
  check(6, std::byte{0x49}, ChunkWireStatus::bad_size);
  check(12, std::byte{0x04}, ChunkWireStatus::bad_format);
  check(13, std::byte{0x08}, ChunkWireStatus::bad_flags);
  // Versions 1 and 2 (584 bytes, no context block) come from an older Sluice: refused by version.
  check(4, std::byte{0x01}, ChunkWireStatus::unsupported_version);
  check(4, std::byte{0x02}, ChunkWireStatus::unsupported_version);
  EXPECT_NE(to_string(ChunkWireStatus::unsupported_version).find("same"), std::string_view::npos);
  check(68, std::byte{0x04}, ChunkWireStatus::bad_flags);  // in_data bit of a gap past gap_count (2)
  check(14, std::byte{33}, ChunkWireStatus::too_many_gaps);
  Chunk chunk;
  EXPECT_EQ(decode_chunk_metadata(std::span(good).first(71), chunk), ChunkWireStatus::too_short);
  EXPECT_EQ(decode_chunk_metadata(std::span(good).first(kChunkWireBytes - 1), chunk), ChunkWireStatus::too_short);
}

}  // namespace
}  // namespace sluice
