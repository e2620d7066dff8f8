// The record stage on real files through real io_uring: bytes in equal bytes out wherever it
// sits in a lane, rotation, striping, refusal to overwrite, a full disk, kill -9 then repair,
// and record → replay giving back the same samples, gaps and timestamps.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "recorder/capture_reader.hpp"
#include "recorder/capture_tools.hpp"
#include "recorder/journal.hpp"
#include "recorder/recording_writer.hpp"
#include "tests/stages/record/record_test_support.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {
namespace fs = std::filesystem;
using test::lane_bytes;
using test::LoopVolume;
using test::ramp_bytes;
using test::read_file;
using test::run_pipeline;
using test::TempDir;

constexpr double kRate = 10e6;

std::string generator_yaml(const std::string& stages, std::uint64_t bytes, const std::string& extra_source = {}) {
  return "pipeline: {name: cap, chunk: 256KiB, chunks: 8}\n"
         "template:\n"
         "  - {name: source, type: generator, signal: ramp, sample_rate: 10Msps, stop_after: " +
         std::to_string(bytes) + extra_source + "}\n" + stages + "lanes:\n  - name: port0\n";
}

TEST(RecordStage, AfterTheSourceBytesInEqualBytesOutIncludingAPartialLastChunk) {
  TempDir dir;
  // 2,000,004 bytes: seven whole 256 KiB chunks and a tail that is not a whole 4 KiB block.
  const std::uint64_t total = 2'000'004;
  ASSERT_EQ(run_pipeline(generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", total)),
            std::vector<std::string>{});
  const auto data = read_file(dir.str("cap-port0-0000.sigmf-data"));
  EXPECT_EQ(data, ramp_bytes(SampleFormat::ci16, kRate, 0, total / 4));
  const recorder::Capture capture = recorder::open_capture(dir.str("cap.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 1U);
  EXPECT_EQ(capture.lanes[0].total_samples, total / 4);
  EXPECT_TRUE(capture.lanes[0].complete);
  EXPECT_TRUE(capture.lanes[0].journals.empty());
  EXPECT_FALSE(fs::exists(dir.str("cap-port0-0000.sluice-journal")));
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

TEST(RecordStage, AfterALinkAndInBothPlacesEveryCopyHoldsTheSameBytes) {
  TempDir dir;
  const std::uint64_t total = 3ULL << 20;
  const std::string stages = "  - {name: raw, type: record, directory: " + dir.str("raw") +
                             "}\n"
                             "  - {name: link, type: link}\n"
                             "  - {name: landed, type: record, directory: " +
                             dir.str("landed") +
                             "}\n"
                             "  - {name: sink, type: null}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(stages, total)), std::vector<std::string>{});
  const auto expected = ramp_bytes(SampleFormat::ci16, kRate, 0, total / 4);
  EXPECT_EQ(read_file(dir.str("raw/cap-port0-0000.sigmf-data")), expected);
  EXPECT_EQ(read_file(dir.str("landed/cap-port0-0000.sigmf-data")), expected);
}

TEST(RecordStage, AfterATransformAsTheLastStage) {
  TempDir dir;
  const std::uint64_t total = 1ULL << 20;
  const std::string stages =
      "  - {name: link, type: link}\n  - {name: rec, type: record, directory: " + dir.str() + "}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(stages, total)), std::vector<std::string>{});
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), ramp_bytes(SampleFormat::ci16, kRate, 0, total / 4));
}

TEST(RecordStage, RotatesIntoValidFileSetsThatTogetherHoldTheStream) {
  TempDir dir;
  const std::uint64_t total = 5ULL << 20;  // 20 chunks of 256 KiB, 1 MiB per file: 5 files
  ASSERT_EQ(run_pipeline(
                generator_yaml("  - {name: rec, type: record, rotate: 1MiB, directory: " + dir.str() + "}\n", total)),
            std::vector<std::string>{});
  for (int i = 0; i < 5; ++i) {
    const std::string data = dir.str("cap-port0-000" + std::to_string(i) + ".sigmf-data");
    ASSERT_TRUE(fs::exists(data)) << data;
    EXPECT_EQ(fs::file_size(data), 1ULL << 20);
  }
  EXPECT_FALSE(fs::exists(dir.str("cap-port0-0005.sigmf-data")));
  const recorder::Capture capture = recorder::open_capture(dir.str("cap.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 1U);
  EXPECT_EQ(capture.lanes[0].recordings.size(), 5U);
  EXPECT_EQ(lane_bytes(capture.lanes[0]), ramp_bytes(SampleFormat::ci16, kRate, 0, total / 4));
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

TEST(RecordStage, StripesOneLaneAcrossDirectoriesAndReadsBackInOrder) {
  TempDir dir;
  const std::uint64_t total = 3ULL << 20;
  const std::string stages = "  - {name: rec, type: record, directory: [" + dir.str("d0") + ", " + dir.str("d1") +
                             ", " + dir.str("d2") + "]}\n";
  Pipeline pipeline(load_pipeline_text(generator_yaml(stages, total), "test"));
  pipeline.start();
  pipeline.run();
  ASSERT_TRUE(pipeline.failures().empty()) << pipeline.failures().front().message;
  // Each volume's chunks are counted, and together they are the lane's (12 of 256 KiB).
  const StageMetrics& record = *pipeline.metrics_by_lane().at(0).at(1);
  std::uint64_t counted = 0;
  for (const auto& counter : record.counters()) {
    if (counter.name.starts_with("volume_") && counter.name.ends_with("_chunks")) counted += counter.get();
  }
  EXPECT_EQ(counted, total / (256 << 10));
  std::uint64_t stored = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string data = dir.str("d" + std::to_string(i) + "/cap-port0-s" + std::to_string(i) + "-0000.sigmf-data");
    ASSERT_TRUE(fs::exists(data)) << data;
    stored += fs::file_size(data);
    EXPECT_GT(fs::file_size(data), 0U);
  }
  EXPECT_EQ(stored, total);
  const recorder::Capture capture = recorder::open_capture(dir.str("d0/cap.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 1U);
  EXPECT_EQ(capture.lanes[0].recordings.size(), 3U);
  EXPECT_EQ(lane_bytes(capture.lanes[0]), ramp_bytes(SampleFormat::ci16, kRate, 0, total / 4));
  std::vector<std::string> files = test::sigmf_files(dir.str("d0"));
  for (const auto& more : {test::sigmf_files(dir.str("d1")), test::sigmf_files(dir.str("d2"))}) {
    files.insert(files.end(), more.begin(), more.end());
  }
  SLUICE_EXPECT_SIGMF_VALID(files);
}

TEST(RecordStage, NeverOverwritesACaptureUnlessAsked) {
  TempDir dir;
  const std::string stages = "  - {name: rec, type: record, directory: " + dir.str() + "}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(stages, 1ULL << 20)), std::vector<std::string>{});
  const auto first = read_file(dir.str("cap-port0-0000.sigmf-data"));
  try {
    run_pipeline(generator_yaml(stages, 2ULL << 20));
    ADD_FAILURE() << "a second recording of the same name started";
  } catch (const ConfigException& error) {  // refused at validation, before anything is opened
    EXPECT_NE(std::string(error.what()).find("never overwritten"), std::string::npos) << error.what();
  }
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), first);
  const std::string again = "  - {name: rec, type: record, overwrite: true, directory: " + dir.str() + "}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(again, 2ULL << 20)), std::vector<std::string>{});
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), ramp_bytes(SampleFormat::ci16, kRate, 0, (2 << 20) / 4));
  // The replaced files were set aside until the new recording finished, then removed.
  EXPECT_FALSE(fs::exists(dir.str("cap-port0.sluice-replaced")));
  EXPECT_EQ(recorder::open_capture(dir.str("cap.sigmf-collection")).lanes.at(0).total_samples, (2U << 20) / 4);
}

TEST(RecordStage, AnOverwriteThatFailsToStartLeavesTheOldCaptureIntactAndOpening) {
  TempDir dir;
  const std::string stages = "  - {name: rec, type: record, directory: " + dir.str() + "}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(stages, 1ULL << 20)), std::vector<std::string>{});
  const auto first = read_file(dir.str("cap-port0-0000.sigmf-data"));
  const auto first_meta = read_file(dir.str("cap-port0-0000.sigmf-meta"));
  // The record stage opens (and sets the old files aside); the stage after it cannot start.
  const std::string failing = "  - {name: rec, type: record, overwrite: true, directory: " + dir.str() +
                              "}\n  - {name: sink, type: null, cpu: 4000}\n";
  std::vector<std::string> failures;
  try {
    failures = run_pipeline(generator_yaml(failing, 2ULL << 20));
  } catch (const std::exception& error) {
    failures.emplace_back(error.what());
  }
  ASSERT_FALSE(failures.empty()) << "the pipeline started although its sink cannot be pinned";
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), first);
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-meta")), first_meta);
  EXPECT_FALSE(fs::exists(dir.str("cap-port0.sluice-replaced")));
  const recorder::Capture capture = recorder::open_capture(dir.str("cap.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 1U);
  EXPECT_TRUE(capture.lanes[0].complete);
  EXPECT_EQ(lane_bytes(capture.lanes[0]), first);
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

TEST(RecordStage, AnOverwriteWhoseOpenFailsPutsTheOldFilesBack) {
  TempDir dir;
  ASSERT_EQ(run_pipeline(generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 1ULL << 20)),
            std::vector<std::string>{});
  const auto first = read_file(dir.str("cap-port0-0000.sigmf-data"));
  { std::ofstream(dir.str("blocker")) << "a file where the second stripe's directory would go"; }
  recorder::RecorderSettings settings;
  settings.directories = {dir.str(), dir.str("blocker/stripe1")};
  settings.name = "cap";
  settings.overwrite = true;
  recorder::RecordingWriter writer(settings, StreamInfo{}, "port0");
  EXPECT_THROW(writer.open({}), std::runtime_error);  // after the first directory's files were set aside
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), first);
  EXPECT_FALSE(fs::exists(dir.str("cap-port0.sluice-replaced")));
  EXPECT_EQ(lane_bytes(recorder::open_capture(dir.str("cap.sigmf-collection")).lanes.at(0)), first);
}

