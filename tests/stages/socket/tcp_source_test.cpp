// emulator (TCP client and server roles) → tcp stage → capture sink on loopback through the
// real Pipeline, with dropped, repeated, reordered and corrupt frames counted exactly.
#include "stages/socket/tcp_source.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "capture_sink.hpp"
#include "emulator/emulator.hpp"

namespace sluice {
namespace {

using test_support::counter;
using test_support::drops;

struct TcpRun {
  std::uint64_t lost_samples = 0;
  std::uint64_t lost_packets = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t reordered = 0;
  std::uint64_t samples_out = 0;
  std::uint64_t bad_magic = 0;
  std::uint64_t late = 0;
  std::size_t spp = 0;
  test_support::Capture capture;
};

void run_tcp(emulator::EmulatorSettings settings, bool stage_is_server, TcpRun& run) {
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
  const std::string yaml = "pipeline: {chunk: 64KiB, chunks: 64}\n"
                           "template:\n"
                           "  - {name: source, type: tcp, mode: " +
                           std::string(stage_is_server ? "server" : "client") + ", address: " + address +
                           ", sample_rate: 100Msps}\n"
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
  sender.reset();  // closes the connection: the stage ends its stream
  runner.join();
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  run.lost_samples = counter(metrics, "lost_samples");
  run.lost_packets = counter(metrics, "lost_packets");
  run.duplicates = counter(metrics, "duplicates");
  run.reordered = counter(metrics, "reordered");
  run.samples_out = metrics.out.samples.load();
  run.bad_magic = drops(metrics, "bad_magic");
  run.late = drops(metrics, "late");
  test_support::current_capture() = nullptr;
}

std::vector<Gap> gaps_of(const TcpRun& run, const emulator::SignalSettings& signal, std::uint64_t total) {
  emulator::SignalSource source(signal);
  std::uint64_t end = 0;
  auto gaps = test_support::walk_stream(run.capture, 4, [&](std::uint64_t first, std::uint64_t count) {
    std::vector<std::byte> bytes(count * 4);
    source.fill(first, bytes);
    return bytes;
  }, end);
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

}  // namespace
}  // namespace sluice
