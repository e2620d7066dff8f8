// emulator → udp stage → capture sink on loopback, through the real Pipeline: every fault
// kind with exact counts, sample contents and gap records; GRO-coalesced and jumbo
// datagrams; random garbage at a running stage.
#include "stages/socket/udp_source.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "capture_sink.hpp"
#include "emulator/emulator.hpp"
#include "monitor/report.hpp"
#include "pipeline/thread_cores.hpp"
#include "proc_net_udp.hpp"
#include "recorder/capture_reader.hpp"
#include "recorder/capture_tools.hpp"
#include "recorder/sigmf.hpp"
#include "tests/support/core_rival.hpp"
#include "tests/support/proc_tasks.hpp"
#include "wire/samples.hpp"
#include "wire/socket.hpp"
#include "wire/vita49_context.hpp"

namespace sluice {
namespace {

using test_support::counter;
using test_support::drops;

struct UdpRun : test_support::SourceCounts {
  std::string record_directory;  // when set, a record stage (capture_name: udp) sits before the sink
  emulator::EmulatorReport sent;
  test_support::Capture capture;
  std::uint64_t packets = 0;
  std::uint64_t received_messages = 0;  // the kernel's messages (a GRO message holds several datagrams)
  std::uint64_t context_packets = 0;
  std::uint64_t context_changes = 0;
  std::map<std::string, std::uint64_t> drops;
  std::size_t samples_per_packet = 0;
  double busy_fraction = 0;                  // the stage thread's busy time over its run
  std::vector<std::string> progress;         // the progress lines after the run
  std::uint64_t timeline_lost = 0;           // the timeline's last lost_samples for the lane
  std::string plot;                          // the rates plot (rate_plot_svg)
  std::uint64_t header_decodes = 0;          // VITA-49 headers decoded whole (UdpSource::header_decodes)
  std::uint64_t receive_blocking_calls = 0;  // receive_thread: its counters
  std::uint64_t receive_spin_ns = 0;
  std::vector<std::uint64_t> receive_thread_bytes;  // each receive thread's bytes received
  std::uint64_t standby_raises = 0;                 // receive_standby: receive_standby_raises
  std::uint64_t standby_bytes = 0;                  // and receive_standby_bytes
  std::uint64_t queued_peak = 0;                    // socket_queued_peak_bytes
  std::uint64_t buffer_bytes = 0;                   // socket_buffer_bytes
  std::vector<std::string> notes;                   // the stage's notes for the report
  double sample_rate = 100e6;                       // the emulator's and the stage's
};

constexpr std::uint64_t kStartSeconds = 1'700'000'000;

// A pipeline of one lane: a udp stage on a free loopback port at 100 Msps (`settings` added
// to its map) into the capture sink, with `chunks` chunks of 64 KiB.
PipelineDefinition udp_to_capture(const std::string& settings, int chunks) {
  const std::string yaml = "pipeline: {chunk: 64KiB, chunks: " + std::to_string(chunks) + "}\n" +
                           "template:\n"
                           "  - {name: source, type: udp, address: 127.0.0.1:0, sample_rate: 100Msps" +
                           settings + "}\n" +
                           "  - {name: sink, type: capture}\n"
                           "lanes: [{name: port0}]\n";
  return load_pipeline_text(yaml, "<test>", {}, test_support::test_registry());
}

UdpSource* udp_stage(Pipeline& pipeline) {
  return dynamic_cast<UdpSource*>(pipeline.definition().lanes[0].stages[0].stage.get());
}

// Runs `settings` (destination filled in) against a udp stage; `extra` runs after the
// emulator, with the stage's port (garbage senders, other framings). A count of 0: no
// emulator, only `extra`.
void run_udp(emulator::EmulatorSettings settings, UdpRun& run, const std::string& stage_settings = "",
             const std::function<std::uint64_t(std::uint16_t)>& extra = {}) {
  test_support::current_capture() = &run.capture;
  const std::string yaml =
      "pipeline: {chunk: 64KiB, chunks: 64}\n"
      "template:\n"
      "  - {name: source, type: udp, address: 127.0.0.1:0, sample_rate: " +
      std::to_string(static_cast<std::uint64_t>(run.sample_rate)) +
      ", format: " + std::string(to_string(settings.signal.format)) +
      (stage_settings.find("framing") == std::string::npos ? ", stream_id: 1" : "") + stage_settings + "}\n" +
      (run.record_directory.empty()
           ? std::string()
           : "  - {name: rec, type: record, capture_name: udp, directory: " + run.record_directory + "}\n") +
      "  - {name: sink, type: capture}\n"
      "lanes: [{name: port0}]\n";
  Pipeline pipeline(load_pipeline_text(yaml, "<test>", {}, test_support::test_registry()));
  pipeline.start();
  UdpSource* stage = udp_stage(pipeline);
  ASSERT_NE(stage, nullptr);
  std::thread runner([&] { pipeline.run(); });

  settings.streams = {{"127.0.0.1:" + std::to_string(stage->port()), 1}};
  settings.signal.sample_rate = run.sample_rate;
  settings.start_seconds = kStartSeconds;
  if (settings.rate == 0) settings.rate = 200e6;  // paced: loopback buffers never overflow
  if (settings.count != 0) {
    emulator::Emulator emulator(settings);
    emulator.open();
    run.samples_per_packet = settings.samples_per_packet();
    run.sent = emulator.run(nullptr, false);
  }
  std::uint64_t expected_datagrams = run.sent.packets;
  if (extra) expected_datagrams += extra(stage->port());

  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  EXPECT_TRUE(test_support::wait_for([&] { return metrics.packets.load() >= expected_datagrams; }))
      << metrics.packets.load() << " of " << expected_datagrams;
  pipeline.request_stop();
  runner.join();
  run.progress = progress_lines(pipeline);
  if (!pipeline.timeline().empty() && !pipeline.timeline().back().lost_samples.empty()) {
    run.timeline_lost = pipeline.timeline().back().lost_samples[0];
  }
  run.plot = rate_plot_svg(pipeline);
  run.header_decodes = stage->header_decodes();
  // receive_thread: true puts the receive calls on a thread of their own, which must have run.
  const ReceiveThread* receive_thread = stage->receive_thread();
  EXPECT_EQ(receive_thread != nullptr, stage_settings.find("receive_thread: true") != std::string::npos);
  if (receive_thread != nullptr) {
    EXPECT_GT(receive_thread->cpu_ns(), 0U);
  }
  run.packets = metrics.packets.load();
  run.received_messages = counter(metrics, "received_messages");
  run.read_counts(metrics);
  if (receive_thread != nullptr) {
    run.receive_blocking_calls = counter(metrics, "receive_thread_blocking_calls");
    run.receive_spin_ns = counter(metrics, "receive_thread_spin_ns");
  }
  for (std::size_t k = 0; stage->receive_thread(k) != nullptr; ++k)
    run.receive_thread_bytes.push_back(stage->receive_thread(k)->received_bytes());
  run.standby_raises = counter(metrics, "receive_standby_raises");
  run.standby_bytes = counter(metrics, "receive_standby_bytes");
  run.queued_peak = counter(metrics, "socket_queued_peak_bytes");
  run.buffer_bytes = counter(metrics, "socket_buffer_bytes");
  run.notes = metrics.notes;
  run.context_packets = counter(metrics, "context_packets");
  run.context_changes = counter(metrics, "context_changes");
  for (const auto& named : metrics.drops()) run.drops[named.name] = named.get();
  run.busy_fraction = static_cast<double>(metrics.busy_ns.load()) /
                      static_cast<double>(metrics.stopped_ns.load() - metrics.started_ns.load());
  test_support::current_capture() = nullptr;
}

// Walks the capture (ci16) against the signal's samples at their stream indices: its gaps in
// order, and the stream's end in `end`.
std::vector<Gap> walk_signal(const UdpRun& run, const emulator::SignalSettings& signal, std::uint64_t& end) {
  emulator::SignalSource source(signal);
  return test_support::walk_stream(
      run.capture, 4,
      [&](std::uint64_t first, std::uint64_t count) {
        std::vector<std::byte> bytes(count * 4);
        source.fill(first, bytes);
        return bytes;
      },
      end);
}

// The chunks hold exactly the samples not listed as lost, in order, equal to the source's,
// with each hole recorded once.
void expect_stream(const UdpRun& run, const emulator::EmulatorSettings& settings, std::uint64_t total_samples,
                   const std::vector<Gap>& expected_gaps) {
  emulator::SignalSettings signal = settings.signal;
  signal.sample_rate = 100e6;
  emulator::SignalSource source(signal);
  const std::size_t size = bytes_per_sample(signal.format);
  std::uint64_t next = 0;
  const std::vector<Gap> gaps = test_support::walk_stream(
      run.capture, size,
      [&](std::uint64_t first, std::uint64_t count) {
        std::vector<std::byte> bytes(count * size);
        source.fill(first, bytes);
        return bytes;
      },
      next);
  std::uint64_t received = 0;
  for (const auto& chunk : run.capture.chunks) {
    received += chunk.sample_count;
    if (chunk.sample_count == 0) continue;
    ASSERT_TRUE(chunk.timestamp.valid);
    // Timestamp of the chunk's first sample: start second + first_sample / rate.
    const std::uint64_t epoch = kStartSeconds * 100'000'000ULL + chunk.first_sample;
    EXPECT_EQ(chunk.timestamp.seconds, epoch / 100'000'000ULL);
    EXPECT_EQ(chunk.timestamp.picoseconds, (epoch % 100'000'000ULL) * 10'000ULL);
  }
  EXPECT_EQ(next, total_samples);
  EXPECT_EQ(received + run.lost_samples, total_samples);
  ASSERT_EQ(gaps.size(), expected_gaps.size());
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    EXPECT_EQ(gaps[i].first_sample, expected_gaps[i].first_sample) << i;
    EXPECT_EQ(gaps[i].length, expected_gaps[i].length) << i;
  }
}

emulator::EmulatorSettings with_count(std::uint64_t count) {
  emulator::EmulatorSettings settings;
  settings.count = count;
  settings.signal.tones = {{3e6, 0.4}};
  settings.signal.noise_snr_db = 30;
  return settings;
}

// The tests of this suite run three ways: receiving on the stage's thread, on a receive thread
// of its own (receive_thread: true), and on three receive threads reading the one socket, their
// datagrams merged back into stream order (receive_threads: 3), which must all give the same
// counts, samples and gaps.
class UdpSourceBothWays : public ::testing::TestWithParam<int> {
 protected:
  [[nodiscard]] std::string way() const {
    if (GetParam() == 0) return "";
    return GetParam() == 1 ? ", receive_thread: true" : ", receive_thread: true, receive_threads: 3";
  }
};
INSTANTIATE_TEST_SUITE_P(Receive, UdpSourceBothWays, ::testing::Values(0, 1, 3),
                         [](const ::testing::TestParamInfo<int>& param) {
                           if (param.param == 0) return std::string("stage_thread");
                           return param.param == 1 ? std::string("receive_thread")
                                                   : std::string("three_receive_threads");
                         });

TEST(UdpSource, CleanStreamArrivesWholeAndInOrder) {
  auto settings = with_count(3000);
  UdpRun run;
  run_udp(settings, run);
  const std::uint64_t total = 3000 * run.samples_per_packet;
  EXPECT_EQ(run.packets, 3000U);
  EXPECT_EQ(run.lost_packets, 0U);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_EQ(run.duplicates, 0U);
  EXPECT_EQ(run.reordered, 0U);
  EXPECT_EQ(run.samples_out, total);
  expect_stream(run, settings, total, {});
  // Equal packets: the first header is decoded whole, every later one matched against it.
  EXPECT_EQ(run.header_decodes, 1U);
}

// At LTE's rates (7.68, 30.72, 61.44, 122.88 Msps) a sample is not a whole number of
// picoseconds, so consecutive timestamps differ by one of two amounts: both are the packet's
// length, and a dropped packet is still a gap of exactly its samples.
TEST(UdpSource, TimestampsAtRatesWithoutWholePicosecondsPlacePacketsExactly) {
  for (const double rate : {30.72e6, 61.44e6, 7.68e6, 122.88e6}) {
    auto settings = with_count(1500);
    settings.faults.drop.packets = {10, 700};
    UdpRun run;
    run.sample_rate = rate;
    run_udp(settings, run);
    const std::uint64_t spp = run.samples_per_packet;
    EXPECT_EQ(run.packets, 1498U) << rate;
    EXPECT_EQ(run.lost_packets, 2U) << rate;
    EXPECT_EQ(run.lost_samples, 2 * spp) << rate;
    EXPECT_EQ(run.duplicates, 0U) << rate;
    EXPECT_EQ(run.reordered, 0U) << rate;
    EXPECT_EQ(run.samples_out, 1498 * spp) << rate;
    EXPECT_EQ(run.header_decodes, 1U) << rate;
    // Each chunk starts at the stream index its samples' timestamp gives.
    for (const auto& chunk : run.capture.chunks) {
      if (chunk.sample_count == 0) continue;
      const auto whole = static_cast<std::uint64_t>(rate);
      std::uint64_t seconds = 0;
      std::uint64_t picoseconds = 0;
      vita49::timestamp_of(kStartSeconds * whole + chunk.first_sample, whole, seconds, picoseconds);
      EXPECT_EQ(chunk.timestamp.seconds, seconds) << rate;
      EXPECT_EQ(chunk.timestamp.picoseconds, picoseconds) << rate;
    }
  }
}

// Between equal packets, every fault the emulator makes is still counted exactly, and only the
// packets whose header words differ (the corrupt ones) are decoded whole again.
TEST_P(UdpSourceBothWays, FaultsAmongEqualPacketsAreExactWithOneWholeDecodePerOddHeader) {
  auto settings = with_count(1200);
  settings.faults.drop.packets = {10, 500, 501};
  settings.faults.duplicate.packets = {100, 900};
  settings.faults.reorder.packets = {300, 800};
  settings.faults.corrupt.packets = {700, 701, 702};  // packet type, size field, stream ID
  UdpRun run;
  run_udp(settings, run, way());
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.sent.dropped, 3U);
  EXPECT_EQ(run.sent.duplicated, 2U);
  EXPECT_EQ(run.sent.corrupted, 3U);
  EXPECT_EQ(run.packets, run.sent.packets);
  EXPECT_EQ(run.duplicates, run.sent.duplicated);
  EXPECT_EQ(run.reordered, run.sent.reordered);
  EXPECT_EQ(run.lost_packets, 6U);
  EXPECT_EQ(run.lost_samples, 6 * spp);
  expect_stream(run, settings, 1200 * spp, {{10 * spp, spp}, {500 * spp, 2 * spp}, {700 * spp, 3 * spp}});
  EXPECT_EQ(run.header_decodes, 1U + run.sent.corrupted);
}

// A started one-lane pipeline (udp → capture) whose udp stage has 3000 packets (at 200 MB/s)
// waiting in its socket, as many as it holds, sent before anything read it.
struct QueuedBeforeReading {
  explicit QueuedBeforeReading(const std::string& stage_settings, std::uint64_t count = 3000) {
    settings.count = count;
    test_support::current_capture() = &run.capture;
    pipeline.emplace(udp_to_capture(", stream_id: 1" + stage_settings, 64));
    pipeline->start();
    settings.streams = {{"127.0.0.1:" + std::to_string(udp_stage(*pipeline)->port()), 1}};
    settings.signal.sample_rate = 100e6;
    settings.start_seconds = kStartSeconds;
    settings.rate = 200e6;
    emulator::Emulator emulator(settings);
    emulator.open();
    sent = emulator.run(nullptr, false);
  }
  QueuedBeforeReading(const QueuedBeforeReading&) = delete;
  QueuedBeforeReading& operator=(const QueuedBeforeReading&) = delete;
  ~QueuedBeforeReading() { test_support::current_capture() = nullptr; }
  UdpRun run;
  emulator::EmulatorSettings settings = with_count(3000);
  std::optional<Pipeline> pipeline;
  emulator::EmulatorReport sent;
};

// A stop finds the whole stream still in the socket (sent before the stage ever read, as by a
// sender that finished while the source lagged behind): the stage takes all of it before it
// ends, so nothing the sender sent before the stop is lost.
TEST_P(UdpSourceBothWays, AStopTakesWhatTheSocketStillHolds) {
  QueuedBeforeReading queued(", receive_buffer: 64MiB" + way());
  Pipeline& pipeline = *queued.pipeline;
  pipeline.request_stop();
  pipeline.run();
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  queued.run.read_counts(metrics);
  EXPECT_EQ(metrics.packets.load(), queued.sent.packets);
  EXPECT_EQ(queued.run.lost_samples, 0U);
  // Every datagram arrived: no lost end is counted or named.
  EXPECT_EQ(counter(metrics, "dropped_after_last_packet"), 0U);
  EXPECT_EQ(drops(metrics, "socket_overflow"), 0U);
  EXPECT_TRUE(std::none_of(metrics.notes.begin(), metrics.notes.end(), [](const std::string& text) {
    return text.find("after the last one") != std::string::npos;
  }));
  expect_stream(queued.run, queued.settings, queued.sent.packets * queued.settings.samples_per_packet(), {});
}

std::string backlog_note(const std::vector<std::string>& notes) {
  const auto found = std::find_if(notes.begin(), notes.end(), [](const std::string& note) {
    return note.find("socket's queue reached") != std::string::npos;
  });
  return found == notes.end() ? std::string() : *found;
}

bool has_backlog_note(const std::vector<std::string>& notes) { return !backlog_note(notes).empty(); }

// A stage that keeps up with a paced sender finds its socket's queue short of half its limit at
// every sample, and its report has no backlog note.
TEST_P(UdpSourceBothWays, AReaderThatKeepsUpKeepsItsSocketsQueueShallow) {
  UdpRun run;
  run_udp(with_count(2000), run, ", receive_buffer: 4MiB" + way());
  EXPECT_EQ(run.lost_samples, 0U);
  // The kernel doubles what SO_RCVBUF asks for and drops past that: the limit the queue is weighed against.
  EXPECT_GE(run.buffer_bytes, 4U << 20) << "the socket was never sampled";
  EXPECT_LT(run.queued_peak, run.buffer_bytes / 2);
  EXPECT_FALSE(has_backlog_note(run.notes));
}

// A stage that reads only after its socket filled (a 2 MiB limit, more sent than that) measures
// the queue at its limit, and its report names it.
TEST_P(UdpSourceBothWays, ASocketQueueFilledWhileTheStageWasBehindIsMeasuredAndNamed) {
  QueuedBeforeReading queued(", receive_buffer: 1MiB" + way());
  Pipeline& pipeline = *queued.pipeline;
  std::thread runner([&] { pipeline.run(); });
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  // Read, and the queue sampled again once empty.
  EXPECT_TRUE(test_support::wait_for([&] {
    return metrics.packets.load() > 0 && counter(metrics, "socket_queued_peak_bytes") > 0 &&
           counter(metrics, "socket_queued_bytes") == 0;
  }));
  pipeline.request_stop();
  runner.join();
  const std::uint64_t peak = counter(metrics, "socket_queued_peak_bytes");
  const std::uint64_t limit = counter(metrics, "socket_buffer_bytes");
  EXPECT_GT(peak, limit / 2);
  EXPECT_LE(peak, limit + (256U << 10)) << "the kernel goes past its limit by one datagram's buffer at most";
  EXPECT_LT(metrics.packets.load(), queued.sent.packets) << "the socket was full: the kernel dropped the rest";
  EXPECT_TRUE(has_backlog_note(metrics.notes));
  // The advice fits the stage: a receive thread where it has none, and where it has them, what
  // they did.
  const std::string note = backlog_note(metrics.notes);
  if (GetParam() == 0) {
    EXPECT_NE(note.find("a receive thread on a core of its own"), std::string::npos) << note;
  } else {
    EXPECT_EQ(note.find("a receive thread on a core of its own"), std::string::npos) << note;
    EXPECT_NE(note.find(GetParam() == 1 ? "): its receive thread" : "): its receive threads"), std::string::npos)
        << note;
    EXPECT_GT(counter(metrics, "receive_thread_cpu_ns"), 0U) << "the receive threads' CPU time is counted";
    EXPECT_GE(counter(metrics, "receive_thread_cpu_ns"), counter(metrics, "receive_thread_spin_ns"));
  }
  // The report carries the receive threads' work a datagram, where there are receive threads.
  const nlohmann::json stage = report_json(pipeline, 0)["lanes"][0]["stages"][0];
  if (GetParam() == 0) {
    EXPECT_TRUE(stage["receive_ns_per_datagram"].is_null()) << stage.dump();
  } else {
    const double expected =
        static_cast<double>(counter(metrics, "receive_thread_cpu_ns") - counter(metrics, "receive_thread_spin_ns")) /
        static_cast<double>(metrics.packets.load());
    EXPECT_GT(expected, 0.0);
    EXPECT_DOUBLE_EQ(stage["receive_ns_per_datagram"].get<double>(), expected) << stage.dump();
  }
}

// A stream that trickles in leaves the stage waiting on its socket most of the time, and that
// time is the stage's wait, not its busy time (a blocking receive used to count as busy, so a
// receiver that kept up with ease read as saturated).
TEST_P(UdpSourceBothWays, TimeSpentWaitingForPacketsIsNotBusyTime) {
  auto settings = with_count(200);
  settings.batch = 1;  // one datagram at a time, every 2 ms: the receive always has one to wait for
  settings.rate = static_cast<double>(settings.samples_per_packet() * 4) / 0.002;
  UdpRun run;
  run_udp(settings, run, way());
  EXPECT_EQ(run.packets, 200U);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_LT(run.busy_fraction, 0.5);
}

TEST_P(UdpSourceBothWays, GsoCoalescedDatagramsAreSplitBackIntoPackets) {
  auto settings = with_count(4000);
  settings.gso = true;
  settings.batch = 64;
  UdpRun run;
  run_udp(settings, run, way());
  // Skip only where the kernel refuses UDP_SEGMENT; where it accepts it, an emulator that did
  // not use GSO is a failure, not a skip (the check would otherwise pass with GSO removed).
  if (!run.sent.gso_used) {
    const wire::UniqueFd probe(::socket(AF_INET, SOCK_DGRAM, 0));
    const int segment = 1400;
    if (::setsockopt(probe.get(), SOL_UDP, UDP_SEGMENT, &segment, sizeof(segment)) != 0)
      GTEST_SKIP() << "kernel without UDP GSO";
    FAIL() << "the kernel accepts UDP_SEGMENT but the emulator did not use GSO";
  }
  EXPECT_EQ(run.packets, 4000U);
  EXPECT_EQ(run.lost_samples, 0U);
  expect_stream(run, settings, 4000 * run.samples_per_packet, {});
  EXPECT_EQ(run.header_decodes, 1U);  // the segments of a coalesced datagram too
  // The kernel handed them over merged: fewer messages than datagrams, each of them counted.
  EXPECT_GT(run.received_messages, 0U);
  EXPECT_LT(run.received_messages, run.packets);
}

// Without GRO every datagram is a message of its own.
TEST_P(UdpSourceBothWays, WithoutGroEachDatagramIsAMessage) {
  auto settings = with_count(2000);
  settings.gso = true;
  UdpRun run;
  run_udp(settings, run, ", gro: false" + way());
  EXPECT_EQ(run.packets, 2000U);
  EXPECT_EQ(run.received_messages, run.packets);
}

TEST_P(UdpSourceBothWays, JumboCf32Datagrams) {
  auto settings = with_count(500);
  settings.payload = 8972;
  settings.signal.format = SampleFormat::cf32;
  UdpRun run;
  run_udp(settings, run, ", max_datagram: 9000" + way());
  EXPECT_EQ(run.samples_per_packet, 1117U);
  EXPECT_EQ(run.lost_samples, 0U);
  expect_stream(run, settings, 500 * run.samples_per_packet, {});
}

TEST(UdpSource, DroppedPacketsAreExactGaps) {
  auto settings = with_count(1000);
  settings.faults.drop.packets = {10, 500, 501, 999};
  UdpRun run;
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.sent.dropped, 4U);
  EXPECT_EQ(run.lost_packets, 3U);  // packet 999 was the last: nothing after it shows its loss
  EXPECT_EQ(run.lost_samples, 3 * spp);
  EXPECT_EQ(run.duplicates, 0U);
  expect_stream(run, settings, 999 * spp, {{10 * spp, spp}, {500 * spp, 2 * spp}});
  // The live progress line says what was lost, not only what arrived.
  ASSERT_EQ(run.progress.size(), 1U);
  ASSERT_LT(3 * spp, 10'000U);  // printed whole below 10 000
  EXPECT_NE(run.progress[0].find("lost " + std::to_string(3 * spp) + " "), std::string::npos) << run.progress[0];
  // So do the report's timeline and the rates plot, which marks where the samples were lost.
  EXPECT_EQ(run.timeline_lost, 3 * spp);
  EXPECT_NE(run.plot.find("samples lost by"), std::string::npos);
  EXPECT_NE(run.plot.find(">samples lost</text>"), std::string::npos);
}

TEST(UdpSource, ALosslessRunMarksNoLossOnTheRatesPlot) {
  UdpRun run;
  run_udp(with_count(200), run);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_EQ(run.timeline_lost, 0U);
  EXPECT_EQ(run.plot.find("samples lost"), std::string::npos);
  EXPECT_NE(run.progress.at(0).find("lost 0 "), std::string::npos) << run.progress.at(0);
}

TEST_P(UdpSourceBothWays, DropsByProbabilityAreCountedExactly) {
  auto settings = with_count(2000);
  settings.faults.drop.probability = 0.02;
  settings.faults.seed = 5;
  UdpRun run;
  run_udp(settings, run, way());
  const std::uint64_t spp = run.samples_per_packet;
  std::vector<Gap> gaps;
  std::uint64_t last_sent = 0;
  for (std::uint64_t k = 0; k < 2000; ++k) {
    if (!settings.faults.applies(emulator::FaultKind::drop, 0, k)) {
      last_sent = k;
      continue;
    }
    if (!gaps.empty() && gaps.back().first_sample + gaps.back().length == k * spp) {
      gaps.back().length += spp;
    } else {
      gaps.push_back({k * spp, spp});
    }
  }
  while (!gaps.empty() && gaps.back().first_sample >= last_sent * spp) gaps.pop_back();
  ASSERT_GT(gaps.size(), 10U);
  ASSERT_EQ(gaps.front().first_sample > 0, true);
  std::uint64_t lost = 0;
  for (const Gap& gap : gaps) lost += gap.length;
  EXPECT_EQ(run.lost_samples, lost);
  EXPECT_EQ(run.lost_packets, lost / spp);
  expect_stream(run, settings, (last_sent + 1) * spp, gaps);
}

TEST_P(UdpSourceBothWays, MoreGapsThanOneChunkHoldsAreAllRecorded) {
  auto settings = with_count(401);
  for (std::uint64_t k = 1; k < 400; k += 2) settings.faults.drop.packets.push_back(k);  // 200 holes
  UdpRun run;
  run_udp(settings, run, ", chunk: 1MiB, reorder_window: 1" + way());
  const std::uint64_t spp = run.samples_per_packet;
  std::vector<Gap> gaps;
  for (std::uint64_t k = 1; k < 400; k += 2) gaps.push_back({k * spp, spp});
  EXPECT_EQ(run.lost_packets, 200U);
  EXPECT_EQ(run.lost_samples, 200 * spp);
  EXPECT_GT(run.capture.chunks.size(), 200 / Chunk::kMaxGaps);  // the gap table filled up: more chunks
  expect_stream(run, settings, 401 * spp, gaps);
}

TEST(UdpSource, DuplicatesAreCountedAndDropped) {
  auto settings = with_count(1000);
  settings.faults.duplicate.packets = {5, 600};
  UdpRun run;
  run_udp(settings, run);
  EXPECT_EQ(run.packets, 1002U);
  EXPECT_EQ(run.duplicates, 2U);
  EXPECT_EQ(run.drops["duplicate"], 2U);
  EXPECT_EQ(run.lost_samples, 0U);
  expect_stream(run, settings, 1000 * run.samples_per_packet, {});
}

TEST(UdpSource, ReorderedPacketsArePutBackInOrder) {
  auto settings = with_count(1000);
  settings.faults.reorder.packets = {7, 300, 301};
  UdpRun run;
  run_udp(settings, run);
  EXPECT_EQ(run.sent.reordered, 2U);  // 301 travels with 300 already held
  EXPECT_EQ(run.reordered, 2U);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_EQ(run.lost_packets, 0U);
  expect_stream(run, settings, 1000 * run.samples_per_packet, {});
}

TEST(UdpSource, TruncatedPacketsAreDroppedAndTheirSamplesCountedLost) {
  auto settings = with_count(800);
  settings.faults.truncate.packets = {100, 400};
  UdpRun run;
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.drops["truncated"], 2U);
  EXPECT_EQ(run.lost_packets, 2U);
  EXPECT_EQ(run.lost_samples, 2 * spp);
  expect_stream(run, settings, 800 * spp, {{100 * spp, spp}, {400 * spp, spp}});
}

