// The `sluice` binary end to end on configs/record_demo.yaml: Ctrl-C leaves a complete
// capture, kill -9 leaves one that `sluice capture repair` completes, `sluice capture info`
// tells them apart, and `sluice play --no-fft` reads a capture back in full.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

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

// Starts the demo recording into `directory` (as capture `name`) until stopped, and waits
// until `records` chunks of lane port0 are journaled.
std::unique_ptr<testing::Process> start_recording(const std::string& directory, std::size_t records,
                                                  const std::string& name = "record_demo") {
  auto child = std::make_unique<testing::Process>(std::vector<std::string>{
      kSluice, "run", kSourceDir + "/configs/record_demo.yaml", "-q", "--set", "pipeline.duration=0s", "--set",
      "pipeline.chunk=256KiB", "--set", "template.record.directory=" + directory, "--set",
      "template.record.capture_name=" + name});
  const std::string journal = directory + "/" + name + "-port0-0000.sluice-journal";
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

// Records the demo into `dir`, kills it with SIGKILL once 4 chunks of lane port0 are
// journaled; returns the collection's path.
std::string record_then_kill(const test::TempDir& dir) {
  auto child = start_recording(dir.str(), 4);
  child->send_signal(SIGKILL);
  EXPECT_EQ(child->wait(std::chrono::seconds(60)).signal, SIGKILL);
  return dir.str("record_demo.sigmf-collection");
}

TEST(CaptureCli, KillNineThenRepairGivesACompleteCapture) {
  test::TempDir dir;
  const std::string collection = record_then_kill(dir);
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
  for (const std::string& path : {dir.str("missing.sigmf-collection"), dir.str("missing.sigmf-meta"),
                                  dir.str("missing"), dir.str("no-such-directory/missing.sigmf-collection")}) {
    std::string output;
    EXPECT_EQ(run_sluice({"capture", "repair", path}, &output), 1) << output;
    EXPECT_EQ(output, "sluice: " + path + " does not exist\n");
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// tests/recorder/map_collection.py (numpy.memmap of every data file the collection lists)
// run by a python3 that has numpy: exit 0 readable, 1 not, 77 no numpy anywhere.
testing::ProcessResult map_collection(const std::string& collection) {
  const std::string script = kSourceDir + "/tests/recorder/map_collection.py";
  testing::ProcessResult result;
  // The python3 on PATH (a pyenv, a venv) may lack numpy where Debian's python3-numpy is installed.
  for (const std::string python : {"python3", "/usr/bin/python3"}) {
    result = testing::run_process({python, script, collection});
    if (result.exit_code != 77 && result.exit_code != 127) return result;
  }
  return result;
}

// The highest segment of lane port0 whose file set is made (data, journal, meta) but has no
// chunk journaled yet: the spare a rotation makes ahead of time (-1 when there is none).
int spare_segment(const std::string& directory) {
  int last = -1;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(directory, error)) {
    int segment = -1;
    const std::string name = item.path().filename().string();
    if (std::sscanf(name.c_str(), "record_demo-port0-%4d.sigmf-data", &segment) == 1) last = std::max(last, segment);
  }
  if (last < 3) return -1;
  char name[64];
  std::snprintf(name, sizeof name, "/record_demo-port0-%04d", last);
  const std::string base = directory + name;
  // Its data file is preallocated (zeros past every journaled byte): the journal says it is empty.
  const bool empty = fs::exists(base + ".sigmf-data", error) && fs::exists(base + ".sigmf-meta", error) &&
                     fs::file_size(base + ".sluice-journal", error) == recorder::kJournalHeaderBytes && !error;
  return empty ? last : -1;
}

// Whether the collection already names segment `segment` of lane port0 (the rotation thread
// rewrites it after each rotation, so under load it may trail the files by a few).
bool collection_lists(const std::string& directory, int segment) {
  char name[64];
  std::snprintf(name, sizeof name, "record_demo-port0-%04d", segment);
  std::ifstream in(directory + "/record_demo.sigmf-collection");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find(name) != std::string::npos;
}

TEST(CaptureCli, KillNineMidRotationThenRepairLeavesOnlyRecordingsThatHoldData) {
  test::TempDir dir;
  testing::Process child(std::vector<std::string>{
      kSluice, "run", kSourceDir + "/configs/record_demo.yaml", "-q", "--set", "pipeline.duration=0s", "--set",
      "pipeline.chunk=256KiB", "--set", "template.source.rate=20MB/s", "--set", "template.record.rotate=1MiB", "--set",
      "template.record.directory=" + dir.str()});
  // Killed once a few rotations are done, the next file set waits, made ahead and empty, and the
  // collection names the recording being written (the one the kill leaves incomplete).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const auto ready = [&] {
    const int spare = spare_segment(dir.str());
    return spare >= 0 && collection_lists(dir.str(), spare - 1);
  };
  while (std::chrono::steady_clock::now() < deadline && !ready()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  child.send_signal(SIGKILL);
  ASSERT_EQ(child.wait(std::chrono::seconds(60)).signal, SIGKILL);
  ASSERT_GE(spare_segment(dir.str()), 3) << "no rotation made a file set ahead before the kill";
  const std::string collection = dir.str("record_demo.sigmf-collection");
  std::string output;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &output), 1) << output;
  ASSERT_EQ(run_sluice({"capture", "repair", collection}, &output), 0) << output;
  EXPECT_EQ(spare_segment(dir.str()), -1) << output;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &output), 0) << output;
  EXPECT_NE(output.find("state:    complete"), std::string::npos) << output;
  // An outside reader maps every data file the collection lists, and it lists what is there.
  const testing::ProcessResult mapped = map_collection(collection);
  if ((mapped.exit_code == 77 || mapped.exit_code == 127) && !test::in_ci())
    GTEST_SKIP() << "no python3 with numpy: " << mapped.err;
  EXPECT_EQ(mapped.exit_code, 0) << mapped.out << mapped.err;
  const recorder::Capture capture = recorder::open_capture(collection);
  std::vector<std::string> problems;
  test::check_every_sample(*capture.lane("port0"), test::ramp_truth(SampleFormat::ci16, 25e6), problems);
  EXPECT_EQ(problems, std::vector<std::string>{});
  SLUICE_EXPECT_SIGMF_VALID(test::sigmf_files(dir.str()));
}

