// Two nodes of one pipeline file as two real `sluice run --node` processes joined by the
// link: every byte arrives in order (checked against the generator's own signal), a killed
// peer is reported by the survivor, which exits non-zero instead of hanging, a stage that
// fails on the sending node fails the receiving node with its reason, and a restarted
// receiver takes a new sender on the same port.
// Here the link is tcp on loopback; the same binary runs inside the Soft-RoCE VM
// (tests/vm, test vm_link_nodes), where SLUICE_IN_VM makes it roce on rxe0's address.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "pipeline/clock.hpp"
#include "stages/generator/generator.hpp"
#include "tests/support/process.hpp"
#include "tests/support/free_port.hpp"
#include "wire/socket.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::Process;
using testing::run_process;

const std::string kSluice = testing::path_from_env("SLUICE_BINARY", SLUICE_BINARY);
constexpr std::size_t kChunk = 256 * 1024;

std::string from_env(const char* variable, const char* fallback) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : fallback;
}
// Inside the test VM (SLUICE_IN_VM=1) the nodes meet over roce at rxe0's address.
const bool kInVm = from_env("SLUICE_IN_VM", "0") == "1";
const std::string kTransport = from_env("SLUICE_LINK_TRANSPORT", kInVm ? "roce" : "tcp");
const std::string kAddress = from_env("SLUICE_VM_ADDRESS", "127.0.0.1");

using testing::free_tcp_port;

class LinkNodes : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("sluice_link_nodes_" + std::to_string(getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::uint16_t port_ = free_tcp_port();
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }

  // Node a: a ramp generator (stop_after 0 = endless, rate 0 = unpaced); node b: the
  // link's receiving half (a 2-slot ring, so credits cycle constantly) into a file.
  // `tap` goes between the generator and the link, on node a.
  fs::path write_pipeline(const std::string& name, std::uint64_t stop_after, const std::string& rate,
                          const std::string& tap = "") {
    const fs::path path = dir_ / (name + ".yaml");
    std::ofstream(path) << "pipeline: {name: two_nodes, chunk: 256KiB, chunks: 8, progress_interval: 100ms}\n"
                           "lanes:\n"
                           "  - name: port0\n"
                           "    stages:\n"
                           "      - {type: generator, node: a, signal: ramp, format: cf32, stop_after: "
                        << stop_after << ", rate: " << rate << "}\n"
                        << tap
                        << "      - {type: link, node: b, transport: " << kTransport << ", address: " << kAddress
                        << ", port: " << port_
                        << ", chunks: 2, peer_timeout: 1s, connect_timeout: 20s}\n"
                           "      - {type: file, overwrite: true, path: "
                        << (dir_ / "received.bin").string() << "}\n";
    return path;
  }

  std::vector<std::string> node(const fs::path& file, const std::string& name) {
    return {kSluice, "run", file.string(), "--node", name, "-q", "--report", (dir_ / (name + ".json")).string()};
  }

  nlohmann::json report(const std::string& name) {
    std::ifstream file(dir_ / (name + ".json"));
    return nlohmann::json::parse(file);
  }

  void expect_ramp_received(std::uint64_t bytes) {
    GeneratorSettings settings;
    settings.signal = GeneratorSignal::ramp;
    settings.format = SampleFormat::cf32;
    std::vector<std::byte> expected(bytes);
    generate_signal(settings, 0, bytes / 8, expected.data());
    std::ifstream file(dir_ / "received.bin", std::ios::binary);
    std::vector<char> got((std::istreambuf_iterator<char>(file)), {});
    ASSERT_EQ(got.size(), bytes);
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), bytes), 0);
  }
};

TEST_F(LinkNodes, TwoProcessesCarryEveryByteInOrder) {
  constexpr std::uint64_t kBytes = 48ULL << 20;
  const fs::path file = write_pipeline("pipeline", kBytes, "0");
  Process sender(node(file, "a"));  // the sender starts first and retries until b listens
  Process receiver(node(file, "b"));
  const auto sent = sender.wait(120s);
  const auto received = receiver.wait(120s);
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  ASSERT_EQ(received.exit_code, 0) << received.err;
  expect_ramp_received(kBytes);
  // Each process reports only its own node's part: a = generator + sending half, b = receiving half + file.
  const auto a = report("a");
  const auto b = report("b");
  ASSERT_EQ(a["lanes"][0]["stages"].size(), 2U);
  ASSERT_EQ(b["lanes"][0]["stages"].size(), 2U);
  EXPECT_EQ(a["lanes"][0]["stages"][1]["out"]["chunks"], kBytes / kChunk);
  EXPECT_EQ(b["lanes"][0]["stages"][0]["out"]["chunks"], kBytes / kChunk);
  EXPECT_EQ(a["lanes"][0]["stages"][1]["drops_total"], 0U);
  EXPECT_EQ(b["lanes"][0]["stages"][1]["drops_total"], 0U);
}

