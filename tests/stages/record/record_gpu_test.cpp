// The recorder fed from GPU memory on a real GPU: device chunks through the record stage's pinned
// bounce pool to io_uring, read back through replay into device memory, bit-exact.
#include <gtest/gtest.h>

#include <cstdio>

#include "pipeline/memory.hpp"
#include "tests/stages/record/record_test_support.hpp"

namespace sluice {
namespace {
using test::ramp_bytes;
using test::read_file;
using test::TempDir;

constexpr std::uint64_t kTotalBytes = 48ULL << 20;  // twelve 4 MiB chunks, each crossing to the GPU and back

TEST(RecordGpu, DeviceChunksAreRecordedThroughThePinnedBounceAndReplayBackIntoDeviceMemory) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  TempDir dir;
  // Record: generator → link into GPU memory → record (device → pinned → io_uring O_DIRECT).
  Pipeline record(
      load_pipeline_text("pipeline: {name: gpu, chunk: 4MiB, chunks: 8}\n"
                         "lanes:\n  - name: port0\n    stages:\n"
                         "      - {type: generator, signal: ramp, sample_rate: 100Msps, stop_after: " +
                             std::to_string(kTotalBytes) +
                             "}\n"
                             "      - {type: link, memory: device}\n"
                             "      - {name: rec, type: record, directory: " +
                             dir.str("capture") + "}\n",
                         "record_gpu.yaml"));
  record.start();
  record.run();
  ASSERT_TRUE(record.failures().empty()) << record.failures()[0].message;
  // No fallback: the landing ring really was in GPU memory, so the bounce path ran.
  const auto lane = record.metrics_by_lane().at(0);
  for (const auto* stage : lane) {
    for (const std::string& note : stage->notes) EXPECT_EQ(note.find("→ host"), std::string::npos) << note;
  }
  const auto expected = ramp_bytes(SampleFormat::ci16, 100e6, 0, kTotalBytes / 4);
  EXPECT_EQ(read_file(dir.str("capture/gpu-port0-0000.sigmf-data")), expected);

  // Replay: capture → host chunks → link into GPU memory → file sink (device → host copy).
  const std::string out = dir.str("replayed.bin");
  Pipeline replay(
      load_pipeline_text("pipeline: {name: back, chunk: 4MiB, chunks: 8}\n"
                         "lanes:\n  - name: port0\n    stages:\n"
                         "      - {type: replay, pace: fast, memory: host_pinned, capture: " +
                             dir.str("capture/gpu.sigmf-collection") +
                             "}\n"
                             "      - {type: link, memory: device}\n"
                             "      - {type: file, path: " +
                             out + "}\n",
                         "replay_gpu.yaml"));
  replay.start();
  replay.run();
  ASSERT_TRUE(replay.failures().empty()) << replay.failures()[0].message;
  EXPECT_EQ(read_file(out), expected);
}

std::uint64_t counter_of(const StageMetrics& stage, const std::string& name) {
  for (const auto& counter : stage.counters()) {
    if (counter.name == name) return counter.get();
  }
  ADD_FAILURE() << "no " << name << " counter";
  return 0;
}

TEST(RecordGpu, SeveralBounceCopiesAreInFlightAtOnceAndTheRecordingIsBitExact) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  // The generator fills device chunks with copies it only queues, so chunks reach the record
  // stage far faster than the GPU finishes them: a stage that waited for each bounce copy would
  // never have two unfinished; one that queues them and writes each once its event says so does.
  constexpr std::uint64_t kBytes = 512ULL << 20;  // 32 chunks of 16 MiB
  TempDir dir;
  Pipeline record(
      load_pipeline_text("pipeline: {name: gpu, chunk: 16MiB, chunks: 8}\n"
                         "lanes:\n  - name: port0\n    stages:\n"
                         "      - {type: generator, signal: ramp, memory: device, sample_rate: 100Msps, "
                         "stop_after: " +
                             std::to_string(kBytes) +
                             "}\n"
                             "      - {name: rec, type: record, directory: " +
                             dir.str("capture") + "}\n",
                         "record_bounce.yaml"));
  record.start();
  record.run();
  ASSERT_TRUE(record.failures().empty()) << record.failures()[0].message;
  const StageMetrics& stage = *record.metrics_by_lane().at(0).at(1);
  EXPECT_EQ(stage.total_drops(), 0U);
  const std::uint64_t most_in_flight = counter_of(stage, "most_bounces_in_flight");
  std::printf("record bounce copies: at most %llu in flight at once\n",
              static_cast<unsigned long long>(most_in_flight));
  EXPECT_GE(most_in_flight, 2U) << "each bounce copy was waited for before the next began";
  EXPECT_EQ(read_file(dir.str("capture/gpu-port0-0000.sigmf-data")),
            ramp_bytes(SampleFormat::ci16, 100e6, 0, kBytes / 4));
}

}  // namespace
}  // namespace sluice