TEST(RecordStage, TwoRecordTapsWithOneCaptureNameAreRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  ASSERT_EQ(run_pipeline(generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 1ULL << 20)),
            std::vector<std::string>{});
  const auto first = read_file(dir.str("cap-port0-0000.sigmf-data"));
  // Raw and spectra taps with the default name and overwrite: true once destroyed the raw
  // recording; now validation names the clash and nothing on disk changes.
  const std::string both = "  - {name: raw, type: record, overwrite: true, directory: " + dir.str() +
                           "}\n"
                           "  - {name: spectra_in, type: record, overwrite: true, directory: " +
                           dir.str() + "/.}\n";
  try {
    run_pipeline(generator_yaml(both, 2ULL << 20));
    ADD_FAILURE() << "two record stages writing the same files validated";
  } catch (const ConfigException& error) {
    EXPECT_NE(std::string(error.what()).find("would both write"), std::string::npos) << error.what();
  }
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), first);
  // Distinct names record side by side, each complete.
  TempDir other;
  const std::string named = "  - {name: raw, type: record, capture_name: raw, directory: " + other.str() +
                            "}\n"
                            "  - {name: copy, type: record, capture_name: copy, directory: " +
                            other.str() + "}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(named, 1ULL << 20)), std::vector<std::string>{});
  EXPECT_EQ(read_file(other.str("raw-port0-0000.sigmf-data")), ramp_bytes(SampleFormat::ci16, kRate, 0, (1 << 20) / 4));
  EXPECT_EQ(read_file(other.str("copy-port0-0000.sigmf-data")),
            ramp_bytes(SampleFormat::ci16, kRate, 0, (1 << 20) / 4));
}

