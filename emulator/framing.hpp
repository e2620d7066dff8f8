// How the emulator frames a packet on the wire (VITA-49, GNU Radio sequence headers or bare over
// UDP; raw TCP frames or bare over TCP): one FrameEncoder per stream writes and damages packets,
// so the send loop does not know the framing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "pipeline/chunk.hpp"
#include "wire/vita49.hpp"

namespace sluice::emulator {

enum class Framing : std::uint8_t { vita49, gnuradio_seq, gnuradio_seq_size, none, raw_tcp };

std::string_view to_string(Framing framing);
// Bytes a packet of `framing` adds around its samples (header and trailer).
std::size_t framing_overhead(Framing framing, SampleFormat format);

// What one packet says about itself; each framing writes the fields it has.
struct PacketFields {
  std::uint64_t k = 0;             // packet number in the stream, from 0
  std::uint64_t first_sample = 0;  // stream index of the first sample (a shift already applied)
  std::uint64_t seconds = 0;       // UTC time of the first sample
  std::uint64_t picoseconds = 0;
  std::size_t samples = 0;
  bool after_gap = false;  // a capture's hole right before this packet
};

class FrameEncoder {
 public:
  // `samples_per_packet`: of a full packet (gnuradio: a sequence number is a position in packets).
  FrameEncoder(Framing framing, std::uint32_t stream_id, SampleFormat format, std::size_t samples_per_packet,
               bool sample_loss_enable);
  // Bytes before the samples.
  [[nodiscard]] std::size_t prefix_bytes() const { return prefix_bytes_; }
  // Bytes of a packet of `samples` samples, header and trailer included.
  [[nodiscard]] std::size_t packet_bytes(std::size_t samples) const;
  // VITA-49 carries big-endian samples; the others the sender's little-endian bytes.
  [[nodiscard]] bool big_endian_samples() const { return framing_ == Framing::vita49; }
  // Writes the header (and trailer) of a packet around samples at buffer + prefix_bytes().
  // Returns the packet's bytes.
  std::size_t write(const PacketFields& fields, std::byte* buffer);
  // Makes the header invalid in a way the receiver can see (packet k picks the variant).
  void corrupt(std::uint64_t k, std::byte* buffer) const;

 private:
  Framing framing_;
  SampleFormat format_;
  std::size_t sample_bytes_;
  std::size_t samples_per_packet_;
  std::size_t prefix_bytes_;
  vita49::Packet packet_;  // vita49: the template each packet updates
};

}  // namespace sluice::emulator
