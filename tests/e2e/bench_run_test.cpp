// `sluice bench` and `sluice run --emulator` as users run them: the real binaries, the real
// emulator on loopback, the real disk. No timing is asserted: bench rows must exist, be
// positive and carry ratios computed from their own numbers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "pipeline/cuda_glue.hpp"
#include "tests/support/free_port.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using testing::path_from_env;
using testing::run_process;

const std::string kSluice = path_from_env("SLUICE_BINARY", SLUICE_BINARY);
const std::string kSourceDir = path_from_env("SLUICE_SOURCE_DIR", SLUICE_SOURCE_DIR);
const std::string kEmulator = path_from_env("SLUICE_EMULATOR", SLUICE_EMULATOR);

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("sluice_bench_e2e_" + std::to_string(getpid()) + "_" + name);
}

void expect_ratio_of_own_numbers(const nlohmann::json& row) {
  const double measured = row["measured"]["bytes_per_second"].get<double>();
  const double ceiling = row["ceiling"]["bytes_per_second"].get<double>();
  EXPECT_GT(measured, 0) << row["stage"];
  EXPECT_GT(ceiling, 0) << row["stage"];
  EXPECT_GT(row["measured"]["msamples_per_second"].get<double>(), 0) << row["stage"];
  EXPECT_GT(row["ceiling"]["msamples_per_second"].get<double>(), 0) << row["stage"];
  EXPECT_GT(row["measured"]["cpu_seconds_per_gb"].get<double>(), 0) << row["stage"];
  EXPECT_NEAR(row["measured"]["gb_per_second"].get<double>(), measured / 1e9, 1e-12 * measured) << row["stage"];
  EXPECT_NEAR(row["ratio"].get<double>(), measured / ceiling, 1e-9 * (measured / ceiling)) << row["stage"];
}

