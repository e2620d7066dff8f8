// configs/storage_node*.yaml over roce in the Soft-RoCE VM (ctest -R vm_storage_node), fft taken
// out: the recording is the emulator's signal bit for bit, the playback is the capture it replays;
// with SLUICE_RATE_ROUNDS (bench/vm/storage_node_bench.sh), playback at >= 0.9x ib_write_bw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "emulator/check_capture.hpp"
#include "emulator/emulator.hpp"
#include "recorder/capture_reader.hpp"
#include "tests/stages/record/record_test_support.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kSluice = testing::path_from_env("SLUICE_BINARY", SLUICE_BINARY);
const std::string kSourceDir = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);
const std::string kWriteBw = kSourceDir + "/tests/vm/guest/write_bw.sh";
const bool kInVm = testing::path_from_env("SLUICE_IN_VM", "0") == "1";
const std::string kAddress = testing::path_from_env("SLUICE_VM_ADDRESS", "192.0.2.1");
constexpr std::size_t kChunk = 4 << 20;  // the shipped configs' chunk: the link's message size
constexpr std::size_t kSampleBytes = 4;  // ci16

#define SLUICE_SKIP_OUTSIDE_VM() \
  if (!kInVm) GTEST_SKIP() << "needs rxe0: runs inside the Soft-RoCE VM (ctest -R vm_storage_node)"

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A shipped config with free ports and without its fft stage, written into `dir`.
std::string config_without_fft(const test::TempDir& dir, const std::string& name,
                               const std::vector<std::string>& ports) {
  std::string text = file_text(fs::path(kSourceDir) / "configs" / name);
  text = std::regex_replace(text, std::regex("  - name: fft\n(    .*\n)+"), "");
  for (const std::string& port : ports) {
    text = std::regex_replace(text, std::regex("\\b" + port + "\\b"), std::to_string(testing::free_tcp_port()));
  }
  const std::string path = dir.str(name);
  std::ofstream(path) << text;
  return path;
}

// Pins stream K's emulator sender thread to core K - 1 in the config at `path` (returned). On
// loopback a datagram is queued on the sending core's backlog, so a sender that moves between
// cores can deliver a burst after later ones: past the udp stage's reorder window, which the
// stage rightly counts as lost and late. A pinned sender keeps its stream in order.
std::string pin_senders(const std::string& path) {
  std::string text = file_text(path);
  for (const int stream : {1, 2}) {
    const std::string id = "stream_id: " + std::to_string(stream) + "}";
    const auto at = text.find(id, text.find("\nemulator:"));
    EXPECT_NE(at, std::string::npos) << id << " in " << path;
    if (at != std::string::npos)
      text.replace(at, id.size(),
                   "stream_id: " + std::to_string(stream) + ", cpu: " + std::to_string(stream - 1) + "}");
  }
  std::ofstream(path) << text;
  return path;
}