// Starts both nodes on an endless paced stream and waits until chunks flow.
struct Running {
  Process receiver;
  Process sender;
  Running(const std::vector<std::string>& b, const std::vector<std::string>& a) : receiver(b), sender(a) {
    EXPECT_TRUE(receiver.wait_for_stderr("accepted a " + kTransport + " sender", 30s)) << receiver.stderr_so_far();
    EXPECT_TRUE(sender.wait_for_stderr("connected over " + kTransport, 30s)) << sender.stderr_so_far();
    std::this_thread::sleep_for(300ms);  // some chunks in flight
  }
};

double seconds_since(std::uint64_t begin) { return static_cast<double>(monotonic_ns() - begin) / 1e9; }

TEST_F(LinkNodes, SenderReportsAReceiverKilledMidStream) {
  const fs::path file = write_pipeline("pipeline", 0, "50MB/s");
  Running nodes(node(file, "b"), node(file, "a"));
  nodes.receiver.send_signal(SIGKILL);
  const std::uint64_t begin = monotonic_ns();
  const auto sent = nodes.sender.wait(30s);
  std::cout << "sender noticed the receiver's death and exited after " << seconds_since(begin) << " s\n";
  EXPECT_EQ(sent.exit_code, 1) << sent.err;  // a stage failure, not a hang killed by wait()
  EXPECT_NE(sent.err.find("link to " + kAddress + ":" + std::to_string(port_)), std::string::npos) << sent.err;
  EXPECT_LT(seconds_since(begin), 15.0);
}

TEST_F(LinkNodes, ReceiverReportsASenderKilledMidStream) {
  const fs::path file = write_pipeline("pipeline", 0, "50MB/s");
  Running nodes(node(file, "b"), node(file, "a"));
  nodes.sender.send_signal(SIGKILL);
  const std::uint64_t begin = monotonic_ns();
  const auto received = nodes.receiver.wait(30s);
  std::cout << "receiver noticed the sender's death and exited after " << seconds_since(begin) << " s\n";
  EXPECT_EQ(received.exit_code, 1) << received.err;
  // A killed peer's socket closes (EOF) or, with bytes it never read, resets: both are reported.
  // Over roce the kernel disconnects a dead process's connection (its receives flush).
  EXPECT_TRUE(received.err.find("peer closed the connection") != std::string::npos ||
              received.err.find("Connection reset by peer") != std::string::npos ||
              received.err.find("sender disconnected") != std::string::npos)
      << received.err;
  EXPECT_LT(seconds_since(begin), 15.0);
}

TEST_F(LinkNodes, RestartedReceiverTakesANewSender) {
  const fs::path endless = write_pipeline("endless", 0, "50MB/s");
  {
    Running nodes(node(endless, "b"), node(endless, "a"));
    nodes.receiver.send_signal(SIGKILL);
    EXPECT_EQ(nodes.sender.wait(30s).exit_code, 1);
  }
  constexpr std::uint64_t kBytes = 8ULL << 20;
  const fs::path file = write_pipeline("finite", kBytes, "0");
  Process receiver(node(file, "b"));  // same port, at once: SO_REUSEADDR
  Process sender(node(file, "a"));
  const auto sent = sender.wait(120s);
  const auto received = receiver.wait(120s);
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  ASSERT_EQ(received.exit_code, 0) << received.err;
  expect_ramp_received(kBytes);
}

TEST_F(LinkNodes, StoppingTheSenderEndsBothCleanly) {
  const fs::path file = write_pipeline("pipeline", 0, "50MB/s");
  Running nodes(node(file, "b"), node(file, "a"));
  nodes.sender.send_signal(SIGINT);  // Ctrl-C on the sending node: end of stream crosses the link
  const auto sent = nodes.sender.wait(30s);
  const auto received = nodes.receiver.wait(30s);
  EXPECT_EQ(sent.exit_code, 0) << sent.err;  // Ctrl-C drains and exits 0
  EXPECT_EQ(received.exit_code, 0) << received.err;
  const auto a = report("a");
  const auto b = report("b");
  EXPECT_EQ(a["lanes"][0]["stages"][1]["out"]["bytes"], b["lanes"][0]["stages"][1]["in"]["bytes"]);
  EXPECT_EQ(fs::file_size(dir_ / "received.bin"), b["lanes"][0]["stages"][1]["in"]["bytes"].get<std::uint64_t>());
}

