// Raw TCP frame header: the documented byte layout and each malformed class.
#include "wire/raw_tcp.hpp"

#include <gtest/gtest.h>

#include <array>

namespace sluice::raw_tcp {
namespace {

TEST(RawTcp, HeaderLayoutMatchesTheDocumentedOffsets) {
  FrameHeader header;
  header.format = SampleFormat::cf32;
  header.sequence = 0x0102030405060708ULL;
  header.first_sample = 0x1112131415161718ULL;
  header.sample_count = 3;
  header.payload_bytes = 24;
  header.seconds = 0x2122232425262728ULL;
  header.picoseconds = 0x3132333435363738ULL;
  std::array<std::byte, kHeaderBytes> out{};
  encode_header(header, out);
  const std::array<unsigned, kHeaderBytes> expected{
      'S',  'L',  'R',  'T',  0x01, 0x00, 0x02, 0x00,   // magic, version, format
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,   // sequence
      0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,   // first_sample
      0x03, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x00,   // sample_count, payload_bytes
      0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21,   // seconds
      0x38, 0x37, 0x36, 0x35, 0x34, 0x33, 0x32, 0x31};  // picoseconds
  for (std::size_t i = 0; i < kHeaderBytes; ++i)
    EXPECT_EQ(std::to_integer<unsigned>(out[i]), expected[i]) << "byte " << i;

  FrameHeader decoded;
  ASSERT_EQ(decode_header(out, decoded), DecodeStatus::ok);
  EXPECT_EQ(decoded.format, SampleFormat::cf32);
  EXPECT_EQ(decoded.sequence, header.sequence);
  EXPECT_EQ(decoded.first_sample, header.first_sample);
  EXPECT_EQ(decoded.sample_count, 3U);
  EXPECT_EQ(decoded.payload_bytes, 24U);
  EXPECT_EQ(decoded.seconds, header.seconds);
  EXPECT_EQ(decoded.picoseconds, header.picoseconds);
}

TEST(RawTcp, MalformedHeaders) {
  FrameHeader header;
  header.sample_count = 10;
  header.payload_bytes = 40;
  std::array<std::byte, kHeaderBytes> good{};
  encode_header(header, good);
  FrameHeader decoded;
  EXPECT_EQ(decode_header(std::span<const std::byte>(good.data(), 47), decoded), DecodeStatus::truncated);
  auto bad = good;
  bad[0] = std::byte{0};
  EXPECT_EQ(decode_header(bad, decoded), DecodeStatus::bad_magic);
  bad = good;
  bad[4] = std::byte{2};
  EXPECT_EQ(decode_header(bad, decoded), DecodeStatus::bad_version);
  bad = good;
  bad[6] = std::byte{9};
  EXPECT_EQ(decode_header(bad, decoded), DecodeStatus::unknown_format);
  bad = good;
  bad[28] = std::byte{41};  // payload_bytes != sample_count * 4
  EXPECT_EQ(decode_header(bad, decoded), DecodeStatus::bad_size_field);
  header.sample_count = (kMaxPayloadBytes / 4) + 1;
  header.payload_bytes = header.sample_count * 4;
  encode_header(header, bad);
  EXPECT_EQ(decode_header(bad, decoded), DecodeStatus::bad_size_field);
}

}  // namespace
}  // namespace sluice::raw_tcp
