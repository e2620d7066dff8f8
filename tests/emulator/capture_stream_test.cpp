// A capture sent back out by the emulator: packets never straddle a hole, and capture → emulator →
// udp/tcp stage → record on loopback gives back the same samples, holes, positions and timestamps,
// paced by the recorded timestamps or as fast as possible.
#include "emulator/capture_stream.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "emulator/emulator.hpp"
#include "emulator/signal.hpp"
#include "pipeline/clock.hpp"
#include "recorder/capture_reader.hpp"
#include "stages/socket/tcp_source.hpp"
#include "stages/socket/udp_source.hpp"
#include "tests/stages/record/record_test_support.hpp"

namespace sluice {
namespace {
using test::TempDir;

constexpr double kRate = 1e6;
constexpr std::uint64_t kChunks =
    8;  // of 64 Ki samples: holes of 1000 before chunks 1, 4 and 7, inside 2, 5 (three), 6

// Holes in the gappy recording, and the samples they lose.
std::size_t gappy_holes() {
  std::size_t holes = 0;
  for (const auto& chunk : test::gappy_expected(256 << 10, kChunks, kRate)) holes += chunk.gaps.size();
  return holes;
}
std::uint64_t gappy_lost() {
  std::uint64_t lost = 0;
  for (const auto& chunk : test::gappy_expected(256 << 10, kChunks, kRate)) {
    for (const auto& gap : chunk.gaps) lost += gap.length;
  }
  return lost;
}

// Records the `gappy` test source (holes before and between the samples of its chunks) to `dir`.
recorder::Capture record_gappy(const TempDir& dir) {
  const auto failures = test::run_pipeline(
      "pipeline: {name: orig, chunk: 256KiB, chunks: 8}\n"
      "lanes:\n  - name: port0\n    stages:\n"
      "      - {type: gappy, count: " +
          std::to_string(kChunks) +
          ", sample_rate: 1Msps}\n"
          "      - {type: record, directory: " +
          dir.str("orig") + "}\n",
      test::test_registry());
  EXPECT_TRUE(failures.empty()) << failures.front();
  return recorder::open_capture(dir.str("orig/orig.sigmf-collection"));
}

std::vector<std::byte> lane_bytes(const recorder::CaptureLane& lane) {
  std::vector<std::byte> bytes(lane.total_samples * lane.sample_bytes);
  std::uint64_t at = 0;
  for (const auto& segment : lane.segments) {
    at += recorder::read_segment(lane, segment, 0, segment.sample_count, bytes.data() + at * lane.sample_bytes);
  }
  return bytes;
}

std::vector<recorder::CaptureGap> holes(const recorder::CaptureLane& lane) {
  std::vector<recorder::CaptureGap> result;
  for (const auto& gap : lane.gaps) {
    if (!gap.in_data) result.push_back(gap);
  }
  return result;
}

TEST(CaptureStream, PacketsStayInsideSegmentsAndCoverEverySampleOnce) {
  TempDir dir;
  const recorder::Capture capture = record_gappy(dir);
  ASSERT_EQ(capture.lanes.size(), 1U);
  const recorder::CaptureLane& lane = capture.lanes[0];
  ASSERT_EQ(lane.segments.size(), gappy_holes() + 1);  // every hole splits the recording
  emulator::CaptureStream stream(lane);
  emulator::PacketSpan span;
  std::vector<std::byte> sent;
  std::vector<std::byte> packet(366 * 4);
  std::uint64_t after_gap = 0;
  std::uint64_t expected_first = lane.segments.front().global_index;
  std::size_t segment = 0;
  while (stream.peek(366, span)) {
    if (span.first_sample != expected_first) {  // jumped a hole: exactly to the next segment
      ++segment;
      ASSERT_LT(segment, lane.segments.size());
      EXPECT_EQ(span.first_sample, lane.segments[segment].global_index);
      EXPECT_TRUE(span.after_gap);
    }
    if (span.after_gap) ++after_gap;
    const auto& current = lane.segments[segment];
    EXPECT_LE(span.first_sample + span.count, current.global_index + current.sample_count);
    EXPECT_EQ(span.time.seconds, recorder::time_of_sample(current, span.first_sample, kRate).seconds);
    EXPECT_EQ(span.time.picoseconds, recorder::time_of_sample(current, span.first_sample, kRate).picoseconds);
    stream.take(span, packet.data());
    sent.insert(sent.end(), packet.begin(), packet.begin() + static_cast<std::ptrdiff_t>(span.count * 4));
    expected_first = span.first_sample + span.count;
  }
  EXPECT_EQ(after_gap, gappy_holes());
  EXPECT_EQ(sent, lane_bytes(lane));
}

TEST(CaptureStream, EmulatorRefusesSpectraAndMissingLanes) {
  TempDir dir;
  record_gappy(dir);
  emulator::EmulatorSettings settings;
  settings.capture = dir.str("orig/orig.sigmf-collection");
  settings.streams = {{"127.0.0.1:9", 1}, {"127.0.0.1:9", 2}};
  EXPECT_THROW(
      {
        emulator::Emulator emulator(settings);
        emulator.open();
      },
      std::runtime_error);  // one lane, two streams
  settings.streams = {{"127.0.0.1:9", 1, "port7"}};
  try {
    emulator::Emulator emulator(settings);
    emulator.open();
    ADD_FAILURE() << "a missing lane must be refused";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("no lane 'port7'"), std::string::npos) << error.what();
  }
}

// Waits (at most 20 s) until the source stage has handed on `samples`, then stops the
// pipeline running on `runner`.
void stop_once_received(Pipeline& pipeline, std::thread& runner, std::uint64_t samples) {
  const StageMetrics& metrics = *pipeline.metrics().front();
  const std::uint64_t deadline = monotonic_ns() + 20'000'000'000ULL;
  while (metrics.out.samples.load() < samples && monotonic_ns() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pipeline.request_stop();
  runner.join();
}

// Sends the gappy capture through a socket stage into a second recording; returns it.
recorder::Capture round_trip(const TempDir& dir, const recorder::Capture& original, emulator::Transport transport,
                             emulator::CapturePace pace, double& seconds) {
  const bool udp = transport == emulator::Transport::udp;
  const std::string source = udp ? "{name: source, type: udp, address: 127.0.0.1:0, stream_id: 1, sample_rate: 1Msps}"
                                 : "{name: source, type: tcp, mode: server, address: 127.0.0.1:0, sample_rate: 1Msps}";
  Pipeline pipeline(
      load_pipeline_text("pipeline: {name: back, chunk: 64KiB, chunks: 32}\n"
                         "lanes:\n  - name: port0\n    stages:\n"
                         "      - " +
                             source +
                             "\n"
                             "      - {type: record, directory: " +
                             dir.str("back") + "}\n",
                         "<round-trip>"));
  pipeline.start();
  const Stage* stage = pipeline.definition().lanes[0].stages[0].stage.get();
  const std::uint16_t port =
      udp ? dynamic_cast<const UdpSource&>(*stage).port() : dynamic_cast<const TcpSource&>(*stage).port();
  std::thread runner([&] { pipeline.run(); });

  emulator::EmulatorSettings settings;
  settings.transport = transport;
  settings.capture = original.path;
  settings.capture_pace = pace;
  settings.streams = {{"127.0.0.1:" + std::to_string(port), 1}};
  emulator::EmulatorReport report;
  {
    emulator::Emulator emulator(settings);
    emulator.open();
    report = emulator.run(nullptr, false);
  }  // TCP: closing the connection ends the stage's stream
  seconds = report.seconds;
  EXPECT_EQ(report.samples, original.lanes[0].total_samples);
  stop_once_received(pipeline, runner, original.lanes[0].total_samples);
  EXPECT_TRUE(pipeline.failures().empty()) << pipeline.failures().front().message;
  return recorder::open_capture(dir.str("back/back.sigmf-collection"));
}

void expect_same_stream(const recorder::CaptureLane& original, const recorder::CaptureLane& back) {
  EXPECT_EQ(back.total_samples, original.total_samples);
  EXPECT_EQ(lane_bytes(back), lane_bytes(original));
  // The holes come back where they were, with every sample at its index.
  const auto want = holes(original);
  const auto got = holes(back);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].global_index, want[i].global_index);
    EXPECT_EQ(got[i].length, want[i].length);
  }
  // Every segment starts at the same stream sample and the same recorded time.
  ASSERT_EQ(back.segments.size(), original.segments.size());
  for (std::size_t i = 0; i < original.segments.size(); ++i) {
    EXPECT_EQ(back.segments[i].global_index, original.segments[i].global_index);
    EXPECT_EQ(back.segments[i].time.seconds, original.segments[i].time.seconds);
    EXPECT_EQ(back.segments[i].time.picoseconds, original.segments[i].time.picoseconds);
  }
  EXPECT_DOUBLE_EQ(back.sample_rate, original.sample_rate);
  std::vector<std::string> problems;
  EXPECT_EQ(test::check_every_sample(back, test::ramp_truth(SampleFormat::ci16, kRate), problems), back.total_samples);
  EXPECT_EQ(problems, std::vector<std::string>{});
}

