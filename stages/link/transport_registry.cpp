// The transports built into this binary: tcp always, roce when rdma-core was found.
#include "stages/link/transport_registry.hpp"

#include "stages/link/tcp_transport.hpp"

namespace sluice {

const TransportKind* find_transport(LinkTransport transport) {
  static const std::vector<TransportKind> kinds = [] {
    std::vector<TransportKind> built;
    built.push_back(TransportKind{LinkTransport::tcp, [] { return std::unique_ptr<LinkSender>(new TcpSender()); },
                                  [] { return std::unique_ptr<LinkReceiver>(new TcpReceiver()); },
                                  [] { return std::string(); }});
#if SLUICE_HAVE_ROCE_LINK
    register_roce_transport(built);
#endif
    return built;
  }();
  for (const auto& kind : kinds) {
    if (kind.transport == transport) return &kind;
  }
  return nullptr;
}

}  // namespace sluice
