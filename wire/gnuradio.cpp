// GNU Radio gr-network header encode/decode (host byte order, read through memcpy).
#include "wire/gnuradio.hpp"

#include <bit>
#include <cstring>

namespace sluice::gnuradio {

static_assert(std::endian::native == std::endian::little,
              "gr-network headers are in the sender's byte order: little-endian");

DecodeStatus decode(std::span<const std::byte> datagram, bool with_size, Header& out) noexcept {
  const std::size_t header = with_size ? kSeqSizeHeaderBytes : kSeqHeaderBytes;
  if (datagram.size() < header) return DecodeStatus::truncated;
  std::memcpy(&out.sequence, datagram.data(), sizeof(out.sequence));
  out.header_bytes = header;
  if (with_size) {
    std::int16_t size = 0;
    std::memcpy(&size, datagram.data() + 8, sizeof(size));
    if (size < 0 || static_cast<std::size_t>(size) != datagram.size()) return DecodeStatus::bad_size_field;
  }
  return DecodeStatus::ok;
}

void encode(std::uint64_t sequence, bool with_size, std::size_t datagram_bytes, std::span<std::byte> out) noexcept {
  std::memcpy(out.data(), &sequence, sizeof(sequence));
  if (!with_size) return;
  const auto size = static_cast<std::int16_t>(datagram_bytes);
  std::memcpy(out.data() + 8, &size, sizeof(size));
  std::memset(out.data() + 10, 0, kSeqSizeHeaderBytes - 10);
}

}  // namespace sluice::gnuradio
