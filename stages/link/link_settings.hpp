// The link stage's settings, shared by the in-process link and the two halves that join nodes.
#pragma once

#include "pipeline/stage.hpp"
#include "stages/link/transport.hpp"

namespace sluice {

struct LinkSettings {
  LinkTransport transport = LinkTransport::local;
  TransportSettings connection;  // tcp / roce: the receiving node's address and port, timeouts
  PoolSettings landing;          // the receiver's ring: chunk size, depth (credits) and memory kind
};
LinkSettings read_link_settings(SettingsReader& reader, const PipelineSettings& pipeline);

}  // namespace sluice
