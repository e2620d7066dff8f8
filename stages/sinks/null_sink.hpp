// `null` sink: takes every chunk and releases it; measures what reached the end of a lane.
#pragma once

#include "pipeline/stage.hpp"

namespace sluice {

class NullSink final : public Stage {
 public:
  NullSink(SettingsReader& reader, const PipelineSettings& pipeline);
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override;
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
};

void register_null_sink_stage(StageRegistry& registry);

}  // namespace sluice
