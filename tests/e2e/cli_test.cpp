// The `sluice` binary as users run it: every shipped config runs and conserves bytes,
// errors give conventional exit codes and locations, Ctrl-C drains, --report is complete.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/support/process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using testing::Process;
using testing::run_process;

using testing::path_from_env;
const std::string kSluice = path_from_env("SLUICE_BINARY", SLUICE_BINARY);
const std::string kSourceDir = path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);
const std::string kEmulator = path_from_env("SLUICE_EMULATOR", SLUICE_EMULATOR);

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("sluice_e2e_" + std::to_string(getpid()) + "_" + name);
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

// At every hop of every lane, what one stage handed on is what the next one received, and
// nothing was dropped anywhere. (Stages such as fft change the byte count within a stage.)
void expect_conserved(const nlohmann::json& report) {
  ASSERT_FALSE(report["lanes"].empty());
  for (const auto& lane : report["lanes"]) {
    const auto& stages = lane["stages"];
    EXPECT_GT(stages.front()["out"]["bytes"].get<std::uint64_t>(), 0U) << lane["name"];
    EXPECT_GT(stages.back()["in"]["bytes"].get<std::uint64_t>(), 0U) << lane["name"];
    for (std::size_t i = 0; i + 1 < stages.size(); ++i) {
      EXPECT_EQ(stages[i]["out"]["bytes"], stages[i + 1]["in"]["bytes"]) << lane["name"] << "/" << stages[i]["name"];
      EXPECT_EQ(stages[i]["out"]["chunks"], stages[i + 1]["in"]["chunks"]) << lane["name"] << "/" << stages[i]["name"];
    }
    for (const auto& stage : stages) EXPECT_EQ(stage["drops_total"], 0U) << lane["name"] << "/" << stage["name"];
  }
}

class ShippedConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedConfig, RunsAndDeliversEveryByte) {
  const fs::path config = fs::path(kSourceDir) / "configs" / GetParam();
  const fs::path report = temp_path(GetParam() + ".json");
  auto result = run_process({kSluice, "run", config.string(), "--duration", "2s", "--report", report.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = read_json(report);
  EXPECT_EQ(json["exit_code"], 0);
  expect_conserved(json);
  fs::remove(report);
}

// Configs with an `emulator:` section: the pipeline runs while sluice-emulator sends it
// what that section describes, as the file's own comment tells users to do.
class ShippedConfigWithEmulator : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedConfigWithEmulator, ReceivesEverythingTheEmulatorSends) {
  const fs::path config = fs::path(kSourceDir) / "configs" / GetParam();
  const fs::path report = temp_path(GetParam() + ".json");
  // The test starts the emulator below, as the file's comment tells users; one that the file
  // starts itself (autostart, the demo) would send everything twice.
  Process pipeline({kSluice, "run", config.string(), "--duration", "60s", "--set", "pipeline.progress_interval=100ms",
                    "--set", "emulator.autostart=false", "--report", report.string()});
  // The first progress line (the only lines with "queues") comes after every stage started
  // (sockets bound); a lane's name alone shows earlier, in the start-up notes of its stages.
  ASSERT_TRUE(pipeline.wait_for_stderr("queues ", std::chrono::seconds(30)));
  auto emulator = run_process({kEmulator, config.string(), "--set", "emulator.duration=2s", "-q"});
  ASSERT_EQ(emulator.exit_code, 0) << emulator.err;
  // Stopped once the emulator has sent everything, as a user stops it (Ctrl-C drains): a fixed
  // duration could end the run mid-stream where the emulator was slow to start.
  pipeline.send_signal(SIGINT);
  auto result = pipeline.wait(std::chrono::seconds(60));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = read_json(report);
  expect_conserved(json);
  for (const auto& lane : json["lanes"]) {
    const auto& source = lane["stages"][0];
    EXPECT_GT(source["packets"].get<std::uint64_t>(), 0U);
    EXPECT_EQ(source["counters"].value("lost_samples", 0U), 0U) << lane["name"];
  }
  fs::remove(report);
}

// A file whose lanes span nodes runs as one process per node (storage_node_test runs those).
bool spans_nodes(const YAML::Node& root) {
  const auto any_node = [](const YAML::Node& stages) {
    if (!stages || !stages.IsSequence()) return false;
    for (const auto& stage : stages) {
      if (stage["node"]) return true;
    }
    return false;
  };
  if (any_node(root["template"])) return true;
  if (root["lanes"] && root["lanes"].IsSequence()) {
    for (const auto& lane : root["lanes"]) {
      if (any_node(lane["stages"])) return true;
    }
  }
  return false;
}

std::vector<std::string> shipped_configs(bool with_emulator) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::path(kSourceDir) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    const YAML::Node root = YAML::LoadFile(entry.path().string());
    if (spans_nodes(root) || static_cast<bool>(root["emulator"]) != with_emulator) continue;
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string config_test_name(const ::testing::TestParamInfo<std::string>& param_info) {
  std::string name = param_info.param.substr(0, param_info.param.size() - 5);
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfig, ::testing::ValuesIn(shipped_configs(false)), config_test_name);
INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfigWithEmulator, ::testing::ValuesIn(shipped_configs(true)),
                         config_test_name);

