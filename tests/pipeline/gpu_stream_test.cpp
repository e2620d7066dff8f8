// Stages' own CUDA streams on a real GPU: hand-off events order copies across streams, copies on two
// streams overlap (GPU clock, against a one-stream control), the bytes are the generator's signal.
#include <gtest/gtest.h>

#if SLUICE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
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
  for (std::size_t i = 0; i < kBytes; i += 4096)
    std::memset(source.data() + i, static_cast<int>(i / 4096 % 251 + 1), 4096);
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
  static const StageRegistry registry = testing::builtin_registry_with({testing::stage_type_of<SignalCheck>(
      "signal_check", StageRole::sink, "compares bytes with the generator's signal")});
  return registry;
}

// One lane of `stages` run to its end.
void run_lane(const std::string& stages, const std::string& chunk) {
  Pipeline pipeline(
      load_pipeline_text("pipeline: {chunk: " + chunk + ", chunks: 8}\nlanes: [{name: a, stages: [" + stages + "]}]\n",
                         "test.yaml", {}, test_registry()));
  pipeline.start();
  pipeline.run();
  EXPECT_TRUE(pipeline.failures().empty()) << pipeline.failures()[0].message;
}

const std::string kLinkToHost = "{type: link, memory: host_pinned}";

#if SLUICE_HAVE_CUDA
// Two stages' GPU work as the generator and the link enqueue it, timed on the GPU's own clock
// (CUDA events with timing), so that host scheduling and the runtime's polling do not enter the
// figures. Stage A copies a pinned pattern into a ring of device chunks (host → device) and hands
// each on with an event; stage B waits for that event and copies the chunk into a pinned landing
// buffer (device → host) and hands the chunk back, which A waits for before it fills it again.
class TwoStageCopies {
 public:
  static constexpr std::size_t kChunkBytes = 64 << 20;
  static constexpr std::size_t kRing = 4;

  TwoStageCopies()
      : pattern_(MemoryKind::host_pinned, kChunkBytes),
        landing_(MemoryKind::host_pinned, kChunkBytes),
        device_("device", PoolSpec{kChunkBytes, kRing, MemoryKind::device}),
        returned_(kRing) {
    for (std::size_t i = 0; i < kChunkBytes; i += 4096) {
      std::memset(pattern_.data() + i, static_cast<int>(i / 4096 % 249 + 3), 4096);
    }
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&end_a_), "cudaEventCreate");
    check(cudaEventCreate(&end_b_), "cudaEventCreate");
  }
  TwoStageCopies(const TwoStageCopies&) = delete;
  TwoStageCopies& operator=(const TwoStageCopies&) = delete;
  ~TwoStageCopies() {
    cudaEventDestroy(end_b_);
    cudaEventDestroy(end_a_);
    cudaEventDestroy(start_);
  }

  // Milliseconds on the GPU from the first copy to the last, `chunks` copies by each stage that
  // runs (A, B or both), A on stream `a` and B on stream `b` (the same one: the control).
  double run(std::size_t chunks, GpuStream* a, GpuStream* b) {
    GpuStream& first = a != nullptr ? *a : *b;
    check(cudaEventRecord(start_, static_cast<cudaStream_t>(first.get())), "cudaEventRecord");
    if (a != nullptr && b != nullptr && b != a) {
      check(cudaStreamWaitEvent(static_cast<cudaStream_t>(b->get()), start_, 0), "cudaStreamWaitEvent");
    }
    bool enqueued = true;
    for (std::size_t i = 0; i < chunks; ++i) {
      Chunk& chunk = device_.chunk(i % kRing);
      if (a != nullptr) {
        enqueued = enqueued && (b == nullptr || a->wait_for(returned_[i % kRing])) &&
                   a->copy(chunk.data, pattern_.data(), kChunkBytes) && a->hand_off(chunk) != 0;
      }
      if (b != nullptr) {
        enqueued = enqueued && (a == nullptr || b->wait_for(chunk)) &&
                   b->copy(landing_.data(), chunk.data, kChunkBytes) && b->hand_off(returned_[i % kRing]) != 0;
      }
    }
    EXPECT_TRUE(enqueued) << first.error() << (b != nullptr ? b->error() : std::string());
    float ms_a = 0;
    float ms_b = 0;
    if (a != nullptr) ms_a = elapsed(end_a_, *a);
    if (b != nullptr) ms_b = elapsed(end_b_, *b);
    for (Chunk& chunk : returned_) chunk.ready_event = nullptr;
    for (std::size_t i = 0; i < kRing; ++i) device_.chunk(i).ready_event = nullptr;
    return std::max(ms_a, ms_b);
  }
  // The landing buffer holds the pattern (after a run with both stages).
  [[nodiscard]] bool landed() const { return std::memcmp(landing_.data(), pattern_.data(), kChunkBytes) == 0; }
  void clear_landing() { std::memset(landing_.data(), 0, kChunkBytes); }

 private:
  static void check(cudaError_t result, const char* call) {
    if (result != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(result));
  }
  float elapsed(cudaEvent_t end, GpuStream& stream) {
    check(cudaEventRecord(end, static_cast<cudaStream_t>(stream.get())), "cudaEventRecord");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, end), "cudaEventElapsedTime");
    return ms;
  }

  MemoryRegion pattern_;
  MemoryRegion landing_;
  Pool device_;
  std::vector<Chunk> returned_;  // B's hand-back of each ring chunk, which A waits for
  cudaEvent_t start_ = nullptr;
  cudaEvent_t end_a_ = nullptr;
  cudaEvent_t end_b_ = nullptr;
};
#endif

