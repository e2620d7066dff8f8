// Both halves of a tcp link connected over loopback, the way the link stage sets them up: the
// receiver listens and accepts while the sender connects with a three-byte hello.
#pragma once

#include <array>
#include <future>
#include <vector>

#include "stages/link/tcp_transport.hpp"

namespace sluice::testing {

struct LoopbackLink {
  Pool source;
  Pool landing;
  TcpSender sender;
  TcpReceiver receiver;
  std::vector<std::byte> hello_seen;

  LoopbackLink(const PoolSpec& source_spec, const PoolSpec& landing_spec, const TransportSettings& settings,
               std::uint32_t sender_lane = 2)
      : source("source", source_spec), landing("landing", landing_spec) {
    receiver.listen(settings, 2, landing);
    auto accepted = std::async(std::launch::async, [&] { return receiver.accept(); });
    const std::array<std::byte, 3> hello{std::byte{1}, std::byte{2}, std::byte{3}};
    sender.connect(settings, sender_lane, {&source}, hello);
    hello_seen = accepted.get();
  }
};

}  // namespace sluice::testing
