// Device and pinned memory on a real GPU: pools, and a lane whose link lands chunks in GPU
// memory and a file sink that copies them back — the bytes must survive both copies.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "pipeline/config.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/runtime.hpp"
#include "stages/generator/generator.hpp"

namespace sluice {
namespace {

TEST(GpuMemory, DeviceAndPinnedPoolsAllocateAndCopy) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  Pool device("device", PoolSpec{1 << 20, 4, MemoryKind::device});
  Pool pinned("pinned", PoolSpec{1 << 20, 4, MemoryKind::host_pinned});
  EXPECT_EQ(device.memory(), MemoryKind::device);
  EXPECT_EQ(pinned.memory(), MemoryKind::host_pinned);
  std::vector<std::byte> pattern(1 << 20);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::byte>(i * 7 + 3);
  ChunkPtr on_device = device.try_acquire();
  ChunkPtr on_host = pinned.try_acquire();
  ASSERT_EQ(copy_memory(on_device->data, MemoryKind::device, pattern.data(), MemoryKind::host, pattern.size()), "");
  ASSERT_EQ(copy_memory(on_host->data, MemoryKind::host_pinned, on_device->data, MemoryKind::device, pattern.size()),
            "");
  EXPECT_EQ(std::memcmp(on_host->data, pattern.data(), pattern.size()), 0);
}

TEST(GpuMemory, PinForDeviceRegistersAHostSlabOnceAndCopiesStayExact) {
  MemoryRegion region(MemoryKind::host, 4 << 20);
  EXPECT_FALSE(region.pinned());
  if (!cuda_available()) {
    EXPECT_FALSE(region.pin_for_device()) << "pinned without a GPU";
    EXPECT_FALSE(region.pinned());
    GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  }
  ASSERT_TRUE(region.pin_for_device());
  EXPECT_TRUE(region.pinned());
  EXPECT_TRUE(region.pin_for_device());    // idempotent: a second cudaHostRegister would fail
  MemoryRegion moved = std::move(region);  // the registration moves with the slab
  EXPECT_TRUE(moved.pinned());
  MemoryRegion device(MemoryKind::device, moved.size());
  for (std::size_t i = 0; i < moved.size(); ++i) moved.data()[i] = static_cast<std::byte>(i * 13 + 1);
  std::vector<std::byte> back(moved.size());
  ASSERT_EQ(copy_memory(device.data(), MemoryKind::device, moved.data(), MemoryKind::host, moved.size()), "");
  ASSERT_EQ(copy_memory(back.data(), MemoryKind::host, device.data(), MemoryKind::device, back.size()), "");
  EXPECT_EQ(std::memcmp(back.data(), moved.data(), back.size()), 0);
}

TEST(GpuMemory, LaneThroughDeviceMemoryKeepsEveryByte) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  const auto path = std::filesystem::temp_directory_path() / ("sluice_gpu_lane_" + std::to_string(getpid()) + ".bin");
  std::filesystem::remove(path);
  auto definition = load_pipeline_text(R"(pipeline: {chunk: 1MiB, chunks: 8}
lanes:
  - name: a
    stages:
      - {type: generator, signal: ramp, stop_after: 32MiB, memory: host_pinned}
      - {type: link, memory: device}
      - {type: file, path: )" + path.string() +
                                           "}\n",
                                       "gpu.yaml");
  Pipeline pipeline(std::move(definition));
  pipeline.start();
  pipeline.run();
  ASSERT_TRUE(pipeline.failures().empty()) << pipeline.failures()[0].message;
  for (const auto* metrics : pipeline.metrics()) EXPECT_TRUE(metrics->notes.empty()) << metrics->notes[0];
  GeneratorSettings settings;
  settings.signal = GeneratorSignal::ramp;
  std::vector<std::byte> expected(32 << 20);
  generate_signal(settings, 0, expected.size() / 4, expected.data());
  std::ifstream file(path, std::ios::binary);
  std::vector<char> actual((std::istreambuf_iterator<char>(file)), {});
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), expected.size()), 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice
