// The link stage's settings, read and checked once for every kind of link.
#include "stages/link/link_settings.hpp"

#include "pipeline/config.hpp"
#include "stages/link/transport_registry.hpp"

namespace sluice {

LinkSettings read_link_settings(SettingsReader& reader, const PipelineSettings& pipeline) {
  LinkSettings settings;
  settings.transport = reader.choice(
      "transport", LinkTransport::local,
      "how chunks cross the link: local (in-process copy into the landing ring), tcp, roce (RDMA WRITE, needs "
      "rdma-core), auto (roce where an RDMA device exists, else tcp between nodes, local within one)",
      {{"local", LinkTransport::local},
       {"tcp", LinkTransport::tcp},
       {"roce", LinkTransport::roce},
       {"auto", LinkTransport::auto_select}});
  TransportSettings& connection = settings.connection;
  connection.endpoint.address = reader.string(
      "address", "",
      "between nodes: the receiving node's address for this lane (its half listens there, the sender connects)");
  connection.endpoint.port = static_cast<std::uint16_t>(
      reader.integer("port", 0, "between nodes: TCP / RDMA-CM port for this lane", 0, 65535));
  connection.device = reader.string("device", "", "roce: RDMA device to use (default: the one that routes to address)");
  connection.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(reader.duration(
      "connect_timeout", connection.connect_timeout,
      "between nodes: how long the sending half retries and the receiving half waits for its peer at start"));
  connection.peer_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      reader.duration("peer_timeout", connection.peer_timeout,
                      "between nodes: silence after which the peer counts as lost (heartbeats every quarter of it)"));
  connection.connections = static_cast<std::uint32_t>(reader.integer(
      "connections", 1, "tcp: connections per lane, chunks spread over them in turn (one socket is one core's copying)",
      1, 64));
  settings.landing = read_pool_settings(reader, pipeline);
  if (settings.transport == LinkTransport::roce && find_transport(LinkTransport::roce) == nullptr) {
    reader.error("transport", "this build has no roce transport",
                 "install rdma-core (libibverbs-dev, librdmacm-dev) and configure with -DSLUICE_WITH_RDMA=ON, or use "
                 "transport: tcp");
  }
  if (!connection.device.empty() && settings.transport != LinkTransport::roce &&
      settings.transport != LinkTransport::auto_select) {
    reader.error("device", "device names an RDMA device, used only by transport roce or auto");
  }
  if (connection.connections > 1 && settings.transport != LinkTransport::tcp &&
      settings.transport != LinkTransport::auto_select) {
    reader.error("connections",
                 "connections spreads a lane over several tcp connections; transport " +
                     std::string(to_string(settings.transport)) + " has one",
                 "use transport: tcp, or drop connections");
  }
  if (connection.peer_timeout < std::chrono::milliseconds(100)) {
    reader.error("peer_timeout", "peer_timeout below 100ms would declare healthy peers lost", "1.5s is the default");
  }
  return settings;
}

}  // namespace sluice
