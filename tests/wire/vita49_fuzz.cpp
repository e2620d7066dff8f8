// libFuzzer target for the VITA-49 data and context decoders (and the raw TCP header decoder): any bytes
// must decode to a status without reading outside the input, and an accepted packet's
// payload must lie inside it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "wire/raw_tcp.hpp"
#include "wire/samples.hpp"
#include "wire/vita49.hpp"
#include "wire/vita49_context.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  sluice::vita49::Packet packet;
  if (sluice::vita49::decode(std::span<const std::byte>(bytes, size), packet) == sluice::vita49::DecodeStatus::ok) {
    if (packet.payload.data() < bytes || packet.payload.data() + packet.payload.size() > bytes + size) std::abort();
    std::byte scratch[65536];
    const std::size_t whole = packet.payload.size() / 4 * 4;
    sluice::wire::copy_swapped(sluice::SampleFormat::ci16, packet.payload.data(), scratch, whole);
  }
  sluice::vita49::ContextPacket context;
  (void)sluice::vita49::decode_context(std::span<const std::byte>(bytes, size), context);
  sluice::raw_tcp::FrameHeader header;
  (void)sluice::raw_tcp::decode_header(std::span<const std::byte>(bytes, size), header);
  return 0;
}
