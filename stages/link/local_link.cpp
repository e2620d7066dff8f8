// Link stage settings, placement (cut into halves between nodes) and the in-process copy.
#include "stages/link/local_link.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "pipeline/config.hpp"
#include "stages/link/link_halves.hpp"

namespace sluice {

LinkSettings read_link_settings(SettingsReader& reader, const PipelineSettings& pipeline) {
  LinkSettings settings;
  settings.transport = reader.choice(
      "transport", LinkTransport::local,
      "how chunks cross the link: local (in-process copy into the landing ring), tcp, roce (RDMA WRITE, needs "
      "rdma-core), auto (roce where an RDMA device exists, else tcp between nodes, local within one)",
      {{"local", LinkTransport::local}, {"tcp", LinkTransport::tcp}, {"roce", LinkTransport::roce}, {"auto", LinkTransport::auto_select}});
  TransportSettings& connection = settings.connection;
  connection.endpoint.address = reader.string(
      "address", "", "between nodes: the receiving node's address for this lane (its half listens there, the sender connects)");
  connection.endpoint.port = static_cast<std::uint16_t>(reader.integer("port", 0, "between nodes: TCP / RDMA-CM port for this lane", 0, 65535));
  connection.device = reader.string("device", "", "roce: RDMA device to use (default: the one that routes to address)");
  connection.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      reader.duration("connect_timeout", connection.connect_timeout,
                      "between nodes: how long the sending half retries and the receiving half waits for its peer at start"));
  connection.peer_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      reader.duration("peer_timeout", connection.peer_timeout,
                      "between nodes: silence after which the peer counts as lost (heartbeats every quarter of it)"));
  settings.landing = read_pool_settings(reader, pipeline);
  if (settings.transport == LinkTransport::roce && find_transport(LinkTransport::roce) == nullptr) {
    reader.error("transport", "this build has no roce transport",
                 "install rdma-core (libibverbs-dev, librdmacm-dev) and configure with -DSLUICE_WITH_RDMA=ON, or use "
                 "transport: tcp");
  }
  if (!connection.device.empty() && settings.transport != LinkTransport::roce && settings.transport != LinkTransport::auto_select) {
    reader.error("device", "device names an RDMA device, used only by transport roce or auto");
  }
  if (connection.peer_timeout < std::chrono::milliseconds(100)) {
    reader.error("peer_timeout", "peer_timeout below 100ms would declare healthy peers lost", "1.5s is the default");
  }
  return settings;
}

LocalLink::LocalLink(SettingsReader& reader, const PipelineSettings& pipeline) : settings_(read_link_settings(reader, pipeline)) {}

std::string LocalLink::place(bool joins_nodes, StageHalves& halves) {
  const TransportSettings& connection = settings_.connection;
  if (!joins_nodes) {
    if (settings_.transport == LinkTransport::tcp || settings_.transport == LinkTransport::roce) {
      return "transport " + std::string(to_string(settings_.transport)) +
             " carries a lane between two nodes, but this link is on the same node as the stage before it "
             "(give the link the receiving node's name in node:, or use transport: local)";
    }
    if (!connection.endpoint.address.empty() || connection.endpoint.port != 0) {
      return "address and port are for a link between nodes; this one stays on its node (set node: or drop them)";
    }
    return {};
  }
  if (settings_.transport == LinkTransport::local) {
    return "transport local copies within one process; a link between nodes needs transport: tcp, roce or auto";
  }
  if (connection.endpoint.address.empty() || connection.endpoint.port == 0) {
    return "a link between nodes needs the receiving node's address: and port: (per lane)";
  }
  halves.sending = std::make_unique<LinkSendingHalf>(settings_);
  halves.receiving = std::make_unique<LinkReceivingHalf>(settings_);
  return {};
}

void LocalLink::start(StageContext& context) {
  context_ = &context;
  if (settings_.transport == LinkTransport::auto_select) {
    spdlog::info("link: lane {}: transport auto -> local (both sides on one node)", context.lane_name());
  }
  for (Pool* pool : context.lane_pools()) {
    if (pool->chunk_bytes() > settings_.landing.chunk_bytes) {
      throw std::runtime_error("landing buffers (" + std::to_string(settings_.landing.chunk_bytes) +
                               " bytes) are smaller than upstream chunks of pool " + pool->name() + " (" +
                               std::to_string(pool->chunk_bytes()) + " bytes); set chunk: on the link");
    }
  }
  landing_ = &context.create_pool("landing", settings_.landing.spec(context.cuda_device()));
  oversize_ = &context.metrics().drop_counter("larger_than_landing_buffer");
  if (landing_->memory() == MemoryKind::device) {
    context.cuda_stream();  // create it now, not on the hot path
    // Upstream chunks are copied to the GPU: page-locked, those copies run at full PCIe rate.
    for (Pool* pool : context.lane_pools()) pool->region().pin_for_device();
  }
}

StageStatus LocalLink::process() {
  ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
  if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
  if (chunk->size > landing_->chunk_bytes()) {
    oversize_->add();
    return StageStatus::ok;
  }
  ChunkPtr landing;
  while (!(landing = context_->acquire(*landing_, std::chrono::milliseconds(100)))) {
  }
  const bool device = landing->memory == MemoryKind::device || chunk->memory == MemoryKind::device;
  if (std::string error = copy_memory(landing->data, landing->memory, chunk->data, chunk->memory, chunk->size,
                                      device ? context_->cuda_stream() : nullptr);
      !error.empty()) {
    context_->fail(error);
    return StageStatus::error;
  }
  landing->copy_metadata_from(*chunk);
  chunk.reset();
  context_->emit(std::move(landing));
  return StageStatus::ok;
}

void register_link_stage(StageRegistry& registry) {
  registry.add(StageType{"link", StageRole::transform,
                         "moves chunks into the receiver's landing ring: in process, or between nodes over tcp or roce",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<LocalLink>(reader, pipeline);
                         }});
}

}  // namespace sluice