// Runs `sluice bench --seconds S --json [extra]`, checks every row, returns the JSON.
nlohmann::json bench(const std::string& seconds, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv{kSluice, "bench", "--seconds", seconds, "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto result = run_process(argv, std::chrono::seconds(280));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("[1/"), std::string::npos) << "no progress on stderr: " << result.err;
  const auto json = nlohmann::json::parse(result.out);
  std::set<std::string> expected{"generator → null",           "udp ← emulator (1472 B)",    "fft (1024-point, FFTW)",
                                 "record (io_uring, depth 8)", "replay (io_uring, depth 4)", "lane: udp → fft → record",
                                 "2 lanes: udp → fft → record"};
  // Where a GPU answers, the lanes' fft runs on cuFFT, and its own row and ceiling join the table.
  if (cuda_glue::device_count() > 0) expected.insert("fft (1024-point, cuFFT)");
  std::set<std::string> seen;
  for (const auto& row : json["rows"]) {
    seen.insert(row["stage"].get<std::string>());
    expect_ratio_of_own_numbers(row);
  }
  EXPECT_EQ(seen, expected);
  return json;
}

const nlohmann::json& row_named(const nlohmann::json& json, const std::string& prefix) {
  for (const auto& row : json["rows"]) {
    if (row["stage"].get<std::string>().rfind(prefix, 0) == 0) return row;
  }
  throw std::runtime_error("no row " + prefix);
}

TEST(SluiceBench, JsonHasEveryRowWithRatiosFromItsOwnNumbers) {
  const auto json = bench("3");
  // Packets are counted where there are packets: the udp rows and their bare loop.
  for (const char* udp : {"udp", "lane", "2 lanes"}) {
    EXPECT_GT(row_named(json, udp)["measured"]["packets_per_second"].get<double>(), 0) << udp;
    EXPECT_GT(row_named(json, udp)["ceiling"]["packets_per_second"].get<double>(), 0) << udp;
  }
  const double one = row_named(json, "lane")["measured"]["bytes_per_second"].get<double>();
  const double two = row_named(json, "2 lanes")["measured"]["bytes_per_second"].get<double>();
  EXPECT_NEAR(json["two_lane_scaling"].get<double>(), two / one, 1e-9 * two / one);
  // The lanes' rows say how busy the whole machine was, and the scaling note names what bounds it
  // (or that nothing shared is at its limit).
  // and which single thread was busiest: a stage of one of its lanes, or one of the emulator's.
  for (const char* lanes : {"lane", "2 lanes"}) {
    const auto& measured = row_named(json, lanes)["measured"];
    const double busy = measured["machine_cpu_busy"].get<double>();
    EXPECT_GT(busy, 0) << lanes;
    EXPECT_LE(busy, 1) << lanes;
    const auto busiest = measured["busiest_thread"].get<std::string>();
    EXPECT_TRUE((busiest.rfind("port", 0) == 0 && busiest.ends_with(" stage")) ||
                busiest.rfind("the emulator's thread ", 0) == 0)
        << lanes << ": " << busiest;
    EXPECT_GT(measured["busiest_thread_busy"].get<double>(), 0.05) << lanes;
    EXPECT_LE(measured["busiest_thread_busy"].get<double>(), 1.05) << lanes;  // clock ticks round
  }
  bool named = false;
  for (const auto& note : json["notes"]) {
    const auto text = note.get<std::string>();
    if (text.rfind("two-lane scaling", 0) == 0) {
      named = text.find("bound by ") != std::string::npos || text.find("no shared resource") != std::string::npos;
    }
  }
  EXPECT_TRUE(named) << json["notes"];
  // Its working directory (captures, the raw file) is removed when it is done.
  EXPECT_FALSE(fs::exists(json["directory"].get<std::string>())) << json["directory"];
}

TEST(SluiceBench, BadSecondsAndMissingDirectoryAreRefused) {
  auto refused = run_process({kSluice, "bench", "--seconds", "0"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  auto missing_dir = run_process({kSluice, "bench", "--seconds", "1", "--dir", "/proc/no/such/dir"});
  EXPECT_EQ(missing_dir.exit_code, 1);
  EXPECT_NE(missing_dir.err.find("--dir /proc/no/such/dir"), std::string::npos) << missing_dir.err;
}

TEST(SluiceBench, TmpfsDirectoryFallsBackToBufferedIoWithANote) {
  struct statfs filesystem {};
  if (::statfs("/dev/shm", &filesystem) != 0 || filesystem.f_type != TMPFS_MAGIC)
    GTEST_SKIP() << "/dev/shm is not tmpfs here";
  const fs::path directory = "/dev/shm/sluice_bench_e2e_" + std::to_string(getpid());
  const auto json = bench("2", {"--dir", directory.string()});
  bool noted = false;
  for (const auto& note : json["notes"]) noted = noted || note.get<std::string>().find("tmpfs") != std::string::npos;
  EXPECT_TRUE(noted) << json["notes"];
  EXPECT_NE(row_named(json, "record")["ceiling_name"].get<std::string>().find("buffered"), std::string::npos);
  fs::remove_all(directory);
}

// Two small ext4 volumes on loop devices (scripts/volumes.sh), removed again at the end.
class LoopVolumes {
 public:
  // Images in /dev/shm, as on the GPU hosts: RAM-backed stand-ins for NVMe drives.
  LoopVolumes() : directory_("/dev/shm/sluice_bench_e2e_" + std::to_string(getpid()) + "_volumes") {
    const auto made = run_process({"bash", (fs::path(kSourceDir) / "scripts/volumes.sh").string(), "make", "2", "2G",
                                   "ext4", directory_.string()},
                                  std::chrono::seconds(240));
    why_not_ = made.exit_code == 0 ? "" : "scripts/volumes.sh make failed: " + made.err;
    std::istringstream lines(made.out);
    for (std::string line; std::getline(lines, line);) mounts_.push_back(line);
  }
  LoopVolumes(const LoopVolumes&) = delete;
  LoopVolumes& operator=(const LoopVolumes&) = delete;
  ~LoopVolumes() {
    const auto removed =
        run_process({"bash", (fs::path(kSourceDir) / "scripts/volumes.sh").string(), "remove", directory_.string()},
                    std::chrono::seconds(120));
    EXPECT_EQ(removed.exit_code, 0) << removed.err;
    EXPECT_FALSE(fs::exists(directory_)) << directory_;
  }
  [[nodiscard]] const std::string& why_not() const { return why_not_; }
  [[nodiscard]] const std::vector<std::string>& mounts() const { return mounts_; }

 private:
  fs::path directory_;
  std::string why_not_;
  std::vector<std::string> mounts_;
};

// Each lane records to its own volume, the table says which, and the scaling note names the
// bound. The volumes are loop devices (root): where they cannot be made, two tmpfs directories
// stand in (the bench then falls back to buffered I/O and says so) and the lanes share one
// file system, which the note must then name; under CI=true that fallback is a failure.
TEST(SluiceBench, SeveralDirsPutEachLaneOnItsOwnVolume) {
  const LoopVolumes volumes;
  std::vector<std::string> dirs = volumes.mounts();
  bool own_volumes = volumes.why_not().empty() && dirs.size() == 2;
  if (!own_volumes) {
    ASSERT_EQ(std::getenv("CI"), nullptr) << volumes.why_not();
    const std::string shm = "/dev/shm/sluice_bench_e2e_" + std::to_string(getpid());
    dirs = {shm + "_a", shm + "_b"};
  }
  const auto json = bench("3", {"--dir", dirs[0], "--dir", dirs[1]});
  ASSERT_EQ(json["lane_directories"].size(), 2U) << json.dump(2);
  for (std::size_t lane = 0; lane < 2; ++lane) {
    const auto recorded = json["lane_directories"][lane];
    ASSERT_EQ(recorded.size(), 1U) << recorded;
    EXPECT_EQ(recorded[0].get<std::string>().rfind(dirs[lane] + "/", 0), 0U) << recorded;
    // The table's notes name each lane's directory.
    const std::string named = "lane port" + std::to_string(lane) + " records to " + recorded[0].get<std::string>();
    bool found = false;
    for (const auto& note : json["notes"]) found = found || note.get<std::string>() == named;
    EXPECT_TRUE(found) << named << " not in " << json["notes"];
  }
  std::string scaling;
  for (const auto& note : json["notes"]) {
    if (note.get<std::string>().rfind("two-lane scaling", 0) == 0) scaling = note.get<std::string>();
  }
  ASSERT_FALSE(scaling.empty()) << json["notes"];
  // Below 1.8× the note says what holds the lanes back; on separate volumes they never share a disk.
  const bool cpus = scaling.find("every CPU busy") != std::string::npos;
  const bool volumes_bound = scaling.find("each lane on its own volumes") != std::string::npos;
  const bool shared = scaling.find("both lanes share one disk") != std::string::npos;
  const bool thread = scaling.find("bound by one thread: ") != std::string::npos;
  if (own_volumes) {
    EXPECT_FALSE(shared) << scaling;
    EXPECT_TRUE(cpus || thread || volumes_bound) << scaling;
  }
  if (json["two_lane_scaling"].get<double>() < 1.8) {
    EXPECT_TRUE(cpus || thread || scaling.find("bound by the") != std::string::npos || volumes_bound || shared)
        << scaling;
  }
  for (const auto& directory : json["directories"]) EXPECT_FALSE(fs::exists(directory.get<std::string>())) << directory;
  if (!own_volumes) {
    for (const auto& directory : dirs) fs::remove_all(directory);
  }
}

// The emulator's pid from "emulator: started PROGRAM FILE (pid N)" on stderr.
pid_t started_pid(const std::string& err) {
  std::smatch match;
  if (!std::regex_search(err, match, std::regex(R"(emulator: started .* \(pid ([0-9]+)\))"))) return -1;
  return static_cast<pid_t>(std::stol(match[1]));
}

void expect_gone(pid_t pid) {
  ASSERT_GT(pid, 0);
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1) << "emulator pid " << pid << " still there";
  EXPECT_EQ(errno, ESRCH);
}

std::uint64_t source_samples(const fs::path& report) {
  std::ifstream file(report);
  const auto json = nlohmann::json::parse(file);
  return json["lanes"][0]["stages"][0]["out"]["samples"].get<std::uint64_t>();
}

// configs/udp_loopback.yaml with its port (50000) replaced by one free now, so that tests
// running in parallel (cli_test runs the same file) do not collide on the port.
std::string udp_loopback_on_free_port(const std::string& name) {
  const std::uint16_t port = testing::free_udp_port();
  std::ifstream in(fs::path(kSourceDir) / "configs/udp_loopback.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text = std::regex_replace(text, std::regex("50000"), std::to_string(port));
  const fs::path path = temp_path(name + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(SluiceRunEmulator, UdpLoopbackInOneCommand) {
  const fs::path report = temp_path("udp.json");
  auto result = run_process(
      {kSluice, "run", udp_loopback_on_free_port(::testing::UnitTest::GetInstance()->current_test_info()->name()),
       "--emulator", "--set", "emulator.duration=2s", "--report", report.string()},
      std::chrono::seconds(60));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_GT(source_samples(report), 0U);
  // The emulator's own summary follows Sluice's on stdout.
  const auto summary = result.out.find("emulator: sent ");
  ASSERT_NE(summary, std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("emulator: sent 0 packets"), std::string::npos) << result.out;
  expect_gone(started_pid(result.err));
  fs::remove(report);
}

TEST(SluiceRunEmulator, AutostartKeyDoesTheSameAndPipelineEndFirstStopsIt) {
  // autostart from the file; the pipeline ends (1 s) long before the emulator would (60 s):
  // the emulator is stopped, reaped, and still reports what it sent.
  auto result = run_process(
      {kSluice, "run", udp_loopback_on_free_port(::testing::UnitTest::GetInstance()->current_test_info()->name()),
       "--set", "emulator.autostart=true", "--set", "emulator.duration=60s", "--duration", "1s"},
      std::chrono::seconds(60));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("emulator: sent "), std::string::npos) << result.out;
  expect_gone(started_pid(result.err));
}

// An emulator that exits with an error (here /bin/false in its place) stops the pipeline and
// fails the run, instead of leaving it waiting for packets that never come.
TEST(SluiceRunEmulator, EmulatorFailureFailsTheRun) {
  const char* previous = std::getenv("SLUICE_EMULATOR");
  const std::string saved = previous != nullptr ? previous : "";
  ASSERT_EQ(::setenv("SLUICE_EMULATOR", "/bin/false", 1), 0);
  auto result = run_process(
      {kSluice, "run", udp_loopback_on_free_port(::testing::UnitTest::GetInstance()->current_test_info()->name()),
       "--emulator", "--duration", "30s"},
      std::chrono::seconds(60));
  if (previous != nullptr) {
    ::setenv("SLUICE_EMULATOR", saved.c_str(), 1);
  } else {
    ::unsetenv("SLUICE_EMULATOR");
  }
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("sluice-emulator exited with status 1"), std::string::npos) << result.err;
}

TEST(SluiceRunEmulator, FlagWithoutEmulatorSectionIsAUsageError) {
  auto result = run_process({kSluice, "run", (fs::path(kSourceDir) / "configs/demo.yaml").string(), "--emulator"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("no emulator: section"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace sluice
