// What the two halves of a RoCE link say to each other.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

// What the two halves of a RoCE link say to each other: the connect private data (the
// sender's credit word; the receiver's ring advertisement), the per-slot header written
// beside each chunk's metadata, the immediate of each payload write and the control
// messages (end of stream, error). Host byte order: both ends are little-endian
// (x86-64, arm64); the static_assert keeps a big-endian build from silently misreading.

namespace sluice::rdma {

static_assert(std::endian::native == std::endian::little, "the RoCE link's wire structs are little-endian");

inline constexpr std::uint32_t kMagic = 0x534c4b52;  // "RKLS"
inline constexpr std::uint16_t kProtocolVersion = 1;

// Sender -> receiver in rdma_connect's private data (RDMA CM leaves 56 bytes for RC).
struct ConnectRequest {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kProtocolVersion;
  std::uint16_t reserved = 0;
  std::uint64_t credit_address = 0;  // where the receiver RDMA-WRITEs its released count
  std::uint32_t credit_rkey = 0;
  std::uint32_t metadata_bytes = 0;  // the largest metadata blob the sender will send
  std::uint32_t lane = 0;            // the lane the sender carries; the receiver refuses another
  std::uint32_t reserved2 = 0;
};
static_assert(sizeof(ConnectRequest) <= 56);

// Receiver -> sender in rdma_accept's private data (196 bytes available).
// The ring survives reconnects: `arrived` and `released` are totals since the receiver
// started, so a new sender continues at slot arrived % slot_count with
// slot_count - (arrived - released) credits, never overwriting a slot still held downstream.
struct RingAdvert {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kProtocolVersion;
  std::uint16_t reserved = 0;
  std::uint32_t slot_count = 0;
  std::uint32_t metadata_slot_bytes = 0;  // SlotHeader + the metadata blob, per slot
  std::uint64_t slot_bytes = 0;           // payload bytes per slot
  std::uint64_t payload_address = 0;      // slot k's payload starts at payload_address + k * slot_bytes
  std::uint64_t metadata_address = 0;     // slot k's header at metadata_address + k * metadata_slot_bytes
  std::uint32_t payload_rkey = 0;
  std::uint32_t metadata_rkey = 0;
  std::uint64_t arrived = 0;
  std::uint64_t released = 0;
};
static_assert(sizeof(RingAdvert) <= 196);

// Written by the sender in front of each chunk's metadata, in the same RDMA WRITE, before
// the payload's WRITE WITH IMMEDIATE (RC delivers them in order, so the header is in place
// when the immediate's completion arrives).
struct SlotHeader {
  std::uint64_t sequence = 0;  // chunks this connection carried before this one
  std::uint64_t payload_bytes = 0;
  std::uint32_t metadata_bytes = 0;
  std::uint32_t magic = kMagic;
};

// One slot of the metadata ring: the header and a blob of up to `metadata_bytes`, rounded up so
// that every slot starts on a cache line. Both ends compute it; the receiver advertises it.
inline constexpr std::size_t kMetadataAlign = 64;
constexpr std::uint32_t metadata_slot_size(std::size_t metadata_bytes) {
  return static_cast<std::uint32_t>((sizeof(SlotHeader) + metadata_bytes + kMetadataAlign - 1) / kMetadataAlign *
                                    kMetadataAlign);
}

// Immediate of a payload write: slot in the low 16 bits, connection sequence's low 16 above.
inline constexpr std::uint32_t kMaxSlots = 1u << 16;
constexpr std::uint32_t make_immediate(std::uint32_t slot, std::uint64_t sequence) {
  return (static_cast<std::uint32_t>(sequence & 0xffffu) << 16) | (slot & 0xffffu);
}
constexpr std::uint32_t immediate_slot(std::uint32_t immediate) { return immediate & 0xffffu; }
constexpr std::uint32_t immediate_sequence(std::uint32_t immediate) { return immediate >> 16; }

// SEND messages: hello (sender -> receiver, first, the stage's opaque description of the
// lane), end of stream (after every payload write: RC keeps the order), error (either way).
enum class ControlType : std::uint32_t { end_of_stream = 1, error = 2, hello = 3 };
struct ControlMessage {
  static constexpr std::size_t kTextBytes = 4096 - 16;
  ControlType type = ControlType::end_of_stream;
  std::uint32_t text_bytes = 0;
  std::uint64_t chunks = 0;  // chunks sent on this connection before the message
  char text[kTextBytes] = {};
};
inline constexpr std::size_t kControlBytes = sizeof(ControlMessage);

}  // namespace sluice::rdma
