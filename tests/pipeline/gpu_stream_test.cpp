// Stages' own CUDA streams on a real GPU: a hand-off event orders one stream's copy after
// another's, two stages' copies on two streams overlap (timed, not assumed), and the bytes that
// cross both are the generator's signal. Without a GPU: setup errors name the failed call.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "pipeline/config.hpp"
#include "pipeline/gpu_stream.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/runtime.hpp"
#include "stages/generator/generator.hpp"
#include "tests/stages/stage_test_util.hpp"

namespace sluice {
namespace {

TEST(GpuStream, WithoutGpuSetupNamesTheFailedCall) {
  if (cuda_available()) GTEST_SKIP() << "a GPU answers; the GPU cases below run instead";
  try {
    GpuStream stream(0, 2);
    FAIL() << "a stream was made without a GPU";
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    EXPECT_TRUE(what.find("cuda") != std::string::npos || what.find("CUDA") != std::string::npos) << what;
  }
}

TEST(GpuStream, HandOffOrdersTheConsumersCopyAfterTheProducers) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  // Large enough that the consumer's copy, unordered, would start long before the producer's ends.
  constexpr std::size_t kBytes = 256 << 20;
  MemoryRegion source(MemoryKind::host_pinned, kBytes);
  MemoryRegion back(MemoryKind::host_pinned, kBytes);
  for (std::size_t i = 0; i < kBytes; i += 4096) std::memset(source.data() + i, static_cast<int>(i / 4096 % 251 + 1), 4096);
  Pool device("device", PoolSpec{kBytes, 1, MemoryKind::device});
  ChunkPtr chunk = device.try_acquire();
  GpuStream producer(0, 4);
  GpuStream consumer(0, 4);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(producer.copy(chunk->data, source.data(), kBytes)) << producer.error();
    ASSERT_NE(producer.hand_off(*chunk), 0U) << producer.error();
    ASSERT_NE(chunk->ready_event, nullptr);
    ASSERT_TRUE(consumer.wait_for(*chunk)) << consumer.error();
    ASSERT_TRUE(consumer.copy(back.data(), chunk->data, kBytes)) << consumer.error();
    const std::uint64_t fence = consumer.fence();
    consumer.wait(fence);
    ASSERT_TRUE(consumer.reached(fence));
    ASSERT_EQ(consumer.error(), "");
    ASSERT_EQ(std::memcmp(back.data(), source.data(), kBytes), 0) << "round " << round;
    // The next round writes other bytes, so a stale copy cannot pass.
    for (std::size_t i = 0; i < kBytes; i += 4096) source.data()[i] = static_cast<std::byte>(round + 7);
    std::memset(back.data(), 0, kBytes);
  }
  std::string error;
  EXPECT_TRUE(chunk_written(*chunk, error)) << error;
}