// Every sample of `lane` is the generator's ramp at its stream index, an outside reader maps
// every data file the collection lists (and it lists every one in `directories`), and the
// SigMF files there are valid.
void expect_ramp_and_readable_outside(const recorder::CaptureLane& lane, const std::string& collection,
                                      const std::vector<std::string>& directories) {
  std::vector<std::string> problems;
  test::check_every_sample(lane, test::ramp_truth(SampleFormat::ci16, 25e6), problems);
  EXPECT_EQ(problems, std::vector<std::string>{});
  const testing::ProcessResult mapped = map_collection(collection);
  if ((mapped.exit_code == 77 || mapped.exit_code == 127) && !test::in_ci())
    GTEST_SKIP() << "no python3 with numpy: " << mapped.err;
  EXPECT_EQ(mapped.exit_code, 0) << mapped.out << mapped.err;
  std::vector<std::string> files;
  for (const auto& directory : directories) {
    for (const auto& file : test::sigmf_files(directory)) files.push_back(file);
  }
  SLUICE_EXPECT_SIGMF_VALID(files);
}

// A recording of lane port0 on disk, with the chunks its journal holds, that the collection
// does not name: the recorder made it (a rotation took it) but had not rewritten the
// collection yet. The collection is rewritten at most every 2 s, rotations come every 50 ms.
struct CutRecording {
  std::string base;
  std::uint64_t journaled_bytes = 0;
};

