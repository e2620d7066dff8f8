// The shared test stages: `feed`, `capture` and `slow`.
#include "tests/support/test_stages.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include "pipeline/gpu_stream.hpp"
#include "pipeline/memory.hpp"
#include "tests/stages/stage_test_util.hpp"

namespace sluice::test_support {
namespace {

class FeedSource final : public Stage {
 public:
  FeedSource(SettingsReader& reader, const PipelineSettings& pipeline)
      : settings_(read_pool_settings(reader, pipeline)) {}
  void start(StageContext& context) override {
    context_ = &context;
    pool_ = &context.create_pool("feed", settings_.spec(context.cuda_device()));
    context.stream.format = feed().format;
    context.stream.sample_rate = 1e6;
    context.stream.description = "test feed";
  }
  StageStatus process() override {
    const Feed& source = feed();
    if (next_ == source.chunks.size()) return StageStatus::end_of_stream;
    ChunkPtr chunk = context_->acquire(*pool_, std::chrono::milliseconds(100));
    if (!chunk) return StageStatus::idle;
    const FeedChunk& planned = source.chunks[next_];
    if (planned.bytes.size() > chunk->capacity) {  // a test that asks for more than its chunks hold
      context_->fail("test feed chunk of " + std::to_string(planned.bytes.size()) + " bytes exceeds the pool's " +
                     std::to_string(chunk->capacity) + "-byte chunks");
      return StageStatus::error;
    }
    if (std::string error =
            copy_memory(chunk->data, chunk->memory, planned.bytes.data(), MemoryKind::host, planned.bytes.size());
        !error.empty()) {
      context_->fail(error);
      return StageStatus::error;
    }
    chunk->size = planned.bytes.size();
    chunk->format = source.format;
    chunk->sequence = next_++;
    chunk->first_sample = planned.first_sample;
    chunk->sample_count = planned.bytes.size() / bytes_per_sample(source.format);
    // 1 Msps: a sample lasts 1 µs = 10^6 ps.
    chunk->timestamp =
        Timestamp{100 + planned.first_sample / 1'000'000, planned.first_sample % 1'000'000 * 1'000'000, true};
    for (const Gap& gap : planned.gaps) chunk->add_gap(gap.first_sample, gap.length, gap.in_data);
    chunk->context_change = planned.context_change;
    chunk->context = planned.context;
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  PoolSettings settings_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  std::size_t next_ = 0;
};

std::string poison_region(std::byte* data, MemoryKind kind, std::size_t bytes) {
  const std::vector<std::byte> nan(bytes, std::byte{0xff});  // all-ones floats are NaN
  return copy_memory(data, kind, nan.data(), MemoryKind::host, bytes);
}

class CaptureSink final : public Stage {
 public:
  CaptureSink(SettingsReader& reader, const PipelineSettings&)
      : key_(reader.string("key", "", "the store the chunks go to (empty: current_capture())")),
        poison_(reader.boolean("poison", false, "fill the last upstream pool's chunks with NaN before use")) {}
  void start(StageContext& context) override {
    context_ = &context;
    capture_ = key_.empty() ? current_capture() : &keyed_capture(key_);
    if (capture_ == nullptr) throw std::runtime_error("capture: no current_capture() set and no key");
    capture_->stream = context.stream;
    if (!poison_) return;
    Pool* last = context.lane_pools().back();
    for (std::size_t i = 0; i < last->chunk_count(); ++i) {
      Chunk& chunk = last->chunk(i);
      if (std::string error = poison_region(chunk.data, chunk.memory, chunk.capacity); !error.empty()) {
        throw std::runtime_error(error);
      }
    }
  }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    CapturedChunk copy{std::vector<std::byte>(chunk->size),
                       chunk->sequence,
                       chunk->first_sample,
                       chunk->sample_count,
                       chunk->format,
                       chunk->timestamp,
                       std::vector<Gap>(chunk->gaps.begin(), chunk->gaps.begin() + chunk->gap_count),
                       chunk->context_change,
                       chunk->context};
    // The fft stage hands device rows on with the event of the work that writes them: a sink
    // without a stream of its own waits for it before reading them.
    std::string error = wait_until_written(*chunk);
    if (error.empty())
      error = copy_memory(copy.bytes.data(), MemoryKind::host, chunk->data, chunk->memory, chunk->size);
    if (error.empty() && poison_) error = poison_region(chunk->data, chunk->memory, chunk->capacity);
    if (!error.empty()) {
      context_->fail(error);
      return StageStatus::error;
    }
    {
      std::lock_guard lock(capture_->mutex);
      capture_->chunks.push_back(std::move(copy));
    }
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  std::string key_;
  bool poison_ = false;
  StageContext* context_ = nullptr;
  Capture* capture_ = nullptr;
};

// Passes each chunk on after `delay`: a consumer slower than its producer.
class SlowStage final : public Stage {
 public:
  SlowStage(SettingsReader& reader, const PipelineSettings&)
      : delay_(reader.duration("delay", std::chrono::milliseconds(1), "time spent per chunk")) {}
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    std::this_thread::sleep_for(delay_);
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  std::chrono::nanoseconds delay_;
  StageContext* context_ = nullptr;
};

}  // namespace

Feed& feed() {
  static Feed value;
  return value;
}

Capture*& current_capture() {
  static Capture fallback;
  static Capture* capture = &fallback;
  return capture;
}

Capture& keyed_capture(const std::string& key) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Capture>> captures;
  std::lock_guard lock(mutex);
  std::unique_ptr<Capture>& capture = captures[key];
  if (!capture) capture = std::make_unique<Capture>();
  return *capture;
}

StageType feed_source_type() { return testing::stage_type_of<FeedSource>("feed", StageRole::source, "test chunks"); }
StageType capture_sink_type() {
  return testing::stage_type_of<CaptureSink>("capture", StageRole::sink, "keeps chunks");
}

StageType slow_stage_type(StageRole role) {
  return testing::stage_type_of<SlowStage>("slow", role, "passes chunks on after `delay` each");
}

}  // namespace sluice::test_support
