// Replay of a capture striped over four loop-mounted ext4 volumes: the kernel's own in-flight
// counts (/proc/diskstats) show every volume reading at once, and the chunks come back in
// stream order holding exactly the generator's ramp.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "recorder/capture_reader.hpp"
#include "tests/stages/record/record_test_support.hpp"

namespace sluice {
namespace {

using test::LoopVolume;
using test::TempDir;

constexpr std::size_t kVolumes = 4;
constexpr unsigned kReadAhead = 1;
constexpr std::uint64_t kChunkBytes = 512 * 1024;  // one block request per read on a loop device
constexpr std::uint64_t kBytes = 64ULL << 20;

// The in-flight I/O count of each device, all from one read of /proc/diskstats.
std::vector<unsigned> in_flight(const std::vector<dev_t>& devices) {
  std::ifstream stats("/proc/diskstats");
  std::stringstream text;
  text << stats.rdbuf();
  std::vector<unsigned> counts(devices.size(), 0);
  std::string line;
  while (std::getline(text, line)) {
    std::istringstream fields(line);
    unsigned major_number = 0;
    unsigned minor_number = 0;
    std::string name;
    fields >> major_number >> minor_number >> name;
    std::vector<std::uint64_t> values;
    for (std::uint64_t value = 0; fields >> value;) values.push_back(value);
    for (std::size_t i = 0; i < devices.size(); ++i) {
      if (major(devices[i]) == major_number && minor(devices[i]) == minor_number && values.size() > 8) {
        counts[i] = static_cast<unsigned>(values[8]);  // the ninth figure: I/Os in progress
      }
    }
  }
  return counts;
}

class StripedReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    for (std::size_t i = 0; i < kVolumes; ++i) {
      volumes_.push_back(std::make_unique<LoopVolume>(dir_, "ext4", "96M", "vol" + std::to_string(i)));
      SLUICE_REQUIRE_MOUNTED(*volumes_.back());
      struct stat status {};
      ASSERT_EQ(::stat(volumes_.back()->path().c_str(), &status), 0);
      devices_.push_back(status.st_dev);
    }
    std::string directories;
    for (const auto& volume : volumes_) directories += (directories.empty() ? "" : ", ") + volume->path();
    const std::string record = "pipeline: {name: stripes, chunk: " + std::to_string(kChunkBytes) +
                               ", chunks: 16}\n"
                               "lanes:\n  - name: a\n    stages:\n"
                               "      - {type: generator, signal: ramp, stop_after: " +
                               std::to_string(kBytes) +
                               "}\n"
                               "      - {type: record, capture_name: striped, preallocate: 32MiB, directory: [" +
                               directories +
                               "]}\n"
                               "      - {type: null}\n";
    ASSERT_EQ(test::run_pipeline(record), std::vector<std::string>{});
    collection_ = volumes_.front()->path() + "/striped.sigmf-collection";
    const recorder::Capture capture = recorder::open_capture(collection_);
    ASSERT_EQ(capture.lanes.size(), 1U);
    std::vector<std::string> files;
    for (const auto& segment : capture.lanes[0].segments) files.push_back(segment.data_path);
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    ASSERT_EQ(files.size(), kVolumes) << "the recorder striped the lane over every volume";
    // Read-only from here: ext4's lazy inode-table init and the journal write no more, so the
    // kernel's in-flight counts are replay's reads alone.
    for (const auto& volume : volumes_) {
      ASSERT_EQ(std::system(("mount -o remount,ro '" + volume->path() + "'").c_str()), 0) << volume->path();
    }
  }

  [[nodiscard]] std::string replay_yaml(const std::string& extra, const std::string& sink) const {
    return "pipeline: {name: back, chunk: " + std::to_string(kChunkBytes) + ", chunks: 16" + extra +
           "}\n"
           "lanes:\n  - name: a\n    stages:\n"
           "      - {type: replay, pace: fast, read_ahead: " +
           std::to_string(kReadAhead) + ", capture: " + collection_ + (extra.empty() ? "" : ", loop: true") +
           "}\n"
           "      - " +
           sink + "\n";
  }

  TempDir dir_;
  std::vector<std::unique_ptr<LoopVolume>> volumes_;
  std::vector<dev_t> devices_;
  std::string collection_;
};

// With read_ahead (1) shared over the stripes, one volume would be busy at a time (two for
// the moment between a read's completion and the kernel's count of it); with read_ahead
// reads per volume, all four are.
TEST_F(StripedReplay, ReadsEveryVolumeAtOnce) {
  std::atomic<bool> done{false};
  std::size_t most_busy = 0;
  std::vector<unsigned> most_per_volume(kVolumes, 0);
  std::thread sampler([&] {
    while (!done) {
      const std::vector<unsigned> counts = in_flight(devices_);
      most_busy = std::max<std::size_t>(
          most_busy,
          static_cast<std::size_t>(std::count_if(counts.begin(), counts.end(), [](unsigned c) { return c > 0; })));
      for (std::size_t i = 0; i < kVolumes; ++i) most_per_volume[i] = std::max(most_per_volume[i], counts[i]);
    }
  });
  const std::vector<std::string> failures = test::run_pipeline(replay_yaml(", duration: 3s", "{type: null}"));
  done = true;
  sampler.join();
  EXPECT_EQ(failures, std::vector<std::string>{});
  std::string seen;
  for (unsigned count : most_per_volume) seen += " " + std::to_string(count);
  EXPECT_EQ(most_busy, kVolumes) << "most reads in flight seen on each volume:" << seen;
}

TEST_F(StripedReplay, GivesBackEverySampleInStreamOrder) {
  ASSERT_EQ(test::run_pipeline(replay_yaml("", "{type: capture, key: striped-order}"), test::test_registry()),
            std::vector<std::string>{});
  auto& store = test::collected("striped-order");
  std::lock_guard lock(store.mutex);
  std::uint64_t next = 0;
  for (const auto& chunk : store.chunks) {
    ASSERT_EQ(chunk.first_sample, next) << "chunk " << chunk.sequence << " out of order";
    ASSERT_EQ(chunk.bytes, test::ramp_bytes(SampleFormat::ci16, 100e6, chunk.first_sample, chunk.sample_count))
        << "chunk " << chunk.sequence << " at sample " << chunk.first_sample;
    next += chunk.sample_count;
  }
  EXPECT_EQ(next * 4, kBytes);
}

}  // namespace
}  // namespace sluice