std::vector<CutRecording> unlisted_with_chunks(const std::vector<std::string>& directories) {
  std::ifstream in(directories.front() + "/record_demo.sigmf-collection");
  const std::string collection((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<CutRecording> found;
  for (const auto& directory : directories) {
    std::error_code error;
    for (const auto& item : fs::directory_iterator(directory, error)) {
      const std::string name = item.path().filename().string();
      if (!name.starts_with("record_demo-port0-") || item.path().extension() != ".sluice-journal") continue;
      const std::string stem = item.path().stem().string();
      if (collection.empty() || collection.find(stem) != std::string::npos) continue;
      CutRecording recording{(fs::path(directory) / stem).string()};
      try {
        for (const auto& record : recorder::read_journal(item.path().string()).records)
          recording.journaled_bytes += record.bytes;
      } catch (const std::runtime_error&) {  // its header still being written
        continue;
      }
      if (recording.journaled_bytes > 0) found.push_back(recording);
    }
  }
  return found;
}

// Records the demo (rotating every 1 MiB) into `directories` (several: striped) and kills it
// with SIGKILL while a recording with journaled chunks is on disk but not in the collection;
// the state after the kill is checked again (a rewrite of the collection may have come
// between the look and the kill: then the next attempt).
std::vector<CutRecording> kill_while_unlisted(const std::vector<std::string>& directories) {
  std::string list;
  for (const auto& directory : directories) list += (list.empty() ? "" : ", ") + directory;
  for (int attempt = 0; attempt < 5; ++attempt) {
    for (const auto& directory : directories) {
      fs::remove_all(directory);
      fs::create_directories(directory);
    }
    testing::Process child(std::vector<std::string>{
        kSluice, "run", kSourceDir + "/configs/record_demo.yaml", "-q", "--set", "pipeline.duration=0s", "--set",
        "pipeline.chunk=256KiB", "--set", "template.source.rate=20MB/s", "--set", "template.record.rotate=1MiB",
        "--set", "template.record.directory=[" + list + "]"});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    // In a striped capture, one on the second volume (found through the collection's listing).
    const auto ready = [&] {
      for (const auto& cut : unlisted_with_chunks(directories)) {
        if (fs::path(cut.base).parent_path() == fs::path(directories.back())) return true;
      }
      return false;
    };
    while (std::chrono::steady_clock::now() < deadline && !ready()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    child.send_signal(SIGKILL);
    if (child.wait(std::chrono::seconds(60)).signal != SIGKILL) return {};
    if (ready()) return unlisted_with_chunks(directories);
  }
  return {};
}

// Every sample a killed recorder journaled is found: `capture info` names each recording the
// collection does not list (and counts its samples), `capture repair` lists it, and every
// sample then reads back bit-exact against the generator's ramp.
void check_unlisted_found_and_repaired(const std::vector<std::string>& directories) {
  const std::vector<CutRecording> cut = kill_while_unlisted(directories);
  ASSERT_FALSE(cut.empty()) << "no kill came while a recording with chunks was unlisted";
  const std::string collection = directories.front() + "/record_demo.sigmf-collection";
  std::string output;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &output), 1) << output;
  for (const auto& recording : cut) {
    const std::string name = fs::path(recording.base).lexically_relative(directories.front()).string();
    EXPECT_NE(output.find("recording " + name + " is on disk but not in the collection"), std::string::npos)
        << name << "\n"
        << output;
  }
  // Replay does not play the capture without them: it refuses the cut recording among them.
  EXPECT_EQ(run_sluice({"play", "--no-fft", "--fast", collection}, &output), 1) << output;
  EXPECT_NE(output.find("not in its collection"), std::string::npos) << output;
  EXPECT_NE(output.find("was cut off: run `sluice capture repair"), std::string::npos) << output;
  // Read before the repair, the unlisted recordings are part of the lane already, as their journals say.
  {
    const recorder::Capture before = recorder::open_capture(collection);
    std::vector<std::string> problems;
    test::check_every_sample(*before.lane("port0"), test::ramp_truth(SampleFormat::ci16, 25e6), problems);
    EXPECT_EQ(problems, std::vector<std::string>{});
  }
  ASSERT_EQ(run_sluice({"capture", "repair", collection}, &output), 0) << output;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &output), 0) << output;
  EXPECT_NE(output.find("state:    complete"), std::string::npos) << output;
  EXPECT_EQ(output.find("not in the collection"), std::string::npos) << output;
  const recorder::Capture capture = recorder::open_capture(collection);
  const recorder::CaptureLane& lane = *capture.lane("port0");
  for (const auto& recording : cut) {
    EXPECT_NE(std::find(lane.recordings.begin(), lane.recordings.end(), recording.base), lane.recordings.end())
        << recording.base;
    std::uint64_t samples = 0;
    for (const auto& segment : lane.segments) {
      if (segment.data_path == recording.base + ".sigmf-data") samples += segment.sample_count;
    }
    EXPECT_EQ(samples * lane.sample_bytes, recording.journaled_bytes) << recording.base;
  }
  expect_ramp_and_readable_outside(lane, collection, directories);
}

