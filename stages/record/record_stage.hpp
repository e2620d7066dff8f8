// `record` tap: writes every chunk that passes into a SigMF capture through io_uring with
// O_DIRECT, and hands it on (or ends it) only once its bytes are in the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pipeline/gpu_stream.hpp"
#include "pipeline/stage.hpp"
#include "recorder/recording_writer.hpp"

namespace sluice {

class RecordStage final : public Stage {
 public:
  RecordStage(SettingsReader& reader, const PipelineSettings& pipeline);
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;
  [[nodiscard]] std::vector<std::string> exclusive_outputs(const std::string& lane) const override;

 private:
  StageStatus stop_on_failure();
  // A pinned copy of a device chunk, made on the lane's stream; null once the stage failed.
  ChunkPtr bounce_copy(const Chunk& chunk);
  // The lane's state as a reader finds it in the files: bytes, recordings, complete or not.
  [[nodiscard]] std::string state_on_disk() const;

  recorder::RecorderSettings settings_;
  StageContext* context_ = nullptr;
  std::unique_ptr<recorder::RecordingWriter> writer_;
  Pool* bounce_ = nullptr;  // pinned copies of device chunks
  GpuStream gpu_;           // those copies (made in start() where the lane has device chunks)
  NamedCounter* not_recorded_ = nullptr;
  // The longest time the stage thread spent on one chunk's copy out of GPU memory and on its
  // submission (rotation, meta room, preallocation, io_uring_submit): where a lane's chunk
  // may wait behind its recording.
  NamedCounter* longest_bounce_us_ = nullptr;
  NamedCounter* longest_submit_us_ = nullptr;
  bool finished_ = false;
  bool join_ = false;            // asked to add lanes to an existing capture
  bool joins_existing_ = false;  // NAME.sigmf-collection existed before this run
};

void register_record_stage(StageRegistry& registry);

}  // namespace sluice
