// Link stage placement (cut into halves between nodes) and the in-process copy.
#include "stages/link/local_link.hpp"

#include <stdexcept>

#include <spdlog/spdlog.h>

#include "pipeline/config.hpp"
#include "stages/link/link_halves.hpp"

namespace sluice {

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
