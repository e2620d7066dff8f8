// `link` stage, in-process transport: the same contract as the RoCE link — the sender
// writes each chunk into one of the receiver's landing buffers (a ring it registered at
// start; taking one is taking a credit) and the chunk's metadata travels with it — but the
// write is a memcpy / cudaMemcpy. Landing buffers may live in another memory kind (GPU).
#pragma once

#include "pipeline/stage.hpp"

namespace sluice {

enum class LinkTransport { local };

struct LinkSettings {
  LinkTransport transport = LinkTransport::local;
  PoolSettings landing;  // the receiver's ring: chunk size, depth (credits) and memory kind
};

class LocalLink final : public Stage {
 public:
  LocalLink(SettingsReader& reader, const PipelineSettings& pipeline);
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override {}

 private:
  LinkSettings settings_;
  StageContext* context_ = nullptr;
  Pool* landing_ = nullptr;
  NamedCounter* oversize_ = nullptr;
};

void register_link_stage(StageRegistry& registry);

}  // namespace sluice
