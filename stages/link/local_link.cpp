// Local link: copy into the landing ring, release the sender's chunk (its credit returns).
#include "stages/link/local_link.hpp"

#include <stdexcept>

#include "pipeline/config.hpp"

namespace sluice {

LocalLink::LocalLink(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.transport = reader.choice("transport", LinkTransport::local,
                                      "how chunks cross the link: local (in-process copy into the landing ring)",
                                      {{"local", LinkTransport::local}});
  settings_.landing = read_pool_settings(reader, pipeline);
}

void LocalLink::start(StageContext& context) {
  context_ = &context;
  for (Pool* pool : context.lane_pools()) {
    if (pool->chunk_bytes() > settings_.landing.chunk_bytes) {
      throw std::runtime_error("landing buffers (" + std::to_string(settings_.landing.chunk_bytes) +
                               " bytes) are smaller than upstream chunks of pool " + pool->name() + " (" +
                               std::to_string(pool->chunk_bytes()) + " bytes); set chunk: on the link");
    }
  }
  landing_ = &context.create_pool("landing", settings_.landing.spec(context.pipeline().cuda_device));
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
                         "moves chunks into the receiver's landing ring (local: in-process copy)",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<LocalLink>(reader, pipeline);
                         }});
}

}  // namespace sluice
