// File sink: bytes in equal bytes on disk; an existing file is never overwritten unless asked.
#include "stages/sinks/file_sink.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "stages/generator/generator.hpp"
#include "tests/stages/stage_test_util.hpp"

namespace sluice {
namespace {

using testing::read_file;
using testing::TempDir;

std::string lane_to(const std::filesystem::path& path, const std::string& extra = "") {
  return R"(pipeline: {chunk: 64KiB}
lanes: [{name: a, stages: [{type: generator, signal: noise, stop_after: 1MiB}, {type: file, path: )" +
         path.string() + extra + "}]}]\n";
}

TEST(FileSink, RefusesToOverwriteAnExistingFile) {
  TempDir dir;
  const auto path = dir.path() / "keep.bin";
  std::ofstream(path) << "precious";
  Pipeline pipeline(load_pipeline_text(lane_to(path)));
  try {
    pipeline.start();
    FAIL() << "start should refuse an existing file";
  } catch (const PipelineError& error) {
    EXPECT_NE(std::string(error.what()).find("File exists"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("overwrite: true"), std::string::npos) << error.what();
  }
  const auto kept = read_file(path);
  EXPECT_EQ(kept.size(), 8U);
}

TEST(FileSink, OverwritesWhenAskedAndWritesEveryByte) {
  TempDir dir;
  const auto path = dir.path() / "replace.bin";
  std::ofstream(path) << "old contents that are longer than nothing";
  auto pipeline = testing::run_pipeline(lane_to(path, ", overwrite: true"));
  ASSERT_TRUE(pipeline->failures().empty());
  const auto actual = read_file(path);
  GeneratorSettings settings;
  settings.signal = GeneratorSignal::noise;
  std::vector<std::byte> expected(1 << 20);
  generate_signal(settings, 0, expected.size() / 4, expected.data());
  EXPECT_EQ(actual, expected);
}

TEST(FileSink, UnwritableDirectoryFailsAtStartWithTheCall) {
  Pipeline pipeline(load_pipeline_text(lane_to("/proc/sluice-cannot-write-here.bin")));
  try {
    pipeline.start();
    FAIL() << "start should fail";
  } catch (const PipelineError& error) {
    EXPECT_NE(std::string(error.what()).find("open(/proc/sluice-cannot-write-here.bin)"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace sluice
