// VITA 49.0 IF Data packets: encode and decode exactly as the standard lays them out
// (all words big-endian). Decoding never throws: it returns a status naming what is wrong.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace sluice::vita49 {

// Layout (32-bit words):
//   0        header: type[31:28] C[27] T[26] rsvd[25:24] TSI[23:22] TSF[21:20] count[19:16] size[15:0]
//   1        stream ID                       (types 1 and 3)
//   2..3     class ID: OUI[23:0]; info class[31:16] packet class[15:0]   (C = 1)
//   4        integer timestamp               (TSI != 0)
//   5..6     fractional timestamp, 64 bits   (TSF != 0)
//   ...      payload
//   last     trailer                         (T = 1)
// `size` counts every word of the packet, header and trailer included.

// One big-endian 32-bit word at any alignment (memcpy + byte swap).
inline std::uint32_t load_be32(const std::byte* in) {
  std::uint32_t value = 0;
  std::memcpy(&value, in, sizeof(value));
  return __builtin_bswap32(value);
}
inline void store_be32(std::byte* out, std::uint32_t value) {
  value = __builtin_bswap32(value);
  std::memcpy(out, &value, sizeof(value));
}

enum class PacketType : std::uint8_t {
  if_data = 0,            // IF Data without stream ID
  if_data_stream_id = 1,  // IF Data with stream ID
  ext_data = 2,
  ext_data_stream_id = 3,
  context = 4,
  ext_context = 5,
};

enum class Tsi : std::uint8_t { none = 0, utc = 1, gps = 2, other = 3 };
enum class Tsf : std::uint8_t { none = 0, sample_count = 1, real_time = 2, free_running = 3 };

struct ClassId {
  std::uint32_t oui = 0;  // 24 bits
  std::uint16_t information_class = 0;
  std::uint16_t packet_class = 0;
};

// The trailer's indicator bits that Sluice reads and writes; each has an enable bit
// (bit 31 - n) and an indicator bit (bit 19 - n) as in VITA 49.0 section 6.1.7.
struct Trailer {
  bool valid_data_enable = false;
  bool valid_data = false;
  bool over_range_enable = false;
  bool over_range = false;
  bool sample_loss_enable = false;
  bool sample_loss = false;
  std::uint32_t raw = 0;  // every bit as received (decode) — encode builds from the flags
};

struct Header {
  PacketType type = PacketType::if_data_stream_id;
  bool has_class_id = false;
  bool has_trailer = false;
  Tsi tsi = Tsi::none;
  Tsf tsf = Tsf::none;
  std::uint8_t packet_count = 0;  // 4 bits, modulo 16
  std::uint16_t size_words = 0;   // filled by encode
};

struct Packet {
  Header header;
  std::uint32_t stream_id = 0;
  ClassId class_id;
  std::uint32_t integer_timestamp = 0;
  std::uint64_t fractional_timestamp = 0;
  Trailer trailer;
  std::span<const std::byte> payload;  // decode: points into the datagram; encode: bytes to copy
};

enum class DecodeStatus : std::uint8_t {
  ok,
  truncated,       // shorter than its header, or than its size field says
  bad_size_field,  // size field smaller than the header it declares, or than the datagram
  unknown_type,    // not an IF Data packet (context, extension or reserved type)
};
std::string_view to_string(DecodeStatus status);

// Header words before the payload for this header (1 + stream ID + class ID + timestamps).
std::size_t prefix_words(const Header& header);
// Whole packet length in bytes for `payload_bytes` (which must be a multiple of 4).
std::size_t packet_bytes(const Header& header, std::size_t payload_bytes);

// Writes the packet into `out` (packet_bytes() long); returns the bytes written, 0 if `out`
// is too small, the payload is not a multiple of 4 or the packet exceeds 65535 words.
// The payload is copied verbatim: it must already be in wire (big-endian) order.
std::size_t encode(const Packet& packet, std::span<std::byte> out);
// Writes only the header words and trailer around a payload the caller places itself at
// `prefix_words(header) * 4` (zero-copy encode). Same return value as encode().
std::size_t encode_around_payload(const Packet& packet, std::size_t payload_bytes, std::span<std::byte> out);

// IF Data only: any other type is unknown_type.
DecodeStatus decode(std::span<const std::byte> datagram, Packet& out);
// Any VITA 49.0 type (0..5): header, prefix and payload (for context packets, the context
// indicator field and the fields after it). Types 6..15 are unknown_type.
DecodeStatus decode_any(std::span<const std::byte> datagram, Packet& out);

// The header words alone, for a datagram of `datagram_bytes` whose first bytes are `prefix`
// (at least prefix_words() * 4 of them): the udp stage receives the payload elsewhere (straight
// into a chunk) and checks the header beside it. Every check decode_any makes on the header and
// the size; `payload` and `trailer` are left empty (the trailer is not read).
DecodeStatus decode_prefix(std::span<const std::byte> prefix, std::size_t datagram_bytes, Packet& out);

