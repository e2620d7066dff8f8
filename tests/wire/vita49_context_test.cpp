// VITA 49.0 IF Context packets against byte vectors worked out by hand from the standard's
// layout (CIF bit table, radix-20 Hz and radix-7 dB fields), and one test per malformed class.
#include "wire/vita49_context.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "tests/wire/packet_bytes.hpp"

namespace sluice::vita49 {
namespace {

// type 4, C, TSI UTC, TSF real-time, count 3, 16 words; stream 1; OUI 00-12-A2, info 1
// packet 3; integer 100, fractional 0. CIF 0xA9A00000: change (31), bandwidth (29), RF
// reference frequency (27), reference level (24), gain (23), sample rate (21).
//   bandwidth 20 MHz      20e6 * 2^20 = 0x0000_1312_D000_0000
//   RF 2.4 GHz            2.4e9 * 2^20 = 0x0008_F0D1_8000_0000
//   level -10.5 dBm       -10.5 * 128 = -1344 = 0xFAC0 in bits 15..0
//   gain 20.25 / -3 dB    stage 1 20.25 * 128 = 0x0A20 (bits 15..0), stage 2 -384 = 0xFE80 (31..16)
//   sample rate 25 MHz    25e6 * 2^20 = 0x0000_17D7_8400_0000
const std::vector<std::byte> kContext = bytes({
    0x48, 0x63, 0x00, 0x10,                          // header
    0x00, 0x00, 0x00, 0x01,                          // stream ID
    0x00, 0x00, 0x12, 0xA2,                          // OUI
    0x00, 0x01, 0x00, 0x03,                          // class codes
    0x00, 0x00, 0x00, 0x64,                          // integer timestamp
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // fractional timestamp
    0xA9, 0xA0, 0x00, 0x00,                          // CIF
    0x00, 0x00, 0x13, 0x12, 0xD0, 0x00, 0x00, 0x00,  // bandwidth
    0x00, 0x08, 0xF0, 0xD1, 0x80, 0x00, 0x00, 0x00,  // RF reference frequency
    0x00, 0x00, 0xFA, 0xC0,                          // reference level
    0xFE, 0x80, 0x0A, 0x20,                          // gain
    0x00, 0x00, 0x17, 0xD7, 0x84, 0x00, 0x00, 0x00,  // sample rate
});

ContextPacket full_context() {
  ContextPacket packet;
  packet.stream_id = 1;
  packet.has_class_id = true;
  packet.class_id = {0x0012A2, 1, 3};
  packet.tsi = Tsi::utc;
  packet.tsf = Tsf::real_time;
  packet.integer_timestamp = 100;
  packet.packet_count = 3;
  packet.changed = true;
  packet.bandwidth_hz = 20e6;
  packet.rf_reference_frequency_hz = 2.4e9;
  packet.reference_level_dbm = -10.5;
  packet.gain_stage1_db = 20.25;
  packet.gain_stage2_db = -3.0;
  packet.sample_rate_hz = 25e6;
  return packet;
}

TEST(Vita49Context, EncodesEveryFieldWhereTheStandardPutsIt) {
  std::vector<std::byte> out(128);
  ASSERT_EQ(context_packet_bytes(full_context()), kContext.size());
  ASSERT_EQ(encode_context(full_context(), out), kContext.size());
  out.resize(kContext.size());
  EXPECT_EQ(out, kContext);
}

TEST(Vita49Context, DecodesTheHandBuiltPacket) {
  ContextPacket packet;
  ASSERT_EQ(decode_context(kContext, packet), ContextStatus::ok);
  EXPECT_EQ(packet.stream_id, 1U);
  EXPECT_TRUE(packet.has_class_id);
  EXPECT_EQ(packet.class_id.oui, 0x0012A2U);
  EXPECT_EQ(packet.class_id.packet_class, 3U);
  EXPECT_EQ(packet.integer_timestamp, 100U);
  EXPECT_EQ(packet.packet_count, 3U);
  EXPECT_TRUE(packet.changed);
  EXPECT_EQ(packet.bandwidth_hz, 20e6);
  EXPECT_EQ(packet.rf_reference_frequency_hz, 2.4e9);
  EXPECT_EQ(packet.reference_level_dbm, -10.5);
  EXPECT_EQ(packet.gain_stage1_db, 20.25);
  EXPECT_EQ(packet.gain_stage2_db, -3.0);
  EXPECT_EQ(packet.sample_rate_hz, 25e6);
  EXPECT_EQ(packet.skipped_fields, 0U);
}

TEST(Vita49Context, SkipsFieldsItDoesNotReadByTheirSize) {
  // No class ID or timestamps: header, stream ID, CIF 0x00260200 = sample rate (21),
  // temperature (18, 1 word), device ID (17, 2 words), GPS ASCII (9: OUI, count 2, 2 words).
  const auto packet_bytes_in = bytes({
      0x40, 0x00, 0x00, 0x0C,                          // type 4, 12 words
      0x00, 0x00, 0x00, 0x07,                          // stream ID
      0x00, 0x26, 0x02, 0x00,                          // CIF
      0x00, 0x00, 0x00, 0xF4, 0x24, 0x00, 0x00, 0x00,  // sample rate 1 MHz: 1e6 * 2^20 = 0xF4240 << 20
      0x00, 0x00, 0x0C, 0x80,                          // temperature 25 C (radix 6), skipped
      0x00, 0x12, 0xA2, 0x00, 0x00, 0x00, 0x00, 0x01,  // device ID, skipped
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x24, 0x47, 0x50, 0x47,  // GPS ASCII: OUI, 2 words, "$GPG"
      0x47, 0x41, 0x0D, 0x0A,                                                  // "GA\r\n"
  });
  ContextPacket packet;
  ASSERT_EQ(decode_context(packet_bytes_in, packet), ContextStatus::ok);
  EXPECT_EQ(packet.stream_id, 7U);
  EXPECT_EQ(packet.sample_rate_hz, 1e6);
  EXPECT_FALSE(packet.rf_reference_frequency_hz.has_value());
  EXPECT_FALSE(packet.gain_stage1_db.has_value());
  EXPECT_EQ(packet.skipped_fields, (1U << 18) | (1U << 17) | (1U << 9));
}

TEST(Vita49Context, SizesContextAssociationListsFromTheirHeader) {
  // source list 1, system list 2 (word 1); vector 1, A set, async 1 (word 2): 2 + 1 + 2 + 1 + 1 + 1.
  const auto lists = bytes({0x00, 0x01, 0x00, 0x02, 0x00, 0x01, 0x80, 0x01});
  EXPECT_EQ(context_field_words(8, lists), 8U);
  EXPECT_EQ(context_field_words(21, lists), 2U);
  EXPECT_EQ(context_field_words(14, lists), 11U);
  EXPECT_FALSE(context_field_words(7, lists).has_value());
  EXPECT_FALSE(context_field_words(9, std::span(lists).first(4)).has_value());
}

TEST(Vita49Context, RefusesMalformedPackets) {
  ContextPacket packet;
  // A reserved CIF bit: the size of what follows is unknown.
  auto reserved = bytes({0x40, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01});
  EXPECT_EQ(decode_context(reserved, packet), ContextStatus::reserved_cif_bit);
  // Sample rate declared but the packet ends after one of its two words.
  auto short_field =
      bytes({0x40, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01});
  EXPECT_EQ(decode_context(short_field, packet), ContextStatus::truncated);
  // A word after the declared fields.
  auto extra = bytes({0x40, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xDE, 0xAD, 0xBE, 0xEF});
  EXPECT_EQ(decode_context(extra, packet), ContextStatus::bad_size_field);
  // No CIF at all.
  auto no_cif = bytes({0x40, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01});
  EXPECT_EQ(decode_context(no_cif, packet), ContextStatus::truncated);
  // A negative sample rate.
  auto negative = bytes({0x40, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x20,
                         0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xF0, 0x00, 0x00});
  EXPECT_EQ(decode_context(negative, packet), ContextStatus::bad_value);
  // IF Data is not context, and context is never data.
  auto data = bytes({0x10, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0xFF, 0xFE});
  EXPECT_EQ(decode_context(data, packet), ContextStatus::not_context);
  Packet as_data;
  EXPECT_EQ(decode(kContext, as_data), DecodeStatus::unknown_type);
  // The size field shorter than the datagram.
  auto longer = kContext;
  longer.resize(longer.size() + 4);
  EXPECT_EQ(decode_context(longer, packet), ContextStatus::bad_size_field);
}

TEST(Vita49Context, RefusesValuesThatDoNotFitTheirField) {
  std::vector<std::byte> out(128);
  ContextPacket packet = full_context();
  packet.gain_stage1_db = 300.0;  // radix-7 16-bit holds -256 .. +255.99 dB
  EXPECT_EQ(encode_context(packet, out), 0U);
  packet = full_context();
  packet.sample_rate_hz = 1e16;  // radix-20 64-bit holds about 8.8 THz
  EXPECT_EQ(encode_context(packet, out), 0U);
}

}  // namespace
}  // namespace sluice::vita49