TEST(CaptureCli, KillNineBeforeTheCollectionListsARecordingThenInfoNamesItAndRepairListsIt) {
  test::TempDir dir;
  check_unlisted_found_and_repaired({dir.str("volume")});
}

TEST(CaptureCli, KillNineBeforeTheCollectionListsAStripeOnTheSecondVolumeThenRepairListsIt) {
  test::TempDir dir;
  check_unlisted_found_and_repaired({dir.str("volume0"), dir.str("volume1")});
}

// A kill between making the first file sets and writing the collection leaves recordings and
// no collection: that state, reproduced from a killed recording (its collection removed), is
// named by `capture info`, and `capture repair` writes the collection with every lane.
TEST(CaptureCli, RecordingsWithoutTheirCollectionAreNamedAndRepairWritesIt) {
  test::TempDir dir;
  const std::string collection = record_then_kill(dir);
  fs::remove(collection);
  fs::remove(collection + ".tmp");
  std::size_t data_files = 0;  // each lane's recording and the next file set made ahead
  for (const auto& item : fs::directory_iterator(dir.path())) data_files += item.path().extension() == ".sigmf-data";
  std::string output;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &output), 1) << output;
  EXPECT_NE(output.find("does not exist, but " + std::to_string(data_files) + " recording(s) of it are on disk"),
            std::string::npos)
      << output;
  ASSERT_EQ(run_sluice({"capture", "repair", collection}, &output), 0) << output;
  EXPECT_EQ(run_sluice({"capture", "info", collection}, &output), 0) << output;
  const recorder::Capture capture = recorder::open_capture(collection);
  ASSERT_EQ(capture.lanes.size(), 2U);
  const recorder::CaptureLane& lane = *capture.lane("port0");
  EXPECT_GE(lane.total_bytes, 4U * 256 * 1024);
  expect_ramp_and_readable_outside(lane, collection, {dir.str()});
}

// The bytes of every data file of lane port0 in `directory`: what is on disk, however listed.
std::uint64_t port0_bytes_on_disk(const std::string& directory) {
  std::uint64_t bytes = 0;
  for (const auto& item : fs::directory_iterator(directory)) {
    const std::string name = item.path().filename().string();
    if (name.starts_with("record_demo-port0-") && item.path().extension() == ".sigmf-data") bytes += item.file_size();
  }
  return bytes;
}

