// Local link: chunks land in the receiver's ring with bytes and metadata intact; landing
// buffers smaller than upstream chunks are refused at start.
#include "stages/link/local_link.hpp"

#include <gtest/gtest.h>

#include "stages/generator/generator.hpp"
#include "tests/stages/stage_test_util.hpp"

namespace sluice {
namespace {

using testing::read_file;
using testing::TempDir;

TEST(LocalLink, CarriesEveryByteThroughItsLandingRing) {
  TempDir dir;
  const auto path = dir.path() / "linked.bin";
  // A landing ring of 2 credits against 16 source chunks: the sender must wait for credits.
  auto pipeline = testing::run_pipeline(R"(pipeline: {chunk: 128KiB, chunks: 16}
lanes:
  - name: a
    stages:
      - {type: generator, signal: ramp, format: cf32, stop_after: 4MiB}
      - {type: link, chunks: 2}
      - {type: file, path: )" + path.string() +
                                        "}\n");
  ASSERT_TRUE(pipeline->failures().empty());
  GeneratorSettings settings;
  settings.signal = GeneratorSignal::ramp;
  settings.format = SampleFormat::cf32;
  std::vector<std::byte> expected(4 << 20);
  generate_signal(settings, 0, expected.size() / 8, expected.data());
  EXPECT_EQ(read_file(path), expected);
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_EQ(lanes[0][1]->out.samples, (4U << 20) / 8);
  EXPECT_EQ(lanes[0][1]->total_drops(), 0U);
}

TEST(LocalLink, RefusesLandingBuffersSmallerThanUpstreamChunks) {
  Pipeline pipeline(load_pipeline_text(R"(pipeline: {chunk: 1MiB}
lanes: [{name: a, stages: [{type: generator}, {type: link, chunk: 64KiB}, {type: null}]}]
)"));
  try {
    pipeline.start();
    FAIL() << "start should fail";
  } catch (const PipelineError& error) {
    EXPECT_NE(std::string(error.what()).find("smaller than upstream chunks"), std::string::npos) << error.what();
  }
}

TEST(LocalLink, DeviceLandingFallsBackToHostWithANoteWithoutAGpu) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present; memory_gpu_test covers device landing";
  auto pipeline = testing::run_pipeline(R"(pipeline: {chunk: 64KiB}
lanes: [{name: a, stages: [{type: generator, stop_after: 1MiB}, {type: link, memory: device}, {type: null}]}]
)");
  ASSERT_TRUE(pipeline->failures().empty());
  const auto lanes = pipeline->metrics_by_lane();
  ASSERT_EQ(lanes[0][1]->notes.size(), 1U);
  EXPECT_EQ(lanes[0][1]->notes[0].rfind("memory device → host", 0), 0U) << lanes[0][1]->notes[0];
  EXPECT_EQ(lanes[0][2]->in.bytes, 1U << 20);
}

}  // namespace
}  // namespace sluice