TEST(StagesOnTwoStreams, HostToDeviceAndDeviceToHostCopiesOverlap) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
#if SLUICE_HAVE_CUDA
  // Each alone, both on their own streams, and both on one stream (the control: there they must
  // take turns, so a measurement that cannot tell the two apart fails here rather than passing).
  // The fastest of three runs each: other work on the GPU only ever makes a run slower.
  TwoStageCopies copies;
  GpuStream stream_a(0, TwoStageCopies::kRing + 1);
  GpuStream stream_b(0, TwoStageCopies::kRing + 1);
  const auto best = [&](std::size_t chunks, GpuStream* a, GpuStream* b) {
    double fastest = copies.run(chunks, a, b);
    for (int run = 0; run < 2; ++run) fastest = std::min(fastest, copies.run(chunks, a, b));
    return fastest;
  };
  // Enough chunks that the faster stage alone takes 200 ms on this GPU: far above any timer floor.
  const double calibration = std::min(best(8, &stream_a, nullptr), best(8, nullptr, &stream_b));
  const auto chunks = static_cast<std::size_t>(std::clamp(std::ceil(8 * 200 / calibration), 8.0, 4096.0));
  const double alone_a = best(chunks, &stream_a, nullptr);
  const double alone_b = best(chunks, nullptr, &stream_b);
  copies.clear_landing();
  const double two_streams = best(chunks, &stream_a, &stream_b);
  EXPECT_TRUE(copies.landed()) << "the last chunk landed is not the pattern";
  const double one_stream = best(chunks, &stream_a, &stream_a);
  const double sum = alone_a + alone_b;
  const double gib = static_cast<double>(chunks * TwoStageCopies::kChunkBytes) / (1ULL << 30);
  std::printf(
      "stage copies, GPU clock, %.1f GiB each: host → device alone %.1f ms (%.1f GB/s), device → host alone "
      "%.1f ms (%.1f GB/s); both on two streams %.1f ms (%.2f of the sum), on one stream %.1f ms (%.2f of the sum)\n",
      gib, alone_a, gib * 1.073741824 / alone_a * 1e3, alone_b, gib * 1.073741824 / alone_b * 1e3, two_streams,
      two_streams / sum, one_stream, one_stream / sum);
  ASSERT_GE(std::min(alone_a, alone_b), 100.0) << "each stage's work alone must take 100 ms or more to be timed";
  EXPECT_GE(one_stream, 0.9 * sum)
      << "on one stream the stages take turns: a measurement that misses this proves nothing";
  EXPECT_LT(two_streams, 0.8 * sum) << "the two stages' copies did not overlap on their own streams";
#endif
}

TEST(StagesOnTwoStreams, BytesThroughTwoStreamsAreTheSignal) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  g_signal = GeneratorSettings{};
  g_signal.format = SampleFormat::ci16;
  g_signal.signal = GeneratorSignal::noise;
  for (const std::string& lane :
       {std::string("{type: generator, signal: noise, memory: device, stop_after: 1GiB}, ") + kLinkToHost,
        std::string(
            "{type: generator, signal: noise, stop_after: 1GiB}, {type: link, name: to_device, memory: device}, ") +
            kLinkToHost,
        std::string("{type: generator, signal: noise, memory: device, stop_after: 1GiB}, {type: link, name: to_device, "
                    "memory: device}, ") +
            kLinkToHost}) {
    g_received = {};
    // A chunk 1024 samples longer than a whole number of periods: each starts elsewhere in the
    // signal, so a stale, reordered or half-copied chunk differs from what is expected.
    run_lane(lane + ", {type: signal_check}", "16388KiB");
    EXPECT_EQ(g_received.bytes, 1ULL << 30) << lane;
    EXPECT_EQ(g_received.mismatched_chunks, 0U) << lane;
  }
}

}  // namespace
}  // namespace sluice