// Records the gappy source, sends it back out, and checks the second recording against the
// first; returns how long the emulator took.
double expect_round_trip(emulator::Transport transport, emulator::CapturePace pace) {
  TempDir dir;
  const recorder::Capture original = record_gappy(dir);
  double seconds = 0;
  const recorder::Capture back = round_trip(dir, original, transport, pace, seconds);
  EXPECT_EQ(back.lanes.size(), 1U);
  if (back.lanes.size() == 1) expect_same_stream(original.lanes[0], back.lanes[0]);
  return seconds;
}

TEST(CaptureStream, UdpRoundTripAtTheRecordedPaceKeepsSamplesHolesAndTimes) {
  const double seconds = expect_round_trip(emulator::Transport::udp, emulator::CapturePace::recorded);
  // Paced by the timestamps: never faster than the span the capture covers, holes included,
  // less the last packet (366 samples) and the quarter-millisecond send-ahead.
  const double span = (static_cast<double>(kChunks * (64 << 10) + gappy_lost() - 366)) / kRate;
  EXPECT_GE(seconds, span - 0.00025);
}

TEST(CaptureStream, TcpRoundTripAsFastAsPossibleKeepsSamplesHolesAndTimes) {
  expect_round_trip(emulator::Transport::tcp, emulator::CapturePace::fast);
}

