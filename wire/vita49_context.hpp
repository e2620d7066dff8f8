// VITA 49.0 IF Context packets (type 4): the fields Sluice reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "wire/vita49.hpp"

namespace sluice::vita49 {

// VITA 49.0 IF Context packets (type 4): the context indicator field (CIF, section 7.1.5)
// and the fields Sluice reads and writes, in their standard fixed-point formats. A field
// Sluice does not use is skipped by its size from the CIF bit table, so a digitizer that
// also sends temperature or GPS context is still understood.
//
// Layout after the header, stream ID, optional class ID and timestamps (all big-endian):
//   CIF word: bit 31 change indicator, bits 30..8 one per field (set: the field follows),
//   then the fields in descending bit order. The ones Sluice knows:
//     bit 29 bandwidth               2 words  signed 64-bit, radix point after bit 20 (Hz)
//     bit 27 RF reference frequency  2 words  same format (Hz)
//     bit 24 reference level         1 word   bits 15..0 signed, radix point after bit 7 (dBm)
//     bit 23 gain                    1 word   stage 2 in bits 31..16, stage 1 in 15..0, each
//                                             signed with the radix point after bit 7 (dB)
//     bit 21 sample rate             2 words  as bandwidth (Hz)
//   Bits 7..0 are reserved in VITA 49.0: a packet that sets them cannot be sized and is refused.

// CIF0 bit positions of the fields Sluice reads and writes.
namespace cif {
inline constexpr unsigned kChange = 31;
inline constexpr unsigned kBandwidth = 29;
inline constexpr unsigned kRfReferenceFrequency = 27;
inline constexpr unsigned kReferenceLevel = 24;
inline constexpr unsigned kGain = 23;
inline constexpr unsigned kSampleRate = 21;
}  // namespace cif

struct ContextPacket {
  std::uint32_t stream_id = 0;
  bool has_class_id = false;
  ClassId class_id;
  Tsi tsi = Tsi::none;
  Tsf tsf = Tsf::none;
  std::uint32_t integer_timestamp = 0;
  std::uint64_t fractional_timestamp = 0;
  std::uint8_t packet_count = 0;  // 4 bits; context packets count separately from data
  bool changed = false;           // CIF bit 31: some field differs from the previous packet
  std::optional<double> bandwidth_hz;
  std::optional<double> rf_reference_frequency_hz;
  std::optional<double> reference_level_dbm;
  std::optional<double> gain_stage1_db;  // encode: gain is written when stage 1 is set
  std::optional<double> gain_stage2_db;  // encode: 0 when unset
  std::optional<double> sample_rate_hz;
  std::uint32_t skipped_fields = 0;  // decode: CIF bits of present fields Sluice does not read
};

enum class ContextStatus : std::uint8_t {
  ok,
  truncated,         // shorter than its header, its size field, or the fields its CIF declares
  bad_size_field,    // size field disagrees with the datagram, or leaves words after the fields
  not_context,       // a valid packet of another type (IF Data goes to decode())
  unknown_type,      // reserved packet type
  reserved_cif_bit,  // CIF bits 7..0 set: fields of unknown size follow
  bad_value,         // a field out of range (a negative rate or bandwidth)
};
std::string_view to_string(ContextStatus status);

// Words a field of CIF bit `bit` occupies, given the words from it to the end of the
// packet (variable-size fields read their length from their first words); nullopt for a
// reserved bit or when `rest` is too short to hold the length.
std::optional<std::size_t> context_field_words(unsigned bit, std::span<const std::byte> rest);

// Whole packet length for `packet` (header, prefix, CIF and the fields that are set).
std::size_t context_packet_bytes(const ContextPacket& packet);
// Writes the packet (type 4, with stream ID) into `out`; returns the bytes written, 0 if
// `out` is too small or a value does not fit its fixed-point field.
std::size_t encode_context(const ContextPacket& packet, std::span<std::byte> out);
ContextStatus decode_context(std::span<const std::byte> datagram, ContextPacket& out);

}  // namespace sluice::vita49
