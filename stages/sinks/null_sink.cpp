// Null sink: the end of a lane that keeps nothing.
#include "stages/sinks/null_sink.hpp"

namespace sluice {

NullSink::NullSink(SettingsReader&, const PipelineSettings&) {}

StageStatus NullSink::process() {
  ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
  if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
  context_->emit(std::move(chunk));
  return StageStatus::ok;
}

void register_null_sink_stage(StageRegistry& registry) {
  registry.add(StageType{"null", StageRole::sink, "discards chunks (measures what reached the end of a lane)",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<NullSink>(reader, pipeline);
                         }});
}

}  // namespace sluice