// `sluice run CONFIG --node NAME` with the link stage `link` switched to roce on rxe0's
// address (both lanes), records in memory-backed files without O_DIRECT, and `extra`.
std::vector<std::string> roce_node(const std::string& config, const std::string& name, const std::string& link,
                                   const test::TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> argv{kSluice, "run", config, "--node", name, "-q", "--report", dir.str(name + ".json")};
  for (const std::string& setting :
       {"template." + link + ".transport=roce", "template." + link + ".connections=1",
        "template." + link + ".connect_timeout=120s", "lanes.port0." + link + ".address=" + kAddress,
        "lanes.port1." + link + ".address=" + kAddress, "template.record.directory=" + dir.str(),
        std::string("template.record.direct=false"), std::string("template.record.preallocate=0")}) {
    argv.insert(argv.end(), {"--set", setting});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

// Every sample of a capture lane, in stream order.
std::vector<std::byte> lane_bytes(const recorder::CaptureLane& lane) {
  std::vector<std::byte> bytes(lane.total_samples * lane.sample_bytes);
  std::byte* out = bytes.data();
  for (const recorder::CaptureSegment& segment : lane.segments) {
    EXPECT_EQ(recorder::read_segment(lane, segment, 0, segment.sample_count, out), segment.sample_count);
    out += segment.sample_count * lane.sample_bytes;
  }
  return bytes;
}

// Where a lane's samples went missing on the GPU node: each stage's drops and the source's
// counters (kernel drops, lost samples), for a failure message.
std::string losses(const nlohmann::json& report, const std::string& lane_name) {
  for (const auto& lane : report["lanes"]) {
    if (lane["name"] != lane_name) continue;
    std::string text;
    for (const auto& stage : lane["stages"]) {
      text += stage["name"].get<std::string>() + ": drops " + stage["drops"].dump() + "; ";
    }
    return text + "source counters " + lane["stages"][0]["counters"].dump();
  }
  return "no lane " + lane_name + " in the GPU node's report";
}

// The lanes' link rate together (bytes/s) on the receiving node, from its first stage: the
// bytes that arrived after each lane's first chunk over the longest lane's time from its first
// chunk to its last (the lanes overlap; where they do not quite, this understates the rate).
double link_rate(const nlohmann::json& report) {
  double bytes = 0;
  double seconds = 0;
  for (const auto& lane : report["lanes"]) {
    const auto& link = lane["stages"][0];
    bytes += link["bytes_per_second"].get<double>() * link["flow_seconds"].get<double>();
    seconds = std::max(seconds, link["flow_seconds"].get<double>());
  }
  return seconds > 0 ? bytes / seconds : 0;
}

TEST(StorageNodeRoce, RecordingOnTheStorageNodeIsTheEmulatorsSignal) {
  SLUICE_SKIP_OUTSIDE_VM();
  test::TempDir dir;
  const std::string config =
      pin_senders(config_without_fft(dir, "storage_node.yaml", {"50120", "50121", "7100", "7101"}));
  testing::Process storage(roce_node(config, "storage", "to_storage", dir, {}));
  const auto gpu =
      testing::run_process(roce_node(config, "gpu", "to_storage", dir,
                                     {"--emulator", "--set", "emulator.duration=2s", "--set", "emulator.rate=10MB/s"}),
                           600s);
  const auto stored = storage.wait(300s);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  ASSERT_EQ(stored.exit_code, 0) << stored.err;

  // Ground truth: the emulator's own count of the samples it sent, and its signal.
  std::smatch sent;
  ASSERT_TRUE(std::regex_search(gpu.out, sent, std::regex("emulator: sent .*; samples ([0-9]+);"))) << gpu.out;
  const emulator::EmulatorSettings emulated = emulator::load_emulator_file(config);
  const std::vector<emulator::LaneCheck> checks =
      emulator::check_capture(emulated.signal, dir.str("storage_node.sigmf-collection"));
  ASSERT_EQ(checks.size(), 2U);
  const nlohmann::json gpu_report = read_json(dir.str("gpu.json"));
  std::uint64_t recorded = 0;
  for (const emulator::LaneCheck& lane : checks) {
    EXPECT_EQ(lane.lost, 0U) << lane.lane << ": " << losses(gpu_report, lane.lane);
    EXPECT_GT(lane.samples, 0U) << lane.lane;
    EXPECT_FALSE(lane.mismatch) << lane.lane << ": stream sample " << lane.first_bad
                                << " differs from the emulator's signal";
    recorded += lane.samples;
  }
  EXPECT_EQ(recorded, std::stoull(sent[1])) << "every sample the emulator sent is in the storage node's capture";
  std::cout << "recording over roce: " << recorded << " samples, link "
            << link_rate(read_json(dir.str("storage.json"))) / 1e6 << " MB/s (paced by the emulator)\n";
}

// Noise (ci16) on both lanes, kLaneBytes each, recorded by one process: the capture the
// storage node plays back.
std::string record_noise(const test::TempDir& dir, std::size_t lane_bytes) {
  const std::string path = dir.str("raw.yaml");
  std::ofstream(path)
      << "pipeline: {name: raw, chunk: 4MiB, chunks: 16}\n"
         "template:\n"
         "  - {name: source, type: generator, signal: noise, format: ci16, sample_rate: 12.5Msps, stop_after: "
      << lane_bytes
      << "}\n"
         "  - {name: record, type: record, directory: "
      << dir.str()
      << ", capture_name: raw, overwrite: true, direct: false}\n"
         "  - {name: sink, type: \"null\"}\n"
         "lanes:\n  - {name: port0}\n  - {name: port1, source: {seed: 2}}\n";
  const auto recorded = testing::run_process({kSluice, "run", path, "-q"}, 300s);
  EXPECT_EQ(recorded.exit_code, 0) << recorded.err;
  return dir.str("raw.sigmf-collection");
}

// perftest's ib_write_bw on rxe0 with one queue pair per lane, `size`-byte messages,
// `iterations` per queue pair: its bandwidth in bytes/s.
double write_bw(std::size_t size, std::size_t iterations, std::size_t queue_pairs) {
  const auto run = testing::run_process(
      {"sh", kWriteBw, std::to_string(size), std::to_string(iterations), std::to_string(queue_pairs)}, 600s);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::smatch rate;
  if (!std::regex_search(run.out, rate, std::regex("write_bw [0-9]+ ([0-9.]+)"))) return 0;
  return std::stod(rate[1]) * 1e6;  // perftest's MB/s are 10^6 bytes
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Rounds of playback timed against ib_write_bw: 0 (the test) plays back once, bit-exact, untimed.
int rate_rounds() {
  const char* text = std::getenv("SLUICE_RATE_ROUNDS");
  return text != nullptr ? std::max(0, std::atoi(text)) : 0;
}

TEST(StorageNodeRoce, PlaybackReachesTheGpuNodeBitExactAtWriteBwRate) {
  SLUICE_SKIP_OUTSIDE_VM();
  constexpr std::size_t kLaneBytes = 48 << 20;
  const int rounds = rate_rounds();
  test::TempDir dir;
  const recorder::Capture source = recorder::open_capture(record_noise(dir, kLaneBytes));
  const std::string config = config_without_fft(dir, "storage_node_playback.yaml", {"7200", "7201"});
  const std::vector<std::string> replay{"--set", "template.replay.capture=" + dir.str("raw.sigmf-collection"), "--set",
                                        "template.replay.direct=false"};
  std::vector<double> link_rates;
  std::vector<double> write_bw_rates;
  // Interleaved, so that whatever slows the emulation slows both sides alike.
  for (int round = 0; round < std::max(rounds, 1); ++round) {
    if (rounds > 0) write_bw_rates.push_back(write_bw(kChunk, kLaneBytes / kChunk, source.lanes.size()));
    testing::Process gpu(roce_node(config, "gpu", "to_gpu", dir, {}));
    const auto storage = testing::run_process(roce_node(config, "storage", "to_gpu", dir, replay), 600s);
    const auto played = gpu.wait(300s);
    ASSERT_EQ(storage.exit_code, 0) << storage.err;
    ASSERT_EQ(played.exit_code, 0) << played.err;
    const recorder::Capture playback = recorder::open_capture(dir.str("playback.sigmf-collection"));
    ASSERT_EQ(playback.lanes.size(), source.lanes.size());
    for (const recorder::CaptureLane& lane : playback.lanes) {
      const recorder::CaptureLane* recorded = source.lane(lane.name);
      ASSERT_NE(recorded, nullptr) << lane.name;
      EXPECT_EQ(lane.total_samples, kLaneBytes / kSampleBytes) << lane.name;
      EXPECT_TRUE(lane_bytes(lane) == lane_bytes(*recorded)) << lane.name << ": the playback differs from the capture";
    }
    if (rounds == 0) return;
    link_rates.push_back(link_rate(read_json(dir.str("gpu.json"))));
    std::cout << "round " << round + 1 << ": link " << link_rates.back() / 1e6 << " MB/s, ib_write_bw "
              << write_bw_rates.back() / 1e6 << " MB/s\n";
  }
  const double ratio = median(link_rates) / median(write_bw_rates);
  std::cout << "playback over roce, 2 lanes, 4 MiB messages: link " << median(link_rates) / 1e6
            << " MB/s, ib_write_bw (2 QPs) " << median(write_bw_rates) / 1e6 << " MB/s, ratio of medians " << ratio
            << "\n";
  EXPECT_GE(ratio, 0.9);
}

}  // namespace
}  // namespace sluice