// A datagram's place among its stream's neighbours, from its timestamp words (decode_prefix on
// the first datagram of a GRO buffer): a real-time timestamp's seconds (their low 24 bits) above
// its picoseconds, else its fractional count. It grows along the stream for months; false
// without a timestamp, or when the header does not decode.
bool order_key(std::span<const std::byte> datagram, std::uint64_t& position) noexcept;

// The trailer word's indicator bits (and the word itself, as `raw`).
inline Trailer parse_trailer(std::uint32_t word) noexcept {
  const auto bit = [word](unsigned position) { return (word >> position & 1U) != 0; };
  Trailer trailer;
  trailer.valid_data_enable = bit(31 - 1);
  trailer.valid_data = bit(19 - 1);
  trailer.over_range_enable = bit(31 - 6);
  trailer.over_range = bit(19 - 6);
  trailer.sample_loss_enable = bit(31 - 7);
  trailer.sample_loss = bit(19 - 7);
  trailer.raw = word;
  return trailer;
}

// Decodes IF Data packets shaped like the last one remembered: the same length and the same
// header words but for the packet count and the timestamps (type, flags, size, stream ID, class
// ID). For a stream of equal packets decode() runs once; every later packet costs a comparison
// and the reads of its count, timestamps and trailer.
class RepeatDecoder {
 public:
  // Remembers `datagram`, which decode() took as IF Data (status ok) into `packet`.
  void remember(std::span<const std::byte> datagram, const Packet& packet) noexcept;
  void forget() noexcept { bytes_ = 0; }
  // True when `datagram` has the remembered shape: `out` then holds what decode() gives (ok).
  // False: `out` is unchanged and decode() must judge the datagram.
  bool decode(std::span<const std::byte> datagram, Packet& out) const noexcept {
    if (datagram.size() != bytes_ || bytes_ == 0) return false;
    const std::byte* data = datagram.data();
    const std::uint32_t word0 = load_be32(data);
    if ((word0 & ~kCountMask) != word0_) return false;
    for (std::size_t i = 0; i < fixed_words_; ++i) {
      if (load_be32(data + 4 + 4 * i) != fixed_[i]) return false;
    }
    const Header& header = packet_.header;
    out.header = header;
    out.header.packet_count = static_cast<std::uint8_t>(word0 >> 16 & 0xFU);
    out.stream_id = packet_.stream_id;
    out.class_id = packet_.class_id;
    const std::byte* timestamp = data + 4 + 4 * fixed_words_;
    out.integer_timestamp = header.tsi != Tsi::none ? load_be32(timestamp) : 0;
    if (header.tsi != Tsi::none) timestamp += 4;
    out.fractional_timestamp =
        header.tsf != Tsf::none ? static_cast<std::uint64_t>(load_be32(timestamp)) << 32 | load_be32(timestamp + 4) : 0;
    out.payload = datagram.subspan(payload_at_, payload_bytes_);
    out.trailer = header.has_trailer ? parse_trailer(load_be32(data + payload_at_ + payload_bytes_)) : Trailer{};
    return true;
  }

 private:
  static constexpr std::uint32_t kCountMask = 0xFU << 16;

  std::size_t bytes_ = 0;        // the datagram's length; 0: nothing remembered
  std::uint32_t word0_ = 0;      // header word 0 without the packet count
  std::size_t fixed_words_ = 0;  // stream ID and class ID words after word 0
  std::array<std::uint32_t, 3> fixed_{};
  std::size_t payload_at_ = 0;
  std::size_t payload_bytes_ = 0;
  Packet packet_;  // the remembered packet's header, stream ID and class ID
};

// Real-time picoseconds in one second.
inline constexpr std::uint64_t kPicosecondsPerSecond = 1'000'000'000'000ULL;

// Exact sample index <-> real-time timestamp at a whole-Hz sample rate (128-bit products).
__extension__ typedef unsigned __int128 Uint128;
// Samples since the epoch of the timestamp (seconds, picoseconds), rounded to the nearest.
inline std::uint64_t sample_index(std::uint64_t seconds, std::uint64_t picoseconds, std::uint64_t rate) {
  return seconds * rate +
         static_cast<std::uint64_t>((static_cast<Uint128>(picoseconds) * rate + kPicosecondsPerSecond / 2) /
                                    kPicosecondsPerSecond);
}
// The timestamp of sample `index` (counted from the epoch), picoseconds rounded to the nearest.
inline void timestamp_of(std::uint64_t index, std::uint64_t rate, std::uint64_t& seconds, std::uint64_t& picoseconds) {
  seconds = index / rate;
  picoseconds =
      static_cast<std::uint64_t>((static_cast<Uint128>(index % rate) * kPicosecondsPerSecond + rate / 2) / rate);
}

}  // namespace sluice::vita49
