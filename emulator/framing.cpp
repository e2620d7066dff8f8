// FrameEncoder: one packet's header and trailer per framing, through the wire/ encoders.
#include "emulator/framing.hpp"

#include <cstring>
#include <span>

#include "wire/gnuradio.hpp"
#include "wire/raw_tcp.hpp"

namespace sluice::emulator {
namespace {

// The VITA OUI (00-12-A2) with Sluice's own packet class codes: 1 = ci16, 2 = cf32.
constexpr std::uint32_t kOui = 0x0012A2;

vita49::Packet packet_template(std::uint32_t stream_id, SampleFormat format) {
  vita49::Packet packet;
  packet.header.type = vita49::PacketType::if_data_stream_id;
  packet.header.has_class_id = true;
  packet.header.has_trailer = true;
  packet.header.tsi = vita49::Tsi::utc;
  packet.header.tsf = vita49::Tsf::real_time;
  packet.stream_id = stream_id;
  packet.class_id = {kOui, 0, static_cast<std::uint16_t>(format == SampleFormat::cf32 ? 2 : 1)};
  packet.trailer.valid_data_enable = true;
  packet.trailer.valid_data = true;
  return packet;
}

std::size_t prefix_of(Framing framing, SampleFormat format) {
  switch (framing) {
    case Framing::vita49:
      return vita49::prefix_words(packet_template(0, format).header) * 4;
    case Framing::gnuradio_seq:
      return gnuradio::kSeqHeaderBytes;
    case Framing::gnuradio_seq_size:
      return gnuradio::kSeqSizeHeaderBytes;
    case Framing::none:
      return 0;
    case Framing::raw_tcp:
      return raw_tcp::kHeaderBytes;
  }
  return 0;
}

}  // namespace

std::string_view to_string(Framing framing) {
  switch (framing) {
    case Framing::vita49:
      return "vita49";
    case Framing::gnuradio_seq:
      return "gnuradio_seq";
    case Framing::gnuradio_seq_size:
      return "gnuradio_seq_size";
    case Framing::none:
      return "none";
    case Framing::raw_tcp:
      return "raw_tcp";
  }
  return "?";
}

std::size_t framing_overhead(Framing framing, SampleFormat format) {
  // Raw TCP frames carry as many samples as a VITA-49 datagram of the same payload setting,
  // so one `payload` gives both transports the same packets.
  if (framing == Framing::raw_tcp || framing == Framing::vita49)
    return vita49::packet_bytes(packet_template(0, format).header, 0);
  return prefix_of(framing, format);
}

FrameEncoder::FrameEncoder(Framing framing, std::uint32_t stream_id, SampleFormat format,
                           std::size_t samples_per_packet, bool sample_loss_enable)
    : framing_(framing),
      format_(format),
      sample_bytes_(bytes_per_sample(format)),
      samples_per_packet_(samples_per_packet),
      prefix_bytes_(prefix_of(framing, format)),
      packet_(packet_template(stream_id, format)) {
  // A capture tells the receiver where its own holes are, as a digitizer's trailer would.
  packet_.trailer.sample_loss_enable = sample_loss_enable;
}

std::size_t FrameEncoder::packet_bytes(std::size_t samples) const {
  const std::size_t payload = samples * sample_bytes_;
  return framing_ == Framing::vita49 ? vita49::packet_bytes(packet_.header, payload) : prefix_bytes_ + payload;
}

std::size_t FrameEncoder::write(const PacketFields& fields, std::byte* buffer) {
  const std::size_t payload = fields.samples * sample_bytes_;
  switch (framing_) {
    case Framing::vita49:
      packet_.header.packet_count = static_cast<std::uint8_t>(fields.k & 0xF);
      packet_.integer_timestamp = static_cast<std::uint32_t>(fields.seconds);
      packet_.fractional_timestamp = fields.picoseconds;
      packet_.trailer.sample_loss = fields.after_gap;
      return vita49::encode_around_payload(packet_, payload,
                                           std::span<std::byte>(buffer, packet_bytes(fields.samples)));
    case Framing::gnuradio_seq:
    case Framing::gnuradio_seq_size: {
      // GNU Radio numbers datagrams from 1; all but a stream's last are full, so the number is a position.
      const std::uint64_t sequence = fields.first_sample / samples_per_packet_ + 1;
      gnuradio::encode(sequence, framing_ == Framing::gnuradio_seq_size, prefix_bytes_ + payload,
                       std::span<std::byte>(buffer, prefix_bytes_));
      return prefix_bytes_ + payload;
    }
    case Framing::none:
      return payload;
    case Framing::raw_tcp: {
      raw_tcp::FrameHeader header;
      header.format = format_;
      header.sequence = fields.k;
      header.first_sample = fields.first_sample;
      header.sample_count = static_cast<std::uint32_t>(fields.samples);
      header.payload_bytes = static_cast<std::uint32_t>(payload);
      header.seconds = fields.seconds;
      header.picoseconds = fields.picoseconds;
      raw_tcp::encode_header(header, std::span<std::byte, raw_tcp::kHeaderBytes>(buffer, raw_tcp::kHeaderBytes));
      return prefix_bytes_ + payload;
    }
  }
  return 0;
}

void FrameEncoder::corrupt(std::uint64_t k, std::byte* buffer) const {
  switch (framing_) {
    case Framing::vita49:
      switch (k % 3) {
        case 0:
          buffer[0] = std::byte{0x70} | (buffer[0] & std::byte{0x0F});
          break;  // reserved packet type
        case 1:
          buffer[3] = static_cast<std::byte>(std::to_integer<unsigned>(buffer[3]) - 1U);
          break;  // size - 1
        default:
          buffer[7] = buffer[7] ^ std::byte{0x5A};
          break;  // stream ID
      }
      break;
    case Framing::gnuradio_seq_size:
      buffer[8] = buffer[8] ^ std::byte{0x01};
      break;  // size field off by one
    case Framing::raw_tcp:
      buffer[0] = std::byte{0xEE};
      break;  // magic
    case Framing::gnuradio_seq:
    case Framing::none:
      break;  // no field a receiver checks: the settings refuse corrupt here
  }
}

}  // namespace sluice::emulator