TEST(RecordStage, JoiningAnExistingCaptureUnderANewLaneNeedsJoin) {
  TempDir dir;
  ASSERT_EQ(run_pipeline(generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 1ULL << 20)),
            std::vector<std::string>{});
  const std::string lane1 =
      "pipeline: {name: cap, chunk: 256KiB, chunks: 8}\n"
      "template:\n"
      "  - {name: source, type: generator, signal: ramp, sample_rate: 10Msps, stop_after: 1MiB}\n"
      "  - {name: rec, type: record, directory: " +
      dir.str() +
      "JOIN}\n"
      "lanes:\n  - name: port1\n";
  auto with = [&](const std::string& join) { return std::string(lane1).replace(lane1.find("JOIN"), 4, join); };
  EXPECT_THROW(run_pipeline(with("")), ConfigException);
  EXPECT_FALSE(fs::exists(dir.str("cap-port1-0000.sigmf-data")));
  ASSERT_EQ(run_pipeline(with(", join: true")), std::vector<std::string>{});
  const recorder::Capture capture = recorder::open_capture(dir.str("cap.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 2U);
  EXPECT_NE(capture.lane("port0"), nullptr);
  EXPECT_NE(capture.lane("port1"), nullptr);
}

TEST(RecordStage, ValidationRefusesADirectoryThatCannotBeWrittenAndCreatesNothing) {
  TempDir dir;
  const std::string file = dir.str("plain-file");
  std::ofstream(file) << "x";
  try {
    load_pipeline_text(generator_yaml("  - {name: rec, type: record, directory: " + file + "/sub}\n", 1 << 20), "test");
    ADD_FAILURE() << "a directory under a plain file validated";
  } catch (const ConfigException& error) {
    EXPECT_NE(std::string(error.what()).find("not a directory"), std::string::npos) << error.what();
  }
  // A directory that does not exist yet is fine, and validating does not create it.
  load_pipeline_text(
      generator_yaml("  - {name: rec, type: record, directory: " + dir.str("new/deeper") + "}\n", 1 << 20), "test");
  EXPECT_FALSE(fs::exists(dir.str("new")));
  if (::geteuid() != 0) {  // root may write anywhere: a read-only directory only stops others
    fs::create_directory(dir.str("ro"));
    fs::permissions(dir.str("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(
        load_pipeline_text(generator_yaml("  - {name: rec, type: record, directory: " + dir.str("ro") + "}\n", 1 << 20),
                           "test"),
        ConfigException);
  }
}

// Runs `yaml` in a child process with a file size limit: 3 for the clean "disk full" failure,
// 4 for any other, 90 if the limit could not be set (an exception: testing::Process's 126).
testing::ProcessResult run_in_child(const std::string& yaml, rlim_t file_size_limit) {
  testing::Process child([&] {
    if (file_size_limit > 0) {
      rlimit limit{file_size_limit, file_size_limit};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 90;
    }
    const auto failures = run_pipeline(yaml);
    for (const auto& failure : failures) std::fprintf(stderr, "child: %s\n", failure.c_str());
    return failures.empty() ? 0 : (failures.front().find("disk full") != std::string::npos ? 3 : 4);
  });
  return child.wait(std::chrono::seconds(120));
}

TEST(RecordStage, AFullDiskStopsCleanlyAndKeepsAValidCapture) {
  TempDir dir;
  // RLIMIT_FSIZE makes the data file "full" at 1.5 MiB: io_uring reports EFBIG, handled like ENOSPC.
  const rlim_t limit = 3ULL << 19;
  const std::string yaml = generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 8ULL << 20);
  const testing::ProcessResult result = run_in_child(yaml, limit);
  EXPECT_EQ(result.exit_code, 3) << "expected the clean 'disk full' failure: " << result.err;
  const recorder::Capture capture = recorder::open_capture(dir.str("cap.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 1U);
  const auto& lane = capture.lanes[0];
  EXPECT_TRUE(lane.complete);
  EXPECT_TRUE(lane.journals.empty());
  EXPECT_GT(lane.total_samples, 0U);
  EXPECT_LE(lane.total_bytes, limit);
  EXPECT_EQ(lane.total_bytes % (256 * 1024), 0U) << "only whole chunks that reached the disk are kept";
  EXPECT_EQ(lane_bytes(lane), ramp_bytes(SampleFormat::ci16, kRate, 0, lane.total_samples));
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

// On a volume far smaller than the default 1 GiB preallocation, recording starts, fills
// the volume, stops with the "disk full" failure and leaves a valid, complete capture of
// whole chunks that hold the ramp at their true indices.
void expect_full_volume_stops_cleanly(const std::string& type, const std::string& size, std::uint64_t bytes) {
  TempDir dir;
  LoopVolume volume(dir, type, size);
  if (!volume.mounted()) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true")
      FAIL() << "cannot mount a " << type << " volume in CI: " << volume.why();
    GTEST_SKIP() << "cannot mount a " << type << " volume here (needs root and loop devices): " << volume.why();
  }
  const std::string yaml =
      generator_yaml("  - {name: rec, type: record, directory: " + volume.path() + "/cap}\n", bytes);
  const testing::ProcessResult result = run_in_child(yaml, 0);
  EXPECT_EQ(result.exit_code, 3) << "expected the clean 'disk full' failure on " << type << ": " << result.err;
  const recorder::Capture capture = recorder::open_capture(volume.path() + "/cap/cap.sigmf-collection");
  ASSERT_EQ(capture.lanes.size(), 1U);
  const auto& lane = capture.lanes[0];
  EXPECT_TRUE(lane.complete);
  EXPECT_TRUE(lane.journals.empty());
  // Most of the volume holds samples: preallocation took no more than there was room for.
  std::error_code error;
  const auto space = fs::space(volume.path(), error);
  EXPECT_GT(lane.total_bytes, space.capacity / 2) << type;
  EXPECT_EQ(lane.total_bytes % (256 * 1024), 0U) << "only whole chunks that reached the disk are kept";
  std::vector<std::string> problems;
  test::check_every_sample(lane, test::ramp_truth(SampleFormat::ci16, kRate), problems);
  EXPECT_EQ(problems, std::vector<std::string>{});
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(volume.path() + "/cap"));
}

TEST(RecordStage, ASmallExt4VolumeRecordsUntilFullAndStopsCleanly) {
  expect_full_volume_stops_cleanly("ext4", "64M", 128ULL << 20);
}

TEST(RecordStage, ASmallXfsVolumeRecordsUntilFullAndStopsCleanly) {
  expect_full_volume_stops_cleanly("xfs", "320M", 512ULL << 20);  // mkfs.xfs makes nothing under 300 MB
}

TEST(RecordStage, ASmallTmpfsVolumeRecordsUntilFullAndStopsCleanly) {
  expect_full_volume_stops_cleanly("tmpfs", "64M", 128ULL << 20);
}

// What is left on a volume after a recording ended: files no finished capture has (a
// journal, a meta's temporary file or set-aside room, an empty data file).
std::vector<std::string> leftovers(const std::string& directory) {
  std::vector<std::string> found;
  for (const auto& item : fs::directory_iterator(directory)) {
    const std::string name = item.path().filename().string();
    const bool data = name.ends_with(".sigmf-data");
    if (name.ends_with(".tmp") || name.ends_with(".sluice-journal") || (data && fs::file_size(item.path()) == 0)) {
      found.push_back(name);
    }
  }
  return found;
}

// Checks every "lane L of the capture C holds ... (N samples) in K recording(s) ..." that a
// failure message says against the capture read back from the files. Returns how many.
std::size_t expect_messages_match_the_files(const std::string& messages, const recorder::Capture& capture) {
  static const std::regex kState(
      R"(lane (\S+) of the capture \S+ holds (the )?\S+ \S+ \((\d+) samples\) in (\d+) recording\(s\)( written before it, complete| but is INCOMPLETE))");
  std::size_t checked = 0;
  for (auto match = std::sregex_iterator(messages.begin(), messages.end(), kState); match != std::sregex_iterator();
       ++match) {
    const recorder::CaptureLane* lane = capture.lane((*match)[1]);
    if (lane == nullptr) {
      ADD_FAILURE() << "a message names lane " << (*match)[1] << ", which the capture does not hold";
      continue;
    }
    ++checked;
    EXPECT_EQ(std::stoull((*match)[3]), lane->total_samples) << match->str();
    EXPECT_EQ(std::stoull((*match)[4]), lane->recordings.size()) << match->str();
    const bool complete = lane->complete && lane->journals.empty();
    EXPECT_EQ((*match)[5] == " written before it, complete", complete) << match->str();
  }
  return checked;
}

std::string two_lane_yaml(const std::string& directory, const std::string& record_settings) {
  return "pipeline: {name: cap, chunk: 256KiB, chunks: 8}\n"
         "template:\n"
         "  - {name: source, type: generator, signal: ramp, sample_rate: 10Msps, stop_after: 256MiB}\n"
         "  - {name: rec, type: record, directory: " +
         directory + ", io_depth: 2" + record_settings +
         "}\n"
         "lanes:\n  - name: port0\n    source: {rate: 20MB/s}\n  - name: port1\n";
}

// Two lanes record onto one small volume until it is full: port0 slowly (the space it
// preallocates stays unwritten), port1 as fast as it can. port1 must go on writing until
// the volume has no room left (whatever port0 preallocated), and each lane must
// end complete, with the message saying what the files hold. `slack`: what may stay free:
// the chunks in flight when the disk filled (dropped: never journaled) and the metadata
// set aside.
void expect_two_lanes_fill_the_volume(const std::string& type, const std::string& size, const std::string& settings) {
  TempDir dir;
  LoopVolume volume(dir, type, size);
  if (!volume.mounted()) {
    if (test::in_ci()) FAIL() << "cannot mount a " << type << " volume in CI: " << volume.why();
    GTEST_SKIP() << "cannot mount a " << type << " volume here (needs root and loop devices): " << volume.why();
  }
  const std::uint64_t free_before = fs::space(volume.path()).available;
  const testing::ProcessResult result = run_in_child(two_lane_yaml(volume.path() + "/cap", settings), 0);
  EXPECT_EQ(result.exit_code, 3) << "expected the clean 'disk full' failure on " << type << ": " << result.err;
  const recorder::Capture capture = recorder::open_capture(volume.path() + "/cap/cap.sigmf-collection");
  ASSERT_EQ(capture.lanes.size(), 2U) << result.err;
  std::uint64_t kept = 0;
  for (const auto& lane : capture.lanes) {
    EXPECT_TRUE(lane.complete) << lane.name;
    EXPECT_EQ(lane.journals, std::vector<std::string>{}) << lane.name;
    EXPECT_GT(lane.total_bytes, 0U) << lane.name;
    std::vector<std::string> problems;
    test::check_every_sample(lane, test::ramp_truth(SampleFormat::ci16, kRate), problems);
    EXPECT_EQ(problems, std::vector<std::string>{}) << lane.name;
    kept += lane.total_bytes;
  }
  constexpr std::uint64_t kSlack = 2 * 3 * (256 << 10) + (2ULL << 20);  // 2 lanes x (io_depth + 1) chunks, metadata
  EXPECT_GE(kept + kSlack, free_before) << type << ": the lanes kept " << (kept >> 10) << " KiB of "
                                        << (free_before >> 10) << " KiB free";
  std::fprintf(stderr, "%s %s%s: the two lanes kept %llu KiB of %llu KiB free\n", type.c_str(), size.c_str(),
               settings.c_str(), static_cast<unsigned long long>(kept >> 10),
               static_cast<unsigned long long>(free_before >> 10));
  EXPECT_EQ(leftovers(volume.path() + "/cap"), std::vector<std::string>{});
  EXPECT_GE(expect_messages_match_the_files(result.err, capture), 1U) << result.err;
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(volume.path() + "/cap"));
}

TEST(RecordStage, TwoLanesOnOneSmallTmpfsBothWriteUntilItIsFull) {
  expect_two_lanes_fill_the_volume("tmpfs", "64M", "");
}

TEST(RecordStage, TwoLanesOnOneSmallExt4BothWriteUntilItIsFull) { expect_two_lanes_fill_the_volume("ext4", "64M", ""); }

TEST(RecordStage, WithoutPreallocationAFullExt4EndsEveryLaneComplete) {
  expect_two_lanes_fill_the_volume("ext4", "64M", ", preallocate: 0");
}

// Runs `yaml` in a child process and kills it without warning once `journal` holds `chunks`
// journaled chunks (or after 10 s); returns how the child ended.
testing::ProcessResult run_and_kill_after(const std::string& yaml, const std::string& journal, std::size_t chunks) {
  testing::Process child([&] {
    run_pipeline(yaml);
    return 0;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline &&
         (!fs::exists(journal) ||
          fs::file_size(journal) < recorder::kJournalHeaderBytes + chunks * sizeof(recorder::JournalRecord))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  child.send_signal(SIGKILL);
  return child.wait(std::chrono::seconds(10));
}

TEST(RecordStage, KilledMidRecordingIsRepairedUpToTheLastChunkOnDisk) {
  TempDir dir;
  // Paced so that the kill lands mid-recording; unlimited length.
  const std::string yaml =
      generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 0, ", rate: 40MB/s");
  const std::string journal = dir.str("cap-port0-0000.sluice-journal");
  const testing::ProcessResult killed = run_and_kill_after(yaml, journal, 6);
  ASSERT_EQ(killed.signal, SIGKILL) << "the recording ended before the kill: " << killed.err;
  ASSERT_TRUE(fs::exists(journal)) << "the recording never started";

  const recorder::Capture cut = recorder::open_capture(dir.str("cap.sigmf-collection"));
  EXPECT_NE(recorder::describe_capture(cut).find("INCOMPLETE"), std::string::npos);
  // The data file runs on past its data (preallocated zeros): before the repair a reader
  // takes only the journaled bytes as samples, and they are the ramp.
  std::uint64_t journaled = 0;
  for (const auto& record : recorder::read_journal(journal).records) journaled += record.bytes;
  EXPECT_GT(fs::file_size(dir.str("cap-port0-0000.sigmf-data")), journaled);
  ASSERT_EQ(cut.lanes.size(), 1U);
  EXPECT_EQ(cut.lanes[0].total_bytes, journaled);
  EXPECT_EQ(lane_bytes(cut.lanes[0]), ramp_bytes(SampleFormat::ci16, kRate, 0, cut.lanes[0].total_samples));
  const recorder::RepairReport report = recorder::repair_capture(dir.str("cap.sigmf-collection"));
  ASSERT_EQ(report.repaired.size(), 1U);
  EXPECT_GE(report.bytes_kept, 6U * 256 * 1024);
  EXPECT_EQ(report.bytes_kept, journaled);
  EXPECT_FALSE(fs::exists(journal));

  const recorder::Capture repaired = recorder::open_capture(dir.str("cap.sigmf-collection"));
  const auto& lane = repaired.lanes[0];
  EXPECT_TRUE(lane.complete);
  EXPECT_EQ(lane.total_bytes, report.bytes_kept);
  EXPECT_EQ(lane_bytes(lane), ramp_bytes(SampleFormat::ci16, kRate, 0, lane.total_samples));
  EXPECT_NE(recorder::describe_capture(repaired).find("complete"), std::string::npos);
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
  // Repairing again finds nothing to do.
  EXPECT_TRUE(recorder::repair_capture(dir.str("cap.sigmf-collection")).repaired.empty());
}

TEST(RecordStage, AnOverwriteCutByAKillLeavesTheOldCaptureSetAsideFoundAndRestorable) {
  TempDir dir;
  ASSERT_EQ(run_pipeline(generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 1ULL << 20)),
            std::vector<std::string>{});
  const auto first = read_file(dir.str("cap-port0-0000.sigmf-data"));
  const std::string overwrite = generator_yaml(
      "  - {name: rec, type: record, overwrite: true, directory: " + dir.str() + "}\n", 0, ", rate: 40MB/s");
  const std::string journal = dir.str("cap-port0-0000.sluice-journal");
  run_and_kill_after(overwrite, journal, 2);
  ASSERT_TRUE(fs::exists(journal)) << "the new recording never started";
  // Both exist: the cut new recording and, set aside, the old one (never both gone).
  const std::string aside = dir.str("cap-port0.sluice-replaced");
  ASSERT_TRUE(fs::exists(aside + "/cap-port0-0000.sigmf-data"));
  EXPECT_EQ(read_file(aside + "/cap-port0-0000.sigmf-data"), first);
  // The next start refuses before touching anything, and names the set-aside directory.
  try {
    run_pipeline(
        generator_yaml("  - {name: rec, type: record, overwrite: true, directory: " + dir.str() + "}\n", 1 << 20));
    ADD_FAILURE() << "a new overwrite started over a set-aside capture";
  } catch (const ConfigException& error) {
    EXPECT_NE(std::string(error.what()).find(aside), std::string::npos) << error.what();
  }
  EXPECT_EQ(read_file(aside + "/cap-port0-0000.sigmf-data"), first);
  // Repair finishes the cut recording and reports the set-aside one; asked, it restores it.
  const recorder::RepairReport report = recorder::repair_capture(dir.str("cap.sigmf-collection"));
  EXPECT_EQ(report.repaired.size(), 1U);
  ASSERT_EQ(report.replaced, std::vector<std::string>{aside});
  const recorder::RepairReport restored = recorder::repair_capture(dir.str("cap.sigmf-collection"), true);
  ASSERT_EQ(restored.replaced, std::vector<std::string>{aside});
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), first);
  const recorder::Capture back = recorder::open_capture(dir.str("cap.sigmf-collection"));
  EXPECT_TRUE(back.lanes.at(0).complete);
  EXPECT_EQ(lane_bytes(back.lanes.at(0)), first);
  // The interrupted recording is kept in its place, not removed.
  EXPECT_TRUE(fs::exists(aside + "/cap-port0-0000.sigmf-data"));
  EXPECT_GE(fs::file_size(aside + "/cap-port0-0000.sigmf-data"), 2U * 256 * 1024);
}

