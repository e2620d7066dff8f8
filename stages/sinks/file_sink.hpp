// `file` sink: appends each chunk's bytes to one file with plain buffered write(2). For
// recordings people keep, use `record` (io_uring, O_DIRECT, SigMF); this is the simple path.
#pragma once

#include <string>
#include <vector>

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
  std::vector<std::byte> bounce_;  // device chunks are copied here before writing
};

void register_file_sink_stage(StageRegistry& registry);

}  // namespace sluice