// Emits the same device chunks over and over, filled once at start: a source that costs the GPU
// nothing, so that a run times only the stages after it.
class DeviceChunks final : public Stage {
 public:
  DeviceChunks(SettingsReader& reader, const PipelineSettings& pipeline)
      : pool_settings_(read_pool_settings(reader, pipeline)),
        stop_after_(reader.bytes("stop_after", 1 << 30, "bytes to emit")) {}
  void start(StageContext& context) override {
    context_ = &context;
    pool_ = &context.create_pool("chunks", pool_settings_.spec(context.cuda_device()));
    std::vector<std::byte> bytes(pool_->chunk_bytes(), std::byte{0x5a});
    for (std::size_t i = 0; i < pool_->chunk_count(); ++i) {
      Chunk& chunk = pool_->chunk(i);
      if (std::string error = copy_memory(chunk.data, chunk.memory, bytes.data(), MemoryKind::host, bytes.size());
          !error.empty()) {
        throw std::runtime_error(error);
      }
    }
    context.stream.format = SampleFormat::ci16;
    context.stream.sample_rate = 1e9;
  }
  StageStatus process() override {
    if (emitted_ >= stop_after_) return StageStatus::end_of_stream;
    ChunkPtr chunk = context_->acquire(*pool_, std::chrono::milliseconds(100));
    if (!chunk) return StageStatus::idle;
    chunk->size = chunk->capacity;
    chunk->format = SampleFormat::ci16;
    chunk->first_sample = emitted_ / 4;
    chunk->sample_count = chunk->size / 4;
    emitted_ += chunk->size;
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  PoolSettings pool_settings_;
  std::uint64_t stop_after_;
  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  std::uint64_t emitted_ = 0;
};

// Compares every byte that reaches it (host memory) with the generator's signal at its stream position.
struct Received {
  std::uint64_t bytes = 0;
  std::uint64_t mismatched_chunks = 0;
};
Received g_received;
GeneratorSettings g_signal;

constexpr std::size_t kPeriod = 65536;  // samples after which the generator's signal repeats

class SignalCheck final : public Stage {
 public:
  SignalCheck(SettingsReader&, const PipelineSettings&) {}
  void start(StageContext& context) override {
    context_ = &context;
    // The signal repeats every kPeriod samples: one period plus the largest chunk covers any chunk.
    std::size_t largest = 0;
    for (Pool* pool : context.lane_pools()) largest = std::max(largest, pool->chunk_bytes());
    const std::size_t samples = kPeriod + largest / bytes_per_sample(g_signal.format);
    expected_.resize(samples * bytes_per_sample(g_signal.format));
    generate_signal(g_signal, 0, samples, expected_.data());
  }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    if (chunk->memory == MemoryKind::device) {
      context_->fail("signal check reads host chunks only");
      return StageStatus::error;
    }
    const std::size_t offset = chunk->first_sample % kPeriod * bytes_per_sample(g_signal.format);
    if (std::memcmp(expected_.data() + offset, chunk->data, chunk->size) != 0) ++g_received.mismatched_chunks;
    g_received.bytes += chunk->size;
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
  std::vector<std::byte> expected_;
};

const StageRegistry& test_registry() {
  static const StageRegistry registry = testing::builtin_registry_with(
      {testing::stage_type_of<DeviceChunks>("device_chunks", StageRole::source, "the same device chunks, again and again"),
       testing::stage_type_of<SignalCheck>("signal_check", StageRole::sink, "compares bytes with the generator's signal")});
  return registry;
}

// Seconds that Pipeline::run() takes for one lane of `stages` (start() is not timed: it allocates).
double run_seconds(const std::string& stages, const std::string& chunk = "16MiB") {
  Pipeline pipeline(load_pipeline_text("pipeline: {chunk: " + chunk + ", chunks: 8}\nlanes: [{name: a, stages: [" + stages + "]}]\n",
                                       "test.yaml", {}, test_registry()));
  pipeline.start();
  const auto begin = std::chrono::steady_clock::now();
  pipeline.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_TRUE(pipeline.failures().empty()) << pipeline.failures()[0].message;
  return seconds;
}

// The fastest of three runs: a busy host only ever makes a run slower.
double best_seconds(const std::string& stages) {
  double best = run_seconds(stages);
  for (int run = 0; run < 2; ++run) best = std::min(best, run_seconds(stages));
  return best;
}

constexpr const char* kBytes = "4GiB";
const std::string kGeneratorToDevice = std::string("{type: generator, format: ci16, memory: device, stop_after: ") + kBytes + "}";
const std::string kDeviceChunks = std::string("{type: device_chunks, memory: device, stop_after: ") + kBytes + "}";
const std::string kLinkToHost = "{type: link, memory: host_pinned}";

TEST(StagesOnTwoStreams, HostToDeviceAndDeviceToHostCopiesOverlap) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  // Stage A: the generator copies its signal into device chunks (host → device) on its stream.
  // Stage B: a link lands device chunks in pinned host memory (device → host) on its stream.
  // Each alone, then both in one lane: on one shared, synchronised stream the two copies would
  // take turns (both ≈ A + B); on two streams they run at once on the GPU's two copy engines.
  const double generator_alone = best_seconds(kGeneratorToDevice + ", {type: null}");
  const double link_alone = best_seconds(kDeviceChunks + ", " + kLinkToHost + ", {type: null}");
  const double both = best_seconds(kGeneratorToDevice + ", " + kLinkToHost + ", {type: null}");
  const double sum = generator_alone + link_alone;
  const double hidden = (sum - both) / std::min(generator_alone, link_alone);
  std::printf("4 GiB: generator → device %.3f s, device → link → host %.3f s, both in one lane %.3f s "
              "(%.2f of the sum; %.0f%% of the shorter stage hidden)\n",
              generator_alone, link_alone, both, both / sum, hidden * 100);
  EXPECT_LT(both, 0.8 * sum) << "the two stages' copies did not overlap";
}

TEST(StagesOnTwoStreams, BytesThroughTwoStreamsAreTheSignal) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  g_signal = GeneratorSettings{};
  g_signal.format = SampleFormat::ci16;
  g_signal.signal = GeneratorSignal::noise;
  for (const std::string& lane :
       {std::string("{type: generator, signal: noise, memory: device, stop_after: 1GiB}, ") + kLinkToHost,
        std::string("{type: generator, signal: noise, stop_after: 1GiB}, {type: link, name: to_device, memory: device}, ") + kLinkToHost,
        std::string("{type: generator, signal: noise, memory: device, stop_after: 1GiB}, {type: link, name: to_device, memory: device}, ") +
            kLinkToHost}) {
    g_received = {};
    // A chunk 1024 samples longer than a whole number of periods: each starts elsewhere in the
    // signal, so a stale, reordered or half-copied chunk differs from what is expected.
    run_seconds(lane + ", {type: signal_check}", "16388KiB");
    EXPECT_EQ(g_received.bytes, 1ULL << 30) << lane;
    EXPECT_EQ(g_received.mismatched_chunks, 0U) << lane;
  }
}

}  // namespace
}  // namespace sluice