// Finished recordings the collection does not list yet (a kill after they were finished and
// before the collection's next rewrite, reproduced by taking the last two of lane port0 out
// of a clean capture's collection) are named by `capture info` and played: nothing on disk is
// skipped.
TEST(CaptureCli, PlayReadsFinishedRecordingsTheCollectionDoesNotListYet) {
  test::TempDir dir;
  std::string output;
  ASSERT_EQ(run_sluice({"run", kSourceDir + "/configs/record_demo.yaml", "-q", "--set", "pipeline.duration=1s", "--set",
                        "pipeline.chunk=256KiB", "--set", "template.source.rate=20MB/s", "--set",
                        "template.record.rotate=1MiB", "--set", "template.record.directory=" + dir.str()},
                       &output),
            0)
      << output;
  const std::string collection = dir.str("record_demo.sigmf-collection");
  nlohmann::json document;
  {
    std::ifstream in(collection);
    document = nlohmann::json::parse(in);
  }
  auto& port0 = document["collection"]["sluice:lanes"]["port0"];
  ASSERT_GE(port0.size(), 3U) << output;
  std::vector<std::string> dropped{port0[port0.size() - 2].get<std::string>(), port0.back().get<std::string>()};
  port0.erase(port0.size() - 1);
  port0.erase(port0.size() - 1);
  auto& streams = document["collection"]["core:streams"];
  for (std::size_t i = streams.size(); i-- > 0;) {
    const std::string name = streams[i]["name"].get<std::string>();
    if (std::find(dropped.begin(), dropped.end(), name) != dropped.end()) streams.erase(i);
  }
  std::ofstream(collection, std::ios::trunc) << document.dump(2) << "\n";

  EXPECT_EQ(run_sluice({"capture", "info", collection}, &output), 1) << output;
  for (const auto& name : dropped) {
    EXPECT_NE(output.find("recording " + name + " is on disk but not in the collection"), std::string::npos)
        << name << "\n"
        << output;
  }
  const std::string report = dir.str("play.json");
  ASSERT_EQ(run_sluice({"play", "--no-fft", "--fast", collection, "--report", report}, &output), 0) << output;
  EXPECT_NE(output.find("not in its collection"), std::string::npos) << output;
  std::ifstream in(report);
  const nlohmann::json json = nlohmann::json::parse(in);
  bool found = false;
  for (const auto& lane : json["lanes"]) {
    if (lane["name"] != "port0") continue;
    found = true;
    EXPECT_EQ(lane["stages"][0]["out"]["bytes"].get<std::uint64_t>(), port0_bytes_on_disk(dir.str()));
  }
  EXPECT_TRUE(found) << json.dump();
}

// A capture whose name extends another's (record_demo-raw beside record_demo) shares its
// file name prefix: repairing one leaves the other's files as they are, and neither lists
// the other's recordings.
TEST(CaptureCli, RepairLeavesACaptureWhoseNameExtendsThisOneAlone) {
  test::TempDir dir;
  for (const std::string name : {"record_demo-raw", "record_demo"}) {
    auto child = start_recording(dir.str(), 2, name);
    child->send_signal(SIGKILL);
    ASSERT_EQ(child->wait(std::chrono::seconds(60)).signal, SIGKILL);
  }
  const std::string other = dir.str("record_demo-raw-port0-0000.sluice-journal");
  ASSERT_TRUE(fs::exists(other));
  const auto other_size = fs::file_size(other);
  std::string output;
  EXPECT_EQ(run_sluice({"capture", "info", dir.str("record_demo.sigmf-collection")}, &output), 1) << output;
  EXPECT_EQ(output.find("record_demo-raw"), std::string::npos) << output;
  ASSERT_EQ(run_sluice({"capture", "repair", dir.str("record_demo.sigmf-collection")}, &output), 0) << output;
  EXPECT_EQ(output.find("record_demo-raw"), std::string::npos) << output;
  EXPECT_TRUE(fs::exists(other));
  EXPECT_EQ(fs::file_size(other), other_size);
  EXPECT_EQ(run_sluice({"capture", "info", dir.str("record_demo-raw.sigmf-collection")}, &output), 1) << output;
  EXPECT_NE(output.find("INCOMPLETE"), std::string::npos) << output;
  ASSERT_EQ(run_sluice({"capture", "repair", dir.str("record_demo-raw.sigmf-collection")}, &output), 0) << output;
  EXPECT_EQ(run_sluice({"capture", "info", dir.str("record_demo-raw.sigmf-collection")}, &output), 0) << output;
  EXPECT_EQ(run_sluice({"capture", "info", dir.str("record_demo.sigmf-collection")}, &output), 0) << output;
}

}  // namespace
}  // namespace sluice