// The emulator's own signal (tone + seeded noise) sent with dropped packets through the real
// udp stage into the real record stage. Every recorded sample is compared with the sample
// the emulator computes for the stream index the SigMF metadata gives it, and the holes
// are exactly the dropped packets.
struct DropCase {
  std::vector<std::uint64_t> packets;  // dropped by number
  double probability = 0;              // dropped at random (seeded: the same packets every run)
};

void expect_drops_recorded_at_their_time(const DropCase& drops) {
  constexpr std::uint64_t kPackets = 2000;
  constexpr std::uint64_t kStart = 1'700'000'000;
  TempDir dir;
  Pipeline pipeline(
      load_pipeline_text("pipeline: {name: drops, chunk: 64KiB, chunks: 32}\n"
                         "lanes:\n  - name: port0\n    stages:\n"
                         "      - {name: source, type: udp, address: 127.0.0.1:0, stream_id: 1, "
                         "sample_rate: 1Msps, format: ci16}\n"
                         "      - {type: record, directory: " +
                             dir.str() + "}\n",
                         "<drops>"));
  pipeline.start();
  const auto port = dynamic_cast<const UdpSource&>(*pipeline.definition().lanes[0].stages[0].stage).port();
  std::thread runner([&] { pipeline.run(); });

  emulator::EmulatorSettings settings;
  settings.streams = {{"127.0.0.1:" + std::to_string(port), 1}};
  settings.signal.sample_rate = kRate;
  settings.signal.tones = {{100e3, 0.4}};
  settings.signal.noise_snr_db = 30;
  settings.signal.seed = 7;
  settings.payload = 1056;  // 256 ci16 samples a packet: 64 packets fill a 64 KiB chunk exactly
  settings.count = kPackets;
  settings.rate = 20e6;  // paced: the kernel loses nothing, so every hole is a dropped packet
  settings.start_seconds = kStart;
  settings.faults.seed = 7;
  settings.faults.drop.packets = drops.packets;
  settings.faults.drop.probability = drops.probability;
  const std::uint64_t per_packet = settings.samples_per_packet();
  ASSERT_EQ(per_packet, 256U);
  emulator::EmulatorReport report;
  {
    emulator::Emulator emulator(settings);
    emulator.open();
    report = emulator.run(nullptr, false);
  }
  // The packets that arrive, and the holes between them (drops after the last one that
  // arrives are invisible to any receiver).
  std::vector<std::uint64_t> arrived;
  for (std::uint64_t k = 0; k < kPackets; ++k) {
    if (!settings.faults.applies(emulator::FaultKind::drop, 0, k)) arrived.push_back(k);
  }
  ASSERT_FALSE(arrived.empty());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> want_holes;  // stream index (receiver's), length
  const std::uint64_t origin = arrived.front() * per_packet;        // the receiver's sample 0
  for (std::size_t i = 1; i < arrived.size(); ++i) {
    if (arrived[i] != arrived[i - 1] + 1) {
      want_holes.emplace_back((arrived[i - 1] + 1) * per_packet - origin,
                              (arrived[i] - arrived[i - 1] - 1) * per_packet);
    }
  }
  EXPECT_EQ(report.dropped, kPackets - arrived.size());
  const std::uint64_t wanted = arrived.size() * per_packet;
  stop_once_received(pipeline, runner, wanted);
  ASSERT_TRUE(pipeline.failures().empty()) << pipeline.failures().front().message;

  const recorder::Capture capture = recorder::open_capture(dir.str("drops.sigmf-collection"));
  ASSERT_EQ(capture.lanes.size(), 1U);
  const recorder::CaptureLane& lane = capture.lanes[0];
  EXPECT_EQ(lane.total_samples, wanted);
  // Ground truth: the emulator's signal, computed afresh from its seed.
  auto source = std::make_shared<emulator::SignalSource>(settings.signal);
  const test::SampleTruth truth = [source, origin](std::uint64_t first, std::uint64_t count) {
    std::vector<std::byte> bytes(count * 4);
    source->fill(origin + first, bytes);
    return bytes;
  };
  std::vector<std::string> problems;
  EXPECT_EQ(test::check_every_sample(lane, truth, problems), wanted);
  EXPECT_EQ(problems, std::vector<std::string>{});
  // The holes are the dropped packets, no more, no fewer, each starting a segment whose
  // time is that of its first sample.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> got_holes;
  for (const auto& gap : lane.gaps) {
    if (gap.in_data) continue;
    if (!got_holes.empty() && got_holes.back().first + got_holes.back().second == gap.global_index) {
      got_holes.back().second += gap.length;  // one hole reported in two chunks
    } else {
      got_holes.emplace_back(gap.global_index, gap.length);
    }
  }
  EXPECT_EQ(got_holes, want_holes);
  ASSERT_EQ(lane.segments.size(), want_holes.size() + 1);
  for (std::size_t i = 0; i < lane.segments.size(); ++i) {
    const std::uint64_t index = lane.segments[i].global_index;
    EXPECT_EQ(index, i == 0 ? 0 : want_holes[i - 1].first + want_holes[i - 1].second);
    const std::uint64_t emulator_index = origin + index;
    EXPECT_EQ(lane.segments[i].time.seconds, kStart + emulator_index / 1'000'000) << "segment " << i;
    EXPECT_EQ(lane.segments[i].time.picoseconds, emulator_index % 1'000'000 * 1'000'000) << "segment " << i;
  }
}

TEST(CaptureStream, DropsAtListedPacketsAreHolesAtTheirTrueTime) {
  // 100-102: one hole of three packets; 500: alone.
  expect_drops_recorded_at_their_time({{100, 101, 102, 500}, 0});
}

TEST(CaptureStream, RandomDropsAreHolesAtTheirTrueTime) { expect_drops_recorded_at_their_time({{}, 0.01}); }

TEST(CaptureStream, DropsAtChunkEdgesAreHolesAtTheirTrueTime) {
  // 64 packets fill a chunk: 63 is a chunk's last packet, 64 the next one's first, 191/192
  // and 320 the same at later edges (shifted by the holes before them).
  expect_drops_recorded_at_their_time({{63, 64, 191, 192, 320}, 0});
}

TEST(CaptureStream, SeveralHolesInOneChunkAreEachTheirOwnSegment) {
  // Packets 700-763 make about one chunk: five holes inside it.
  expect_drops_recorded_at_their_time({{702, 710, 711, 730, 745, 760}, 0});
}

}  // namespace
}  // namespace sluice
