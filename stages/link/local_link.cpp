// Link stage placement (cut into halves between nodes) and the in-process copy.
#include "stages/link/local_link.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "pipeline/config.hpp"
#include "pipeline/log.hpp"
#include "stages/link/link_halves.hpp"

namespace sluice {
namespace {
constexpr std::size_t kInputsInFlight = 8;  // input chunks copies may still read
}  // namespace

LocalLink::LocalLink(SettingsReader& reader, const PipelineSettings& pipeline)
    : settings_(read_link_settings(reader, pipeline)) {}

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
    log::info("link: lane {}: transport auto -> local (both sides on one node)", context.lane_name());
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
  bool touches_gpu = landing_->memory() == MemoryKind::device;
  std::size_t in_flight = kInputsInFlight;
  for (Pool* pool : context.lane_pools()) {
    if (pool == landing_) continue;
    touches_gpu = touches_gpu || pool->memory() == MemoryKind::device;
    in_flight =
        std::min(in_flight, std::max<std::size_t>(1, pool->chunk_count() / 2));  // upstream keeps chunks to fill
  }
  if (touches_gpu) {
    gpu_ = GpuStream(context.cuda_device(), landing_->chunk_count() + in_flight + 1);
    inputs_in_flight_.reserve(in_flight);
  }
  if (landing_->memory() == MemoryKind::device) {
    // Upstream chunks are copied to the GPU: page-locked, those copies run at full PCIe rate.
    for (Pool* pool : context.lane_pools()) pool->region().pin_for_device();
  }
}

StageStatus LocalLink::process() {
  retire(false);
  // While copies still read input chunks, upstream may wait for exactly those: never sleep then.
  ChunkPtr chunk = context_->input().pop(inputs_in_flight_.empty() ? std::chrono::microseconds(10'000)
                                                                   : std::chrono::microseconds(0));
  if (!chunk && !inputs_in_flight_.empty()) {
    {
      const WaitTimer waiting(context_->metrics());
      gpu_.wait(inputs_in_flight_.front_fence());
    }
    retire(false);
    if (gpu_.error().empty()) return StageStatus::ok;
    context_->fail("link: " + gpu_.error());
    return StageStatus::error;
  }
  if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
  if (chunk->size > landing_->chunk_bytes()) {
    oversize_->add();
    return StageStatus::ok;
  }
  ChunkPtr landing;
  while (!(landing = context_->acquire(*landing_, std::chrono::milliseconds(100)))) {
  }
  landing->copy_metadata_from(*chunk);
  if (landing->memory == MemoryKind::device || chunk->memory == MemoryKind::device) {
    if (!copy_on_gpu(std::move(chunk), *landing)) return StageStatus::error;
  } else {
    std::memcpy(landing->data, chunk->data, chunk->size);
    chunk.reset();
  }
  context_->emit(std::move(landing));
  return StageStatus::ok;
}

bool LocalLink::copy_on_gpu(ChunkPtr chunk, Chunk& landing) noexcept {
  // After the producer's GPU work on the chunk, on this stage's stream: nothing here waits for it.
  if (gpu_.wait_for(*chunk) && gpu_.copy(landing.data, chunk->data, chunk->size)) {
    if (landing.memory == MemoryKind::device) {
      // Downstream's stream waits for the copy; the input goes back once the copy has read it.
      const std::uint64_t fence = gpu_.hand_off(landing);
      if (inputs_in_flight_.full()) retire(true);
      if (fence != 0) inputs_in_flight_.push(std::move(chunk), fence);
    } else {
      // Host landing: its reader is the CPU, so the copy must have finished (this stage's own).
      const WaitTimer waiting(context_->metrics());
      gpu_.wait(gpu_.fence());
    }
  }
  if (gpu_.error().empty()) return true;
  context_->fail("link: " + gpu_.error());
  return false;
}

void LocalLink::retire(bool all) noexcept {
  while (!inputs_in_flight_.empty()) {
    if (all) {
      gpu_.wait(inputs_in_flight_.front_fence());
    } else if (!gpu_.reached(inputs_in_flight_.front_fence())) {
      return;
    }
    inputs_in_flight_.pop();  // back to its pool
  }
}

void LocalLink::stop() noexcept {
  if (!gpu_) return;
  retire(true);
  if (!gpu_.finish()) log::warn("link: lane {}: {}", context_->lane_name(), gpu_.error());
}

void register_link_stage(StageRegistry& registry) {
  registry.add(StageType{"link", StageRole::transform,
                         "moves chunks into the receiver's landing ring: in process, or between nodes over tcp or roce",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<LocalLink>(reader, pipeline);
                         }});
}

}  // namespace sluice
