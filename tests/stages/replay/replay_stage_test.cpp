// Replay of a capture striped over loop-mounted ext4 volumes, checked against the kernel's own
// in-flight counts (/proc/diskstats), the generator's ramp, and a volume throttled by blkio.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "recorder/capture_reader.hpp"
#include "tests/stages/record/record_test_support.hpp"
#include "tests/stages/stage_test_util.hpp"
#include "tests/support/io_throttle.hpp"

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

// What reached the end of the lane and when (monotonic): the test's own clock on the chunks.
struct Arrival {
  std::uint64_t at_ns = 0;
  std::uint64_t first_sample = 0;
  std::uint64_t sample_count = 0;
  std::vector<std::byte> bytes;
};
std::mutex arrivals_mutex;
std::vector<Arrival> arrivals;

class ArrivalSink final : public Stage {
 public:
  ArrivalSink(SettingsReader&, const PipelineSettings&) {}
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    Arrival arrival{monotonic_ns(), chunk->first_sample, chunk->sample_count,
                    std::vector<std::byte>(chunk->data, chunk->data + chunk->size)};
    {
      std::lock_guard lock(arrivals_mutex);
      arrivals.push_back(std::move(arrival));
    }
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
};

// A capture striped over two volumes (chunks alternate between them while neither is busy: the
// second chunk on the second volume), replayed at its recorded rate
// (256 KiB chunks of 250 kS/s ci16: 262 ms each) while the second volume's reads are held back
// for the first 2 s. Started on the first chunk, the pacing clock would make chunk 1 (the
// second volume's first) late by about 1.5 s; started once the reads ahead are in, every chunk
// reaches the sink within one chunk's duration of its recorded time after the first, and the
// chunks hold exactly the generator's ramp, in order.
TEST(PacedReplay, StaysOnTimeWhenAVolumeIsSlowToStart) {
  constexpr std::uint64_t kChunk = 256 * 1024;
  constexpr std::uint64_t kChunks = 12;
  constexpr double kRate = 250e3;
  constexpr double kChunkSeconds = static_cast<double>(kChunk / 4) / kRate;
  TempDir dir;
  LoopVolume fast(dir, "ext4", "64M", "fast");
  SLUICE_REQUIRE_MOUNTED(fast);
  LoopVolume slow(dir, "ext4", "64M", "slow");
  SLUICE_REQUIRE_MOUNTED(slow);
  const std::string record = "pipeline: {name: rec, chunk: " + std::to_string(kChunk) +
                             ", chunks: 8}\n"
                             "lanes:\n  - name: a\n    stages:\n"
                             "      - {type: generator, signal: ramp, sample_rate: 250kHz, stop_after: " +
                             std::to_string(kChunk * kChunks) +
                             "}\n"
                             "      - {type: record, capture_name: paced, directory: [" +
                             fast.path() + ", " + slow.path() + "]}\n      - {type: null}\n";
  ASSERT_EQ(test::run_pipeline(record), std::vector<std::string>{});
  const recorder::Capture capture = recorder::open_capture(fast.path() + "/paced.sigmf-collection");
  ASSERT_EQ(capture.lanes.size(), 1U);
  ASSERT_GE(capture.lanes[0].segments.size(), 2U);
  ASSERT_NE(capture.lanes[0].segments[1].data_path.find(slow.path()), std::string::npos)
      << "the recorder put the second chunk on the second volume";

  test::IoThrottle throttle(slow.path(), 4096, test::IoThrottle::Direction::read);
  SLUICE_REQUIRE_THROTTLED(throttle);
  {
    std::lock_guard lock(arrivals_mutex);
    arrivals.clear();
  }
  const StageRegistry registry = testing::builtin_registry_with(
      {testing::stage_type_of<ArrivalSink>("arrivals", StageRole::sink, "times chunks")});
  Pipeline pipeline(load_pipeline_text("pipeline: {name: back, chunk: " + std::to_string(kChunk) +
                                           ", chunks: 8}\n"
                                           "lanes:\n  - name: a\n    stages:\n"
                                           "      - {type: replay, pace: recorded, read_ahead: 2, capture: " +
                                           fast.path() + "/paced.sigmf-collection}\n      - {type: arrivals}\n",
                                       "test", {}, registry));
  pipeline.start();
  std::thread lifter([&throttle] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    throttle.lift();
  });
  pipeline.run();
  lifter.join();
  for (const auto& failure : pipeline.failures()) ADD_FAILURE() << failure.stage << ": " << failure.message;

  std::lock_guard lock(arrivals_mutex);
  ASSERT_EQ(arrivals.size(), kChunks);
  const auto seconds_after_first = [](const Arrival& arrival) {
    return static_cast<double>(arrival.at_ns - arrivals.front().at_ns) / 1e9;
  };
  std::uint64_t next = 0;
  for (std::size_t k = 0; k < arrivals.size(); ++k) {
    const Arrival& arrival = arrivals[k];
    ASSERT_EQ(arrival.first_sample, next) << "chunk " << k << " out of order";
    EXPECT_EQ(arrival.bytes, test::ramp_bytes(SampleFormat::ci16, kRate, arrival.first_sample, arrival.sample_count))
        << "chunk " << k;
    next += arrival.sample_count;
    const double due = static_cast<double>(arrival.first_sample) / kRate;
    // Late: after its last sample's recorded time (one chunk's duration of slack).
    EXPECT_LE(seconds_after_first(arrival), due + kChunkSeconds) << "chunk " << k << " late";
  }
  EXPECT_EQ(next * 4, kChunk * kChunks);
  EXPECT_GE(seconds_after_first(arrivals.back()), static_cast<double>(kChunks - 2) * kChunkSeconds)
      << "paced at the recorded rate, not as fast as the reads go";
  for (const auto& counter : pipeline.metrics_by_lane()[0][0]->counters()) {
    if (counter.name == "late_chunks") {
      EXPECT_EQ(counter.get(), 0U) << "the replay's own count agrees";
    }
  }
}