TEST(UdpSource, CorruptHeadersAreDroppedByReason) {
  auto settings = with_count(800);
  settings.faults.corrupt.packets = {30, 31, 32};  // k % 3: packet type, size field, stream ID
  UdpRun run;
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.drops["unknown_type"], 1U);
  EXPECT_EQ(run.drops["bad_size_field"], 1U);
  EXPECT_EQ(run.drops["wrong_stream_id"], 1U);
  EXPECT_EQ(run.lost_packets, 3U);
  EXPECT_EQ(run.lost_samples, 3 * spp);
  expect_stream(run, settings, 800 * spp, {{30 * spp, 3 * spp}});
}

TEST_P(UdpSourceBothWays, RandomGarbageNeverCorruptsTheStream) {
  auto settings = with_count(1500);
  UdpRun run;
  const std::uint64_t garbage = 3000;
  run_udp(settings, run, way(), [&](std::uint16_t port) -> std::uint64_t {
    wire::UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(port));
    std::mt19937_64 random(17);
    std::vector<std::byte> datagram(9000);
    for (std::uint64_t i = 0; i < garbage; ++i) {
      const std::size_t length = 1 + random() % 2000;
      for (std::size_t j = 0; j < length; ++j) datagram[j] = static_cast<std::byte>(random());
      // Every few, a plausible header: IF Data with a size field matching or not.
      if (i % 4 == 0 && length >= 8) {
        datagram[0] = std::byte{0x1C};
        datagram[2] = static_cast<std::byte>((length / 4) >> 8);
        datagram[3] = static_cast<std::byte>(length / 4);
      }
      EXPECT_EQ(::sendto(sender.get(), datagram.data(), length, 0, reinterpret_cast<const sockaddr*>(&address),
                         sizeof(address)),
                static_cast<ssize_t>(length));
      if (i % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return garbage;
  });
  std::uint64_t dropped = 0;
  for (const auto& [reason, count] : run.drops) dropped += count;
  EXPECT_EQ(dropped, garbage);
  EXPECT_EQ(run.lost_samples, 0U);
  expect_stream(run, settings, 1500 * run.samples_per_packet, {});
}

// Packets [from, to) claim a position `by` samples away, as a sender whose clock jumped would.
emulator::EmulatorSettings with_shift(std::uint64_t count, std::uint64_t from, std::uint64_t to, std::int64_t by) {
  auto settings = with_count(count);
  for (std::uint64_t k = from; k < to; ++k) settings.faults.shift.packets.push_back(k);
  settings.faults.shift_by = by;
  return settings;
}

constexpr std::int64_t kHourAt100Msps = 3600LL * 100'000'000LL;

TEST(UdpSource, OneTimestampAnHourAheadDoesNotMoveTheStream) {
  const auto settings = with_shift(1000, 500, 501, kHourAt100Msps);
  UdpRun run;
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.sent.shifted, 1U);
  EXPECT_EQ(run.drops["outlier"], 1U);
  EXPECT_EQ(run.resyncs, 0U);
  // The outlier's samples are missing at its true place, and nothing else moved.
  EXPECT_EQ(run.lost_packets, 1U);
  EXPECT_EQ(run.lost_samples, spp);
  expect_stream(run, settings, 1000 * spp, {{500 * spp, spp}});
}

