// `link` stage within one node: an in-process copy into the receiver's landing ring.
#pragma once

#include "pipeline/gpu_stream.hpp"
#include "pipeline/stage.hpp"
#include "stages/link/link_settings.hpp"

namespace sluice {

// `link` stage. Within one node it is the in-process transport: the sender writes each
// chunk into one of the receiver's landing buffers (a ring it allocated at start; taking
// one is taking a credit) and the chunk's metadata travels with it, but the write is a
// memcpy / cudaMemcpy; landing buffers may live in another memory kind (GPU). Where its
// `node:` differs from the stage before it, the link is cut into a sending and a
// receiving half (link_halves.hpp) that talk over tcp or roce (transport.hpp).
class LocalLink final : public Stage {
 public:
  LocalLink(SettingsReader& reader, const PipelineSettings& pipeline);
  std::string place(bool joins_nodes, StageHalves& halves) override;
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;

 private:
  // Copies `chunk` into `landing` on this stage's stream; false (the stage failed) on an error.
  bool copy_on_gpu(ChunkPtr chunk, Chunk& landing) noexcept;
  // Gives back the input chunks whose copies have finished (all of them with `all`, waiting).
  void retire(bool all) noexcept;

  LinkSettings settings_;
  StageContext* context_ = nullptr;
  Pool* landing_ = nullptr;
  NamedCounter* oversize_ = nullptr;
  GpuStream gpu_;               // copies that touch a GPU (made in start() where one can)
  FenceRing inputs_in_flight_;  // input chunks a copy still reads
};

void register_link_stage(StageRegistry& registry);

}  // namespace sluice