// Every sample the chunks hold with its stream index (a chunk's samples skip its absent
// gaps), and every absent gap, in stream order.
struct Flat {
  std::vector<std::pair<std::uint64_t, std::uint32_t>> samples;  // ci16: one 32-bit word each
  std::vector<std::pair<std::uint64_t, std::uint64_t>> gaps;
};
Flat flatten(const std::vector<test::SeenChunk>& chunks) {
  Flat flat;
  for (const auto& chunk : chunks) {
    std::vector<Gap> holes;
    for (const auto& gap : chunk.gaps) {
      if (gap.in_data) continue;
      flat.gaps.emplace_back(gap.first_sample, gap.length);
      if (gap.first_sample >= chunk.first_sample) holes.push_back(gap);
    }
    std::sort(holes.begin(), holes.end(), [](const Gap& a, const Gap& b) { return a.first_sample < b.first_sample; });
    std::uint64_t index = chunk.first_sample;
    std::size_t hole = 0;
    for (std::uint64_t i = 0; i < chunk.sample_count; ++i) {
      while (hole < holes.size() && holes[hole].first_sample <= index) {
        index = std::max(index, holes[hole].first_sample + holes[hole].length);
        ++hole;
      }
      std::uint32_t word = 0;
      std::memcpy(&word, chunk.bytes.data() + i * 4, 4);
      flat.samples.emplace_back(index++, word);
    }
  }
  std::sort(flat.gaps.begin(), flat.gaps.end());
  return flat;
}