TEST(UdpSource, FewerAgreeingOutliersThanResyncAfterAreOutliers) {
  // Three packets an hour back, in a row: resync_after is 4, so they are outliers too.
  const auto settings = with_shift(1000, 200, 203, -kHourAt100Msps);
  UdpRun run;
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.drops["outlier"], 3U);
  EXPECT_EQ(run.resyncs, 0U);
  expect_stream(run, settings, 1000 * spp, {{200 * spp, 3 * spp}});
}

// Walks the capture of a stream whose sender jumped by `by` samples at stream index `at`:
// samples after it are the emulator's from `at` on, placed `by` later.
std::vector<Gap> walk_jumped(const UdpRun& run, const emulator::EmulatorSettings& settings, std::uint64_t at,
                             std::uint64_t by, std::uint64_t& end) {
  emulator::SignalSettings signal = settings.signal;
  signal.sample_rate = 100e6;
  emulator::SignalSource source(signal);
  return test_support::walk_stream(
      run.capture, 4,
      [&](std::uint64_t first, std::uint64_t count) {
        std::vector<std::byte> bytes(count * 4);
        source.fill(first >= at + by ? first - by : first, bytes);
        return bytes;
      },
      end);
}

TEST_P(UdpSourceBothWays, SustainedJumpAheadIsOneResynchronisationWithAGapAtItsPlace) {
  const std::uint64_t jump = static_cast<std::uint64_t>(kHourAt100Msps);
  const auto settings = with_shift(1000, 500, 1000, kHourAt100Msps);
  UdpRun run;
  run_udp(settings, run, way());
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.resyncs, 1U);
  EXPECT_EQ(run.resync_samples, jump);
  EXPECT_EQ(run.drops["outlier"], 0U);
  EXPECT_EQ(run.drops["socket_overflow"], 0U) << "a jump with no datagram dropped by the kernel";
  // The packets that confirmed the jump are kept: nothing is lost.
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_EQ(run.samples_out, 1000 * spp);
  std::uint64_t end = 0;
  const std::vector<Gap> gaps = walk_jumped(run, settings, 500 * spp, jump, end);
  EXPECT_EQ(end, 1000 * spp + jump);
  ASSERT_EQ(gaps.size(), 1U);
  EXPECT_EQ(gaps[0].first_sample, 500 * spp);
  EXPECT_EQ(gaps[0].length, jump);
  // Chunk times follow the sender's clock on both sides of the jump.
  for (const auto& chunk : run.capture.chunks) {
    if (chunk.sample_count == 0) continue;
    const std::uint64_t epoch = kStartSeconds * 100'000'000ULL + chunk.first_sample;
    EXPECT_EQ(chunk.timestamp.seconds, epoch / 100'000'000ULL);
  }
}

