// File sink: write(2) loop that treats short writes and EINTR as normal, and stops the lane
// with the errno on anything else (a full disk says "No space left on device").
#include "stages/sinks/file_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "pipeline/config.hpp"
#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice {

FileSink::FileSink(SettingsReader& reader, const PipelineSettings&) {
  settings_.path = reader.required_string("path", "file to write");
  settings_.overwrite = reader.boolean("overwrite", false, "replace an existing file (otherwise refuse to start)");
}

void FileSink::start(StageContext& context) {
  context_ = &context;
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (settings_.overwrite ? O_TRUNC : O_EXCL);
  fd_ = ::open(settings_.path.c_str(), flags, 0644);
  if (fd_ < 0) {
    const int error = errno;
    throw std::runtime_error(errno_message("open(" + settings_.path + ")", error) +
                             (error == EEXIST ? " (set overwrite: true to replace it)" : ""));
  }
  std::size_t bounce_bytes = 0;
  for (Pool* pool : context.lane_pools()) {
    if (pool->memory() == MemoryKind::device) bounce_bytes = std::max(bounce_bytes, pool->chunk_bytes());
  }
  if (bounce_bytes > 0) {
    bounce_ = MemoryRegion(MemoryKind::host, bounce_bytes);
    bounce_.pin_for_device();
    gpu_ = GpuStream(context.cuda_device(), 2);
  }
}

StageStatus FileSink::process() {
  ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
  if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
  const std::byte* data = chunk->data;
  if (chunk->memory == MemoryKind::device) {
    if (bounce_.size() < chunk->size) {
      context_->fail("device chunk larger than the bounce buffer sized at start");
      return StageStatus::error;
    }
    // After the producer's GPU work, on this stage's stream; the thread waits for this copy only.
    if (gpu_.wait_for(*chunk) && gpu_.copy(bounce_.data(), chunk->data, chunk->size)) {
      const WaitTimer waiting(context_->metrics());
      gpu_.wait(gpu_.fence());
    }
    if (!gpu_.error().empty()) {
      context_->fail("file sink: " + gpu_.error());
      return StageStatus::error;
    }
    data = bounce_.data();
  }
  std::size_t written = 0;
  while (written < chunk->size) {
    const ssize_t result = ::write(fd_, data + written, chunk->size - written);
    if (result < 0) {
      if (errno == EINTR) continue;
      context_->fail(errno_message("write(" + settings_.path + ")", errno));
      return StageStatus::error;
    }
    written += static_cast<std::size_t>(result);
  }
  context_->emit(std::move(chunk));
  return StageStatus::ok;
}

void FileSink::stop() noexcept {
  if (fd_ < 0) return;
  if (::fsync(fd_) != 0) log::warn("{}", errno_message("fsync(" + settings_.path + ")"));
  if (::close(fd_) != 0) log::warn("{}", errno_message("close(" + settings_.path + ")"));
  fd_ = -1;
}

void register_file_sink_stage(StageRegistry& registry) {
  registry.add(StageType{"file", StageRole::sink, "appends chunk bytes to a file (plain write(2))",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                           return std::make_unique<FileSink>(reader, pipeline);
                         }});
}

}  // namespace sluice