TEST_F(LinkNodes, StoppingTheReceiverFailsTheSender) {
  const fs::path file = write_pipeline("pipeline", 0, "50MB/s");
  Running nodes(node(file, "b"), node(file, "a"));
  nodes.receiver.send_signal(SIGINT);  // after peer_timeout without an end of stream, b gives up
  const auto received = nodes.receiver.wait(30s);
  const auto sent = nodes.sender.wait(30s);
  EXPECT_EQ(received.exit_code, 0) << received.err;  // Ctrl-C drains and exits 0
  EXPECT_EQ(sent.exit_code, 1) << sent.err;
  EXPECT_NE(sent.err.find("receiver failed: receiving node stopped"), std::string::npos) << sent.err;
}

// A record tap on node a fills its disk (RLIMIT_FSIZE makes the data file full at 2 MiB):
// node a fails, and node b must not take the end of the stream for a clean one.
TEST_F(LinkNodes, AStageThatFailsOnTheSendingNodeFailsTheReceivingNode) {
  const fs::path captures = dir_ / "captures";
  fs::create_directories(captures);
  const fs::path file = write_pipeline("pipeline", 0, "20MB/s",
                                       "      - {type: record, node: a, name: tap, direct: false, directory: " +
                                           captures.string() + "}\n");
  Process receiver(node(file, "b"));
  std::vector<std::string> limited{"/bin/sh", "-c", "ulimit -f 4096 && trap '' XFSZ && exec \"$0\" \"$@\""};
  const std::vector<std::string> a = node(file, "a");
  limited.insert(limited.end(), a.begin(), a.end());
  Process sender(limited);
  const auto sent = sender.wait(60s);
  const auto received = receiver.wait(60s);
  EXPECT_EQ(sent.exit_code, 1) << sent.err;
  EXPECT_NE(sent.err.find("disk full"), std::string::npos) << sent.err;
  EXPECT_EQ(received.exit_code, 1) << received.err;
  // The reason arrives with the stage that failed, named as on node a.
  EXPECT_NE(received.err.find("sender failed: stage tap (record): "), std::string::npos) << received.err;
  EXPECT_NE(received.err.find("disk full"), std::string::npos) << received.err;
  // Every chunk node a sent before failing was written on node b.
  const auto a_report = report("a");
  const auto b_report = report("b");
  EXPECT_GT(b_report["lanes"][0]["stages"][1]["in"]["bytes"].get<std::uint64_t>(), 0U);
  EXPECT_EQ(a_report["lanes"][0]["stages"][2]["out"]["bytes"], b_report["lanes"][0]["stages"][1]["in"]["bytes"]);
}

TEST_F(LinkNodes, PlacementMistakesAreConfigurationErrors) {
  const fs::path file = write_pipeline("pipeline", 1 << 20, "0");
  auto whole = run_process({kSluice, "run", file.string()});
  EXPECT_EQ(whole.exit_code, 2);
  EXPECT_NE(whole.err.find("--node NAME"), std::string::npos) << whole.err;
  auto unknown = run_process({kSluice, "run", file.string(), "--node", "c"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("nodes named in the file: a, b"), std::string::npos) << unknown.err;
  auto same_node = run_process({kSluice, "validate", file.string(), "--set", "lanes.port0.stages.link.node=a"});
  EXPECT_EQ(same_node.exit_code, 2);
  EXPECT_NE(same_node.err.find("transport " + kTransport + " carries a lane between two nodes"), std::string::npos)
      << same_node.err;
  auto local_between = run_process({kSluice, "validate", file.string(), "--set", "lanes.port0.stages.link.transport=local"});
  EXPECT_EQ(local_between.exit_code, 2);
  EXPECT_NE(local_between.err.find("needs transport: tcp, roce or auto"), std::string::npos) << local_between.err;
  auto no_port = run_process({kSluice, "validate", file.string(), "--set", "lanes.port0.stages.link.port=0"});
  EXPECT_EQ(no_port.exit_code, 2);
  EXPECT_NE(no_port.err.find("address: and port:"), std::string::npos) << no_port.err;
  auto listed = run_process({kSluice, "validate", file.string()});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("link (link, to node b)"), std::string::npos) << listed.out;
#if !SLUICE_HAVE_ROCE_LINK
  auto roce = run_process({kSluice, "validate", file.string(), "--set", "lanes.port0.stages.link.transport=roce"});
  EXPECT_EQ(roce.exit_code, 2);
  EXPECT_NE(roce.err.find("-DSLUICE_WITH_RDMA=ON"), std::string::npos) << roce.err;
#endif
}

}  // namespace
}  // namespace sluice