TEST(Cli, HelpAndVersionExitZero) {
  auto help = run_process({kSluice, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("validate"), std::string::npos);
  auto run_help = run_process({kSluice, "run", "--help"});
  EXPECT_EQ(run_help.exit_code, 0);
  EXPECT_NE(run_help.out.find("--set"), std::string::npos);
  auto version = run_process({kSluice, "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("sluice "), std::string::npos);
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_process({kSluice}).exit_code, 2);
  EXPECT_EQ(run_process({kSluice, "frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_process({kSluice, "run", "/nonexistent.yaml"}).exit_code, 2);
}

TEST(Cli, ValidateReportsEveryErrorWithItsLocation) {
  const fs::path config = temp_path("bad.yaml");
  std::ofstream(config) << "pipeline:\n  chunk: 4MiB\nlanes:\n  - name: a\n    stages:\n      - type: generator\n"
                           "        rate: quick\n      - type: nul\n";
  auto result = run_process({kSluice, "validate", config.string()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("(2 errors)"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(config.string() + ":7:15: lanes.a.stages[0].rate"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(config.string() + ":8:15: lanes.a.stages[1].type: unknown stage type 'nul'"),
            std::string::npos)
      << result.err;
  fs::remove(config);
}

TEST(Cli, BadYamlIsRefusedBeforeAnythingIsCreated) {
  const fs::path directory = temp_path("never_created");
  fs::remove_all(directory);
  const fs::path config = temp_path("latin1.yaml");
  // A Latin-1 "é" in the pipeline name, which becomes the capture's name.
  std::ofstream(config)
      << "pipeline:\n  name: caf\xE9\n  duration: 100ms\nlanes:\n  - name: a\n    stages:\n      - {type: generator}\n"
         "      - {type: record, directory: " +
             directory.string() + "}\n";
  for (const char* command : {"validate", "run"}) {
    auto result = run_process({kSluice, command, config.string()});
    EXPECT_EQ(result.exit_code, 2) << command;
    EXPECT_NE(result.err.find(config.string() + ":2:12: (file): not UTF-8"), std::string::npos) << result.err;
    EXPECT_FALSE(fs::exists(directory)) << command << " created " << directory;
  }
  // An alias bomb is refused at once, naming where.
  std::string bomb = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char level = 'b'; level <= 'i'; ++level) {
    bomb += std::string(1, level) + ": &" + level + " [";
    for (int i = 0; i < 9; ++i) bomb += std::string(i == 0 ? "" : ",") + "*" + static_cast<char>(level - 1);
    bomb += "]\n";
  }
  std::ofstream(config) << bomb;
  auto result = run_process({kSluice, "validate", config.string()}, std::chrono::seconds(20));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(config.string() + ":6:8: f[0]: aliases expand the document by more than 100000 nodes"),
            std::string::npos)
      << result.err;
  // Nesting too deep names where the list past the limit starts.
  std::ofstream(config) << "pipeline: {}\nlanes: " + std::string(1000, '[') + std::string(1000, ']') + "\n";
  result = run_process({kSluice, "validate", config.string()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(config.string() + ":2:71: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("maps and lists nested deeper than 64 levels"), std::string::npos) << result.err;
  // A syntax error names its key path.
  std::ofstream(config) << "pipeline:\n  name: [unclosed\nlanes: []\n";
  result = run_process({kSluice, "validate", config.string()});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(": pipeline.name"), std::string::npos) << result.err;
  fs::remove(config);
}

TEST(Cli, ValidateAcceptsTheDemo) {
  auto result = run_process({kSluice, "validate", kSourceDir + "/configs/demo.yaml"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("port1: source (generator) → link (link) → sink (null)"), std::string::npos) << result.out;
}

// The four-lane example: each lane's line is followed by its GPU and why, then each stage's
// GPU and cores; without a GPU the placement says so.
TEST(Cli, ValidatePrintsWhereEachLaneRuns) {
  auto result = run_process({kSluice, "validate", kSourceDir + "/configs/four_lane_two_gpu.yaml"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* lane : {"port0", "port1", "port2", "port3"}) {
    const std::regex placed(
        std::string(lane) +
        R"(: source \(udp\) → link \(link\) → fft \(fft\) → record \(record\) → sink \(null\)\n)"
        R"((    GPU [01]( \([0-9a-f:.]+\))?: (nearest to \w+ \(.*\)|round-robin \(.*\))\n)"
        R"(      source: GPU [01], cores .*\n      link: GPU [01], cores )"
        R"(|    GPU: none here \(.+\): pools fall back to host memory\n      source: cores any\n))");
    EXPECT_TRUE(std::regex_search(result.out, placed)) << lane << "\n" << result.out;
  }
}

// A stage's own threads are part of where it runs: the udp stage's receive threads and their cores.
TEST(Cli, ValidatePrintsTheReceiveThreadsAndTheirCores) {
  auto result = run_process({kSluice, "validate", kSourceDir + "/configs/four_lane_two_gpu.yaml", "--set",
                             "template.source.receive_thread=true", "--set", "template.source.receive_threads=2",
                             "--set", "template.source.receive_cpu=0-1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::regex placed(R"(\n      source: (GPU [01], )?cores [^;\n]*; 2 receive threads on cores 0, 1\n)");
  EXPECT_TRUE(std::regex_search(result.out, placed)) << result.out;
  // Every lane's first thread on core 0 and second on core 1: each core is named, with its threads.
  for (const char* core : {"0", "1"}) {
    EXPECT_NE(result.out.find(std::string("\n  warning: core ") + core +
                              " carries 4 receive threads pinned there alone (port0 source's receive thread"),
              std::string::npos)
        << result.out;
  }
  // One core a lane: nothing to warn about.
  std::vector<std::string> apart = {kSluice, "validate", kSourceDir + "/configs/four_lane_two_gpu.yaml", "--set",
                                    "template.source.receive_thread=true"};
  for (int lane = 0; lane < 4; ++lane) {
    apart.insert(apart.end(),
                 {"--set", "lanes.port" + std::to_string(lane) + ".source.receive_cpu=" + std::to_string(lane)});
  }
  result = run_process(apart);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.find("warning:"), std::string::npos) << result.out;
}

TEST(Cli, StartFailureExitsOneNamingTheStage) {
  const fs::path config = temp_path("start.yaml");
  std::ofstream(config)
      << "lanes: [{name: a, stages: [{type: generator}, {name: out, type: file, path: /proc/nope/x}]}]\n";
  auto result = run_process({kSluice, "run", config.string()});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("lane a, stage out (file): open(/proc/nope/x)"), std::string::npos) << result.err;
  fs::remove(config);
}

TEST(Cli, CtrlCDrainsAndExitsZero) {
  const fs::path config = fs::path(kSourceDir) / "configs" / "demo.yaml";
  const fs::path report = temp_path("sigint.json");
  Process process({kSluice, "run", config.string(), "--duration", "60s", "--set", "pipeline.progress_interval=100ms",
                   "--report", report.string()});
  ASSERT_TRUE(process.wait_for_stderr("port1", std::chrono::seconds(30)));
  process.send_signal(SIGINT);
  auto result = process.wait(std::chrono::seconds(30));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("stopping: draining queues"), std::string::npos);
  EXPECT_NE(result.out.find("lane"), std::string::npos);  // the summary table
  const auto json = read_json(report);
  EXPECT_LT(json["elapsed_seconds"].get<double>(), 30.0);
  expect_conserved(json);
  fs::remove(report);
}

// A short paced run with progress lines every 50 ms off a terminal (the test's pipes).
std::vector<std::string> paced_run(const fs::path& config, std::vector<std::string> extra) {
  std::ofstream(config)
      << "pipeline: {name: p, chunk: 64KiB, progress_interval: 50ms}\n"
         "lanes: [{name: lane0, stages: [{type: generator, rate: 20MB/s, stop_after: 8MiB}, {type: null}]}]\n";
  std::vector<std::string> argv{kSluice};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"run", config.string()});
  return argv;
}

TEST(Cli, QuietPrintsNoProgressAtAll) {
  const fs::path config = temp_path("quiet.yaml");
  auto loud = run_process(paced_run(config, {}));
  ASSERT_EQ(loud.exit_code, 0) << loud.err;
  EXPECT_NE(loud.err.find("Msps"), std::string::npos) << "progress lines expected without -q:\n" << loud.err;
  auto argv = paced_run(config, {});
  argv.push_back("-q");
  auto quiet = run_process(argv);
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("Msps"), std::string::npos) << quiet.err;
  EXPECT_NE(quiet.out.find("lane0"), std::string::npos) << "the summary still goes to stdout";
  fs::remove(config);
}

TEST(Cli, SpdlogLevelStandsUnlessLogLevelIsGiven) {
  const fs::path config = temp_path("levels.yaml");
  const std::string started = "lane lane0, stage generator (generator): started";
  ::setenv("SPDLOG_LEVEL", "debug", 1);
  auto from_environment = run_process(paced_run(config, {}));
  auto overridden = run_process(paced_run(config, {"--log-level", "info"}));
  ::unsetenv("SPDLOG_LEVEL");
  auto flag = run_process(paced_run(config, {"--log-level", "debug"}));
  auto plain = run_process(paced_run(config, {}));
  EXPECT_NE(from_environment.err.find(started), std::string::npos) << from_environment.err;
  EXPECT_EQ(overridden.err.find(started), std::string::npos) << overridden.err;
  EXPECT_NE(flag.err.find(started), std::string::npos) << flag.err;
  EXPECT_EQ(plain.err.find(started), std::string::npos) << plain.err;
  EXPECT_EQ(run_process(paced_run(config, {"--log-level", "verbose"})).exit_code, 2);  // not silently "off"
  fs::remove(config);
}

TEST(Cli, DebugLogSaysWhereAStreamStoppedAndWhy) {
  // A lane whose source hands on one chunk every 2 s: at debug level the log names each stage
  // as it starts, when data first came, that it went quiet and came back, and how it ended.
  const fs::path config = temp_path("lost.yaml");
  std::ofstream(config)
      << "pipeline: {name: p, chunk: 64KiB, chunks: 4}\n"
         "lanes: [{name: a, stages: [{type: generator, rate: 32kB/s, stop_after: 128KiB, on_full: drop},"
         " {type: null}]}]\n";
  auto result = run_process({kSluice, "--log-level", "debug", "run", config.string(), "-q"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find(
                "lane a, stage generator (generator): started; stream: generator tone, 100 MHz ci16; no input queue;"
                " when the next queue is full: drop"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find(
                "lane a, stage null (null): started; stream: generator tone, 100 MHz ci16; input queue 16 chunks"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("lane a, stage null (null): first data"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("lane a, stage null (null): no data for 1."), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("lane a, stage null (null): data again after"), std::string::npos) << result.err;
  EXPECT_NE(
      result.err.find("lane a, stage generator (generator): reached end of stream after 2 chunks, 128.00 KiB, 0 drops"),
      std::string::npos)
      << result.err;
  fs::remove(config);
}

TEST(Cli, SummaryRateIsOverTheTimeDataFlowed) {
  // 4 MiB at 8 MB/s: data flows about 0.5 s; the run lasts longer (start, drain). The summary's
  // GB/s is the paced rate, not bytes over the whole run, and the run's duration is beside it.
  const fs::path config = temp_path("flow.yaml");
  const fs::path report = temp_path("flow.json");
  std::ofstream(config)
      << "pipeline: {name: p, chunk: 64KiB}\n"
         "lanes: [{name: a, stages: [{type: generator, rate: 8MB/s, stop_after: 4MiB}, {type: null}]}]\n";
  auto result = run_process({kSluice, "run", config.string(), "-q", "--report", report.string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("run ", 0), 0U) << result.out;
  EXPECT_NE(result.out.find("flow s"), std::string::npos) << result.out;
  const auto json = read_json(report);
  const auto& source = json["lanes"][0]["stages"][0];
  EXPECT_NEAR(source["bytes_per_second"].get<double>(), 8e6, 8e6 * 0.05) << result.out;
  EXPECT_LE(source["flow_seconds"].get<double>(), json["elapsed_seconds"].get<double>());
  fs::remove(config);
  fs::remove(report);
}

TEST(CliEmulator, SetWorksWithoutAConfigFile) {
  const int receiver = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(receiver, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(receiver, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::getsockname(receiver, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string to = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  auto sent = run_process({kEmulator, "--to", to, "--set", "emulator.count=7", "--set", "emulator.rate=0", "-q"});
  ::close(receiver);
  EXPECT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_NE(sent.err.find("sent 7 packets"), std::string::npos) << sent.err;
  auto bad = run_process({kEmulator, "--to", to, "--set", "emulator.rate=quick"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("emulator.rate"), std::string::npos) << bad.err;
}

TEST(Cli, ReportHasEveryStageMetric) {
  const fs::path config = temp_path("report.yaml");
  std::ofstream(config) << "pipeline: {name: r, chunk: 64KiB}\n"
                           "lanes: [{name: a, stages: [{type: generator, stop_after: 8MiB}, {type: null}]}]\n";
  const fs::path report = temp_path("report.json");
  const fs::path plot = temp_path("rates.svg");
  auto result =
      run_process({kSluice, "run", config.string(), "--report", report.string(), "--plot", plot.string(), "-q"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = read_json(report);
  // The timeline ends with everything delivered, and the plot draws one line per lane.
  ASSERT_FALSE(json["timeline"].empty());
  EXPECT_EQ(json["timeline"].back()["sink_bytes"][0], 8U << 20);
  std::ifstream plot_file(plot);
  const std::string svg((std::istreambuf_iterator<char>(plot_file)), {});
  EXPECT_EQ(svg.rfind("<svg", 0), 0U);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find(">a</text>"), std::string::npos);
  fs::remove(plot);
  EXPECT_EQ(json["pipeline"], "r");
  const auto& sink = json["lanes"][0]["stages"][1];
  EXPECT_EQ(sink["in"]["bytes"], 8U << 20);
  EXPECT_EQ(sink["in"]["chunks"], 128U);
  EXPECT_EQ(sink["latency_ns"]["count"], 128U);
  EXPECT_GE(sink["latency_ns"]["p99"], sink["latency_ns"]["p50"]);
  EXPECT_TRUE(sink.contains("busy_fraction"));
  EXPECT_TRUE(sink["queue"].contains("high_water"));
  fs::remove(config);
  fs::remove(report);
}

}  // namespace
}  // namespace sluice
