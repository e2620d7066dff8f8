// bench/stages/udp_receive_loops, the bare baseline of `run.sh dual`: real sockets, the real
// emulator. The ratio it stands for is only as good as its count, so the count must be exact.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/free_port.hpp"
#include "tests/support/process.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using testing::path_from_env;
using testing::run_process;

const std::string kLoops = path_from_env("SLUICE_UDP_RECEIVE_LOOPS", SLUICE_UDP_RECEIVE_LOOPS);
const std::string kEmulator = path_from_env("SLUICE_EMULATOR", SLUICE_EMULATOR);

TEST(UdpReceiveLoops, CountsEveryDatagramTheEmulatorSentToEachPort) {
  const std::uint16_t first = testing::free_udp_port();
  std::uint16_t second = testing::free_udp_port();
  while (second == first) second = testing::free_udp_port();
  testing::Process loops(
      {kLoops, "--port", std::to_string(first), "--port", std::to_string(second), "--seconds", "60", "--idle", "1"});
  ASSERT_TRUE(loops.wait_for_stderr("2 loops ready", 10s)) << loops.stderr_so_far();
  // Paced, so that even a receive buffer capped by rmem_max (no CAP_NET_ADMIN) holds every one.
  for (const auto& [port, count] : {std::pair{first, 300}, std::pair{second, 500}}) {
    const auto sent = run_process({kEmulator, "--to", "127.0.0.1:" + std::to_string(port), "--set",
                                   "emulator.count=" + std::to_string(count), "--set", "emulator.rate=50MB/s", "-q"});
    ASSERT_EQ(sent.exit_code, 0) << sent.err;
    ASSERT_NE(sent.err.find("sent " + std::to_string(count) + " packets"), std::string::npos) << sent.err;
  }
  const auto result = loops.wait(30s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto report = nlohmann::json::parse(result.out);
  ASSERT_EQ(report["ports"].size(), 2U) << result.out;
  EXPECT_EQ(report["ports"][0]["port"], first);
  EXPECT_EQ(report["ports"][0]["packets"], 300);
  EXPECT_EQ(report["ports"][1]["port"], second);
  EXPECT_EQ(report["ports"][1]["packets"], 500);
  EXPECT_EQ(report["packets"], 800);
  // Every datagram the same size: the bytes are in the same proportion, and add up.
  const auto bytes_first = report["ports"][0]["bytes"].get<std::uint64_t>();
  const auto bytes_second = report["ports"][1]["bytes"].get<std::uint64_t>();
  EXPECT_GT(bytes_first, 300U * 28);
  EXPECT_EQ(bytes_first / 300, bytes_second / 500);
  EXPECT_EQ(bytes_first % 300, 0U);
  EXPECT_EQ(report["bytes"].get<std::uint64_t>(), bytes_first + bytes_second);
}

// --handoff runs the udp stage's receive thread and a taking thread: every datagram still counts
// once, whatever the taking thread does with each batch. The ring is the smallest, so that the
// receive thread keeps running out of free slots and the socket takes the stream meanwhile.
TEST(UdpReceiveLoops, EachHandoffCountsEveryDatagram) {
  for (const std::string handoff : {"pass", "read", "copy"}) {
    SCOPED_TRACE(handoff);
    const std::uint16_t port = testing::free_udp_port();
    testing::Process loops({kLoops, "--port", std::to_string(port), "--handoff", handoff, "--placer-cpu", "-1",
                            "--ring", "2", "--seconds", "60", "--idle", "1"});
    ASSERT_TRUE(loops.wait_for_stderr("1 loops ready", 10s)) << loops.stderr_so_far();
    const auto sent = run_process({kEmulator, "--to", "127.0.0.1:" + std::to_string(port), "--set",
                                   "emulator.count=2000", "--set", "emulator.rate=200MB/s", "-q"});
    ASSERT_EQ(sent.exit_code, 0) << sent.err;
    const auto result = loops.wait(30s);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto report = nlohmann::json::parse(result.out);
    EXPECT_EQ(report["handoff"], handoff);
    EXPECT_EQ(report["ring"], 2);
    EXPECT_EQ(report["packets"], 2000) << result.out;
    EXPECT_EQ(report["bytes"].get<std::uint64_t>() % 2000, 0U) << result.out;
  }
}

// Runs udp_receive_loops with `args`: it must exit 2 and say `why`.
void expect_usage_error(std::vector<std::string> args, const std::string& why) {
  args.insert(args.begin(), kLoops);
  const auto result = run_process(args);
  EXPECT_EQ(result.exit_code, 2) << why;
  EXPECT_NE(result.err.find(why), std::string::npos) << result.err;
}

TEST(UdpReceiveLoops, UsageErrorsExitWithTwoAndSayWhy) {
  const std::string port = std::to_string(testing::free_udp_port());
  expect_usage_error({"--port", port, "--port", port, "--cpu", "0"}, "one --cpu per --port");
  expect_usage_error({"--port", port, "--receive-buffer", "lots"}, "--receive-buffer lots");
  expect_usage_error({"--port", port, "--handoff", "steal"}, "one of none, pass, read, copy");
  expect_usage_error({"--port", port, "--handoff", "copy"}, "one --placer-cpu per --port");
  expect_usage_error({"--port", port, "--placer-cpu", "1"}, "applies to --handoff");
  expect_usage_error({}, "--port");
}

}  // namespace
}  // namespace sluice
