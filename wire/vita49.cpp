// VITA 49.0 IF Data encode/decode. Reads go through memcpy + byte swap so that any
// alignment of the datagram buffer is fine.
#include "wire/vita49.hpp"

#include <cstring>

namespace sluice::vita49 {
namespace {

bool has_stream_id(PacketType type) {
  return type == PacketType::if_data_stream_id || type == PacketType::ext_data_stream_id ||
         type == PacketType::context || type == PacketType::ext_context;
}

std::uint32_t trailer_word(const Trailer& trailer) {
  std::uint32_t word = 0;
  auto put = [&word](bool enable, bool indicator, unsigned position) {
    if (enable) word |= 1U << (31 - position);
    if (indicator) word |= 1U << (19 - position);
  };
  put(trailer.valid_data_enable, trailer.valid_data, 1);
  put(trailer.over_range_enable, trailer.over_range, 6);
  put(trailer.sample_loss_enable, trailer.sample_loss, 7);
  return word;
}

}  // namespace

std::string_view to_string(DecodeStatus status) {
  switch (status) {
    case DecodeStatus::ok:
      return "ok";
    case DecodeStatus::truncated:
      return "truncated";
    case DecodeStatus::bad_size_field:
      return "bad_size_field";
    case DecodeStatus::unknown_type:
      return "unknown_type";
  }
  return "?";
}

std::size_t prefix_words(const Header& header) {
  std::size_t words = 1;
  if (has_stream_id(header.type)) words += 1;
  if (header.has_class_id) words += 2;
  if (header.tsi != Tsi::none) words += 1;
  if (header.tsf != Tsf::none) words += 2;
  return words;
}

bool order_key(std::span<const std::byte> datagram, std::uint64_t& position) noexcept {
  if (datagram.size() < 4) return false;
  // The first datagram's own size: a GRO buffer holds several, one after another.
  const std::size_t declared = std::size_t{load_be32(datagram.data()) & 0xFFFFU} * 4;
  Packet packet;
  if (decode_prefix(datagram, declared, packet) != DecodeStatus::ok) return false;
  const Header& header = packet.header;
  if (header.tsi == Tsi::none && header.tsf == Tsf::none) return false;
  // Picoseconds stay under 2^40; counts grow on their own.
  constexpr std::uint64_t kPicosecondBits = 40;
  position = header.tsf == Tsf::real_time || header.tsf == Tsf::none
                 ? std::uint64_t{packet.integer_timestamp} << kPicosecondBits | packet.fractional_timestamp
                 : packet.fractional_timestamp;
  return true;
}

std::size_t packet_bytes(const Header& header, std::size_t payload_bytes) {
  return (prefix_words(header) + (header.has_trailer ? 1U : 0U)) * 4 + payload_bytes;
}

std::size_t encode_around_payload(const Packet& packet, std::size_t payload_bytes, std::span<std::byte> out) {
  const Header& header = packet.header;
  const std::size_t total = packet_bytes(header, payload_bytes);
  if (payload_bytes % 4 != 0 || total > out.size() || total / 4 > 0xFFFF) return 0;
  std::uint32_t word0 = static_cast<std::uint32_t>(header.type) << 28;
  if (header.has_class_id) word0 |= 1U << 27;
  if (header.has_trailer) word0 |= 1U << 26;
  word0 |= static_cast<std::uint32_t>(header.tsi) << 22;
  word0 |= static_cast<std::uint32_t>(header.tsf) << 20;
  word0 |= static_cast<std::uint32_t>(header.packet_count & 0xF) << 16;
  word0 |= static_cast<std::uint32_t>(total / 4);
  std::byte* cursor = out.data();
  store_be32(cursor, word0);
  cursor += 4;
  if (has_stream_id(header.type)) {
    store_be32(cursor, packet.stream_id);
    cursor += 4;
  }
  if (header.has_class_id) {
    store_be32(cursor, packet.class_id.oui & 0x00FFFFFFU);
    store_be32(cursor + 4,
               static_cast<std::uint32_t>(packet.class_id.information_class) << 16 | packet.class_id.packet_class);
    cursor += 8;
  }
  if (header.tsi != Tsi::none) {
    store_be32(cursor, packet.integer_timestamp);
    cursor += 4;
  }
  if (header.tsf != Tsf::none) {
    store_be32(cursor, static_cast<std::uint32_t>(packet.fractional_timestamp >> 32));
    store_be32(cursor + 4, static_cast<std::uint32_t>(packet.fractional_timestamp));
    cursor += 8;
  }
  cursor += payload_bytes;
  if (header.has_trailer) store_be32(cursor, trailer_word(packet.trailer));
  return total;
}

std::size_t encode(const Packet& packet, std::span<std::byte> out) {
  const std::size_t written = encode_around_payload(packet, packet.payload.size(), out);
  if (written == 0) return 0;
  if (!packet.payload.empty()) {
    std::memcpy(out.data() + prefix_words(packet.header) * 4, packet.payload.data(), packet.payload.size());
  }
  return written;
}

DecodeStatus decode(std::span<const std::byte> datagram, Packet& out) {
  const DecodeStatus status = decode_any(datagram, out);
  // Only IF Data carries samples; context packets go to decode_context (wire/vita49_context.hpp).
  if (status == DecodeStatus::ok && out.header.type != PacketType::if_data &&
      out.header.type != PacketType::if_data_stream_id) {
    return DecodeStatus::unknown_type;
  }
  return status;
}

DecodeStatus decode_any(std::span<const std::byte> datagram, Packet& out) {
  const DecodeStatus status = decode_prefix(datagram, datagram.size(), out);
  if (status != DecodeStatus::ok) return status;
  const std::size_t prefix_bytes = prefix_words(out.header) * 4;
  const std::size_t payload_bytes = datagram.size() - prefix_bytes - (out.header.has_trailer ? 4U : 0U);
  out.payload = datagram.subspan(prefix_bytes, payload_bytes);
  out.trailer =
      out.header.has_trailer ? parse_trailer(load_be32(datagram.data() + prefix_bytes + payload_bytes)) : Trailer{};
  return DecodeStatus::ok;
}

DecodeStatus decode_prefix(std::span<const std::byte> prefix, std::size_t datagram_bytes, Packet& out) {
  if (datagram_bytes < 4 || prefix.size() < 4) return DecodeStatus::truncated;
  const std::uint32_t word0 = load_be32(prefix.data());
  Header& header = out.header;
  const unsigned type = word0 >> 28;
  if (type > static_cast<unsigned>(PacketType::ext_context)) return DecodeStatus::unknown_type;
  header.type = static_cast<PacketType>(type);
  header.has_class_id = (word0 >> 27 & 1U) != 0;
  // Context packets have no trailer: their bit 26 is reserved (VITA 49.0 section 7.1.1).
  const bool context = header.type == PacketType::context || header.type == PacketType::ext_context;
  header.has_trailer = !context && (word0 >> 26 & 1U) != 0;
  header.tsi = static_cast<Tsi>(word0 >> 22 & 3U);
  header.tsf = static_cast<Tsf>(word0 >> 20 & 3U);
  header.packet_count = static_cast<std::uint8_t>(word0 >> 16 & 0xFU);
  header.size_words = static_cast<std::uint16_t>(word0 & 0xFFFFU);

  const std::size_t fixed_words = prefix_words(header) + (header.has_trailer ? 1U : 0U);
  const std::size_t declared = static_cast<std::size_t>(header.size_words) * 4;
  if (header.size_words < fixed_words) return DecodeStatus::bad_size_field;
  if (datagram_bytes < declared) return DecodeStatus::truncated;
  if (datagram_bytes > declared) return DecodeStatus::bad_size_field;
  if (prefix.size() < prefix_words(header) * 4) return DecodeStatus::truncated;

  const std::byte* cursor = prefix.data() + 4;
  out.stream_id = 0;
  if (has_stream_id(header.type)) {
    out.stream_id = load_be32(cursor);
    cursor += 4;
  }
  out.class_id = {};
  if (header.has_class_id) {
    out.class_id.oui = load_be32(cursor) & 0x00FFFFFFU;
    const std::uint32_t codes = load_be32(cursor + 4);
    out.class_id.information_class = static_cast<std::uint16_t>(codes >> 16);
    out.class_id.packet_class = static_cast<std::uint16_t>(codes & 0xFFFFU);
    cursor += 8;
  }
  out.integer_timestamp = 0;
  if (header.tsi != Tsi::none) {
    out.integer_timestamp = load_be32(cursor);
    cursor += 4;
  }
  out.fractional_timestamp = 0;
  if (header.tsf != Tsf::none)
    out.fractional_timestamp = static_cast<std::uint64_t>(load_be32(cursor)) << 32 | load_be32(cursor + 4);
  out.payload = {};
  out.trailer = {};
  return DecodeStatus::ok;
}

void RepeatDecoder::remember(std::span<const std::byte> datagram, const Packet& packet) noexcept {
  const Header& header = packet.header;
  const std::size_t words = prefix_words(header);
  fixed_words_ = words - 1 - (header.tsi != Tsi::none ? 1U : 0U) - (header.tsf != Tsf::none ? 2U : 0U);
  for (std::size_t i = 0; i < fixed_words_; ++i) fixed_[i] = load_be32(datagram.data() + 4 + 4 * i);
  word0_ = load_be32(datagram.data()) & ~kCountMask;
  payload_at_ = words * 4;
  payload_bytes_ = packet.payload.size();
  packet_ = packet;
  packet_.payload = {};
  bytes_ = datagram.size();
}

}  // namespace sluice::vita49
