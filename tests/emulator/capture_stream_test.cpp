// A recorded capture sent back out by the emulator: packets never straddle a hole, and a
// capture → emulator → udp/tcp stage → record round trip on loopback gives back the same
// samples, the same holes at the same stream positions and the same timestamps, paced by the
// recorded timestamps (or as fast as possible).
#include "emulator/capture_stream.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "emulator/emulator.hpp"
#include "pipeline/clock.hpp"
#include "recorder/capture_reader.hpp"
#include "stages/socket/tcp_source.hpp"
#include "stages/socket/udp_source.hpp"
#include "tests/stages/record/record_test_support.hpp"

namespace sluice {
namespace {
using test::TempDir;

constexpr double kRate = 1e6;
constexpr std::uint64_t kChunks = 8;  // of 64 Ki samples: holes of 1000 before chunks 1, 4 and 7

// Records the `gappy` test source (holes the source reported, and holes it filled) to `dir`.
recorder::Capture record_gappy(const TempDir& dir) {
  const auto failures = test::run_pipeline("pipeline: {name: orig, chunk: 256KiB, chunks: 8}\n"
                                           "lanes:\n  - name: port0\n    stages:\n"
                                           "      - {type: gappy, count: " + std::to_string(kChunks) +
                                               ", sample_rate: 1Msps}\n"
                                               "      - {type: record, directory: " + dir.str("orig") + "}\n",
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
    if (!gap.filled) result.push_back(gap);
  }
  return result;
}

TEST(CaptureStream, PacketsStayInsideSegmentsAndCoverEverySampleOnce) {
  TempDir dir;
  const recorder::Capture capture = record_gappy(dir);
  ASSERT_EQ(capture.lanes.size(), 1U);
  const recorder::CaptureLane& lane = capture.lanes[0];
  ASSERT_EQ(lane.segments.size(), 4U);  // three holes split the recording
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
  EXPECT_EQ(after_gap, 3U);
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

// Sends the gappy capture through a socket stage into a second recording; returns it.
recorder::Capture round_trip(const TempDir& dir, const recorder::Capture& original, emulator::Transport transport,
                             emulator::CapturePace pace, double& seconds) {
  const bool udp = transport == emulator::Transport::udp;
  const std::string source = udp ? "{name: source, type: udp, address: 127.0.0.1:0, stream_id: 1, sample_rate: 1Msps}"
                                 : "{name: source, type: tcp, mode: server, address: 127.0.0.1:0, sample_rate: 1Msps}";
  Pipeline pipeline(load_pipeline_text("pipeline: {name: back, chunk: 64KiB, chunks: 32}\n"
                                       "lanes:\n  - name: port0\n    stages:\n"
                                       "      - " + source + "\n"
                                       "      - {type: record, directory: " + dir.str("back") + "}\n",
                                       "<round-trip>"));
  pipeline.start();
  const Stage* stage = pipeline.definition().lanes[0].stages[0].stage.get();
  const std::uint16_t port = udp ? dynamic_cast<const UdpSource&>(*stage).port() : dynamic_cast<const TcpSource&>(*stage).port();
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
  const StageMetrics& metrics = *pipeline.metrics().front();
  const std::uint64_t expected = original.lanes[0].total_samples;
  const std::uint64_t deadline = monotonic_ns() + 10'000'000'000ULL;
  while (metrics.out.samples.load() < expected && monotonic_ns() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pipeline.request_stop();
  runner.join();
  EXPECT_TRUE(pipeline.failures().empty()) << pipeline.failures().front().message;
  return recorder::open_capture(dir.str("back/back.sigmf-collection"));
}

void expect_same_stream(const recorder::CaptureLane& original, const recorder::CaptureLane& back) {
  EXPECT_EQ(back.total_samples, original.total_samples);
  EXPECT_EQ(lane_bytes(back), lane_bytes(original));
  // The holes come back where they were; holes the source filled travel as ordinary samples.
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
  const double span = (static_cast<double>(kChunks * (64 << 10) + 3 * 1000 - 366)) / kRate;
  EXPECT_GE(seconds, span - 0.00025);
}

TEST(CaptureStream, TcpRoundTripAsFastAsPossibleKeepsSamplesHolesAndTimes) {
  expect_round_trip(emulator::Transport::tcp, emulator::CapturePace::fast);
}

}  // namespace
}  // namespace sluice
