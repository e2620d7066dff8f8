// The storage-node deployment as shipped (configs/storage_node*.yaml, on free ports): two real
// `sluice run --node` processes joined per lane by the tcp link, recording the emulator's tone and
// playing a raw recording back, every row checked against the tone or the recording itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "recorder/capture_reader.hpp"
#include "recorder/capture_tools.hpp"
#include "tests/stages/record/record_test_support.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kSluice = testing::path_from_env("SLUICE_BINARY", SLUICE_BINARY);
const std::string kSourceDir = testing::path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);
constexpr double kToneHz = 5e6;
constexpr double kSampleRate = 12.5e6;
constexpr std::size_t kFftSize = 1024;

// A shipped config with `replacements` (pattern -> text) applied, written into `dir`.
std::string shipped_config(const test::TempDir& dir, const std::string& name,
                           const std::vector<std::pair<std::string, std::string>>& replacements) {
  std::ifstream in(fs::path(kSourceDir) / "configs" / name);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [pattern, replacement] : replacements)
    text = std::regex_replace(text, std::regex(pattern), replacement);
  const std::string path = dir.str(name);
  std::ofstream(path) << text;
  return path;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

std::vector<std::string> node(const std::string& config, const std::string& name, const std::string& report,
                              std::vector<std::string> extra) {
  std::vector<std::string> argv{kSluice, "run", config, "--node", name, "-q", "--report", report};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TEST(StorageNode, GpuNodeSpectraReachTheStorageNodesCaptureEverySample) {
  test::TempDir dir;
  const std::string config = shipped_config(dir, "storage_node.yaml",
                                            {{"50120", std::to_string(testing::free_udp_port())},
                                             {"50121", std::to_string(testing::free_udp_port())},
                                             {"7100", std::to_string(testing::free_tcp_port())},
                                             {"7101", std::to_string(testing::free_tcp_port())}});
  testing::Process storage(
      node(config, "storage", dir.str("storage.json"), {"--set", "template.record.directory=" + dir.str()}));
  const auto gpu = testing::run_process(
      node(config, "gpu", dir.str("gpu.json"), {"--emulator", "--set", "emulator.duration=2s"}), 180s);
  const auto stored = storage.wait(120s);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  ASSERT_EQ(stored.exit_code, 0) << stored.err;

  const auto gpu_report = read_json(dir.str("gpu.json"));
  const auto storage_report = read_json(dir.str("storage.json"));
  const recorder::Capture capture = recorder::open_capture(dir.str("storage_node.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 2U);
  for (std::size_t lane = 0; lane < 2; ++lane) {
    const auto& gpu_stages = gpu_report["lanes"][lane]["stages"];
    const auto& storage_stages = storage_report["lanes"][lane]["stages"];
    const std::uint64_t received = gpu_stages[0]["out"]["samples"].get<std::uint64_t>();
    EXPECT_GT(received, 0U);
    EXPECT_EQ(gpu_stages[0]["counters"].value("lost_samples", 1U), 0U) << "lane " << lane;
    // What the sending half sent is what the storage node's receiving half took, chunk for chunk.
    EXPECT_EQ(gpu_stages.back()["out"]["chunks"], storage_stages[0]["out"]["chunks"]) << "lane " << lane;
    EXPECT_EQ(gpu_stages.back()["out"]["bytes"], storage_stages[0]["out"]["bytes"]) << "lane " << lane;
    const recorder::CaptureLane* recorded = capture.lane(gpu_report["lanes"][lane]["name"].get<std::string>());
    ASSERT_NE(recorded, nullptr);
    const recorder::CaptureSpectrum spectrum = recorder::capture_spectrum(*recorded, kFftSize);
    EXPECT_TRUE(spectrum.from_spectra);
    EXPECT_EQ(spectrum.available, received / kFftSize) << "one row per 1024 samples the GPU node took, no averaging";
    EXPECT_NEAR(spectrum.frequency_of(spectrum.peak_bin()), kToneHz, kSampleRate / kFftSize);
  }
}

// Raw samples of the emulator's tone, both lanes, recorded by one process.
std::string record_raw(const test::TempDir& dir) {
  const std::string udp0 = std::to_string(testing::free_udp_port());
  const std::string udp1 = std::to_string(testing::free_udp_port());
  const std::string path = dir.str("raw.yaml");
  std::ofstream(path) << "emulator:\n"
                         "  autostart: true\n"
                         "  transport: udp\n"
                         "  streams: [{address: 127.0.0.1:"
                      << udp0 << ", stream_id: 1}, {address: 127.0.0.1:" << udp1
                      << ", stream_id: 2}]\n"
                         "  sample_rate: 12.5Msps\n  format: ci16\n  payload: 8972\n  rate: 50MB/s\n  duration: 2s\n"
                         "  signal: {tones: [{frequency: 5MHz, amplitude: 0.4}], noise_snr_db: 40, seed: 1}\n"
                         "pipeline: {name: raw, chunk: 4MiB, chunks: 16}\n"
                         "template:\n"
                         "  - {name: source, type: udp, format: ci16, sample_rate: 12.5Msps, receive_buffer: 128MiB, "
                         "max_datagram: 9000}\n"
                         "  - {name: record, type: record, directory: "
                      << dir.str()
                      << ", capture_name: raw, overwrite: true}\n"
                         "  - {name: sink, type: \"null\"}\n"
                         "lanes:\n"
                         "  - {name: port0, source: {address: 127.0.0.1:"
                      << udp0
                      << ", stream_id: 1}}\n"
                         "  - {name: port1, source: {address: 127.0.0.1:"
                      << udp1 << ", stream_id: 2}}\n";
  const auto recorded = testing::run_process({kSluice, "run", path, "-q"}, 120s);
  EXPECT_EQ(recorded.exit_code, 0) << recorded.err;
  return dir.str("raw.sigmf-collection");
}

TEST(StorageNode, PlaybackFromTheStorageNodeRunsThroughTheGpuNodesFft) {
  test::TempDir dir;
  const std::string raw = record_raw(dir);
  const std::string config = shipped_config(
      dir, "storage_node_playback.yaml",
      {{"7200", std::to_string(testing::free_tcp_port())}, {"7201", std::to_string(testing::free_tcp_port())}});
  testing::Process gpu(node(config, "gpu", dir.str("gpu.json"), {"--set", "template.record.directory=" + dir.str()}));
  const auto storage = testing::run_process(
      node(config, "storage", dir.str("storage.json"), {"--set", "template.replay.capture=" + raw}), 180s);
  const auto played = gpu.wait(120s);
  ASSERT_EQ(storage.exit_code, 0) << storage.err;
  ASSERT_EQ(played.exit_code, 0) << played.err;

  const recorder::Capture recording = recorder::open_capture(raw);
  const recorder::Capture playback = recorder::open_capture(dir.str("playback.sigmf-collection"));
  ASSERT_EQ(playback.lanes.size(), 2U);
  for (const auto& lane : playback.lanes) {
    const recorder::CaptureLane* source = recording.lane(lane.name);
    ASSERT_NE(source, nullptr) << lane.name;
    const recorder::CaptureSpectrum recorded = recorder::capture_spectrum(*source, kFftSize);
    const recorder::CaptureSpectrum played_back = recorder::capture_spectrum(lane, kFftSize);
    EXPECT_FALSE(recorded.from_spectra);
    EXPECT_TRUE(played_back.from_spectra);
    // The fft stage frames the samples as they come, across a hole in the recording (the row over
    // it is marked): one row per 1024 recorded samples, wherever a loss while recording split them.
    EXPECT_EQ(played_back.available, source->total_samples / kFftSize)
        << lane.name << ": one row per 1024 recorded samples (the recording: " << source->segments.size()
        << " segment(s), " << source->lost_samples << " samples lost)";
    EXPECT_GT(played_back.available, 0U);
    EXPECT_EQ(played_back.peak_bin(), recorded.peak_bin()) << lane.name;
    EXPECT_NEAR(played_back.frequency_of(played_back.peak_bin()), kToneHz, kSampleRate / kFftSize);
  }
}

}  // namespace
}  // namespace sluice