// The emulator's VITA-49 stream (stream ID 1, its signal, time from kStartSeconds at 100 Msps)
// sent packet by packet, so that a test decides when each part of it goes out.
class VitaStream {
 public:
  VitaStream(const emulator::EmulatorSettings& settings, std::uint16_t port)
      : settings_(settings),
        samples_(settings.samples_per_packet()),
        encoder_(emulator::Framing::vita49, 1, settings.signal.format, samples_, false),
        source_(settings.signal),
        packet_bytes_(encoder_.packet_bytes(samples_)),
        scratch_(samples_ * bytes_per_sample(settings.signal.format)),
        to_(*wire::parse_endpoint("127.0.0.1:" + std::to_string(port))) {}
  // Packets [from, to), `segments` per send (above 1: one UDP GSO send, which the kernel hands
  // a GRO socket as one coalesced datagram); a 1 ms pause after every `pause_every` sends.
  void send(std::uint64_t from, std::uint64_t to, std::uint64_t segments, std::uint64_t pause_every) {
    std::vector<std::byte> datagrams(segments * packet_bytes_);
    std::uint64_t sends = 0;
    for (std::uint64_t first = from; first < to; first += segments) {
      const std::uint64_t count = std::min(segments, to - first);
      for (std::uint64_t k = first; k < first + count; ++k) encode(k, datagrams.data() + (k - first) * packet_bytes_);
      send_segments(datagrams.data(), count);
      if (++sends % pause_every == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  [[nodiscard]] std::size_t samples_per_packet() const { return samples_; }

 private:
  void encode(std::uint64_t k, std::byte* out) {
    emulator::PacketFields fields;
    fields.k = k;
    fields.first_sample = k * samples_;
    fields.samples = samples_;
    vita49::timestamp_of(fields.first_sample, 100'000'000, fields.seconds, fields.picoseconds);
    fields.seconds += kStartSeconds;
    ASSERT_EQ(encoder_.write(fields, out), packet_bytes_);
    source_.fill(fields.first_sample, scratch_);
    wire::copy_swapped(settings_.signal.format, scratch_.data(), out + encoder_.prefix_bytes(), scratch_.size());
  }
  void send_segments(std::byte* data, std::uint64_t count) {
    iovec iov{data, count * packet_bytes_};
    msghdr header{};
    header.msg_name = &to_;
    header.msg_namelen = sizeof(to_);
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    alignas(cmsghdr) std::array<std::byte, CMSG_SPACE(sizeof(std::uint16_t))> control{};
    if (count > 1) {
      header.msg_control = control.data();
      header.msg_controllen = control.size();
      cmsghdr* segment = CMSG_FIRSTHDR(&header);
      segment->cmsg_level = SOL_UDP;
      segment->cmsg_type = UDP_SEGMENT;
      segment->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
      const auto size = static_cast<std::uint16_t>(packet_bytes_);
      std::memcpy(CMSG_DATA(segment), &size, sizeof(size));
    }
    ASSERT_EQ(::sendmsg(socket_.get(), &header, 0), static_cast<ssize_t>(iov.iov_len)) << std::strerror(errno);
  }

  emulator::EmulatorSettings settings_;
  std::size_t samples_;
  emulator::FrameEncoder encoder_;
  emulator::SignalSource source_;
  std::size_t packet_bytes_;
  std::vector<std::byte> scratch_;
  sockaddr_in to_;
  wire::UniqueFd socket_{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
};

// A stage that falls behind: the stream starts while nobody reads the socket (before run(); a
// receive thread, `way`, waits for the stage's thread too), the kernel keeps what its small
// buffer holds and drops the rest (far more than max_jump), then the stage reads and the sender
// goes on. The hole is loss the kernel caused, at its place, not a sender that jumped ahead;
// ground truth is the kernel's own drop count (/proc/net/udp) and the emulator's signal on both
// sides of the hole. `segments`: datagrams per send (the kernel counts a dropped coalesced
// datagram once, as it does a NIC's GRO super-datagram).
void expect_kernel_burst_is_loss(std::uint64_t segments, const std::string& way) {
  UdpRun run;
  test_support::current_capture() = &run.capture;
  Pipeline pipeline(udp_to_capture(", stream_id: 1, receive_buffer: 64KiB, max_jump: 1ms" + way, 64));
  pipeline.start();  // the socket is bound; nothing reads it until run()
  UdpSource* stage = udp_stage(pipeline);
  ASSERT_NE(stage, nullptr);
  const auto settings = with_count(0);
  VitaStream stream(settings, stage->port());
  const std::uint64_t spp = stream.samples_per_packet();
  constexpr std::uint64_t kBurst = 94 * 32;  // whole sends of 32
  constexpr std::uint64_t kTail = 20;        // single datagrams, slowly: a lost last one could not be seen
  constexpr std::uint64_t kTotal = kBurst + 18 * 32 + kTail;
  stream.send(0, kBurst, segments, 64 / segments);  // pauses for the loopback backlog: every drop is the socket's
  const std::uint64_t burst_drops = test_support::proc_udp_drops(stage->port()).value();
  const std::uint64_t burst_missing = burst_drops * segments;
  const std::uint64_t kept = kBurst - burst_missing;
  ASSERT_GT(burst_missing * spp, 100'000U) << "the kernel must drop more than max_jump (1 ms: 100 000 samples)";
  ASSERT_GT(kept, 0U);

  std::thread runner([&] { pipeline.run(); });
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  // The stage catches up with what the kernel kept before the sender goes on.
  EXPECT_TRUE(test_support::wait_for([&] { return metrics.packets.load() >= kept; }));
  stream.send(kBurst, kTotal - kTail, segments, std::max<std::uint64_t>(1, 8 / segments));
  stream.send(kTotal - kTail, kTotal, 1, 1);
  EXPECT_TRUE(test_support::wait_for([&] {
    return metrics.packets.load() + test_support::proc_udp_drops(stage->port()).value() * segments >= kTotal;
  })) << metrics.packets.load();
  const std::uint64_t dropped = test_support::proc_udp_drops(stage->port()).value();
  pipeline.request_stop();
  runner.join();
  test_support::current_capture() = nullptr;

  EXPECT_EQ(counter(metrics, "resyncs"), 0U);
  EXPECT_EQ(counter(metrics, "resync_samples"), 0U);
  EXPECT_EQ(drops(metrics, "outlier"), 0U);
  EXPECT_EQ(drops(metrics, "socket_overflow"), dropped) << "the stage's count is the kernel's";
  const std::uint64_t missing = kTotal - metrics.packets.load();
  if (segments == 1) {
    EXPECT_EQ(missing, dropped);  // one datagram per drop
  }
  std::uint64_t captured = 0;
  for (const auto& chunk : run.capture.chunks) captured += chunk.sample_count;
  EXPECT_EQ(counter(metrics, "lost_samples"), kTotal * spp - captured);
  EXPECT_EQ(counter(metrics, "lost_samples"), missing * spp);
  // The hole is where the kernel's buffer filled, as long as what it dropped, and every sample
  // around it is the emulator's at its index (any later small overflow is a gap of its own).
  std::uint64_t end = 0;
  const std::vector<Gap> gaps = walk_signal(run, settings.signal, end);
  EXPECT_EQ(end, kTotal * spp);
  ASSERT_FALSE(gaps.empty());
  EXPECT_EQ(gaps[0].first_sample, kept * spp);
  EXPECT_EQ(gaps[0].length, burst_missing * spp);
  std::uint64_t gap_samples = 0;
  for (const Gap& gap : gaps) gap_samples += gap.length;
  EXPECT_EQ(gap_samples, missing * spp);
}

TEST_P(UdpSourceBothWays, AKernelDropBurstLongerThanMaxJumpIsLossNotAJump) { expect_kernel_burst_is_loss(1, way()); }

// As a NIC's GRO does: coalesced datagrams, each dropped one counted once by the kernel.
TEST_P(UdpSourceBothWays, AKernelDropBurstOfCoalescedDatagramsIsLossNotAJump) {
  const wire::UniqueFd probe(::socket(AF_INET, SOCK_DGRAM, 0));
  const int segment = 1400;
  if (::setsockopt(probe.get(), SOL_UDP, UDP_SEGMENT, &segment, sizeof(segment)) != 0)
    GTEST_SKIP() << "kernel without UDP GSO";
  expect_kernel_burst_is_loss(32, way());
}

// A stream that ends while nothing reads its socket: the kernel keeps what the socket's small
// buffer holds and drops the rest, the stream's end; then the stage is stopped and takes what was
// kept. `settings`: the stage's. The kernel's drop count comes from /proc/net/udp.
struct LostEnd {
  static constexpr std::uint64_t kSent = 600;
  UdpRun run;
  std::optional<Pipeline> pipeline;
  std::uint64_t dropped = 0;
  std::uint64_t samples_per_packet = 0;

  explicit LostEnd(const std::string& settings) {
    test_support::current_capture() = &run.capture;
    pipeline.emplace(udp_to_capture(settings + ", receive_buffer: 64KiB", 64));
    pipeline->start();  // the socket is bound; nothing takes from it until run()
    UdpSource* stage = udp_stage(*pipeline);
    EXPECT_NE(stage, nullptr);
    if (stage == nullptr) return;
    VitaStream stream(with_count(0), stage->port());  // stream id 1
    samples_per_packet = stream.samples_per_packet();
    stream.send(0, kSent, 1, 32);  // pauses for the loopback backlog: every drop is the socket's
    dropped = test_support::proc_udp_drops(stage->port()).value();
    pipeline->request_stop();
    pipeline->run();
    test_support::current_capture() = nullptr;
  }
  [[nodiscard]] const StageMetrics& metrics() const { return test_support::source_metrics(*pipeline); }
  // The note that names the lost end, or empty.
  [[nodiscard]] std::string note() const {
    const std::string named = "dropped " + std::to_string(dropped) + " datagram(s) after the last one";
    for (const std::string& text : metrics().notes)
      if (text.find(named) != std::string::npos) return text;
    return {};
  }
};

// No later datagram carries the kernel's count of the lost end and no later packet shows where
// the stream ended, so the stage reads the count off the socket once it has drained it: the
// kernel's drops, all of them counted, and named as the stream's lost end with the samples they
// held at least; every datagram kept is in the capture, and lost_samples stays at what later
// packets showed (none).
TEST_P(UdpSourceBothWays, AStreamEndTheKernelDroppedIsCountedAndNamed) {
  const LostEnd end(", stream_id: 1" + way());
  ASSERT_GT(end.dropped, 0U);
  ASSERT_LT(end.dropped, LostEnd::kSent);
  const StageMetrics& metrics = end.metrics();
  EXPECT_EQ(metrics.packets.load(), LostEnd::kSent - end.dropped);
  EXPECT_EQ(drops(metrics, "socket_overflow"), end.dropped) << "the stage's count is the kernel's";
  EXPECT_EQ(counter(metrics, "dropped_after_last_packet"), end.dropped);
  EXPECT_EQ(counter(metrics, "lost_samples"), 0U);
  std::uint64_t captured = 0;
  for (const auto& chunk : end.run.capture.chunks) captured += chunk.sample_count;
  EXPECT_EQ(captured, (LostEnd::kSent - end.dropped) * end.samples_per_packet);
  const std::string note = end.note();
  ASSERT_FALSE(note.empty()) << "no note names the lost end";
  EXPECT_NE(note.find("at least " + std::to_string(end.dropped * end.samples_per_packet) + " samples"),
            std::string::npos)
      << note;
}

// Where no packet was placed (every one kept was another stream's), nothing tells what a dropped
// datagram held: the lost end is still counted and named, without a sample count.
TEST(UdpSource, ALostEndAfterNoPlacedPacketIsNamedWithoutASize) {
  const LostEnd end(", stream_id: 2");
  ASSERT_GT(end.dropped, 0U);
  const StageMetrics& metrics = end.metrics();
  EXPECT_EQ(drops(metrics, "wrong_stream_id"), LostEnd::kSent - end.dropped);
  EXPECT_EQ(counter(metrics, "dropped_after_last_packet"), end.dropped);
  const std::string note = end.note();
  ASSERT_FALSE(note.empty()) << "no note names the lost end";
  EXPECT_NE(note.find("of a size no placed packet tells"), std::string::npos) << note;
  EXPECT_EQ(note.find("at least"), std::string::npos) << note;
}

TEST(UdpSource, SustainedJumpBackStartsANewSegmentRightAfterTheOldOne) {
  const auto settings = with_shift(1000, 500, 1000, -kHourAt100Msps);
  UdpRun run;
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(run.resyncs, 1U);
  EXPECT_EQ(run.drops["outlier"], 0U);
  EXPECT_EQ(run.drops["late"], 0U);
  EXPECT_EQ(run.lost_samples, 0U);
  // The stream index cannot go back: the new segment follows on, in a chunk of its own
  // whose time is the sender's new time.
  std::uint64_t end = 0;
  EXPECT_TRUE(walk_jumped(run, settings, 1000 * spp, 0, end).empty());
  EXPECT_EQ(end, 1000 * spp);
  bool found = false;
  for (const auto& chunk : run.capture.chunks) {
    const std::uint64_t epoch = kStartSeconds * 100'000'000ULL + chunk.first_sample -
                                (chunk.first_sample >= 500 * spp ? static_cast<std::uint64_t>(kHourAt100Msps) : 0);
    EXPECT_EQ(chunk.timestamp.seconds, epoch / 100'000'000ULL) << chunk.first_sample;
    EXPECT_EQ(chunk.timestamp.picoseconds, (epoch % 100'000'000ULL) * 10'000ULL) << chunk.first_sample;
    found = found || chunk.first_sample == 500 * spp;
  }
  EXPECT_TRUE(found) << "no chunk starts where the sender jumped";
}

TEST(UdpSource, ARecordedJumpBackIsANewCaptureSegmentAtTheSendersNewTime) {
  // The real emulator's clock steps back an hour at packet 500 and stays there; the real udp
  // source resynchronises and a real record stage writes the capture. Ground truth is the
  // emulator's seeded signal: every recorded sample must be the one the emulator sent at the
  // time the capture's metadata gives it.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sluice-udp-jump-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto settings = with_shift(1000, 500, 1000, -kHourAt100Msps);
  UdpRun run;
  run.record_directory = dir.string();
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  ASSERT_EQ(run.resyncs, 1U);
  const recorder::Capture capture = recorder::open_capture((dir / "udp.sigmf-collection").string());
  ASSERT_EQ(capture.lanes.size(), 1U);
  const recorder::CaptureLane& lane = capture.lanes[0];
  EXPECT_EQ(lane.total_samples, 1000 * spp);
  ASSERT_EQ(lane.segments.size(), 2U) << "the jump back must start a capture segment";
  EXPECT_EQ(lane.segments[1].global_index, 500 * spp);
  EXPECT_TRUE(lane.segments[1].time_jump);
  EXPECT_NE(recorder::describe_capture(capture).find("resyncs:  1"), std::string::npos)
      << recorder::describe_capture(capture);
  EXPECT_EQ(recorder::iso8601(lane.segments[1].time),
            recorder::iso8601(recorder::time_after(Timestamp{kStartSeconds - 3600, 0, true}, 500 * spp, 100e6)));
  emulator::SignalSettings signal = settings.signal;
  signal.sample_rate = 100e6;
  emulator::SignalSource source(signal);
  std::uint64_t checked = 0;
  for (const auto& segment : lane.segments) {
    ASSERT_TRUE(segment.time.valid);
    // The emulator's sample at the time the metadata gives, undoing its clock step for the
    // samples it sent an hour back (their true position is an hour later).
    const std::uint64_t claimed = segment.time.seconds * 100'000'000ULL + segment.time.picoseconds / 10'000ULL -
                                  kStartSeconds * 100'000'000ULL + (segment.time_jump ? kHourAt100Msps : 0);
    std::vector<std::byte> recorded(segment.sample_count * 4);
    ASSERT_EQ(recorder::read_segment(lane, segment, 0, segment.sample_count, recorded.data()), segment.sample_count);
    std::vector<std::byte> sent(segment.sample_count * 4);
    source.fill(claimed, sent);
    EXPECT_TRUE(recorded == sent) << "segment at " << segment.global_index;
    checked += segment.sample_count;
  }
  EXPECT_EQ(checked, 1000 * spp);
  std::filesystem::remove_all(dir);
}

TEST_P(UdpSourceBothWays, ZeroLengthDatagramsAreCountedAsMalformed) {
  auto settings = with_count(300);
  UdpRun run;
  run_udp(settings, run, way(), [&](std::uint16_t port) -> std::uint64_t {
    wire::UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(port));
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(::sendto(sender.get(), nullptr, 0, 0, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    }
    return 5;
  });
  EXPECT_EQ(run.drops["empty"], 5U);
  EXPECT_EQ(run.packets, 305U);
  expect_stream(run, settings, 300 * run.samples_per_packet, {});
}

TEST(UdpSource, MaxJumpIsASettingWithABound) {
  // 1 ms at 100 Msps is 100,000 samples: a shift of 200,000 is an outlier, 50,000 is a gap.
  const auto far = with_shift(600, 300, 301, 200'000);
  UdpRun run;
  run_udp(far, run, ", max_jump: 1ms");
  EXPECT_EQ(run.drops["outlier"], 1U);
  const auto near = with_shift(600, 300, 301, 50'000);
  UdpRun other;
  run_udp(near, other, ", max_jump: 1ms");
  EXPECT_EQ(other.drops["outlier"], 0U);
}

// Sends `count` datagrams of 1472 bytes as GNU Radio 3.10's network.udp_sink does with the
// given header type (sequence numbers from 1, samples in the host's byte order), leaving out
// the sequence numbers in `skip`. Returns the datagrams sent and the samples in each.
std::uint64_t send_like_gnuradio(std::uint16_t port, int header_type, std::uint64_t count,
                                 const std::vector<std::uint64_t>& skip, const emulator::SignalSettings& signal,
                                 std::size_t& samples_per_datagram) {
  const std::size_t header = header_type == 0 ? 0 : header_type == 1 ? 8 : 16;
  samples_per_datagram = (1472 - header) / 4;
  wire::UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(port));
  emulator::SignalSource source(signal);
  std::vector<std::byte> datagram(header + samples_per_datagram * 4);
  std::uint64_t sent = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    const std::uint64_t sequence = k + 1;
    if (std::find(skip.begin(), skip.end(), sequence) != skip.end()) continue;
    // The structs as the sink memcpys them: little-endian uint64, then int16 size and padding.
    for (std::size_t b = 0; b < 8 && header != 0; ++b) datagram[b] = static_cast<std::byte>(sequence >> (8 * b));
    if (header == 16) {
      datagram[8] = static_cast<std::byte>(datagram.size() & 0xFF);
      datagram[9] = static_cast<std::byte>(datagram.size() >> 8);
    }
    source.fill(k * samples_per_datagram, std::span<std::byte>(datagram.data() + header, samples_per_datagram * 4));
    EXPECT_EQ(::sendto(sender.get(), datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&address),
                       sizeof(address)),
              static_cast<ssize_t>(datagram.size()));
    ++sent;
    if (sent % 32 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  return sent;
}

// The capture holds the signal's samples with exactly `expected_gaps`, up to `total`.
void expect_untimed_stream(const UdpRun& run, const emulator::SignalSettings& signal, std::uint64_t total,
                           const std::vector<Gap>& expected_gaps) {
  std::uint64_t end = 0;
  const std::vector<Gap> gaps = walk_signal(run, signal, end);
  EXPECT_EQ(end, total);
  ASSERT_EQ(gaps.size(), expected_gaps.size());
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    EXPECT_EQ(gaps[i].first_sample, expected_gaps[i].first_sample) << i;
    EXPECT_EQ(gaps[i].length, expected_gaps[i].length) << i;
  }
  for (const auto& chunk : run.capture.chunks) EXPECT_FALSE(chunk.timestamp.valid);
}

TEST(UdpSource, GnuRadioSequenceNumbersGiveExactLoss) {
  for (const auto& [header_type, framing] : {std::pair{1, "gnuradio_seq"}, std::pair{2, "gnuradio_seq_size"}}) {
    SCOPED_TRACE(framing);
    auto settings = with_count(0);
    UdpRun run;
    std::size_t spp = 0;
    // Sequence numbers 11, 500 and 501 never sent; the stream starts at sequence 1.
    run_udp(settings, run, std::string(", framing: ") + framing, [&](std::uint16_t port) {
      return send_like_gnuradio(port, header_type, 1000, {11, 500, 501}, settings.signal, spp);
    });
    EXPECT_EQ(run.packets, 997U);
    EXPECT_EQ(run.lost_packets, 3U);
    EXPECT_EQ(run.lost_samples, 3 * spp);
    EXPECT_EQ(run.samples_out, 997 * spp);
    expect_untimed_stream(run, settings.signal, 1000 * spp, {{10 * spp, spp}, {499 * spp, 2 * spp}});
  }
}

TEST(UdpSource, GnuRadioSizeFieldIsChecked) {
  auto settings = with_count(0);
  UdpRun run;
  std::size_t spp = 0;
  run_udp(settings, run, ", framing: gnuradio_seq_size", [&](std::uint16_t port) -> std::uint64_t {
    std::uint64_t sent = send_like_gnuradio(port, 2, 100, {}, settings.signal, spp);
    // A datagram whose size field disagrees with its length, and one too short for the header.
    wire::UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    const sockaddr_in address = *wire::parse_endpoint("127.0.0.1:" + std::to_string(port));
    std::vector<std::byte> bad(64);
    bad[0] = std::byte{101};
    bad[8] = std::byte{63};
    EXPECT_EQ(
        ::sendto(sender.get(), bad.data(), bad.size(), 0, reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
        64);
    EXPECT_EQ(::sendto(sender.get(), bad.data(), 12, 0, reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
              12);
    return sent + 2;
  });
  EXPECT_EQ(run.drops["bad_size_field"], 1U);
  EXPECT_EQ(run.drops["truncated"], 1U);
  expect_untimed_stream(run, settings.signal, 100 * spp, {});
}

TEST(UdpSource, BareSamplesArriveWholeAndSayThatLossCannotBeSeen) {
  auto settings = with_count(0);
  UdpRun run;
  std::size_t spp = 0;
  run_udp(settings, run, ", framing: none",
          [&](std::uint16_t port) { return send_like_gnuradio(port, 0, 1000, {}, settings.signal, spp); });
  EXPECT_EQ(spp, 368U);
  EXPECT_EQ(run.packets, 1000U);
  EXPECT_EQ(run.lost_samples, 0U);
  expect_untimed_stream(run, settings.signal, 1000 * spp, {});
}

// The emulator's own GNU Radio framings with every fault the framing can show: drops by list
// and by chance, a duplicate, a reordered packet, a truncated one and (seq_size) a corrupted
// size field. Every packet not delivered is an exact gap; the samples are the signal's.
TEST_P(UdpSourceBothWays, EmulatorGnuRadioFramingsWithFaultsGiveExactLoss) {
  for (const auto framing : {emulator::Framing::gnuradio_seq, emulator::Framing::gnuradio_seq_size}) {
    SCOPED_TRACE(to_string(framing));
    const bool with_size = framing == emulator::Framing::gnuradio_seq_size;
    auto settings = with_count(1500);
    settings.framing = framing;
    settings.faults.seed = 7;
    settings.faults.drop.packets = {10, 200, 201};
    settings.faults.drop.probability = 0.01;
    settings.faults.duplicate.packets = {50};
    settings.faults.reorder.packets = {80};
    settings.faults.truncate.packets = {120};
    if (with_size) settings.faults.corrupt.packets = {150};
    UdpRun run;
    run_udp(settings, run, std::string(", framing: ") + std::string(to_string(framing)) + way());
    const std::uint64_t spp = run.samples_per_packet;
    EXPECT_EQ(spp, (1472U - (with_size ? 16U : 8U)) / 4U);
    // Expected: each packet dropped, truncated or corrupted is lost, runs merged into gaps.
    std::vector<Gap> gaps;
    std::uint64_t last_delivered = 0;
    std::uint64_t lost_packets = 0;
    for (std::uint64_t k = 0; k < settings.count; ++k) {
      const bool lost = settings.faults.applies(emulator::FaultKind::drop, 0, k) || k == 120 || (with_size && k == 150);
      if (!lost) {
        last_delivered = k;
        continue;
      }
      ASSERT_NE(k, 0U) << "the first packet sets the origin: pick another seed";
      if (!gaps.empty() && gaps.back().first_sample + gaps.back().length == k * spp) {
        gaps.back().length += spp;
      } else {
        gaps.push_back({k * spp, spp});
      }
    }
    ASSERT_EQ(last_delivered, settings.count - 1) << "a lost last packet cannot be seen: pick another seed";
    for (const Gap& gap : gaps) lost_packets += gap.length / spp;
    ASSERT_GT(gaps.size(), 10U);
    EXPECT_EQ(run.sent.dropped + run.sent.truncated + run.sent.corrupted, lost_packets);
    EXPECT_EQ(run.lost_packets, lost_packets);
    EXPECT_EQ(run.lost_samples, lost_packets * spp);
    EXPECT_EQ(run.samples_out, (settings.count - lost_packets) * spp);
    EXPECT_EQ(run.duplicates, 1U);
    EXPECT_EQ(run.reordered, 1U);
    if (with_size) {
      EXPECT_EQ(run.drops["bad_size_field"], 2U);  // the truncated datagram and the corrupted size field
    } else {
      EXPECT_EQ(run.drops["bad_payload"], 1U);  // the truncated datagram: not the stream's datagram size
    }
    expect_untimed_stream(run, settings.signal, settings.count * spp, gaps);
    EXPECT_NE(run.capture.stream.description.find("sequence numbers"), std::string::npos);
  }
}

// The emulator's bare datagrams with drops: the stage cannot see them (nothing counted lost,
// the description says so in words); what arrives is the signal's packets that were sent, in order.
TEST(UdpSource, EmulatorBareDatagramsWithDropsArriveInOrderAndLossIsNotSeen) {
  auto settings = with_count(1000);
  settings.framing = emulator::Framing::none;
  settings.faults.seed = 3;
  settings.faults.drop.packets = {10, 500, 501};
  settings.faults.drop.probability = 0.01;
  UdpRun run;
  run_udp(settings, run, ", framing: none");
  const std::uint64_t spp = run.samples_per_packet;
  EXPECT_EQ(spp, 1472U / 4U);
  std::vector<std::byte> expected;
  emulator::SignalSource source(settings.signal);
  std::vector<std::byte> packet(spp * 4);
  std::uint64_t sent = 0;
  for (std::uint64_t k = 0; k < settings.count; ++k) {
    if (settings.faults.applies(emulator::FaultKind::drop, 0, k)) continue;
    source.fill(k * spp, packet);
    expected.insert(expected.end(), packet.begin(), packet.end());
    ++sent;
  }
  ASSERT_GT(settings.count - sent, 5U);
  EXPECT_EQ(run.sent.dropped, settings.count - sent);
  std::vector<std::byte> received;
  for (const auto& chunk : run.capture.chunks) {
    EXPECT_TRUE(chunk.gaps.empty());
    received.insert(received.end(), chunk.bytes.begin(), chunk.bytes.end());
  }
  EXPECT_EQ(received.size(), expected.size());
  EXPECT_TRUE(received == expected) << "bare samples out of order or altered";
  EXPECT_EQ(run.lost_packets, 0U);
  EXPECT_EQ(run.lost_samples, 0U);
  EXPECT_EQ(run.samples_out, sent * spp);
  EXPECT_NE(run.capture.stream.description.find("lost datagrams cannot be detected"), std::string::npos);
}

// The configuration errors of a udp stage with `settings` added to its map, or "".
std::string udp_settings_errors(const std::string& settings) {
  try {
    load_pipeline_text("lanes: [{name: a, stages: [{type: udp" + settings + "}, {type: null}]}]\n", "t.yaml");
  } catch (const ConfigException& error) {
    return error.errors().to_string();
  }
  return std::string();
}

// The kernel holds at most 1 GiB for a socket: a larger receive_buffer could have no effect.
TEST(UdpSource, AReceiveBufferLargerThanASocketHoldsIsAnError) {
  const std::string errors = udp_settings_errors(", receive_buffer: 2GiB");
  EXPECT_NE(errors.find("receive_buffer"), std::string::npos) << errors;
  EXPECT_NE(errors.find("out of range [4.00 KiB, 1.00 GiB]"), std::string::npos) << errors;
  EXPECT_EQ(udp_settings_errors(", receive_buffer: 1GiB"), "");
}

TEST(UdpSource, FramingSettingsThatCannotApplyAreErrors) {
  EXPECT_NE(udp_settings_errors(", framing: none, stream_id: 3").find("stream_id applies to framing vita49 only"),
            std::string::npos);
  EXPECT_NE(udp_settings_errors(", framing: none, max_jump: 1s").find("framing none does not have"), std::string::npos);
  EXPECT_NE(udp_settings_errors(", framing: gnu").find("is not one of"), std::string::npos);
  EXPECT_EQ(udp_settings_errors(", framing: gnuradio_seq, reorder_window: 4"), "");
}

// IF Context packets (VITA 49.0 type 4) interleaved with the data: counted exactly, never
// taken for samples, the stream whole.
TEST_P(UdpSourceBothWays, IfContextPacketsAreCountedAndNeverTakenForData) {
  auto settings = with_count(1000);
  settings.context.enabled = true;
  settings.context.rf_frequency = 2.4e9;
  settings.context.every = 100;
  UdpRun run;
  run_udp(settings, run, way());
  // At start, then at the first send batch (32 packets) at least 100 packets after the last.
  EXPECT_GE(run.sent.context_packets, 1000U / (100 + 32) + 1);
  EXPECT_EQ(run.context_packets, run.sent.context_packets);
  EXPECT_EQ(run.drops["unknown_type"], 0U);
  EXPECT_EQ(run.drops["bad_context"], 0U);
  EXPECT_EQ(run.packets, 1000U + run.sent.context_packets);
  expect_stream(run, settings, 1000 * run.samples_per_packet, {});
}

// The emulator's retune: the new frequency goes out at once with the change indicator, and
// the stage counts it as a change.
TEST(UdpSource, ARetuneIsOneContextChange) {
  emulator::EmulatorSettings settings;  // count 0: only the context packets below
  UdpRun run;
  run_udp(settings, run, "", [&](std::uint16_t port) -> std::uint64_t {
    wire::UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(sender.get(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)), 0);
    emulator::ContextSettings context;
    context.enabled = true;
    context.rf_frequency = 2.4e9;
    emulator::ContextSender sender_state(context, 1, 100e6, 0);
    std::uint64_t sent = sender_state.maybe_send(sender.get(), 0);
    sent += sender_state.maybe_send(sender.get(), 1);  // nothing due: no packet
    sender_state.set_rf_frequency(2.45e9);
    EXPECT_TRUE(sender_state.packet().changed);
    sent += sender_state.maybe_send(sender.get(), 2);
    EXPECT_EQ(sent, 2U);
    return sent;
  });
  EXPECT_EQ(run.context_packets, 2U);
  EXPECT_EQ(run.context_changes, 1U);
}

// A retune mid-stream reaches the capture: the emulator sends its changed IF Context packet
// right before the first data packet at or after 100 µs; the udp stage ends its chunk there and
// the next one carries the change; the real record stage starts a SigMF segment at exactly that
// sample with the new core:frequency and a `context` annotation, which the capture reader
// (replay's input) reads back as the segment's change.
TEST(UdpSource, ARetuneStartsACaptureSegmentAtTheFirstSampleUnderTheNewFrequency) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sluice-udp-retune-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto settings = with_count(1000);
  settings.context.enabled = true;
  settings.context.rf_frequency = 2.4e9;
  settings.context.retune = true;
  settings.context.retune_at = std::chrono::microseconds(100);  // sample 10 000 at 100 Msps
  settings.context.retune_rf_frequency = 2.5e9;
  UdpRun run;
  run.record_directory = dir.string();
  run_udp(settings, run);
  const std::uint64_t spp = run.samples_per_packet;
  const std::uint64_t at = (10'000 + spp - 1) / spp * spp;  // the first packet starting at or after it
  EXPECT_EQ(run.context_changes, 1U);
  EXPECT_EQ(run.lost_samples, 0U);
  // Marked chunks: the first (its values were unknown at start: no context_wait), and the retune.
  std::vector<std::pair<std::uint64_t, double>> marked;
  for (const auto& chunk : run.capture.chunks) {
    if (!chunk.context_change) continue;
    marked.emplace_back(chunk.first_sample, chunk.context.rf_frequency);
    EXPECT_EQ(chunk.context.sample_rate, 100e6);
  }
  const std::vector<std::pair<std::uint64_t, double>> expected{{0, 2.4e9}, {at, 2.5e9}};
  EXPECT_EQ(marked, expected);
  const recorder::Capture capture = recorder::open_capture((dir / "udp.sigmf-collection").string());
  ASSERT_EQ(capture.lanes.size(), 1U);
  const recorder::CaptureLane& lane = capture.lanes[0];
  ASSERT_EQ(lane.segments.size(), 2U) << "the retune must start a capture segment";
  EXPECT_EQ(lane.segments[0].global_index, 0U);
  EXPECT_EQ(lane.segments[0].frequency, 2.4e9);
  EXPECT_EQ(lane.segments[1].global_index, at);
  EXPECT_EQ(lane.segments[1].frequency, 2.5e9);
  EXPECT_TRUE(lane.segments[1].context_change);
  EXPECT_EQ(lane.segments[1].context.rf_frequency, 2.5e9);
  EXPECT_EQ(lane.total_samples, 1000 * spp);
  std::filesystem::remove_all(dir);
}

std::vector<std::byte> context_bytes(double sample_rate) {
  vita49::ContextPacket packet;
  packet.stream_id = 1;
  packet.rf_reference_frequency_hz = 2.4e9;
  packet.bandwidth_hz = 20e6;
  packet.reference_level_dbm = -10.5;
  packet.gain_stage1_db = 20.25;
  packet.gain_stage2_db = -3.0;
  packet.sample_rate_hz = sample_rate;
  std::vector<std::byte> bytes(vita49::context_packet_bytes(packet));
  EXPECT_EQ(vita49::encode_context(packet, bytes), bytes.size());
  return bytes;
}

void send_to(int fd, std::uint16_t port, const std::vector<std::byte>& bytes) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)),
            static_cast<ssize_t>(bytes.size()));
}

std::uint16_t free_udp_port() {
  wire::UniqueFd probe(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  EXPECT_EQ(::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  return ntohs(address.sin_port);
}

// context_wait: the sender's first context packet sets the frequency, bandwidth, level and
// gain that downstream stages (and the recorder's SigMF core:frequency) see at start.
TEST(UdpSource, ContextWaitPutsTheSendersValuesIntoTheStreamDescription) {
  UdpRun run;
  test_support::current_capture() = &run.capture;
  const std::uint16_t port = free_udp_port();
  const std::string yaml =
      "pipeline: {chunk: 64KiB, chunks: 8}\n"
      "template:\n"
      "  - {name: source, type: udp, address: 127.0.0.1:" +
      std::to_string(port) +
      ", sample_rate: 100Msps, stream_id: 1, context_wait: 10s}\n"
      "  - {name: sink, type: capture}\n"
      "lanes: [{name: port0}]\n";
  Pipeline pipeline(load_pipeline_text(yaml, "<test>", {}, test_support::test_registry()));
  std::atomic<bool> started{false};
  std::thread starter([&] {
    pipeline.start();
    started = true;
  });
  // A digitizer repeats its context; the stage takes the first that reaches its socket.
  wire::UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const auto packet = context_bytes(100e6);
  while (!started) {
    send_to(sender.get(), port, packet);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  starter.join();
  std::thread runner([&] { pipeline.run(); });
  pipeline.request_stop();
  runner.join();
  EXPECT_EQ(run.capture.stream.center_frequency, 2.4e9);
  EXPECT_EQ(run.capture.stream.bandwidth, 20e6);
  EXPECT_EQ(run.capture.stream.reference_level_dbm, -10.5);
  EXPECT_EQ(run.capture.stream.gain_db, 17.25);
  EXPECT_EQ(run.capture.stream.sample_rate, 100e6);
  EXPECT_GE(counter(test_support::source_metrics(pipeline), "context_packets"), 1U);
  test_support::current_capture() = nullptr;
}

// A context packet whose sample rate is not the configured one fails the stage with both rates.
TEST_P(UdpSourceBothWays, ContextSampleRateMismatchIsAnError) {
  UdpRun run;
  test_support::current_capture() = &run.capture;
  Pipeline pipeline(udp_to_capture(", stream_id: 1" + way(), 8));
  pipeline.start();
  UdpSource* stage = udp_stage(pipeline);
  ASSERT_NE(stage, nullptr);
  std::thread runner([&] { pipeline.run(); });
  wire::UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  send_to(sender.get(), stage->port(), context_bytes(50e6));
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  // The stage fails in the same process() call that counts the packet.
  EXPECT_TRUE(test_support::wait_for([&] { return counter(metrics, "context_packets") >= 1; }));
  pipeline.request_stop();
  runner.join();
  ASSERT_FALSE(pipeline.failures().empty());
  EXPECT_NE(pipeline.failures().front().message.find("50000000 Hz"), std::string::npos)
      << pipeline.failures().front().message;
  EXPECT_NE(pipeline.failures().front().message.find("100000000 Hz"), std::string::npos)
      << pipeline.failures().front().message;
  test_support::current_capture() = nullptr;
}

// A receive that fails on the receive thread fails the stage with the call and its errno: the
// stage's socket is replaced under it by a file (dup2), as a descriptor closed by mistake would be.
// The same with two receive threads on the socket.
class FailedReceive : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Threads, FailedReceive, ::testing::Values(1, 2));
TEST_P(FailedReceive, OnTheReceiveThreadFailsTheStageWithTheCallAndErrno) {
  UdpRun run;
  test_support::current_capture() = &run.capture;
  Pipeline pipeline(
      udp_to_capture(", stream_id: 1, receive_thread: true, receive_threads: " + std::to_string(GetParam()), 8));
  pipeline.start();
  UdpSource* stage = udp_stage(pipeline);
  ASSERT_NE(stage, nullptr);
  const int fd = test_support::udp_socket_fd(stage->port());
  ASSERT_GE(fd, 0);
  std::thread runner([&] { pipeline.run(); });
  const wire::UniqueFd not_a_socket(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_EQ(::dup2(not_a_socket.get(), fd), fd);
  EXPECT_TRUE(test_support::wait_for([&] { return !pipeline.failures().empty(); }));
  pipeline.request_stop();
  runner.join();
  ASSERT_EQ(pipeline.failures().size(), 1U);
  EXPECT_EQ(pipeline.failures().front().message, "recvmmsg (receive thread): " + std::string(std::strerror(ENOTSOCK)));
  test_support::current_capture() = nullptr;
}

// Stopped with nothing to receive, the receive thread waiting in recvmmsg, the stage ends at once.
TEST(UdpSource, AStopEndsTheReceiveThreadWhileItWaitsForDatagrams) {
  UdpRun run;
  test_support::current_capture() = &run.capture;
  Pipeline pipeline(udp_to_capture(", stream_id: 1, receive_thread: true", 8));
  pipeline.start();
  std::thread runner([&] { pipeline.run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto asked = std::chrono::steady_clock::now();
  pipeline.request_stop();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(2));
  EXPECT_TRUE(pipeline.failures().empty());
  test_support::current_capture() = nullptr;
}

// A receive thread that shares its core with another busy thread (one the test pins there) is
// kept off it while that one runs: the stage's metrics measure the wait and the report names
// the thread, its core and what to do.
TEST(UdpSource, AReceiveThreadKeptOffItsCoreIsMeasuredAndNamed) {
  const int core = allowed_cores().front();
  UdpRun run;
  test_support::current_capture() = &run.capture;
  // It spins on its empty socket, so it always wants its core.
  Pipeline pipeline(udp_to_capture(
      ", stream_id: 1, receive_thread: true, receive_spin: 10s, receive_cpu: [" + std::to_string(core) + "]", 8));
  pipeline.start();
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  const CoreWait& receive = metrics.threads().back();
  {
    const test::CoreRival rival(core);
    std::thread runner([&] { pipeline.run(); });
    EXPECT_TRUE(test_support::wait_for([&] { return receive.lifetime_ns() >= 600'000'000U; }));
    pipeline.request_stop();
    runner.join();
  }
  test_support::current_capture() = nullptr;
  ASSERT_EQ(metrics.threads().size(), 2U);
  EXPECT_EQ(receive.name(), "receive");
  EXPECT_EQ(receive.cores(), std::to_string(core));
  // Two threads that always want one core: each runs about half the time.
  EXPECT_GE(receive.waited_ns(), receive.lifetime_ns() / 5) << receive.waited_ns() << " of " << receive.lifetime_ns();
  EXPECT_GT(receive.preemptions(), 0U);
  EXPECT_TRUE(pipeline.core_sharers(receive).empty()) << "the rival is no thread of the pipeline";
  const std::string note = core_wait_note(receive, pipeline.core_sharers(receive));
  EXPECT_NE(
      note.find("its receive thread (pinned to cores " + std::to_string(core) + ") was ready to run but kept off"),
      std::string::npos)
      << note;
  EXPECT_NE(summary_table(pipeline).find("note: " + note), std::string::npos);
}

// With several receive threads, receive_cpu gives each thread its core in the order written, so
// that a layout can put the thread that always receives on one core and a standby thread on
// another, whichever number is lower: [high, low] pins the first thread to high.
TEST(UdpSource, SeveralReceiveThreadsTakeTheirCoresInTheOrderWritten) {
  const std::vector<int> cores = allowed_cores();
  ASSERT_GE(cores.size(), 2U) << "the test needs two cores this process may use";
  const std::string low = std::to_string(cores[0]);
  const std::string high = std::to_string(cores[1]);
  Pipeline pipeline(load_pipeline_text(
      "pipeline: {chunk: 64KiB, chunks: 8}\n"
      "lanes: [{name: a, stages: [{type: udp, address: 127.0.0.1:0, receive_thread: true, receive_threads: 2, "
      "receive_standby: 1, receive_cpu: [" +
          high + ", " + low + "]}, {type: null}]}]\n",
      "t.yaml"));
  EXPECT_NE(pipeline.definition().lanes[0].stages[0].stage->threads_placement().find(
                "2 receive threads on cores " + high + ", " + low + ", the last standing by"),
            std::string::npos);
  pipeline.start();
  std::thread runner([&] { pipeline.run(); });
  const std::vector<std::string> first = test::tasks_named("rx a");
  const std::vector<std::string> second = test::tasks_named("rx 2 a");
  ASSERT_EQ(first.size(), 1U);
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(test::status_field(first[0], "Cpus_allowed_list"), high);
  EXPECT_EQ(test::status_field(second[0], "Cpus_allowed_list"), low);
  pipeline.request_stop();
  runner.join();
  EXPECT_TRUE(pipeline.failures().empty());
}

// Receive threads that always run each need a core: a load-time warning names every core that
// one shares with another receive thread, each pinned there alone. Standby threads alone may
// share one; threads pinned to a set of cores can move.
TEST(UdpSource, ReceiveThreadsPinnedToOneCoreAloneAreNamed) {
  const auto shared = [](const std::string& a, const std::string& b) {
    return shared_busy_cores(load_pipeline_text(
        "lanes: [{name: a, stages: [{type: udp, address: 127.0.0.1:0, receive_thread: true" + a +
            "}, {type: null}]}, {name: b, stages: [{type: udp, address: 127.0.0.1:0, receive_thread: true" + b +
            "}, {type: null}]}]\n",
        "t.yaml"));
  };
  const std::vector<std::string> both = shared(", receive_cpu: 1", ", receive_cpu: 1");
  ASSERT_EQ(both.size(), 1U);
  EXPECT_NE(both[0].find("core 1 carries 2 receive threads pinned there alone (a udp's receive thread, b udp's "
                         "receive thread)"),
            std::string::npos)
      << both[0];
  EXPECT_NE(both[0].find("give each a core of its own (receive_cpu)"), std::string::npos) << both[0];
  EXPECT_TRUE(shared(", receive_cpu: 1", ", receive_cpu: 2").empty());
  EXPECT_TRUE(shared(", receive_cpu: 0-1", ", receive_cpu: 0-1").empty()) << "a set lets each move";
  const std::string standby = ", receive_threads: 2, receive_standby: 1, receive_cpu: ";
  EXPECT_TRUE(shared(standby + "[0, 2]", standby + "[1, 2]").empty()) << "two standby threads";
  const std::vector<std::string> beside = shared(standby + "[0, 1]", ", receive_cpu: 1");
  ASSERT_EQ(beside.size(), 1U);
  EXPECT_NE(beside[0].find("(a udp's standby receive thread, b udp's receive thread)"), std::string::npos) << beside[0];
  const std::vector<std::string> two = shared(", receive_threads: 2, receive_cpu: [3, 0]", ", receive_cpu: 0");
  ASSERT_EQ(two.size(), 1U);
  EXPECT_NE(two[0].find("core 0 carries 2 receive threads pinned there alone (a udp's receive thread 2, b udp's "
                        "receive thread)"),
            std::string::npos)
      << two[0];
}

// Three receive threads that each take one datagram a call, spinning, share the stream between
// them datagram by datagram: every one of them receives, and the stage still hands on the
// stream whole and in order, nothing counted reordered or lost.
TEST(UdpSource, SeveralReceiveThreadsShareTheStreamAndItsOrderIsKept) {
  auto settings = with_count(20000);
  settings.rate = 30e6;  // about a second: long enough for every thread to be scheduled on a busy machine
  UdpRun run;
  run_udp(
      settings, run,
      ", gro: false, batch: 1, receive_buffer: 128MiB, receive_thread: true, receive_threads: 3, receive_spin: 10s");
  ASSERT_EQ(run.receive_thread_bytes.size(), 3U);
  for (std::size_t k = 0; k < 3; ++k) EXPECT_GT(run.receive_thread_bytes[k], 0U) << "receive thread " << k;
  EXPECT_EQ(run.packets, 20000U);
  EXPECT_EQ(run.reordered, 0U);
  EXPECT_EQ(run.duplicates, 0U);
  EXPECT_EQ(run.lost_samples, 0U);
  expect_stream(run, settings, 20000 * run.samples_per_packet, {});
}

// A socket that backs up (the whole stream queued before the stage reads, 4 to 5 times
// receive_standby_above) wakes the standby receive thread: it takes part of the backlog, and the
// stream is still handed on whole and in order.
TEST(UdpSource, AStandbyReceiveThreadTakesPartOfABacklogAndTheStreamStaysWhole) {
  QueuedBeforeReading queued(
      ", receive_buffer: 64MiB, receive_thread: true, receive_threads: 2, receive_standby: 1, "
      "receive_standby_above: 4MiB",
      12000);
  Pipeline& pipeline = *queued.pipeline;
  std::thread runner([&] { pipeline.run(); });
  const StageMetrics& metrics = test_support::source_metrics(pipeline);
  EXPECT_TRUE(test_support::wait_for([&] { return metrics.packets.load() >= queued.sent.packets; }))
      << metrics.packets.load() << " of " << queued.sent.packets;
  pipeline.request_stop();
  runner.join();
  queued.run.read_counts(metrics);
  EXPECT_GE(counter(metrics, "receive_standby_raises"), 1U);
  const ReceiveThread* standby = udp_stage(pipeline)->receive_thread(1);
  ASSERT_NE(standby, nullptr);
  EXPECT_GT(standby->received_bytes(), 0U) << "the standby thread took none of the backlog";
  EXPECT_EQ(counter(metrics, "receive_standby_bytes"), standby->received_bytes());
  EXPECT_LT(standby->received_bytes(), udp_stage(pipeline)->receive_thread(0)->received_bytes() * 4)
      << "the first thread receives all the time";
  EXPECT_EQ(metrics.packets.load(), queued.sent.packets);
  EXPECT_EQ(queued.run.reordered, 0U);
  EXPECT_EQ(queued.run.duplicates, 0U);
  EXPECT_EQ(queued.run.lost_samples, 0U);
  expect_stream(queued.run, queued.settings, queued.sent.packets * queued.settings.samples_per_packet(), {});
}

// A paced stream whose whole size stays under receive_standby_above never wakes the standby
// thread: the first thread takes every datagram, and the standby thread none.
TEST(UdpSource, AStandbyReceiveThreadSleepsWhileTheSocketStaysShort) {
  auto settings = with_count(2000);
  UdpRun run;
  run_udp(settings, run,
          ", receive_buffer: 64MiB, receive_thread: true, receive_threads: 2, receive_standby: 1, "
          "receive_standby_above: 16MiB");
  EXPECT_LT(run.packets * settings.payload, 16U << 20) << "the stream must fit under the mark";
  EXPECT_EQ(run.packets, 2000U);
  EXPECT_EQ(run.lost_samples, 0U);
  ASSERT_EQ(run.receive_thread_bytes.size(), 2U);
  EXPECT_GT(run.receive_thread_bytes[0], 0U);
  EXPECT_EQ(run.receive_thread_bytes[1], 0U);
  EXPECT_EQ(run.standby_raises, 0U);
  EXPECT_EQ(run.standby_bytes, 0U);
}

// receive_spin: the receive thread polls through the paced stream's pauses, so it never blocks,
// and the stream arrives whole; without it the same run's calls block.
TEST(UdpSource, AReceiveThreadThatSpinsTakesTheWholeStreamWithoutBlocking) {
  for (const std::string spin : {"", ", receive_spin: 10s"}) {
    SCOPED_TRACE(spin.empty() ? "no spin" : spin);
    UdpRun run;
    run_udp(with_count(3000), run, ", receive_thread: true" + spin);
    EXPECT_EQ(run.packets, 3000U);
    EXPECT_EQ(run.lost_packets, 0U);
    EXPECT_EQ(run.lost_samples, 0U);
    if (spin.empty()) {
      EXPECT_GT(run.receive_blocking_calls, 0U);
      EXPECT_EQ(run.receive_spin_ns, 0U);
    } else {
      EXPECT_EQ(run.receive_blocking_calls, 0U);
      EXPECT_GT(run.receive_spin_ns, 0U);
    }
  }
}

// Whether a lane of one udp stage with `settings` (into null), once started, has a note with `text`.
bool udp_start_notes(const std::string& settings, const std::string& text) {
  Pipeline pipeline(
      load_pipeline_text("pipeline: {chunk: 64KiB, chunks: 8}\n"
                         "lanes: [{name: a, stages: [{type: udp, address: 127.0.0.1:0, " +
                             settings + "}, {type: null}]}]\n",
                         "t.yaml"));
  pipeline.start();
  const std::vector<std::string>& notes = test_support::source_metrics(pipeline).notes;
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& note) { return note.find(text) != std::string::npos; });
}

TEST(UdpSource, ReceiveThreadSettingsThatCannotApplyAreErrors) {
  EXPECT_NE(udp_settings_errors(", receive_cpu: 1").find("receive_cpu applies to the receive thread, which is off"),
            std::string::npos);
  EXPECT_NE(udp_settings_errors(", receive_batches: 8").find("set receive_thread: true"), std::string::npos);
  EXPECT_NE(udp_settings_errors(", receive_thread: true, receive_batches: 1").find("receive_batches"),
            std::string::npos);
  EXPECT_NE(udp_settings_errors(", receive_spin: 1ms").find("receive_spin applies to the receive thread, which is off"),
            std::string::npos);
  EXPECT_EQ(udp_settings_errors(", receive_thread: true, receive_cpu: 0, receive_batches: 8, receive_spin: 50us"), "");
  // Several receive threads: only on a receive thread, a core each, and on framings that place datagrams.
  EXPECT_NE(udp_settings_errors(", receive_threads: 2").find("receive_threads applies to the receive thread"),
            std::string::npos);
  EXPECT_NE(udp_settings_errors(", receive_thread: true, receive_threads: 3, receive_cpu: 4-5")
                .find("names 2 core(s) for 3 receive threads"),
            std::string::npos);
  EXPECT_NE(udp_settings_errors(", framing: none, receive_thread: true, receive_threads: 2").find("framing none"),
            std::string::npos);
  EXPECT_EQ(udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_cpu: 0-1"), "");
  // Their cores are taken in the order written, so a core named twice is an error; one thread
  // pins to the set, in any order.
  EXPECT_NE(udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_cpu: [1, 1]")
                .find("core 1 is named twice in '1,1'"),
            std::string::npos);
  EXPECT_NE(udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_cpu: \"0-1,1\"")
                .find("core 1 is named twice"),
            std::string::npos);
  EXPECT_EQ(udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_cpu: [1, 0]"), "");
  EXPECT_EQ(udp_settings_errors(", receive_thread: true, receive_cpu: \"1,0\""), "");
  // Standby threads: one receive thread at least takes the stream, the mark only with them and
  // below the socket's buffer, and only on a receive thread.
  EXPECT_NE(
      udp_settings_errors(", receive_thread: true, receive_standby: 1").find("1 of 1 receive thread(s) would stand by"),
      std::string::npos);
  EXPECT_NE(
      udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_standby: 2").find("receive_threads: 3"),
      std::string::npos);
  EXPECT_NE(udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_standby_above: 1MiB")
                .find("there are none"),
            std::string::npos);
  EXPECT_NE(udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_standby: 1, receive_buffer: 8MiB, "
                                "receive_standby_above: 8MiB")
                .find("is not below receive_buffer"),
            std::string::npos);
  const std::string off = udp_settings_errors(", receive_standby: 1");
  EXPECT_NE(off.find("receive_standby applies to the receive thread"), std::string::npos) << off;
  EXPECT_EQ(off.find("would stand by"), std::string::npos) << "one error for one key: " << off;
  EXPECT_EQ(udp_settings_errors(", receive_thread: true, receive_threads: 2, receive_standby: 1, "
                                "receive_standby_above: 1MiB, receive_cpu: 0-1"),
            "");
  // One core for both threads works, but takes turns: the stage's summary says so.
  EXPECT_TRUE(udp_start_notes("receive_thread: true, receive_cpu: 0, cpu: 0", "receive_cpu 0 is also the stage's cpu"));
  // A spin on an unpinned thread spins beside whatever else the scheduler puts there: said too.
  EXPECT_TRUE(udp_start_notes("receive_thread: true, receive_spin: 1ms", "receive_spin without receive_cpu"));
  // A core this process may not use fails the start, naming the setting and the call.
  Pipeline nowhere(load_pipeline_text(
      "pipeline: {chunk: 64KiB, chunks: 8}\n"
      "lanes: [{name: a, stages: [{type: udp, address: 127.0.0.1:0, receive_thread: true, receive_cpu: 4095}, "
      "{type: null}]}]\n",
      "t.yaml"));
  try {
    nowhere.start();
    FAIL() << "a receive thread pinned to a core that is not there";
  } catch (const PipelineError& error) {
    EXPECT_NE(std::string(error.what()).find("receive_cpu 4095: pthread_setaffinity_np (receive thread): "),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace sluice
