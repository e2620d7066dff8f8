// The transports built into this binary, found by kind: tcp always, roce when rdma-core was
// found. Kept apart from transport.hpp so that the transports' own files depend on the seam only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stages/link/transport.hpp"

namespace sluice {

// A transport kind this build can make. tcp is always built; roce registers itself only
// when rdma-core was found (SLUICE_HAVE_RDMA), from its own source file.
struct TransportKind {
  LinkTransport transport;
  std::function<std::unique_ptr<LinkSender>()> make_sender;
  std::function<std::unique_ptr<LinkReceiver>()> make_receiver;
  // Empty when usable on this host; else why not ("no RDMA device: /sys/class/infiniband is empty").
  std::function<std::string()> unavailable_reason;
};

// The transports built into this binary (tcp, and roce when built).
const TransportKind* find_transport(LinkTransport transport);

// Defined by the roce transport's source file (built only with rdma-core); appends its kind.
void register_roce_transport(std::vector<TransportKind>& kinds);

}  // namespace sluice
