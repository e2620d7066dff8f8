// emulator (TCP client and server roles) → tcp stage → capture sink on loopback through the
// real Pipeline, with dropped, repeated, reordered and corrupt frames counted exactly.
#include "stages/socket/tcp_source.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <random>
#include <thread>

#include "capture_sink.hpp"
#include "emulator/emulator.hpp"
#include "wire/socket.hpp"

namespace sluice {
namespace {

using test_support::counter;
using test_support::drops;

struct TcpRun : test_support::SourceCounts {
  std::uint64_t bad_magic = 0;
  std::uint64_t late = 0;
  std::uint64_t outliers = 0;
  std::size_t spp = 0;
  std::vector<std::string> notes;
  test_support::Capture capture;
};

// With `stop_first`, the pipeline is asked to stop as soon as the sender has written its last
// frame, before the sender closes the connection; otherwise the close ends the stream.
void run_tcp(emulator::EmulatorSettings settings, bool stage_is_server, TcpRun& run,
             const std::string& stage_settings = "", bool stop_first = false) {
  test_support::current_capture() = &run.capture;
  settings.transport = emulator::Transport::tcp;
  settings.signal.sample_rate = 100e6;
  settings.start_seconds = 1'700'000'000;
  run.spp = settings.samples_per_packet();
  std::unique_ptr<emulator::Emulator> sender;
  std::string address = "127.0.0.1:0";
  if (!stage_is_server) {
    settings.tcp_role = emulator::TcpRole::server;
    settings.streams = {{"127.0.0.1:0", 1}};
    sender = std::make_unique<emulator::Emulator>(settings);
    sender->open();
    address = "127.0.0.1:" + std::to_string(sender->local_port(0));
  }
  const std::string yaml =
      "pipeline: {chunk: 64KiB, chunks: 64}\n"
      "template:\n"
      "  - {name: source, type: tcp, mode: " +
      std::string(stage_is_server ? "server" : "client") + ", address: " + address +
      ", sample_rate: 100Msps, reconnect: false" + stage_settings +
      "}\n"
      "  - {name: sink, type: capture}\n"
      "lanes: [{name: port0}]\n";
  Pipeline pipeline(load_pipeline_text(yaml, "<test>", {}, test_support::test_registry()));
  pipeline.start();
  std::thread runner([&] { pipeline.run(); });
  if (stage_is_server) {
    auto* stage = dynamic_cast<TcpSource*>(pipeline.definition().lanes[0].stages[0].stage.get());
    ASSERT_NE(stage, nullptr);
    settings.tcp_role = emulator::TcpRole::client;
    settings.streams = {{"127.0.0.1:" + std::to_string(stage->port()), 1}};
    sender = std::make_unique<emulator::Emulator>(settings);
    sender->open();
  }
  sender->run(nullptr, false);
  if (stop_first) {
    pipeline.request_stop();
    runner.join();
  }
  sender.reset();  // closes the connection: the stage ends its stream
  if (!stop_first) runner.join();
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  run.read_counts(metrics);
  run.bad_magic = drops(metrics, "bad_magic");
  run.late = drops(metrics, "late");
  run.outliers = drops(metrics, "outlier");
  run.notes = metrics.notes;
  test_support::current_capture() = nullptr;
}

std::vector<Gap> gaps_of(const TcpRun& run, const emulator::SignalSettings& signal, std::uint64_t total) {
  emulator::SignalSource source(signal);
  std::uint64_t end = 0;
  auto gaps = test_support::walk_stream(
      run.capture, 4,
      [&](std::uint64_t first, std::uint64_t count) {
        std::vector<std::byte> bytes(count * 4);
        source.fill(first, bytes);
        return bytes;
      },
      end);
  EXPECT_EQ(end, total);
  return gaps;
}

TEST(TcpSource, CleanStreamFromAClient) {
  emulator::EmulatorSettings settings;
  settings.count = 2000;
  TcpRun run;
  run_tcp(settings, true, run);
  EXPECT_EQ(run.samples_out, 2000 * run.spp);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_TRUE(gaps_of(run, settings.signal, 2000 * run.spp).empty());
  // Contents: little-endian samples straight from the source.
  emulator::SignalSource source(settings.signal);
  std::uint64_t checked = 0;
  for (const auto& chunk : run.capture.chunks) {
    std::vector<std::byte> expected(chunk.bytes.size());
    source.fill(chunk.first_sample, expected);
    ASSERT_EQ(chunk.bytes, expected);
    checked += chunk.sample_count;
  }
  EXPECT_EQ(checked, 2000 * run.spp);
}

// A stop asked the moment the sender has written its last frame, with much of the stream still
// in the connection's buffers (the sender writes faster than the stage places): the stage reads
// what the connection holds before it ends, so every frame sent before the stop arrives.
TEST(TcpSource, AStopTakesWhatTheConnectionStillHolds) {
  emulator::EmulatorSettings settings;
  settings.count = 20000;
  TcpRun run;
  run_tcp(settings, true, run, ", receive_buffer: 64MiB", true);
  EXPECT_EQ(run.samples_out, 20000 * run.spp);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_TRUE(gaps_of(run, settings.signal, 20000 * run.spp).empty());
}

TEST(TcpSource, FaultsFromAServerAreCountedExactly) {
  emulator::EmulatorSettings settings;
  settings.count = 1000;
  settings.faults.drop.packets = {10};
  settings.faults.duplicate.packets = {20};
  settings.faults.corrupt.packets = {30};
  settings.faults.reorder.packets = {40};  // 41 first: 40 arrives after its hole was recorded
  TcpRun run;
  run_tcp(settings, false, run);
  const std::uint64_t spp = run.spp;
  EXPECT_EQ(run.duplicates, 1U);
  EXPECT_EQ(run.bad_magic, 1U);
  EXPECT_EQ(run.reordered, 1U);
  EXPECT_EQ(run.late, 1U);
  EXPECT_EQ(run.lost_packets, 3U);
  EXPECT_EQ(run.lost_samples, 3 * spp);
  EXPECT_EQ(run.samples_out, 997 * spp);
  const std::vector<Gap> gaps = gaps_of(run, settings.signal, 1000 * spp);
  ASSERT_EQ(gaps.size(), 3U);
  EXPECT_EQ(gaps[0].first_sample, 10 * spp);
  EXPECT_EQ(gaps[1].first_sample, 30 * spp);
  EXPECT_EQ(gaps[2].first_sample, 40 * spp);
  for (const Gap& gap : gaps) EXPECT_EQ(gap.length, spp);
}

// The emulator's bare TCP bytes (framing none) with dropped and reordered packets: nothing
// in the stream can show it, so nothing is counted lost and the stage says so in words; the
// samples are the signal's packets in the order they were sent.
TEST(TcpSource, EmulatorBareBytesWithFaultsArriveAsSentAndLossIsNotSeen) {
  emulator::EmulatorSettings settings;
  settings.count = 1000;
  settings.framing = emulator::Framing::none;
  settings.signal.tones = {{3e6, 0.4}};
  settings.signal.noise_snr_db = 30;  // no two samples alike: a misplaced sample shows
  settings.faults.seed = 9;
  settings.faults.drop.packets = {10, 11};
  settings.faults.drop.probability = 0.01;
  settings.faults.reorder.packets = {40};
  TcpRun run;
  run_tcp(settings, true, run, ", framing: none");
  const std::uint64_t spp = run.spp;
  EXPECT_EQ(spp, 1472U / 4U);
  // The packets in send order: 40 goes after 41.
  std::vector<std::uint64_t> order;
  for (std::uint64_t k = 0; k < settings.count; ++k) {
    if (settings.faults.applies(emulator::FaultKind::drop, 0, k)) continue;
    order.push_back(k);
  }
  const auto at40 = std::find(order.begin(), order.end(), 40U);
  ASSERT_TRUE(at40 != order.end() && at40 + 1 != order.end() && *(at40 + 1) == 41U) << "pick another seed";
  std::iter_swap(at40, at40 + 1);
  emulator::SignalSource source(settings.signal);
  std::vector<std::byte> expected;
  std::vector<std::byte> packet(spp * 4);
  for (const std::uint64_t k : order) {
    source.fill(k * spp, packet);
    expected.insert(expected.end(), packet.begin(), packet.end());
  }
  ASSERT_GT(settings.count - order.size(), 4U);
  std::vector<std::byte> received;
  for (const auto& chunk : run.capture.chunks) {
    EXPECT_TRUE(chunk.gaps.empty());
    received.insert(received.end(), chunk.bytes.begin(), chunk.bytes.end());
  }
  EXPECT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected) << "bare samples altered or out of send order";
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_EQ(run.samples_out, order.size() * spp);
  const bool said = std::any_of(run.notes.begin(), run.notes.end(), [](const std::string& note) {
    return note.find("cannot be detected") != std::string::npos;
  });
  EXPECT_TRUE(said);
  EXPECT_NE(run.capture.stream.description.find("cannot"), std::string::npos) << run.capture.stream.description;
}

constexpr std::uint64_t k2To40 = 1ULL << 40;

TEST(TcpSource, OneFrameWithFirstSampleOffBy2To40IsAnOutlier) {
  emulator::EmulatorSettings settings;
  settings.count = 1000;
  settings.faults.shift.packets = {300};
  settings.faults.shift_by = static_cast<std::int64_t>(k2To40);
  TcpRun run;
  run_tcp(settings, true, run);
  const std::uint64_t spp = run.spp;
  EXPECT_EQ(run.outliers, 1U);
  EXPECT_EQ(run.late, 0U);
  EXPECT_EQ(run.resyncs, 0U);
  EXPECT_EQ(run.lost_samples, spp);
  EXPECT_EQ(run.samples_out, 999 * spp);
  const std::vector<Gap> gaps = gaps_of(run, settings.signal, 1000 * spp);
  ASSERT_EQ(gaps.size(), 1U);
  EXPECT_EQ(gaps[0].first_sample, 300 * spp);
  EXPECT_EQ(gaps[0].length, spp);
}

TEST(TcpSource, SustainedFirstSampleJumpIsOneResynchronisation) {
  emulator::EmulatorSettings settings;
  settings.count = 1000;
  for (std::uint64_t k = 300; k < 1000; ++k) settings.faults.shift.packets.push_back(k);
  settings.faults.shift_by = static_cast<std::int64_t>(k2To40);
  TcpRun run;
  run_tcp(settings, true, run);
  const std::uint64_t spp = run.spp;
  EXPECT_EQ(run.resyncs, 1U);
  EXPECT_EQ(run.resync_samples, k2To40);
  EXPECT_EQ(run.outliers, 0U);
  EXPECT_EQ(run.late, 0U);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_EQ(run.samples_out, 1000 * spp);
  emulator::SignalSource source(settings.signal);
  std::uint64_t end = 0;
  const std::vector<Gap> gaps = test_support::walk_stream(
      run.capture, 4,
      [&](std::uint64_t first, std::uint64_t count) {
        std::vector<std::byte> bytes(count * 4);
        source.fill(first >= 300 * spp + k2To40 ? first - k2To40 : first, bytes);
        return bytes;
      },
      end);
  EXPECT_EQ(end, 1000 * spp + k2To40);
  ASSERT_EQ(gaps.size(), 1U);
  EXPECT_EQ(gaps[0].first_sample, 300 * spp);
  EXPECT_EQ(gaps[0].length, k2To40);
}

// Connects to the stage, sends `garbage` random bytes and closes, as a stray client would.
void send_garbage(std::uint16_t port, std::size_t garbage) {
  wire::UniqueFd stray(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(port));
  ASSERT_EQ(::connect(stray.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  std::mt19937_64 random(3);
  std::vector<std::byte> bytes(garbage);
  for (auto& byte : bytes) byte = static_cast<std::byte>(random());
  ASSERT_EQ(::send(stray.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

struct ServerLane {
  test_support::Capture capture;
  std::unique_ptr<Pipeline> pipeline;
  std::thread runner;
  TcpSource* stage = nullptr;
  explicit ServerLane(const std::string& extra) {
    test_support::current_capture() = &capture;
    const std::string yaml =
        "pipeline: {chunk: 64KiB, chunks: 64}\n"
        "template:\n"
        "  - {name: source, type: tcp, mode: server, address: 127.0.0.1:0, sample_rate: 100Msps" +
        extra + "}\n  - {name: sink, type: capture}\nlanes: [{name: port0}]\n";
    pipeline = std::make_unique<Pipeline>(load_pipeline_text(yaml, "<test>", {}, test_support::test_registry()));
    pipeline->start();
    stage = dynamic_cast<TcpSource*>(pipeline->definition().lanes[0].stages[0].stage.get());
    runner = std::thread([this] { pipeline->run(); });
  }
  ~ServerLane() {
    pipeline->request_stop();
    if (runner.joinable()) runner.join();
    test_support::current_capture() = nullptr;
  }
  ServerLane(const ServerLane&) = delete;
  ServerLane& operator=(const ServerLane&) = delete;
  emulator::EmulatorReport send(emulator::EmulatorSettings settings) {
    settings.transport = emulator::Transport::tcp;
    settings.tcp_role = emulator::TcpRole::client;
    settings.signal.sample_rate = 100e6;
    settings.start_seconds = 1'700'000'000;
    settings.streams = {{"127.0.0.1:" + std::to_string(stage->port()), 1}};
    emulator::Emulator sender(settings);
    sender.open();
    return sender.run(nullptr, false);
  }
  [[nodiscard]] const StageMetrics& metrics() const { return test_support::source_metrics(*pipeline); }
};

TEST(TcpSource, AStrayConnectionDoesNotEndTheRunAndTheSensorGetsIn) {
  ServerLane lane(", reconnect: false");
  send_garbage(lane.stage->port(), 4096);
  ASSERT_TRUE(test_support::wait_for([&] { return counter(lane.metrics(), "disconnects") == 1; }));
  EXPECT_EQ(drops(lane.metrics(), "garbage_connection"), 1U);
  emulator::EmulatorSettings settings;
  settings.count = 2000;
  const std::size_t spp = settings.samples_per_packet();
  lane.send(settings);
  // The sensor delivered frames and closed: with reconnect off, that ends the stream.
  lane.runner.join();
  EXPECT_EQ(counter(lane.metrics(), "connections"), 2U);
  EXPECT_EQ(drops(lane.metrics(), "bad_magic"), 0U);  // the stray's bytes never reached the stream
  EXPECT_EQ(lane.metrics().out.samples.load(), 2000 * spp);
  TcpRun run;
  for (auto& chunk : lane.capture.chunks) run.capture.chunks.push_back(chunk);
  EXPECT_TRUE(gaps_of(run, settings.signal, 2000 * spp).empty());
}

// Every bad item the emulator injects is counted once, under its reason, against the
// emulator's own report: back-to-back damaged frames each count (not one per scan), and a
// duplicate of a damaged frame is one more damaged frame on the wire.
TEST(TcpSource, EveryInjectedBadFrameIsCountedOnceUnderItsReason) {
  ServerLane lane("");
  emulator::EmulatorSettings settings;
  settings.count = 20000;
  settings.faults.drop.packets = {100};
  settings.faults.duplicate.packets = {200, 600};
  settings.faults.reorder.packets = {300};
  settings.faults.corrupt.packets = {400, 401, 402, 600};
  settings.faults.shift.packets = {500};
  const std::size_t spp = settings.samples_per_packet();
  const emulator::EmulatorReport report = lane.send(settings);
  ASSERT_TRUE(test_support::wait_for([&] { return counter(lane.metrics(), "disconnects") == 1; }));
  lane.pipeline->request_stop();
  lane.runner.join();
  std::uint64_t damaged_on_wire = 0;  // from the fault plan: a duplicated damaged frame goes twice
  for (const std::uint64_t k : settings.faults.corrupt.packets) {
    damaged_on_wire += settings.faults.applies(emulator::FaultKind::duplicate, 0, k) ? 2U : 1U;
  }
  ASSERT_EQ(report.corrupted, 4U);
  ASSERT_EQ(damaged_on_wire, 5U);
  const StageMetrics& metrics = lane.metrics();
  EXPECT_EQ(drops(metrics, "bad_magic"), damaged_on_wire);
  EXPECT_EQ(drops(metrics, "bad_header"), 0U);
  EXPECT_EQ(drops(metrics, "duplicate"), report.duplicated - (damaged_on_wire - report.corrupted));
  EXPECT_EQ(drops(metrics, "late"), report.reordered);
  EXPECT_EQ(drops(metrics, "outlier"), report.shifted);
  // Frames with a valid header: all that were sent but the damaged ones.
  EXPECT_EQ(metrics.packets.load(), report.packets - damaged_on_wire);
  // Missing from the stream: the dropped, damaged, late and shifted frames, each a gap; every
  // frame on the wire that is not in the stream is one drop.
  const std::uint64_t missing = report.dropped + report.corrupted + report.reordered + report.shifted;
  EXPECT_EQ(metrics.total_drops(), report.packets - (settings.count - missing));
  EXPECT_EQ(counter(metrics, "lost_samples"), missing * spp);
  EXPECT_EQ(metrics.out.samples.load(), (settings.count - missing) * spp);
}

TEST(TcpSource, IdleTimeoutOutsideItsRangeOrInClientModeIsRefused) {
  for (const std::string settings :
       {"mode: server, idle_timeout: 1ms", "mode: server, idle_timeout: 2h", "mode: client, idle_timeout: 5s"}) {
    const std::string yaml = "template:\n  - {name: source, type: tcp, address: 127.0.0.1:0, " + settings +
                             "}\n  - {name: sink, type: capture}\nlanes: [{name: port0}]\n";
    try {
      (void)load_pipeline_text(yaml, "<test>", {}, test_support::test_registry());
      ADD_FAILURE() << settings << " was accepted";
    } catch (const ConfigException& error) {
      ASSERT_FALSE(error.errors().empty());
      EXPECT_NE(error.errors().to_string().find("idle_timeout"), std::string::npos) << settings;
    }
  }
}

// A client connection to the stage's port that the test holds open.
wire::UniqueFd connect_to(std::uint16_t port) {
  wire::UniqueFd socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  return socket;
}

// True when the stage closed `socket`, as its peer sees it (end of file or reset), within `timeout`.
bool closed_by_peer(int socket, std::chrono::milliseconds timeout) {
  pollfd readable{socket, POLLIN, 0};
  if (::poll(&readable, 1, static_cast<int>(timeout.count())) != 1) return false;
  std::byte byte{};
  const ssize_t got = ::recv(socket, &byte, 1, MSG_DONTWAIT);
  return got == 0 || (got < 0 && errno == ECONNRESET);
}

// The sensor sends at a fixed rate while connection `first` is already open: its first frame
// must be served at once (well inside the idle limit, which a stalled listener would wait
// out), every frame must arrive, and the first connection must be closed by the stage.
void sensor_after(ServerLane& lane, wire::UniqueFd first, std::uint64_t count) {
  ASSERT_TRUE(test_support::wait_for([&] { return counter(lane.metrics(), "connections") == 1; }));
  emulator::EmulatorSettings settings;
  settings.count = count;
  settings.rate = 3e6;  // bytes/s: about 2000 frames a second, paced as a digitizer sends
  const std::size_t spp = settings.samples_per_packet();
  const auto connected = std::chrono::steady_clock::now();
  emulator::EmulatorReport report;
  std::thread sensor([&] { report = lane.send(settings); });
  const bool served =
      test_support::wait_for([&] { return lane.metrics().packets.load() > 0; }, std::chrono::seconds(8));
  const auto first_frame = std::chrono::steady_clock::now() - connected;
  // The stage closes the first connection (the test waits past the idle limit for that).
  EXPECT_TRUE(closed_by_peer(first.get(), std::chrono::seconds(10)));
  first.reset();  // lets a stalled stage go on, so that a failure ends
  sensor.join();
  ASSERT_TRUE(served) << "the sensor was not served while the first connection was open";
  EXPECT_LT(first_frame, std::chrono::seconds(2)) << "the sensor's first frame waited";
  ASSERT_TRUE(test_support::wait_for([&] { return lane.metrics().out.samples.load() >= report.samples; }));
  lane.pipeline->request_stop();
  lane.runner.join();
  EXPECT_EQ(report.samples, count * spp);
  EXPECT_EQ(lane.metrics().out.samples.load(), count * spp);
  EXPECT_EQ(counter(lane.metrics(), "lost_samples"), 0U);
  EXPECT_EQ(counter(lane.metrics(), "connections"), 2U);
  TcpRun run;
  for (auto& chunk : lane.capture.chunks) run.capture.chunks.push_back(chunk);
  EXPECT_TRUE(gaps_of(run, settings.signal, count * spp).empty());
}

TEST(TcpSource, ASilentConnectionOpenedFirstNeitherDelaysTheSensorNorStaysOpen) {
  ServerLane lane(", idle_timeout: 4s");
  sensor_after(lane, connect_to(lane.stage->port()), 4000);
  EXPECT_EQ(drops(lane.metrics(), "idle_connection"), 1U);
  EXPECT_EQ(drops(lane.metrics(), "garbage_connection"), 0U);
}

TEST(TcpSource, AGarbageConnectionOpenedFirstIsClosedAtOnceAndTheSensorServed) {
  ServerLane lane(", idle_timeout: 4s");
  wire::UniqueFd garbage = connect_to(lane.stage->port());
  const std::string text = "GET / HTTP/1.1\r\nHost: sluice\r\n\r\n and more than one frame header of it";
  ASSERT_EQ(::send(garbage.get(), text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
  sensor_after(lane, std::move(garbage), 4000);
  EXPECT_EQ(drops(lane.metrics(), "garbage_connection"), 1U);
  EXPECT_EQ(drops(lane.metrics(), "idle_connection"), 0U);
  EXPECT_EQ(drops(lane.metrics(), "bad_magic"), 0U);
}

// One stream: a second connection that sends a valid frame header while the sensor is served
// waits unread, and the stage closes it after the idle limit; the sensor's stream is whole.
TEST(TcpSource, ASecondSenderIsClosedAfterTheIdleLimitAndTheFirstKeepsItsStream) {
  ServerLane lane(", idle_timeout: 300ms");
  emulator::EmulatorSettings settings;
  settings.count = 4000;
  settings.rate = 3e6;
  const std::size_t spp = settings.samples_per_packet();
  emulator::EmulatorReport report;
  std::thread sensor([&] { report = lane.send(settings); });
  ASSERT_TRUE(test_support::wait_for([&] { return lane.metrics().packets.load() > 0; }));
  wire::UniqueFd second = connect_to(lane.stage->port());
  std::array<std::byte, raw_tcp::kHeaderBytes> header{};
  raw_tcp::FrameHeader frame;
  raw_tcp::encode_header(frame, header);
  ASSERT_EQ(::send(second.get(), header.data(), header.size(), MSG_NOSIGNAL), static_cast<ssize_t>(header.size()));
  EXPECT_TRUE(closed_by_peer(second.get(), std::chrono::seconds(10)));
  sensor.join();
  ASSERT_TRUE(test_support::wait_for([&] { return lane.metrics().out.samples.load() >= report.samples; }));
  lane.pipeline->request_stop();
  lane.runner.join();
  EXPECT_EQ(drops(lane.metrics(), "second_sender"), 1U);
  EXPECT_EQ(lane.metrics().out.samples.load(), 4000 * spp);
  EXPECT_EQ(counter(lane.metrics(), "lost_samples"), 0U);
}

// A silent connection opened while the sensor is served is closed for its idle time, counted,
// whether the sensor is still sending then or has closed.
TEST(TcpSource, ASilentConnectionOpenedWhileTheSensorIsServedIsClosedWhenIdle) {
  ServerLane lane(", idle_timeout: 1s");
  emulator::EmulatorSettings settings;
  settings.count = 4000;  // about 2 s: the silent one goes idle while the sensor sends
  settings.rate = 3e6;
  std::thread sensor([&] { (void)lane.send(settings); });
  ASSERT_TRUE(test_support::wait_for([&] { return lane.metrics().packets.load() > 0; }));
  wire::UniqueFd silent = connect_to(lane.stage->port());
  const auto opened = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed_by_peer(silent.get(), std::chrono::seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - opened, std::chrono::milliseconds(900));
  sensor.join();
  EXPECT_TRUE(test_support::wait_for([&] { return drops(lane.metrics(), "idle_connection") == 1; }));
}

TEST(TcpSource, ByDefaultASensorThatClosesIsWaitedForAndResumesWithTheFramesBetweenAsAGap) {
  // No reconnect setting: raw TCP has no end-of-stream marker, so a close is not an end.
  ServerLane lane("");
  emulator::EmulatorSettings first;
  first.count = 400;
  const std::size_t spp = first.samples_per_packet();
  lane.send(first);
  ASSERT_TRUE(test_support::wait_for([&] { return counter(lane.metrics(), "disconnects") == 1; }));
  // The sensor comes back 100 frames later (its frames 400..499 never reached the stage).
  emulator::EmulatorSettings second;
  second.count = 1000;
  for (std::uint64_t k = 0; k < 500; ++k) second.faults.drop.packets.push_back(k);
  lane.send(second);
  ASSERT_TRUE(test_support::wait_for([&] { return lane.metrics().out.samples.load() >= 900 * spp; }));
  EXPECT_EQ(counter(lane.metrics(), "connections"), 2U);
  lane.pipeline->request_stop();
  lane.runner.join();
  EXPECT_EQ(counter(lane.metrics(), "lost_samples"), 100 * spp);
  EXPECT_EQ(counter(lane.metrics(), "resyncs"), 0U);
  TcpRun run;
  for (auto& chunk : lane.capture.chunks) run.capture.chunks.push_back(chunk);
  const std::vector<Gap> gaps = gaps_of(run, first.signal, 1000 * spp);
  ASSERT_EQ(gaps.size(), 1U);
  EXPECT_EQ(gaps[0].first_sample, 400 * spp);
  EXPECT_EQ(gaps[0].length, 100 * spp);
}

// The window scale a connecting peer sees from the stage: the receive buffer must be set
// on the listening socket, before the handshake, to size it.
int announced_window_scale(std::uint16_t port) {
  wire::UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(::connect(client.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  tcp_info info{};
  socklen_t length = sizeof(info);
  EXPECT_EQ(::getsockopt(client.get(), IPPROTO_TCP, TCP_INFO, &info, &length), 0);
  return info.tcpi_snd_wscale;
}

TEST(TcpSource, ReceiveBufferIsSetBeforeTheHandshakeAndNoted) {
  int small_scale = 0;
  int large_scale = 0;
  {
    ServerLane lane(", receive_buffer: 8KiB");
    small_scale = announced_window_scale(lane.stage->port());
    const auto& notes = lane.metrics().notes;
    ASSERT_FALSE(notes.empty());
    EXPECT_NE(notes.front().find("receive buffer"), std::string::npos);
  }
  {
    ServerLane lane(", receive_buffer: 256MiB");
    large_scale = announced_window_scale(lane.stage->port());
    const std::string& note = lane.metrics().notes.front();
    // Granted in full (SO_RCVBUFFORCE with CAP_NET_ADMIN) or the cap is said.
    const bool granted = note.find("256.00 MiB") != std::string::npos;
    EXPECT_TRUE(granted || note.find("capped by the kernel") != std::string::npos) << note;
    if (!granted) GTEST_SKIP() << "kernel capped the buffer (" << note << "): the window cannot grow";
  }
  EXPECT_GT(large_scale, small_scale);
}

TEST(TcpSource, BareSamplesLikeGnuRadioTcpSinkArriveWhole) {
  ServerLane lane(", framing: none, reconnect: false");
  emulator::SignalSettings signal;
  signal.tones = {{3e6, 0.4}};
  signal.noise_snr_db = 30;  // no two samples alike: a misplaced byte shows
  emulator::SignalSource source(signal);
  const std::uint64_t total = 200'000;
  std::vector<std::byte> samples(total * 4);
  source.fill(0, samples);
  {
    wire::UniqueFd sensor(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(lane.stage->port()));
    ASSERT_EQ(::connect(sensor.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    // Writes of 1001 bytes: samples cut across receives must be put back together.
    for (std::size_t offset = 0; offset < samples.size(); offset += 1001) {
      const std::size_t length = std::min<std::size_t>(1001, samples.size() - offset);
      ASSERT_EQ(::send(sensor.get(), samples.data() + offset, length, MSG_NOSIGNAL), static_cast<ssize_t>(length));
    }
  }
  lane.runner.join();  // the sensor closed: the stream ends
  EXPECT_EQ(lane.metrics().out.samples.load(), total);
  EXPECT_EQ(drops(lane.metrics(), "partial_sample"), 0U);
  TcpRun run;
  for (auto& chunk : lane.capture.chunks) run.capture.chunks.push_back(chunk);
  EXPECT_TRUE(gaps_of(run, signal, total).empty());
  ASSERT_FALSE(lane.metrics().notes.empty());
  EXPECT_NE(lane.metrics().notes.back().find("cannot be detected"), std::string::npos);
}

}  // namespace
}  // namespace sluice
