// `file` sink: appends each chunk's bytes to one file with plain buffered write(2). For
// recordings people keep, use `record` (io_uring, O_DIRECT, SigMF); this is the simple path.
#pragma once

#include <string>

#include "pipeline/gpu_stream.hpp"
#include "pipeline/stage.hpp"

namespace sluice {

struct FileSinkSettings {
  std::string path;
  bool overwrite = false;
};

class FileSink final : public Stage {
 public:
  FileSink(SettingsReader& reader, const PipelineSettings& pipeline);
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;

 private:
  FileSinkSettings settings_;
  StageContext* context_ = nullptr;
  int fd_ = -1;
  MemoryRegion bounce_;  // device chunks are copied here (page-locked) before writing
  GpuStream gpu_;        // those copies (made in start() where a pool of the lane is on a GPU)
};

void register_file_sink_stage(StageRegistry& registry);

}  // namespace sluice
