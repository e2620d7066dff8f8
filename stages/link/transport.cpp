// The transports built into this binary: tcp always, roce when rdma-core was found.
#include "stages/link/transport.hpp"

#include "stages/link/tcp_transport.hpp"

namespace sluice {

std::string_view to_string(LinkTransport transport) {
  switch (transport) {
    case LinkTransport::local: return "local";
    case LinkTransport::tcp: return "tcp";
    case LinkTransport::roce: return "roce";
    case LinkTransport::auto_select: return "auto";
  }
  return "?";
}

std::string_view to_string(LinkStatus status) {
  switch (status) {
    case LinkStatus::ok: return "ok";
    case LinkStatus::idle: return "idle";
    case LinkStatus::end_of_stream: return "end of stream";
    case LinkStatus::peer_lost: return "peer lost";
    case LinkStatus::error: return "error";
  }
  return "?";
}

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
