#include "suite/device_source.hpp"

#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/memory.hpp"
#include "pipeline/stage.hpp"

namespace sluice::bench {
namespace {}  // namespace

std::vector<std::byte> random_samples(std::size_t bytes, SampleFormat format) {
  std::vector<std::byte> out(bytes);
  std::mt19937 random(7);
  if (format == SampleFormat::cf32) {
    std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
    for (std::size_t at = 0; at + 4 <= bytes; at += 4) {
      const float value = uniform(random);
      std::memcpy(out.data() + at, &value, 4);
    }
  } else {
    for (auto& byte : out) byte = static_cast<std::byte>(random());
  }
  return out;
}

namespace {

class DeviceSource final : public Stage {
 public:
  DeviceSource(SettingsReader& reader, const PipelineSettings& pipeline) {
    format_ = reader.choice("format", SampleFormat::cf32, "sample format of the random samples",
                            {{"ci8", SampleFormat::ci8}, {"ci16", SampleFormat::ci16}, {"cf32", SampleFormat::cf32}});
    chunks_to_send_ = static_cast<std::uint64_t>(
        reader.integer("chunks_to_send", 0, "end the stream after this many chunks (0: at stop)", 0));
    pool_settings_ = read_pool_settings(reader, pipeline);
    if (pool_settings_.memory != MemoryKind::device) {
      reader.error("memory", "device_source fills device chunks once and re-sends them", "set memory: device");
    }
    if (pool_settings_.chunk_bytes % bytes_per_sample(format_) != 0) {
      reader.error("chunk", "chunk size is not a whole number of samples");
    }
  }
  void start(StageContext& context) override {
    context_ = &context;
    pool_ = &context.create_pool("source", pool_settings_.spec(context.cuda_device()));
    const std::vector<std::byte> bytes = random_samples(pool_->chunk_bytes(), format_);
    for (std::size_t i = 0; i < pool_->chunk_count(); ++i) {
      Chunk& chunk = pool_->chunk(i);
      if (std::string error = copy_memory(chunk.data, chunk.memory, bytes.data(), MemoryKind::host, bytes.size());
          !error.empty()) {
        throw std::runtime_error(error);
      }
    }
    context.stream.format = format_;
    context.stream.sample_rate = 1e9;
    context.stream.description = "bench: random device chunks, filled once";
  }
  StageStatus process() override {
    if (context_->stop_requested() || (chunks_to_send_ != 0 && sent_ == chunks_to_send_))
      return StageStatus::end_of_stream;
    ChunkPtr chunk = context_->acquire(*pool_, std::chrono::milliseconds(100));
    if (!chunk) return StageStatus::idle;
    chunk->size = chunk->capacity;
    chunk->format = format_;
    chunk->sequence = sent_;
    chunk->sample_count = chunk->size / bytes_per_sample(format_);
    chunk->first_sample = sent_++ * chunk->sample_count;
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  SampleFormat format_ = SampleFormat::cf32;
  std::uint64_t chunks_to_send_ = 0;
  PoolSettings pool_settings_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  std::uint64_t sent_ = 0;
};

}  // namespace

const StageRegistry& bench_registry() {
  static const StageRegistry built = [] {
    StageRegistry stages;
    register_builtin_stages(stages);
    stages.add(StageType{"device_source", StageRole::source, "bench: device chunks filled once, re-sent",
                         [](SettingsReader& reader, const PipelineSettings& pipeline) {
                           return std::unique_ptr<Stage>(std::make_unique<DeviceSource>(reader, pipeline));
                         }});
    return stages;
  }();
  return built;
}

}  // namespace sluice::bench
