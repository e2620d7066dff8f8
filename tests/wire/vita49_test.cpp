// VITA-49 encode/decode against byte vectors worked out by hand from the standard's layout,
// and one test per malformed class.
#include "wire/vita49.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "tests/wire/wire_bytes.hpp"
#include "wire/samples.hpp"

namespace sluice::vita49 {
namespace {

using test::bytes;

// type 1, C, T, TSI UTC, TSF real-time, count 5, 9 words; stream 0x12345678; class OUI 00-12-A2
// info 1 packet 2; integer 0x5F5E1000; fractional 0x0000000102030405; one ci16 sample (1, -2);
// trailer valid-data enable (bit 30) + indicator (bit 18).
const std::vector<std::byte> kFullPacket = bytes({
    0x1C, 0x65, 0x00, 0x09,                          // header
    0x12, 0x34, 0x56, 0x78,                          // stream ID
    0x00, 0x00, 0x12, 0xA2,                          // OUI
    0x00, 0x01, 0x00, 0x02,                          // information / packet class codes
    0x5F, 0x5E, 0x10, 0x00,                          // integer timestamp
    0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05,  // fractional timestamp
    0x00, 0x01, 0xFF, 0xFE,                          // payload: I = 1, Q = -2 (big-endian)
    0x40, 0x04, 0x00, 0x00,                          // trailer
});

Packet full_packet() {
  Packet packet;
  packet.header.type = PacketType::if_data_stream_id;
  packet.header.has_class_id = true;
  packet.header.has_trailer = true;
  packet.header.tsi = Tsi::utc;
  packet.header.tsf = Tsf::real_time;
  packet.header.packet_count = 5;
  packet.stream_id = 0x12345678;
  packet.class_id = {0x0012A2, 1, 2};
  packet.integer_timestamp = 0x5F5E1000;
  packet.fractional_timestamp = 0x0000000102030405ULL;
  packet.trailer.valid_data_enable = true;
  packet.trailer.valid_data = true;
  return packet;
}

TEST(Vita49, EncodesEveryFieldWhereTheStandardPutsIt) {
  const auto payload = bytes({0x00, 0x01, 0xFF, 0xFE});
  Packet packet = full_packet();
  packet.payload = payload;
  std::vector<std::byte> out(64);
  ASSERT_EQ(encode(packet, out), 36U);
  out.resize(36);
  EXPECT_EQ(out, kFullPacket);
}

TEST(Vita49, DecodesEveryField) {
  Packet packet;
  ASSERT_EQ(decode(kFullPacket, packet), DecodeStatus::ok);
  EXPECT_EQ(packet.header.type, PacketType::if_data_stream_id);
  EXPECT_TRUE(packet.header.has_class_id);
  EXPECT_TRUE(packet.header.has_trailer);
  EXPECT_EQ(packet.header.tsi, Tsi::utc);
  EXPECT_EQ(packet.header.tsf, Tsf::real_time);
  EXPECT_EQ(packet.header.packet_count, 5);
  EXPECT_EQ(packet.header.size_words, 9);
  EXPECT_EQ(packet.stream_id, 0x12345678U);
  EXPECT_EQ(packet.class_id.oui, 0x0012A2U);
  EXPECT_EQ(packet.class_id.information_class, 1);
  EXPECT_EQ(packet.class_id.packet_class, 2);
  EXPECT_EQ(packet.integer_timestamp, 0x5F5E1000U);
  EXPECT_EQ(packet.fractional_timestamp, 0x0000000102030405ULL);
  ASSERT_EQ(packet.payload.size(), 4U);
  EXPECT_EQ(packet.payload.data(), kFullPacket.data() + 28);
  EXPECT_TRUE(packet.trailer.valid_data_enable);
  EXPECT_TRUE(packet.trailer.valid_data);
  EXPECT_FALSE(packet.trailer.sample_loss_enable);
  EXPECT_EQ(packet.trailer.raw, 0x40040000U);
}

TEST(Vita49, TrailerSampleLossAndOverRangeBits) {
  // Over-range: enable bit 25, indicator bit 13; sample loss: enable bit 24, indicator bit 12.
  const auto packet_bytes = bytes({0x04, 0x00, 0x00, 0x02, 0x03, 0x00, 0x30, 0x00});
  Packet packet;
  ASSERT_EQ(decode(packet_bytes, packet), DecodeStatus::ok);
  EXPECT_EQ(packet.header.type, PacketType::if_data);
  EXPECT_TRUE(packet.payload.empty());
  EXPECT_TRUE(packet.trailer.over_range_enable);
  EXPECT_TRUE(packet.trailer.over_range);
  EXPECT_TRUE(packet.trailer.sample_loss_enable);
  EXPECT_TRUE(packet.trailer.sample_loss);
  EXPECT_FALSE(packet.trailer.valid_data_enable);

  Packet encoded;
  encoded.header.type = PacketType::if_data;
  encoded.header.has_trailer = true;
  encoded.trailer.over_range_enable = encoded.trailer.over_range = true;
  encoded.trailer.sample_loss_enable = encoded.trailer.sample_loss = true;
  std::vector<std::byte> out(8);
  ASSERT_EQ(encode(encoded, out), 8U);
  EXPECT_EQ(out, packet_bytes);
}

TEST(Vita49, MinimalPacketWithoutOptionalFields) {
  // type 0, no C/T/TSI/TSF, count 15, 2 words: header + one payload word.
  const auto packet_bytes = bytes({0x00, 0x0F, 0x00, 0x02, 0xDE, 0xAD, 0xBE, 0xEF});
  Packet packet;
  ASSERT_EQ(decode(packet_bytes, packet), DecodeStatus::ok);
  EXPECT_EQ(packet.header.packet_count, 15);
  EXPECT_EQ(packet.stream_id, 0U);
  EXPECT_EQ(packet.payload.size(), 4U);
  EXPECT_EQ(prefix_words(packet.header), 1U);
}

TEST(Vita49, TruncatedDatagrams) {
  Packet packet;
  EXPECT_EQ(decode(std::span<const std::byte>(kFullPacket.data(), 3), packet), DecodeStatus::truncated);
  EXPECT_EQ(decode(std::span<const std::byte>(kFullPacket.data(), 32), packet), DecodeStatus::truncated);
  EXPECT_EQ(decode(std::span<const std::byte>(kFullPacket.data(), 0), packet), DecodeStatus::truncated);
}

// The order key reads the timestamp words wherever the optional fields put them: the hand-made
// packet's seconds (low 24 bits) above its picoseconds.
TEST(Vita49, OrderKeyIsTheTimestampWhereverItSits) {
  std::uint64_t position = 0;
  ASSERT_TRUE(order_key(kFullPacket, position));
  EXPECT_EQ(position, (std::uint64_t{0x5F5E1000} & 0xFFFFFF) << 40 | 0x0000000102030405ULL);
  EXPECT_FALSE(order_key(std::span<const std::byte>(kFullPacket.data(), 20), position)) << "cut inside the timestamp";
  // Across a second, and over a sample count: the key grows along the stream.
  std::vector<std::uint64_t> keys;
  for (const auto& [seconds, picoseconds] : std::vector<std::pair<std::uint32_t, std::uint64_t>>{
           {1'700'000'000, 999'999'000'000ULL}, {1'700'000'001, 0}, {1'700'000'001, 4'000'000}}) {
    Packet packet = full_packet();
    packet.integer_timestamp = seconds;
    packet.fractional_timestamp = picoseconds;
    std::vector<std::byte> out(64);
    out.resize(encode(packet, out));
    ASSERT_TRUE(order_key(out, position));
    keys.push_back(position);
  }
  EXPECT_LT(keys[0], keys[1]);
  EXPECT_LT(keys[1], keys[2]);
  Packet counted = full_packet();
  counted.header.tsi = Tsi::none;
  counted.header.tsf = Tsf::sample_count;
  counted.header.has_class_id = false;
  counted.fractional_timestamp = 123'456'789;
  std::vector<std::byte> out(64);
  out.resize(encode(counted, out));
  ASSERT_TRUE(order_key(out, position));
  EXPECT_EQ(position, 123'456'789U);
  // Without a timestamp there is no key.
  Packet untimed = full_packet();
  untimed.header.tsi = Tsi::none;
  untimed.header.tsf = Tsf::none;
  out.assign(64, std::byte{0});
  out.resize(encode(untimed, out));
  EXPECT_FALSE(order_key(out, position));
}

TEST(Vita49, SizeFieldThatDisagreesWithTheDatagram) {
  Packet packet;
  auto longer = kFullPacket;
  longer.insert(longer.end(), 4, std::byte{0});
  EXPECT_EQ(decode(longer, packet), DecodeStatus::bad_size_field);
  auto too_small = kFullPacket;
  too_small[3] = std::byte{0x07};  // 7 words cannot hold the 8 fixed words this header declares
  EXPECT_EQ(decode(std::span<const std::byte>(too_small.data(), 28), packet), DecodeStatus::bad_size_field);
}

TEST(Vita49, NonDataPacketTypesAreUnknown) {
  Packet packet;
  for (unsigned type : {2U, 3U, 4U, 5U, 6U, 15U}) {
    auto changed = kFullPacket;
    changed[0] = static_cast<std::byte>(type << 4 | 0x0C);
    EXPECT_EQ(decode(changed, packet), DecodeStatus::unknown_type) << "type " << type;
  }
}

TEST(Vita49, SampleIndexAndTimestampAreExactInverses) {
  const std::uint64_t rate = 122'880'000;
  for (std::uint64_t index :
       {0ULL, 1ULL, 359ULL, 122'879'999ULL, 122'880'000ULL, 1'700'000'000ULL * 122'880'000ULL + 12345}) {
    std::uint64_t seconds = 0;
    std::uint64_t picoseconds = 0;
    timestamp_of(index, rate, seconds, picoseconds);
    EXPECT_LT(picoseconds, kPicosecondsPerSecond);
    EXPECT_EQ(sample_index(seconds, picoseconds, rate), index);
  }
}

// Every field decode() reads, compared one by one (Packet has no operator==).
void expect_same_packet(const Packet& got, const Packet& want) {
  EXPECT_EQ(got.header.type, want.header.type);
  EXPECT_EQ(got.header.has_class_id, want.header.has_class_id);
  EXPECT_EQ(got.header.has_trailer, want.header.has_trailer);
  EXPECT_EQ(got.header.tsi, want.header.tsi);
  EXPECT_EQ(got.header.tsf, want.header.tsf);
  EXPECT_EQ(got.header.packet_count, want.header.packet_count);
  EXPECT_EQ(got.header.size_words, want.header.size_words);
  EXPECT_EQ(got.stream_id, want.stream_id);
  EXPECT_EQ(got.class_id.oui, want.class_id.oui);
  EXPECT_EQ(got.class_id.information_class, want.class_id.information_class);
  EXPECT_EQ(got.class_id.packet_class, want.class_id.packet_class);
  EXPECT_EQ(got.integer_timestamp, want.integer_timestamp);
  EXPECT_EQ(got.fractional_timestamp, want.fractional_timestamp);
  EXPECT_EQ(got.trailer.raw, want.trailer.raw);
  EXPECT_EQ(got.payload.data(), want.payload.data());
  EXPECT_EQ(got.payload.size(), want.payload.size());
}

TEST(Vita49, RepeatDecoderReadsTheNextPacketOfAStreamAsDecodeDoes) {
  // Every header shape: with and without stream ID, class ID, each timestamp kind, trailer.
  for (unsigned shape = 0; shape < 64; ++shape) {
    Packet first;
    first.header.type = (shape & 1U) != 0 ? PacketType::if_data_stream_id : PacketType::if_data;
    first.header.has_class_id = (shape & 2U) != 0;
    first.header.has_trailer = (shape & 4U) != 0;
    first.header.tsi = static_cast<Tsi>(shape >> 3 & 1U ? 1U : 0U);
    first.header.tsf = static_cast<Tsf>(shape >> 4 & 3U);
    first.stream_id = 0xABCD0001;
    first.class_id = {0x0012A2, 7, 9};
    first.trailer.valid_data_enable = true;
    const std::vector<std::byte> samples(64, std::byte{0x5A});
    first.payload = samples;
    std::vector<std::byte> wire_first(128);
    wire_first.resize(encode(first, wire_first));
    ASSERT_FALSE(wire_first.empty()) << shape;
    Packet decoded;
    ASSERT_EQ(decode(wire_first, decoded), DecodeStatus::ok);
    RepeatDecoder repeat;
    Packet unchanged;
    EXPECT_FALSE(repeat.decode(wire_first, unchanged)) << "nothing remembered yet";
    repeat.remember(wire_first, decoded);

    Packet next = first;
    next.header.packet_count = 1;
    next.integer_timestamp = 1'700'000'001;
    next.fractional_timestamp = 999'999'999'999ULL;
    next.trailer.over_range_enable = true;
    next.trailer.over_range = true;
    std::vector<std::byte> wire_next(128);
    wire_next.resize(encode(next, wire_next));
    Packet fast;
    Packet whole;
    ASSERT_TRUE(repeat.decode(wire_next, fast)) << shape;
    ASSERT_EQ(decode(wire_next, whole), DecodeStatus::ok);
    expect_same_packet(fast, whole);
  }
}

TEST(Vita49, RepeatDecoderLeavesEveryOtherHeaderToDecode) {
  const auto payload = bytes({0x00, 0x01, 0xFF, 0xFE});
  Packet packet = full_packet();
  packet.payload = payload;
  std::vector<std::byte> remembered(64);
  remembered.resize(encode(packet, remembered));
  Packet decoded;
  ASSERT_EQ(decode(remembered, decoded), DecodeStatus::ok);
  RepeatDecoder repeat;
  repeat.remember(remembered, decoded);
  // Each byte of the header words that must match (word 0 but the count, stream ID, class ID)
  // changed alone: never taken for the remembered shape.
  for (std::size_t at = 0; at < 16; ++at) {
    if (at == 1) continue;  // the count nibble's byte, below
    std::vector<std::byte> changed = remembered;
    changed[at] ^= std::byte{0x01};
    Packet out;
    EXPECT_FALSE(repeat.decode(changed, out)) << at;
  }
  std::vector<std::byte> count_changed = remembered;
  count_changed[1] = std::byte{0x6F};  // TSI/TSF kept, count 15
  Packet out;
  EXPECT_TRUE(repeat.decode(count_changed, out));
  EXPECT_EQ(out.header.packet_count, 15U);
  std::vector<std::byte> flags_changed = remembered;
  flags_changed[1] = std::byte{0x55};  // TSF 1 instead of 2
  EXPECT_FALSE(repeat.decode(flags_changed, out));
  std::vector<std::byte> longer = remembered;
  longer.insert(longer.end(), 4, std::byte{0});
  EXPECT_FALSE(repeat.decode(longer, out)) << "a datagram of another length";
  repeat.forget();
  EXPECT_FALSE(repeat.decode(remembered, out));
}

TEST(Samples, SwapTurnsBigEndianComponentsIntoLittleEndian) {
  // ci16: three samples (odd count exercises the half-word tail).
  const auto wire_ci16 = bytes({0x00, 0x01, 0xFF, 0xFE, 0x12, 0x34, 0x80, 0x00, 0x7F, 0xFF, 0x00, 0x02});
  std::vector<std::byte> local(wire_ci16.size());
  wire::copy_swapped(SampleFormat::ci16, wire_ci16.data(), local.data(), local.size());
  EXPECT_EQ(local, bytes({0x01, 0x00, 0xFE, 0xFF, 0x34, 0x12, 0x00, 0x80, 0xFF, 0x7F, 0x02, 0x00}));
  // cf32: 1.0f = 0x3F800000, -2.0f = 0xC0000000.
  const auto wire_cf32 = bytes({0x3F, 0x80, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00});
  std::vector<std::byte> floats(8);
  wire::copy_swapped(SampleFormat::cf32, wire_cf32.data(), floats.data(), floats.size());
  float values[2] = {};
  std::memcpy(values, floats.data(), sizeof(values));
  EXPECT_EQ(values[0], 1.0F);
  EXPECT_EQ(values[1], -2.0F);
}

TEST(Samples, StreamedCopyWritesWhatTheSwapWritesAtEveryAlignmentAndLength) {
  // The socket stages' copy into chunks: 16-byte non-temporal stores from the first 16-byte
  // boundary on (64-byte ones from the first 64-byte boundary, with AVX-512), 4-byte streamed
  // ones before and after. Each width this CPU has, every destination offset (a whole number of
  // samples, at most 4 bytes apart) within a line and every length up to a few lines, for each
  // format swapped and not: the bytes written equal copy_swapped's (or memcpy's), and not one
  // byte outside [out, out + bytes) changes.
  std::vector<std::byte> wire_bytes(512);
  for (std::size_t i = 0; i < wire_bytes.size(); ++i) wire_bytes[i] = static_cast<std::byte>((i * 37 + 11) & 0xFF);
  std::vector<wire::StreamWidth> widths{wire::StreamWidth::sse2};
  if (wire::stream_width() == wire::StreamWidth::avx512) widths.push_back(wire::StreamWidth::avx512);
  for (const wire::StreamWidth width : widths) {
    for (const SampleFormat format : {SampleFormat::ci8, SampleFormat::ci16, SampleFormat::cf32, SampleFormat::rf32}) {
      const std::size_t sample = bytes_per_sample(format);
      for (const bool swap : {true, false}) {
        for (std::size_t offset = 0; offset < 68; offset += std::min<std::size_t>(sample, 4)) {
          for (std::size_t length = 0; length <= 328; length += sample) {
            alignas(64) std::array<std::byte, 448> streamed{};
            alignas(64) std::array<std::byte, 448> expected{};
            streamed.fill(std::byte{0xA5});
            expected.fill(std::byte{0xA5});
            wire::stream_copy(format, swap, wire_bytes.data() + 3, streamed.data() + offset, length, width);
            wire::stream_fence();
            if (swap) {
              wire::copy_swapped(format, wire_bytes.data() + 3, expected.data() + offset, length);
            } else {
              std::memcpy(expected.data() + offset, wire_bytes.data() + 3, length);
            }
            ASSERT_EQ(streamed, expected)
                << to_string(format) << (swap ? " swapped" : " plain") << ", offset " << offset << ", " << length
                << " bytes, " << (width == wire::StreamWidth::avx512 ? "AVX-512" : "SSE2");
          }
        }
      }
    }
  }
  std::printf("stream_copy on this CPU: %s\n",
              wire::stream_width() == wire::StreamWidth::avx512 ? "64-byte AVX-512 stores" : "16-byte SSE2 stores");
}

TEST(Samples, SwapInPlaceWritesWhatTheCopyWritesAtEveryAlignmentAndLength) {
  // The udp stage's swap of payloads the kernel wrote straight into a chunk: 32-byte steps where
  // the CPU has AVX2, 16-byte ones, then words. Every offset within a line and every length up to
  // a few lines: the bytes equal copy_swapped's from the same input, and none outside changes.
  std::vector<std::byte> wire_bytes(512);
  for (std::size_t i = 0; i < wire_bytes.size(); ++i) wire_bytes[i] = static_cast<std::byte>((i * 53 + 5) & 0xFF);
  for (const SampleFormat format : {SampleFormat::ci8, SampleFormat::ci16, SampleFormat::cf32, SampleFormat::rf32}) {
    const std::size_t sample = bytes_per_sample(format);
    for (std::size_t offset = 0; offset < 68; offset += std::min<std::size_t>(sample, 4)) {
      for (std::size_t length = 0; length <= 328; length += sample) {
        alignas(64) std::array<std::byte, 448> swapped{};
        alignas(64) std::array<std::byte, 448> expected{};
        swapped.fill(std::byte{0xA5});
        expected.fill(std::byte{0xA5});
        std::memcpy(swapped.data() + offset, wire_bytes.data(), length);
        wire::swap_in_place(format, swapped.data() + offset, length);
        wire::copy_swapped(format, wire_bytes.data(), expected.data() + offset, length);
        ASSERT_EQ(swapped, expected) << to_string(format) << ", offset " << offset << ", " << length << " bytes";
      }
    }
  }
}

}  // namespace
}  // namespace sluice::vita49
