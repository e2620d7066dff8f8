// A link between GPUs on a real two-GPU host: chunks from a ring on GPU 0 land on GPU 1 with
// every byte intact, and each stage's pools sit on the GPU its gpu: names (asked of CUDA with
// cudaPointerGetAttributes, not of Sluice's bookkeeping).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/cuda_glue.hpp"
#include "pipeline/runtime.hpp"
#include "stages/generator/generator.hpp"
#include "tests/stages/stage_test_util.hpp"

namespace sluice {
namespace {

struct PoolSeen {
  std::string name;
  int device = -1;  // cuda_glue::device_of: -1 for host memory
};
std::vector<PoolSeen> g_pools;
int g_probe_gpu = -1;

// A sink that asks CUDA where every pool of its lane lives, then passes chunks on.
class PoolProbe final : public Stage {
 public:
  PoolProbe(SettingsReader&, const PipelineSettings&) {}
  void start(StageContext& context) override {
    context_ = &context;
    g_probe_gpu = context.cuda_device();
    for (const Pool* pool : context.lane_pools())
      g_pools.push_back({pool->name(), cuda_glue::device_of(pool->region().data())});
  }
  StageStatus process() override {
    if (ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10))) {
      context_->emit(std::move(chunk));
      return StageStatus::ok;
    }
    return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
  }
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
};

bool two_gpus(std::string& why) {
  const int count = cuda_glue::device_count();
  if (count >= 2) return true;
  why =
      "needs 2 GPUs, found " + std::to_string(count) + (count == 0 ? " (" + cuda_glue::unavailable_reason() + ")" : "");
  return false;
}

TEST(LocalLinkGpu, ARingOnGpu0LandsOnGpu1WithEveryByte) {
  std::string why;
  if (!two_gpus(why)) GTEST_SKIP() << why;
  testing::TempDir dir;
  const auto path = dir.path() / "landed.bin";
  auto pipeline = testing::run_pipeline(R"(pipeline: {chunk: 1MiB, chunks: 8}
lanes:
  - name: a
    gpu: 0
    stages:
      - {type: generator, signal: ramp, stop_after: 64MiB, memory: device}
      - {type: link, memory: device, gpu: 1}
      - {type: file, path: )" + path.string() +
                                        "}\n");
  ASSERT_TRUE(pipeline->failures().empty()) << pipeline->failures()[0].message;
  for (const auto* metrics : pipeline->metrics()) EXPECT_TRUE(metrics->notes.empty()) << metrics->notes[0];
  EXPECT_EQ(pipeline->definition().lanes[0].stages[1].cuda_device, 1);
  GeneratorSettings settings;
  settings.signal = GeneratorSignal::ramp;
  std::vector<std::byte> expected(64 << 20);
  generate_signal(settings, 0, expected.size() / 4, expected.data());
  const std::vector<std::byte> actual = testing::read_file(path);
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), expected.size()), 0);
}

TEST(LocalLinkGpu, EachPoolSitsOnTheGpuItsStageNames) {
  std::string why;
  if (!two_gpus(why)) GTEST_SKIP() << why;
  g_pools.clear();
  const StageRegistry registry =
      testing::builtin_registry_with({testing::stage_type_of<PoolProbe>("probe", StageRole::sink, "where pools live")});
  Pipeline pipeline(load_pipeline_text(R"(pipeline: {chunk: 1MiB, chunks: 8}
lanes:
  - name: a
    gpu: 1
    stages:
      - {type: generator, stop_after: 16MiB, memory: device, gpu: 0}
      - {type: link, memory: device}
      - {type: fft, backend: cufft, size: 1024, memory: device}
      - {type: probe}
)",
                                       "test.yaml", {}, registry));
  pipeline.start();
  pipeline.run();
  ASSERT_TRUE(pipeline.failures().empty()) << pipeline.failures()[0].message;
  EXPECT_EQ(g_probe_gpu, 1);
  std::vector<std::string> seen;
  for (const auto& pool : g_pools) seen.push_back(pool.name + " on " + std::to_string(pool.device));
  const std::vector<std::string> expected{"a.generator.out on 0", "a.link.landing on 1", "a.fft.spectra on 1"};
  for (const auto& each : expected) EXPECT_NE(std::find(seen.begin(), seen.end(), each), seen.end()) << each;
  EXPECT_EQ(seen.size(), expected.size());
}

}  // namespace
}  // namespace sluice
