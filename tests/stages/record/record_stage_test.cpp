// The record stage on real files through real io_uring: bytes in equal bytes out wherever it
// sits in a lane, rotation, striping, refusal to overwrite, a full disk, kill -9 then repair,
// and record → replay giving back the same samples, gaps and timestamps.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "recorder/capture_reader.hpp"
#include "recorder/capture_tools.hpp"
#include "recorder/journal.hpp"
#include "tests/stages/record/record_test_support.hpp"

namespace sluice {
namespace {
namespace fs = std::filesystem;
using test::ramp_bytes;
using test::read_file;
using test::run_pipeline;
using test::TempDir;

constexpr double kRate = 10e6;

// Every sample of a lane, in stream order, read back through CaptureReader.
std::vector<std::byte> lane_bytes(const recorder::CaptureLane& lane) {
  std::vector<std::byte> bytes(lane.total_samples * lane.sample_bytes);
  std::uint64_t at = 0;
  for (const auto& segment : lane.segments) {
    at += recorder::read_segment(lane, segment, 0, segment.sample_count, bytes.data() + at * lane.sample_bytes);
  }
  bytes.resize(at * lane.sample_bytes);
  return bytes;
}

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
                             "  - {name: landed, type: record, directory: " + dir.str("landed") +
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
  const std::string stages = "  - {name: link, type: link}\n  - {name: rec, type: record, directory: " + dir.str() + "}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(stages, total)), std::vector<std::string>{});
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), ramp_bytes(SampleFormat::ci16, kRate, 0, total / 4));
}

TEST(RecordStage, RotatesIntoValidFileSetsThatTogetherHoldTheStream) {
  TempDir dir;
  const std::uint64_t total = 5ULL << 20;  // 20 chunks of 256 KiB, 1 MiB per file: 5 files
  ASSERT_EQ(run_pipeline(generator_yaml(
                "  - {name: rec, type: record, rotate: 1MiB, directory: " + dir.str() + "}\n", total)),
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
  const std::string stages = "  - {name: rec, type: record, directory: [" + dir.str("d0") + ", " + dir.str("d1") + ", " +
                             dir.str("d2") + "]}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(stages, total)), std::vector<std::string>{});
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
  } catch (const PipelineError& error) {
    EXPECT_NE(std::string(error.what()).find("never overwritten"), std::string::npos) << error.what();
  }
  EXPECT_EQ(read_file(dir.str("cap-port0-0000.sigmf-data")), first);
  const std::string again = "  - {name: rec, type: record, overwrite: true, directory: " + dir.str() + "}\n";
  ASSERT_EQ(run_pipeline(generator_yaml(again, 2ULL << 20)), std::vector<std::string>{});
  EXPECT_EQ(fs::file_size(dir.str("cap-port0-0000.sigmf-data")), 2ULL << 20);
}

