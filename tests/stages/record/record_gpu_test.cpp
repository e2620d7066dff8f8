// The recorder fed from GPU memory on a real GPU: chunks that a link landed in device memory
// go through the record stage's pinned bounce pool to io_uring, and the capture read back
// through replay (host chunks, linked back into device memory) gives every byte back.
#include <gtest/gtest.h>

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
  Pipeline record(load_pipeline_text("pipeline: {name: gpu, chunk: 4MiB, chunks: 8}\n"
                                     "lanes:\n  - name: port0\n    stages:\n"
                                     "      - {type: generator, signal: ramp, sample_rate: 100Msps, stop_after: " +
                                         std::to_string(kTotalBytes) +
                                         "}\n"
                                         "      - {type: link, memory: device}\n"
                                         "      - {name: rec, type: record, directory: " + dir.str("capture") + "}\n",
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
  Pipeline replay(load_pipeline_text("pipeline: {name: back, chunk: 4MiB, chunks: 8}\n"
                                     "lanes:\n  - name: port0\n    stages:\n"
                                     "      - {type: replay, pace: fast, memory: host_pinned, capture: " +
                                         dir.str("capture/gpu.sigmf-collection") +
                                         "}\n"
                                         "      - {type: link, memory: device}\n"
                                         "      - {type: file, path: " + out + "}\n",
                                     "replay_gpu.yaml"));
  replay.start();
  replay.run();
  ASSERT_TRUE(replay.failures().empty()) << replay.failures()[0].message;
  EXPECT_EQ(read_file(out), expected);
}

}  // namespace
}  // namespace sluice
