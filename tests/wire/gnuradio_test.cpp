// gr-network headers against byte vectors written out by hand from GNU Radio's structs.
#include "wire/gnuradio.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "tests/wire/packet_bytes.hpp"

namespace sluice::gnuradio {
namespace {

TEST(GnuRadio, SequenceHeaderIsALittleEndianUint64) {
  // Sequence 0x0102030405060708, then two payload bytes.
  const auto datagram = bytes({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xAA, 0xBB});
  Header header;
  ASSERT_EQ(decode(datagram, false, header), DecodeStatus::ok);
  EXPECT_EQ(header.sequence, 0x0102030405060708ULL);
  EXPECT_EQ(header.header_bytes, 8U);
  std::array<std::byte, 8> encoded{};
  encode(0x0102030405060708ULL, false, 10, encoded);
  EXPECT_TRUE(std::equal(encoded.begin(), encoded.end(), datagram.begin()));
}

TEST(GnuRadio, SequenceAndSizeHeaderChecksTheSize) {
  // Sequence 1, size 18 (0x0012) = 16-byte header + 2 payload bytes; padding arbitrary.
  auto datagram = bytes({0x01, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x00, 0xDE, 0xAD, 0xBE, 0xEF, 0x55, 0x66, 0xAA, 0xBB});
  Header header;
  ASSERT_EQ(decode(datagram, true, header), DecodeStatus::ok);
  EXPECT_EQ(header.sequence, 1U);
  EXPECT_EQ(header.header_bytes, 16U);
  datagram[8] = std::byte{0x13};
  EXPECT_EQ(decode(datagram, true, header), DecodeStatus::bad_size_field);
  datagram[8] = std::byte{0x12};
  datagram[9] = std::byte{0x80};  // negative int16
  EXPECT_EQ(decode(datagram, true, header), DecodeStatus::bad_size_field);
  std::array<std::byte, 16> encoded{};
  encode(1, true, 18, encoded);
  EXPECT_EQ(encoded[0], std::byte{0x01});
  EXPECT_EQ(encoded[8], std::byte{0x12});
  EXPECT_EQ(encoded[9], std::byte{0x00});
}

TEST(GnuRadio, ShortDatagramsAreTruncated) {
  Header header;
  EXPECT_EQ(decode(bytes({1, 2, 3, 4, 5, 6, 7}), false, header), DecodeStatus::truncated);
  EXPECT_EQ(decode(bytes({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}), true, header), DecodeStatus::truncated);
}

}  // namespace
}  // namespace sluice::gnuradio