// A consumer three times slower than the recorded rate (a `slow` stage behind a one-chunk
// queue) keeps the replay's hand-offs waiting: the late chunks are counted as held back
// downstream, none as read-bound, and the causes add up to late_chunks.
TEST(PacedReplay, NamesASlowConsumerAsTheCauseOfLateChunks) {
  TempDir dir;
  const std::string record =
      "pipeline: {name: rec, chunk: 64KiB, chunks: 8}\n"
      "lanes:\n  - name: a\n    stages:\n"
      "      - {type: generator, signal: ramp, sample_rate: 409600Hz, stop_after: 768KiB}\n"
      "      - {type: record, capture_name: held, directory: " +
      dir.str() + "}\n      - {type: null}\n";
  ASSERT_EQ(test::run_pipeline(record), std::vector<std::string>{});
  Pipeline pipeline(
      load_pipeline_text("pipeline: {name: back, chunk: 64KiB, chunks: 8}\n"
                         "lanes:\n  - name: a\n    stages:\n"
                         "      - {type: replay, pace: recorded, read_ahead: 2, capture: " +
                             dir.str("held.sigmf-collection") +
                             "}\n"
                             "      - {type: slow, delay: 120ms, queue_depth: 1}\n"
                             "      - {type: null}\n",
                         "test", {}, test::test_registry()));
  pipeline.start();
  pipeline.run();
  for (const auto& failure : pipeline.failures()) ADD_FAILURE() << failure.stage << ": " << failure.message;
  std::map<std::string, std::uint64_t> counters;
  for (const auto& counter : pipeline.metrics_by_lane()[0][0]->counters()) counters[counter.name] = counter.get();
  EXPECT_GE(counters["late_chunks"], 6U);
  EXPECT_GE(counters["late_downstream"], 6U);
  EXPECT_EQ(counters["late_reads"], 0U);
  EXPECT_EQ(counters["late_reads"] + counters["late_downstream"] + counters["late_wakeups"], counters["late_chunks"]);
  EXPECT_GE(counters["late_most_us"], 100'000U) << "the last chunks leave most of a second late";
}

// `realtime: true` puts the replay's own thread, and only it, under SCHED_FIFO, as the kernel
// reports each thread's policy (sched_getscheduler on every task of this process); a fast
// replay refuses it.
TEST(PacedReplay, RealtimePutsTheReplayThreadUnderSchedFifo) {
  // Root is not always enough (a container without CAP_SYS_NICE or real-time budget): ask the
  // kernel on a scratch thread.
  int fifo_error = 0;
  std::thread([&] {
    sched_param priority{};
    priority.sched_priority = 1;
    fifo_error = pthread_setschedparam(pthread_self(), SCHED_FIFO, &priority);
  }).join();
  if (fifo_error != 0) {
    if (test::in_ci()) FAIL() << "SCHED_FIFO is refused in CI: " << std::strerror(fifo_error);
    GTEST_SKIP() << "this machine refuses SCHED_FIFO: " << std::strerror(fifo_error);
  }
  TempDir dir;
  ASSERT_EQ(test::run_pipeline("pipeline: {name: rec, chunk: 64KiB, chunks: 8}\n"
                               "lanes:\n  - name: a\n    stages:\n"
                               "      - {type: generator, signal: ramp, sample_rate: 1MHz, stop_after: 1MiB}\n"
                               "      - {type: record, capture_name: rt, directory: " +
                               dir.str() + "}\n      - {type: null}\n"),
            std::vector<std::string>{});
  const auto fifo_threads_while_replaying = [&](const std::string& realtime) {
    Pipeline pipeline(
        load_pipeline_text("pipeline: {name: back, chunk: 64KiB, chunks: 8, duration: 1s}\n"
                           "lanes:\n  - name: a\n    stages:\n"
                           "      - {type: replay, pace: recorded, loop: true, realtime: " +
                               realtime + ", capture: " + dir.str("rt.sigmf-collection") + "}\n      - {type: null}\n",
                           "test", {}, StageRegistry::builtin()));
    pipeline.start();
    std::atomic<bool> done{false};
    std::size_t most = 0;
    std::thread sampler([&] {
      while (!done) {
        std::size_t fifo = 0;
        for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
          if (::sched_getscheduler(std::stoi(task.path().filename().string())) == SCHED_FIFO) ++fifo;
        }
        most = std::max(most, fifo);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    pipeline.run();
    done = true;
    sampler.join();
    for (const auto& failure : pipeline.failures()) ADD_FAILURE() << failure.stage << ": " << failure.message;
    return most;
  };
  EXPECT_EQ(fifo_threads_while_replaying("false"), 0U);
  EXPECT_EQ(fifo_threads_while_replaying("true"), 1U);
  try {
    static_cast<void>(
        load_pipeline_text("pipeline: {name: back, chunk: 64KiB, chunks: 8}\n"
                           "lanes:\n  - name: a\n    stages:\n"
                           "      - {type: replay, pace: fast, realtime: true, capture: " +
                               dir.str("rt.sigmf-collection") + "}\n      - {type: null}\n",
                           "test", {}, StageRegistry::builtin()));
    ADD_FAILURE() << "a fast replay took realtime: true";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("realtime"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace sluice
