// VITA 49.0 IF Context encode/decode: the CIF bit table and the fixed-point field formats.
#include "wire/vita49_context.hpp"

#include <array>
#include <cmath>
#include <cstring>

namespace sluice::vita49 {
namespace {

// Fixed-size fields of CIF0 in words, index = bit (VITA 49.0 table 7.1.5-1); 0 for bit 31
// (an indicator, no field), bits 9 and 8 (variable) and the reserved bits 7..0.
// A table laid out by bit groups: clang-format would wrap its long comments, and 14 does not wrap
// them the same way twice.
// clang-format off
constexpr std::array<std::uint8_t, 32> kFieldWords = {
    0, 0, 0, 0, 0, 0, 0, 0,    // 0..7 reserved
    0, 0,                      // 8 context association lists, 9 GPS ASCII: variable
    1, 13, 13, 11, 11, 2,      // 10 ephemeris ref ID, 11 relative eph., 12 ECEF eph., 13 INS, 14 GPS, 15 payload format
    1, 2, 1, 1, 2, 2,          // 16 state/events, 17 device ID, 18 temperature, 19 TS calibration, 20 TS adjustment, 21 sample rate
    1, 1, 1, 2, 2, 2,          // 22 over-range count, 23 gain, 24 reference level, 25 IF band offset, 26 RF offset, 27 RF frequency
    2, 2, 1, 0,                // 28 IF reference frequency, 29 bandwidth, 30 reference point ID, 31 change indicator
};
// clang-format on

constexpr double kRadix20 = 1048576.0;  // 2^20: Hz fields
constexpr double kRadix7 = 128.0;       // 2^7: dB and dBm fields

// Hz in the 64-bit radix-20 format; false when it does not fit (about +-8.8 THz).
bool to_radix20(double value, std::int64_t& out) {
  const double scaled = std::round(value * kRadix20);
  if (!(std::fabs(scaled) < 9.2e18)) return false;
  out = static_cast<std::int64_t>(scaled);
  return true;
}

bool to_radix7(double value, std::int16_t& out) {
  const double scaled = std::round(value * kRadix7);
  if (!(scaled >= -32768.0 && scaled <= 32767.0)) return false;
  out = static_cast<std::int16_t>(scaled);
  return true;
}

double from_radix20(const std::byte* in) {
  const std::uint64_t raw = static_cast<std::uint64_t>(load_be32(in)) << 32 | load_be32(in + 4);
  return static_cast<double>(static_cast<std::int64_t>(raw)) / kRadix20;
}

double from_radix7(std::uint32_t bits16) {
  return static_cast<double>(static_cast<std::int16_t>(bits16 & 0xFFFFU)) / kRadix7;
}

Header context_header(const ContextPacket& packet) {
  Header header;
  header.type = PacketType::context;
  header.has_class_id = packet.has_class_id;
  header.tsi = packet.tsi;
  header.tsf = packet.tsf;
  header.packet_count = packet.packet_count;
  return header;
}

std::size_t field_bytes(const ContextPacket& packet) {
  std::size_t words = 1;  // the CIF itself
  if (packet.bandwidth_hz) words += 2;
  if (packet.rf_reference_frequency_hz) words += 2;
  if (packet.reference_level_dbm) words += 1;
  if (packet.gain_stage1_db) words += 1;
  if (packet.sample_rate_hz) words += 2;
  return words * 4;
}

}  // namespace

std::string_view to_string(ContextStatus status) {
  switch (status) {
    case ContextStatus::ok:
      return "ok";
    case ContextStatus::truncated:
      return "truncated";
    case ContextStatus::bad_size_field:
      return "bad_size_field";
    case ContextStatus::not_context:
      return "not_context";
    case ContextStatus::unknown_type:
      return "unknown_type";
    case ContextStatus::reserved_cif_bit:
      return "reserved_cif_bit";
    case ContextStatus::bad_value:
      return "bad_value";
  }
  return "?";
}

std::optional<std::size_t> context_field_words(unsigned bit, std::span<const std::byte> rest) {
  if (bit >= 32 || bit < 8) return std::nullopt;
  if (bit == 9) {  // GPS ASCII: manufacturer OUI word, word count, then that many words
    if (rest.size() < 8) return std::nullopt;
    return 2 + static_cast<std::size_t>(load_be32(rest.data() + 4));
  }
  if (bit == 8) {  // context association lists: two size words, then the lists
    if (rest.size() < 8) return std::nullopt;
    const std::uint32_t first = load_be32(rest.data());
    const std::uint32_t second = load_be32(rest.data() + 4);
    const std::size_t source = first >> 16 & 0x1FFU;
    const std::size_t system = first & 0x1FFU;
    const std::size_t vector = second >> 16;
    const std::size_t asynchronous = second & 0x7FFFU;
    const bool tags = (second >> 15 & 1U) != 0;  // the asynchronous-channel tag list follows
    return 2 + source + system + vector + asynchronous + (tags ? asynchronous : 0);
  }
  return kFieldWords[bit];
}

std::size_t context_packet_bytes(const ContextPacket& packet) {
  return packet_bytes(context_header(packet), field_bytes(packet));
}

std::size_t encode_context(const ContextPacket& packet, std::span<std::byte> out) {
  const std::size_t fields = field_bytes(packet);
  Packet wire;
  wire.header = context_header(packet);
  wire.stream_id = packet.stream_id;
  wire.class_id = packet.class_id;
  wire.integer_timestamp = packet.integer_timestamp;
  wire.fractional_timestamp = packet.fractional_timestamp;
  const std::size_t written = encode_around_payload(wire, fields, out);
  if (written == 0) return 0;
  std::byte* cursor = out.data() + prefix_words(wire.header) * 4;
  std::uint32_t indicators = packet.changed ? 1U << cif::kChange : 0;
  std::byte* const cif_word = cursor;
  cursor += 4;
  // Fields in descending bit order, as the standard requires.
  auto put_hz = [&](const std::optional<double>& value, unsigned bit) {
    if (!value) return true;
    std::int64_t fixed = 0;
    if (!to_radix20(*value, fixed)) return false;
    const auto raw = static_cast<std::uint64_t>(fixed);
    store_be32(cursor, static_cast<std::uint32_t>(raw >> 32));
    store_be32(cursor + 4, static_cast<std::uint32_t>(raw));
    cursor += 8;
    indicators |= 1U << bit;
    return true;
  };
  if (!put_hz(packet.bandwidth_hz, cif::kBandwidth)) return 0;
  if (!put_hz(packet.rf_reference_frequency_hz, cif::kRfReferenceFrequency)) return 0;
  if (packet.reference_level_dbm) {
    std::int16_t level = 0;
    if (!to_radix7(*packet.reference_level_dbm, level)) return 0;
    store_be32(cursor, static_cast<std::uint16_t>(level));  // bits 31..16 reserved, zero
    cursor += 4;
    indicators |= 1U << cif::kReferenceLevel;
  }
  if (packet.gain_stage1_db) {
    std::int16_t stage1 = 0;
    std::int16_t stage2 = 0;
    if (!to_radix7(*packet.gain_stage1_db, stage1) || !to_radix7(packet.gain_stage2_db.value_or(0.0), stage2)) return 0;
    store_be32(cursor, static_cast<std::uint32_t>(static_cast<std::uint16_t>(stage2)) << 16 |
                           static_cast<std::uint16_t>(stage1));
    cursor += 4;
    indicators |= 1U << cif::kGain;
  }
  if (!put_hz(packet.sample_rate_hz, cif::kSampleRate)) return 0;
  store_be32(cif_word, indicators);
  return written;
}

namespace {

// A context packet with the prologue of `packet` and no fields yet.
ContextPacket context_of(const Packet& packet) {
  ContextPacket out;
  out.stream_id = packet.stream_id;
  out.has_class_id = packet.header.has_class_id;
  out.class_id = packet.class_id;
  out.tsi = packet.header.tsi;
  out.tsf = packet.header.tsf;
  out.integer_timestamp = packet.integer_timestamp;
  out.fractional_timestamp = packet.fractional_timestamp;
  out.packet_count = packet.header.packet_count;
  return out;
}

// The CIF0 field of `bit` at `field` into `out`; a field Sluice does not use is only noted.
void read_field(unsigned bit, const std::byte* field, ContextPacket& out) {
  switch (bit) {
    case cif::kBandwidth:
      out.bandwidth_hz = from_radix20(field);
      break;
    case cif::kRfReferenceFrequency:
      out.rf_reference_frequency_hz = from_radix20(field);
      break;
    case cif::kReferenceLevel:
      out.reference_level_dbm = from_radix7(load_be32(field));
      break;
    case cif::kGain: {
      const std::uint32_t gain = load_be32(field);
      out.gain_stage1_db = from_radix7(gain);
      out.gain_stage2_db = from_radix7(gain >> 16);
      break;
    }
    case cif::kSampleRate:
      out.sample_rate_hz = from_radix20(field);
      break;
    default:
      out.skipped_fields |= 1U << bit;
      break;
  }
}

}  // namespace

ContextStatus decode_context(std::span<const std::byte> datagram, ContextPacket& out) {
  Packet packet;
  switch (decode_any(datagram, packet)) {
    case DecodeStatus::ok:
      break;
    case DecodeStatus::truncated:
      return ContextStatus::truncated;
    case DecodeStatus::bad_size_field:
      return ContextStatus::bad_size_field;
    case DecodeStatus::unknown_type:
      return ContextStatus::unknown_type;
  }
  if (packet.header.type != PacketType::context) return ContextStatus::not_context;
  out = context_of(packet);
  std::span<const std::byte> rest = packet.payload;
  if (rest.size() < 4) return ContextStatus::truncated;
  const std::uint32_t indicators = load_be32(rest.data());
  rest = rest.subspan(4);
  if ((indicators & 0xFFU) != 0) return ContextStatus::reserved_cif_bit;
  out.changed = (indicators >> cif::kChange & 1U) != 0;
  for (unsigned bit = 30; bit >= 8; --bit) {
    if ((indicators >> bit & 1U) == 0) continue;
    const std::optional<std::size_t> words = context_field_words(bit, rest);
    if (!words || *words * 4 > rest.size()) return ContextStatus::truncated;
    read_field(bit, rest.data(), out);
    rest = rest.subspan(*words * 4);
  }
  // The size field must end exactly where the declared fields do.
  if (!rest.empty()) return ContextStatus::bad_size_field;
  if ((out.sample_rate_hz && *out.sample_rate_hz < 0) || (out.bandwidth_hz && *out.bandwidth_hz < 0))
    return ContextStatus::bad_value;
  return ContextStatus::ok;
}

}  // namespace sluice::vita49
