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
  // Whether another input chunk may be taken now: the writer has room (host lanes), or a slot
  // behind the copies in flight and a free bounce for it (lanes with device chunks).
  bool ready_for_input();
  // One input chunk: to the writer (host lanes), or behind the copies in flight, its own copy
  // out of GPU memory started on this stage's stream without waiting for it.
  StageStatus take(ChunkPtr chunk);
  bool start_bounce_copy(ChunkPtr chunk);
  // Hands the writer, in arrival order, every chunk at the head whose copy has finished.
  StageStatus submit_copied(bool& progressed);
  bool submit(ChunkPtr chunk, ChunkPtr bounce);
  StageStatus fail_copies();
  // The lane's state as a reader finds it in the files: bytes, recordings, complete or not.
  [[nodiscard]] std::string state_on_disk() const;

  recorder::RecorderSettings settings_;
  StageContext* context_ = nullptr;
  std::unique_ptr<recorder::RecordingWriter> writer_;
  Pool* bounce_ = nullptr;  // pinned copies of device chunks
  GpuStream gpu_;           // those copies (made in start() where the lane has device chunks)
  // Lanes with device chunks: every chunk in arrival order, each with its bounce (null for host
  // chunks and gaps) and the fence of its copy (0: none), until the writer takes it.
  FenceRing arrived_;
  FenceRing bounces_;
  ChunkPtr spare_bounce_;  // taken before an input chunk is, so that a device chunk always has one
  NamedCounter* not_recorded_ = nullptr;
  // The longest time the stage thread spent on one chunk's copy out of GPU memory (queueing it)
  // and on its submission (rotation, meta room, preallocation, io_uring_submit): where a lane's
  // chunk may wait behind its recording. And the most copies out of GPU memory unfinished at once.
  NamedCounter* longest_bounce_us_ = nullptr;
  NamedCounter* longest_submit_us_ = nullptr;
  NamedCounter* most_bounces_in_flight_ = nullptr;
  // Striped: the chunks each volume took ("volume_K_chunks"), and those that went past a volume
  // whose writes were all in the kernel ("busy_volume_passed"): a volume that falls behind shows.
  std::vector<NamedCounter*> volume_chunks_;
  NamedCounter* busy_volume_passed_ = nullptr;
  bool finished_ = false;
  bool join_ = false;            // asked to add lanes to an existing capture
  bool joins_existing_ = false;  // NAME.sigmf-collection existed before this run
};

void register_record_stage(StageRegistry& registry);

}  // namespace sluice