// Runs `yaml` in a child process with a file size limit; returns its exit status.
int run_in_child(const std::string& yaml, rlim_t file_size_limit) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (file_size_limit > 0) {
      rlimit limit{file_size_limit, file_size_limit};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(90);
    }
    try {
      const auto failures = run_pipeline(yaml);
      for (const auto& failure : failures) std::fprintf(stderr, "child: %s\n", failure.c_str());
      ::_exit(failures.empty() ? 0 : (failures.front().find("disk full") != std::string::npos ? 3 : 4));
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child: %s\n", error.what());
      ::_exit(5);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(RecordStage, AFullDiskStopsCleanlyAndKeepsAValidCapture) {
  TempDir dir;
  // RLIMIT_FSIZE makes the data file "full" at 1.5 MiB: io_uring reports EFBIG, handled like ENOSPC.
  const rlim_t limit = 3ULL << 19;
  const std::string yaml = generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 8ULL << 20);
  EXPECT_EQ(run_in_child(yaml, limit), 3) << "expected the clean 'disk full' failure";
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

TEST(RecordStage, KilledMidRecordingIsRepairedUpToTheLastChunkOnDisk) {
  TempDir dir;
  // Paced so that the kill lands mid-recording; unlimited length.
  const std::string yaml = generator_yaml("  - {name: rec, type: record, directory: " + dir.str() + "}\n", 0,
                                          ", rate: 40MB/s");
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      run_pipeline(yaml);
    } catch (...) {
    }
    ::_exit(0);
  }
  const std::string journal = dir.str("cap-port0-0000.sluice-journal");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Wait for at least 6 journaled chunks, then kill without warning.
  while (std::chrono::steady_clock::now() < deadline &&
         (!fs::exists(journal) ||
          fs::file_size(journal) < recorder::kJournalHeaderBytes + 6 * sizeof(recorder::JournalRecord))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(fs::exists(journal)) << "the recording never started";

  const recorder::Capture cut = recorder::open_capture(dir.str("cap.sigmf-collection"));
  EXPECT_NE(recorder::describe_capture(cut).find("INCOMPLETE"), std::string::npos);
  const recorder::RepairReport report = recorder::repair_capture(dir.str("cap.sigmf-collection"));
  ASSERT_EQ(report.repaired.size(), 1U);
  EXPECT_GE(report.bytes_kept, 6U * 256 * 1024);
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

TEST(RecordStage, RecordThenReplayGivesBackSamplesGapsAndTimestamps) {
  TempDir dir;
  const std::uint64_t chunk = 64 * 1024;
  const std::uint64_t count = 12;
  const std::string record = "pipeline: {name: gaps, chunk: 64KiB, chunks: 8}\n"
                             "template:\n"
                             "  - {name: source, type: gappy, count: 12, sample_rate: 1MHz}\n"
                             "  - {name: rec, type: record, directory: " + dir.str() + "}\n"
                             "lanes:\n  - name: port0\n";
  ASSERT_EQ(run_pipeline(record, test::test_registry()), std::vector<std::string>{});
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));

  const std::string replay = "pipeline: {name: back, chunk: 64KiB, chunks: 8}\n"
                             "template:\n"
                             "  - {name: source, type: replay, pace: fast, capture: " + dir.str("gaps.sigmf-collection") +
                             "}\n"
                             "  - {name: sink, type: collect, key: replay-gaps}\n"
                             "lanes:\n  - name: port0\n";
  ASSERT_EQ(run_pipeline(replay, test::test_registry()), std::vector<std::string>{});
  const auto expected = test::gappy_expected(chunk, count, 1e6);
  auto& store = test::collected("replay-gaps");
  std::lock_guard lock(store.mutex);
  ASSERT_EQ(store.chunks.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("chunk " + std::to_string(i));
    const auto& got = store.chunks[i];
    EXPECT_EQ(got.first_sample, expected[i].first_sample);
    EXPECT_EQ(got.sample_count, expected[i].sample_count);
    EXPECT_EQ(got.bytes, expected[i].bytes);
    EXPECT_TRUE(got.timestamp.valid);
    EXPECT_EQ(got.timestamp.seconds, expected[i].timestamp.seconds);
    EXPECT_EQ(got.timestamp.picoseconds, expected[i].timestamp.picoseconds);
    ASSERT_EQ(got.gaps.size(), expected[i].gaps.size());
    for (std::size_t g = 0; g < got.gaps.size(); ++g) {
      EXPECT_EQ(got.gaps[g].first_sample, expected[i].gaps[g].first_sample);
      EXPECT_EQ(got.gaps[g].length, expected[i].gaps[g].length);
    }
  }
  const recorder::Capture capture = recorder::open_capture(dir.str("gaps.sigmf-collection"));
  std::uint64_t lost = 0;
  for (const auto& chunk_seen : expected) {
    for (const auto& gap : chunk_seen.gaps) lost += gap.length;
  }
  EXPECT_EQ(capture.lanes[0].lost_samples, lost);
  EXPECT_NE(recorder::describe_capture(capture).find(std::to_string(lost) + " samples lost"), std::string::npos);
}

TEST(RecordStage, ReplayLoopsAndPacesAtTheRecordedRate) {
  TempDir dir;
  // 1 MiB of ci16 at 1 Msps: 262,144 samples = 0.262 s of signal.
  const std::string record = "pipeline: {name: pace, chunk: 64KiB, chunks: 8}\n"
                             "template:\n"
                             "  - {name: source, type: generator, signal: ramp, sample_rate: 1Msps, stop_after: 1MiB}\n"
                             "  - {name: rec, type: record, directory: " + dir.str() + "}\n"
                             "lanes:\n  - name: port0\n";
  ASSERT_EQ(run_pipeline(record), std::vector<std::string>{});
  const std::string replay = "pipeline: {name: back, chunk: 64KiB, chunks: 8, duration: 10s}\n"
                             "template:\n"
                             "  - {name: source, type: replay, loop: true, capture: " + dir.str("pace.sigmf-collection") +
                             "}\n"
                             "  - {name: sink, type: collect, key: replay-loop}\n"
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

TEST(RecordStage, SigmfFilesValidateAgainstTheSpecification) {
  TempDir dir;
  ASSERT_EQ(run_pipeline(generator_yaml("  - {name: rec, type: record, rotate: 512KiB, directory: " + dir.str() + "}\n",
                                        1ULL << 20)),
            std::vector<std::string>{});
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

}  // namespace
}  // namespace sluice