TEST(RecordStage, RecordThenReplayGivesBackSamplesGapsAndTimestamps) {
  TempDir dir;
  const std::uint64_t chunk = 64 * 1024;
  const std::uint64_t count = 12;
  const std::string record =
      "pipeline: {name: gaps, chunk: 64KiB, chunks: 8}\n"
      "template:\n"
      "  - {name: source, type: gappy, count: 12, sample_rate: 1MHz}\n"
      "  - {name: rec, type: record, directory: " +
      dir.str() +
      "}\n"
      "lanes:\n  - name: port0\n";
  ASSERT_EQ(run_pipeline(record, test::test_registry()), std::vector<std::string>{});
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
  const auto expected = test::gappy_expected(chunk, count, 1e6);

  // Every recorded sample is the ramp value of the stream index the metadata gives it.
  const recorder::Capture capture = recorder::open_capture(dir.str("gaps.sigmf-collection"));
  std::vector<std::string> problems;
  EXPECT_EQ(test::check_every_sample(capture.lanes[0], test::ramp_truth(SampleFormat::ci16, 1e6), problems),
            count * chunk / 4);
  EXPECT_EQ(problems, std::vector<std::string>{});
  std::size_t holes = 0;
  std::uint64_t lost = 0;
  for (const auto& chunk_seen : expected) {
    holes += chunk_seen.gaps.size();
    for (const auto& gap : chunk_seen.gaps) lost += gap.length;
  }
  EXPECT_EQ(capture.lanes[0].segments.size(), holes + 1);  // every hole starts a segment
  EXPECT_EQ(capture.lanes[0].lost_samples, lost);
  EXPECT_NE(recorder::describe_capture(capture).find(std::to_string(lost) + " samples lost"), std::string::npos);

  const std::string replay =
      "pipeline: {name: back, chunk: 64KiB, chunks: 8}\n"
      "template:\n"
      "  - {name: source, type: replay, pace: fast, capture: " +
      dir.str("gaps.sigmf-collection") +
      "}\n"
      "  - {name: sink, type: capture, key: replay-gaps}\n"
      "lanes:\n  - name: port0\n";
  ASSERT_EQ(run_pipeline(replay, test::test_registry()), std::vector<std::string>{});
  auto& store = test::collected("replay-gaps");
  std::lock_guard lock(store.mutex);
  // Replay hands back the same samples at the same stream indices with the same holes
  // (its chunks end at holes, so they are cut differently from the source's).
  const Flat want = flatten(expected);
  const Flat got = flatten(store.chunks);
  EXPECT_EQ(got.samples.size(), want.samples.size());
  EXPECT_TRUE(got.samples == want.samples);
  EXPECT_EQ(got.gaps, want.gaps);
  for (const auto& seen : store.chunks) {
    // Each chunk's time is its first sample's: 1,700,000,000 s + index µs.
    EXPECT_TRUE(seen.timestamp.valid);
    EXPECT_EQ(seen.timestamp.seconds, 1'700'000'000U + seen.first_sample / 1'000'000);
    EXPECT_EQ(seen.timestamp.picoseconds, seen.first_sample % 1'000'000 * 1'000'000);
  }
}

TEST(RecordStage, OnFullDropLeavesAGapOfTheDroppedSamplesForEveryLaterStage) {
  TempDir dir;
  // The generator (a chunk a millisecond) outruns a stage that takes 2 ms a chunk; with
  // on_full: drop, whole chunks are released at its full queue, between ones that get through. Each becomes a gap, so
  // the capture holds every sample that got through at its true index, and recorded + lost = generated.
  const std::uint64_t total_bytes = 8ULL << 20;
  const std::string yaml =
      "pipeline: {name: drops, chunk: 64KiB, chunks: 16}\n"
      "template:\n"
      "  - {name: source, type: generator, signal: ramp, sample_rate: 10Msps, stop_after: " +
      std::to_string(total_bytes) +
      ", rate: 64MB/s, on_full: drop}\n"
      "  - {name: slow, type: slow, delay: 2ms, queue_depth: 2}\n"
      "  - {name: rec, type: record, directory: " +
      dir.str() +
      "}\n"
      "lanes:\n  - name: port0\n";
  ASSERT_EQ(run_pipeline(yaml, test::test_registry()), std::vector<std::string>{});
  const recorder::Capture capture = recorder::open_capture(dir.str("drops.sigmf-collection"));
  const auto& lane = capture.lanes[0];
  std::vector<std::string> problems;
  test::check_every_sample(lane, test::ramp_truth(SampleFormat::ci16, kRate), problems);
  EXPECT_EQ(problems, std::vector<std::string>{});
  EXPECT_GT(lane.lost_samples, 0U) << "nothing was dropped: the test did not test";
  EXPECT_GT(lane.segments.size(), 1U);
  std::uint64_t last_end = 0;
  for (const auto& gap : lane.gaps) last_end = std::max(last_end, gap.global_index + gap.length);
  for (const auto& segment : lane.segments) last_end = std::max(last_end, segment.global_index + segment.sample_count);
  EXPECT_EQ(last_end, total_bytes / 4);  // a drop at the very end is a gap too
  EXPECT_EQ(lane.total_samples + lane.lost_samples, total_bytes / 4);
}

TEST(RecordStage, ReplayLoopsAndPacesAtTheRecordedRate) {
  TempDir dir;
  // 1 MiB of ci16 at 1 Msps: 262,144 samples = 0.262 s of signal.
  const std::string record =
      "pipeline: {name: pace, chunk: 64KiB, chunks: 8}\n"
      "template:\n"
      "  - {name: source, type: generator, signal: ramp, sample_rate: 1Msps, stop_after: 1MiB}\n"
      "  - {name: rec, type: record, directory: " +
      dir.str() +
      "}\n"
      "lanes:\n  - name: port0\n";
  ASSERT_EQ(run_pipeline(record), std::vector<std::string>{});
  const std::string replay =
      "pipeline: {name: back, chunk: 64KiB, chunks: 8, duration: 10s}\n"
      "template:\n"
      "  - {name: source, type: replay, loop: true, capture: " +
      dir.str("pace.sigmf-collection") +
      "}\n"
      "  - {name: sink, type: capture, key: replay-loop}\n"
      "lanes:\n  - name: port0\n";
  Pipeline pipeline(load_pipeline_text(replay, "test", {}, test::test_registry()));
  pipeline.start();
  const auto begin = std::chrono::steady_clock::now();
  std::size_t wanted = 24;  // one and a half passes
  pipeline.run([&] {
    auto& store = test::collected("replay-loop");
    std::lock_guard lock(store.mutex);
    if (store.chunks.size() >= wanted) pipeline.request_stop();
  });
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  auto& store = test::collected("replay-loop");
  std::lock_guard lock(store.mutex);
  ASSERT_GE(store.chunks.size(), wanted);
  // Paced: 23 chunks of 16,384 samples after the first are due at 0.377 s.
  EXPECT_GE(elapsed, 0.3);
  // The second pass continues the stream index and repeats the bytes.
  EXPECT_EQ(store.chunks[16].first_sample, 16U * 16384);
  EXPECT_EQ(store.chunks[16].bytes, store.chunks[0].bytes);
  EXPECT_EQ(store.chunks[17].bytes, ramp_bytes(SampleFormat::ci16, 1e6, 16384, 16384));
}

// Paced replay counts the chunks that leave after their last sample's recorded time: none
// for a capture whose 64 KiB chunks last 164 ms each, every one after the first for a capture
// recorded at 100 Gsps, whose chunks last 164 ns (no read is that fast).
TEST(RecordStage, PacedReplayCountsChunksThatFallBehindTheRecordedRate) {
  TempDir dir;
  const auto late_chunks = [&](const std::string& name, const std::string& rate) {
    const std::string record = "pipeline: {name: " + name +
                               ", chunk: 64KiB, chunks: 8}\n"
                               "template:\n"
                               "  - {name: source, type: generator, signal: ramp, sample_rate: " +
                               rate +
                               ", stop_after: 1MiB}\n"
                               "  - {name: rec, type: record, directory: " +
                               dir.str() +
                               "}\n"
                               "lanes:\n  - name: port0\n";
    EXPECT_EQ(run_pipeline(record), std::vector<std::string>{});
    const std::string replay =
        "pipeline: {name: back, chunk: 64KiB, chunks: 8}\n"
        "template:\n"
        "  - {name: source, type: replay, pace: recorded, capture: " +
        dir.str(name + ".sigmf-collection") +
        "}\n"
        "  - {name: sink, type: \"null\"}\n"
        "lanes:\n  - name: port0\n";
    Pipeline pipeline(load_pipeline_text(replay, "test", {}, test::test_registry()));
    pipeline.start();
    pipeline.run();
    EXPECT_TRUE(pipeline.failures().empty());
    EXPECT_EQ(pipeline.metrics_by_lane()[0][0]->out.chunks.load(), 16U);
    for (const auto& counter : pipeline.metrics_by_lane()[0][0]->counters()) {
      if (counter.name == "late_chunks") return counter.get();
    }
    ADD_FAILURE() << "no late_chunks counter";
    return std::uint64_t{0};
  };
  EXPECT_EQ(late_chunks("slow", "100ksps"), 0U);
  EXPECT_GE(late_chunks("fast", "100Gsps"), 15U);
}

TEST(RecordStage, SigmfFilesValidateAgainstTheSpecification) {
  TempDir dir;
  ASSERT_EQ(run_pipeline(generator_yaml("  - {name: rec, type: record, rotate: 512KiB, directory: " + dir.str() + "}\n",
                                        1ULL << 20)),
            std::vector<std::string>{});
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

}  // namespace
}  // namespace sluice
