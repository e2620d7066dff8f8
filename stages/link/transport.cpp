// Names of the link transports and of their statuses, for logs and errors.
#include "stages/link/transport.hpp"

namespace sluice {

std::string_view to_string(LinkTransport transport) {
  switch (transport) {
    case LinkTransport::local:
      return "local";
    case LinkTransport::tcp:
      return "tcp";
    case LinkTransport::roce:
      return "roce";
    case LinkTransport::auto_select:
      return "auto";
  }
  return "?";
}

std::string_view to_string(LinkStatus status) {
  switch (status) {
    case LinkStatus::ok:
      return "ok";
    case LinkStatus::idle:
      return "idle";
    case LinkStatus::end_of_stream:
      return "end of stream";
    case LinkStatus::peer_lost:
      return "peer lost";
    case LinkStatus::error:
      return "error";
  }
  return "?";
}

}  // namespace sluice
