// The `sluice` binary end to end on configs/record_demo.yaml: Ctrl-C leaves a complete
// capture, kill -9 leaves one that `sluice capture repair` completes, `sluice capture info`
// tells them apart, and `sluice play --no-fft` reads a capture back in full.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "recorder/capture_reader.hpp"
#include "recorder/journal.hpp"
#include "tests/stages/record/record_test_support.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {
namespace fs = std::filesystem;

const std::string kSluice = testing::path_from_env("SLUICE_BINARY", SLUICE_BINARY);
const std::string kSourceDir = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);

// Runs sluice to completion; returns its exit code and, in `output`, stdout then stderr.
int run_sluice(const std::vector<std::string>& arguments, std::string* output = nullptr) {
  std::vector<std::string> argv{kSluice};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  const testing::ProcessResult result = testing::run_process(argv);
  if (output != nullptr) *output = result.out + result.err;
  return result.exit_code;
}

// Starts the demo recording into `directory` until stopped, and waits until `records`
// chunks of lane port0 are journaled.
std::unique_ptr<testing::Process> start_recording(const std::string& directory, std::size_t records) {
  auto child = std::make_unique<testing::Process>(std::vector<std::string>{
      kSluice, "run", kSourceDir + "/configs/record_demo.yaml", "-q", "--set", "pipeline.duration=0s", "--set",
      "pipeline.chunk=256KiB", "--set", "template.record.directory=" + directory});
  const std::string journal = directory + "/record_demo-port0-0000.sluice-journal";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline &&
         (!fs::exists(journal) ||
          fs::file_size(journal) < recorder::kJournalHeaderBytes + records * sizeof(recorder::JournalRecord))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return child;
}

TEST(CaptureCli, CtrlCLeavesACompleteCaptureThatPlaysBackInFull) {
  test::TempDir dir;
  auto child = start_recording(dir.str(), 4);
  child->send_signal(SIGINT);
  const auto stopped = child->wait(std::chrono::seconds(60));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  const std::string collection = dir.str("record_demo.sigmf-collection");
  std::string info;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &info), 0) << info;
  EXPECT_NE(info.find("state:    complete"), std::string::npos) << info;
  EXPECT_NE(info.find("lane port1"), std::string::npos) << info;
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));

  const recorder::Capture capture = recorder::open_capture(collection);
  const std::string report = dir.str("play.json");
  std::string output;
  ASSERT_EQ(run_sluice({"play", "--no-fft", "--fast", collection, "--report", report}, &output), 0) << output;
  std::ifstream in(report);
  const nlohmann::json json = nlohmann::json::parse(in);
  ASSERT_EQ(json["lanes"].size(), capture.lanes.size());
  for (std::size_t i = 0; i < capture.lanes.size(); ++i) {
    EXPECT_EQ(json["lanes"][i]["stages"][0]["out"]["bytes"].get<std::uint64_t>(), capture.lanes[i].total_bytes);
  }
}

TEST(CaptureCli, KillNineThenRepairGivesACompleteCapture) {
  test::TempDir dir;
  auto child = start_recording(dir.str(), 4);
  child->send_signal(SIGKILL);
  EXPECT_EQ(child->wait(std::chrono::seconds(60)).signal, SIGKILL);
  const std::string collection = dir.str("record_demo.sigmf-collection");
  std::string info;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &info), 1) << info;
  EXPECT_NE(info.find("INCOMPLETE"), std::string::npos) << info;
  std::string repair;
  EXPECT_EQ(run_sluice({"capture", "repair", collection}, &repair), 0) << repair;
  EXPECT_NE(repair.find("repaired"), std::string::npos) << repair;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &info), 0) << info;
  const recorder::Capture capture = recorder::open_capture(collection);
  const auto& lane = *capture.lane("port0");
  EXPECT_GE(lane.total_bytes, 4U * 256 * 1024);
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

// A path with nothing there is named as missing, whichever form it takes; nothing is created.
TEST(CaptureCli, RepairOfAMissingPathSaysItDoesNotExist) {
  test::TempDir dir;
  for (const std::string& path : {dir.str("missing.sigmf-collection"), dir.str("missing.sigmf-meta"), dir.str("missing"),
                                  dir.str("no-such-directory/missing.sigmf-collection")}) {
    std::string output;
    EXPECT_EQ(run_sluice({"capture", "repair", path}, &output), 1) << output;
    EXPECT_EQ(output, "sluice: " + path + " does not exist\n");
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace sluice
