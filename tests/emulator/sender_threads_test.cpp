// Several sender threads per stream: every packet arrives once and in sequence order, at a
// plain socket (decoded here) and at a udp stage (no gap, no reorder), and the rate still holds.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>

#include "emulator/emulator.hpp"
#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
#include "stages/socket/udp_source.hpp"
#include "tests/stages/stage_test_util.hpp"
#include "tests/support/test_stages.hpp"
#include "wire/socket.hpp"
#include "wire/vita49.hpp"

namespace sluice::emulator {
namespace {

constexpr std::uint64_t kStartSeconds = 1'700'000'000;

// A loopback UDP socket on a free port with a large receive buffer.
wire::UniqueFd bound_receiver(std::uint16_t& port) {
  wire::UniqueFd socket(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(socket.valid());
  const int buffer = 32 << 20;
  if (::setsockopt(socket.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof(buffer)) != 0) {
    ::setsockopt(socket.get(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  }
  timeval timeout{10, 0};  // a datagram that never comes fails the test instead of hanging it
  ::setsockopt(socket.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address = *wire::parse_endpoint("127.0.0.1:0");
  EXPECT_EQ(::bind(socket.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  EXPECT_EQ(::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  port = ntohs(address.sin_port);
  return socket;
}

EmulatorSettings threaded(std::size_t threads, std::uint16_t port, std::uint64_t count, double rate) {
  EmulatorSettings settings;
  settings.streams = {{"127.0.0.1:" + std::to_string(port), 1}};
  settings.threads_per_stream = threads;
  settings.batch = 8;
  settings.count = count;
  settings.rate = rate;
  settings.signal.sample_rate = 100e6;
  settings.signal.tones = {Tone{1.25e6, 0.5}};  // samples that differ from one packet to the next
  settings.start_seconds = kStartSeconds;
  return settings;
}

TEST(SenderThreads, EveryPacketArrivesOnceAndInSequenceAtAPlainSocket) {
  for (const std::size_t threads : {2U, 3U}) {
    std::uint16_t port = 0;
    const wire::UniqueFd receiver = bound_receiver(port);
    constexpr std::uint64_t kPackets = 4000;
    EmulatorSettings settings = threaded(threads, port, kPackets, 100e6);
    settings.gso = false;  // one datagram per packet, as the receiver below reads them
    const std::size_t per_packet = settings.samples_per_packet();
    std::vector<std::uint64_t> firsts;  // each datagram's first sample, from its VITA-49 timestamp
    std::thread reader([&] {
      std::vector<std::byte> datagram(2048);
      while (firsts.size() < kPackets) {
        const ssize_t got = ::recv(receiver.get(), datagram.data(), datagram.size(), 0);
        if (got <= 0) return;
        vita49::Packet packet;
        if (vita49::decode(std::span<const std::byte>(datagram.data(), static_cast<std::size_t>(got)), packet) !=
            vita49::DecodeStatus::ok) {
          return;
        }
        const std::uint64_t picoseconds = packet.fractional_timestamp;
        firsts.push_back(vita49::sample_index(packet.integer_timestamp, picoseconds, 100'000'000) -
                         vita49::sample_index(kStartSeconds, 0, 100'000'000));
      }
    });
    Emulator emulator(settings);
    emulator.open();
    const EmulatorReport report = emulator.run(nullptr, false);
    reader.join();
    EXPECT_EQ(report.packets, kPackets) << threads << " threads";
    ASSERT_EQ(firsts.size(), kPackets) << threads << " threads: datagrams missing";
    for (std::uint64_t k = 0; k < kPackets; ++k) {
      ASSERT_EQ(firsts[k], k * per_packet) << threads << " threads: datagram " << k << " out of sequence";
    }
  }
}

TEST(SenderThreads, AUdpStageSeesTheWholeStreamWithoutAGapOrAReorder) {
  test_support::Capture& capture = test_support::keyed_capture("sender threads");
  const StageRegistry registry = testing::builtin_registry_with({test_support::capture_sink_type()});
  Pipeline pipeline(load_pipeline_text(
      "pipeline: {chunk: 64KiB, chunks: 64}\n"
      "lanes: [{name: a, stages: [{type: udp, address: 127.0.0.1:0, sample_rate: 100Msps, format: ci16, stream_id: 1, "
      "receive_buffer: 32MiB}, {type: capture, key: sender threads}]}]\n",
      "test.yaml", {}, registry));
  pipeline.start();
  auto* stage = dynamic_cast<UdpSource*>(pipeline.definition().lanes[0].stages[0].stage.get());
  ASSERT_NE(stage, nullptr);
  std::thread runner([&] { pipeline.run(); });
  constexpr std::uint64_t kPackets = 20000;
  const EmulatorSettings settings = threaded(3, stage->port(), kPackets, 200e6);
  Emulator emulator(settings);
  emulator.open();
  const EmulatorReport report = emulator.run(nullptr, false);
  const StageMetrics& metrics = *pipeline.metrics().front();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (metrics.packets.load() < kPackets && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pipeline.request_stop();
  runner.join();
  ASSERT_TRUE(pipeline.failures().empty()) << pipeline.failures()[0].message;
  EXPECT_EQ(report.packets, kPackets);
  EXPECT_EQ(metrics.packets.load(), kPackets);
  for (const auto& counter : metrics.counters()) {
    if (counter.name == "lost_samples" || counter.name == "lost_packets" || counter.name == "reordered" ||
        counter.name == "duplicates") {
      EXPECT_EQ(counter.get(), 0U) << counter.name;
    }
  }
  // The samples, in order and whole, against the emulator's own signal generator.
  const std::size_t per_packet = settings.samples_per_packet();
  SignalSource signal(settings.signal);
  std::uint64_t next = 0;
  std::vector<std::byte> expected;
  for (const test_support::CapturedChunk& chunk : capture.chunks) {
    EXPECT_TRUE(chunk.gaps.empty()) << "gap at " << chunk.gaps.front().first_sample;
    ASSERT_EQ(chunk.first_sample, next);
    expected.resize(chunk.bytes.size());
    signal.fill(chunk.first_sample, expected);
    ASSERT_EQ(chunk.bytes, expected) << "samples differ in the chunk at " << chunk.first_sample;
    next += chunk.sample_count;
  }
  EXPECT_EQ(next, kPackets * per_packet);
}

TEST(SenderThreads, ThreeThreadsTogetherNeverSendFasterThanTheRate) {
  std::uint16_t port = 0;
  const wire::UniqueFd receiver = bound_receiver(port);  // bound, so the datagrams have a destination
  constexpr double kRate = 20e6;
  constexpr std::uint64_t kPackets = 13'600;  // about a second at 20 MB/s
  Emulator emulator(threaded(3, port, kPackets, kRate));
  emulator.open();
  const EmulatorReport report = emulator.run(nullptr, false);
  const double rate = static_cast<double>(report.bytes) / report.seconds;
  // The rate is the stream's, shared by its threads: never faster than asked (one batch of lead
  // at most), whereas each thread pacing itself to the whole rate would send up to three times
  // it. How much slower a busy machine makes it is not this test's business.
  EXPECT_EQ(report.packets, kPackets);
  EXPECT_LE(rate, kRate * 1.05) << report.seconds << " s";
}

TEST(SenderThreads, WhereSeveralSendersCannotApplyTheSettingIsAnError) {
  const auto problem = [](const std::string& yaml) {
    try {
      (void)load_emulator_text("emulator: {" + yaml + "}\n");
    } catch (const ConfigException& error) {
      return std::string(error.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(problem("threads_per_stream: 3, streams: [{cpus: [0, 1, 2]}]"), "(accepted)");
  for (const char* refused :
       {"threads_per_stream: 2, transport: tcp", "threads_per_stream: 2, faults: {drop: {packets: [3]}}",
        "threads_per_stream: 2, context: {rf_frequency: 1GHz}"}) {
    const std::string error = problem(refused);
    EXPECT_NE(error.find("threads_per_stream"), std::string::npos) << refused << ": " << error;
    EXPECT_NE(error.find("cannot apply"), std::string::npos) << refused << ": " << error;
  }
  const std::string cores = problem("threads_per_stream: 3, streams: [{cpus: [0, 1]}]");
  EXPECT_NE(cores.find("names 2 cores for 3 sender thread(s)"), std::string::npos) << cores;
  const std::string both = problem("streams: [{cpu: 1, cpus: [0, 1]}]");
  EXPECT_NE(both.find("cpu and cpus both given"), std::string::npos) << both;
}

}  // namespace
}  // namespace sluice::emulator
