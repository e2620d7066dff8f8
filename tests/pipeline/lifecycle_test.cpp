// Lifecycle on the real runtime: end of stream, stop while running, duration, a stage that
// fails at start or mid-run, and the block/drop overflow policies. Every run checks that
// what the source handed on is what arrived (no accepted chunk lost).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "monitor/prometheus_text.hpp"
#include "monitor/report.hpp"
#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/thread_cores.hpp"
#include "tests/stages/stage_test_util.hpp"
#include "tests/support/core_rival.hpp"
#include "tests/support/test_stages.hpp"

namespace sluice {
namespace {

std::atomic<int> g_tracking_stops{0};

class FailingStartSink final : public Stage {
 public:
  FailingStartSink(SettingsReader&, const PipelineSettings&) {}
  void start(StageContext&) override { throw std::runtime_error("open(/dev/sluice0): No such device"); }
  StageStatus process() override { return StageStatus::error; }
  void stop() noexcept override {}
};

class TrackingSink final : public Stage {
 public:
  TrackingSink(SettingsReader&, const PipelineSettings&) {}
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override { g_tracking_stops.fetch_add(1); }

 private:
  StageContext* context_ = nullptr;
};

// Passes `after` chunks on, then fails before taking another.
class FailAfter final : public Stage {
 public:
  FailAfter(SettingsReader& reader, const PipelineSettings&)
      : after_(reader.integer("after", 5, "chunks before failing", 0)) {}
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    if (passed_ == after_) {
      context_->fail("simulated device error after " + std::to_string(after_) + " chunks");
      return StageStatus::error;
    }
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    ++passed_;
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  std::int64_t after_;
  std::int64_t passed_ = 0;
  StageContext* context_ = nullptr;
};

// `slow`, the sink these tests fill queues with, is test_support's (tests/support/test_stages.hpp).

// The probe's stage thread's cores while it runs, and those of a thread it makes in start().
std::vector<int> g_probe_cores;
std::vector<int> g_probe_helper_cores;

class AffinityProbe final : public Stage {
 public:
  AffinityProbe(SettingsReader&, const PipelineSettings&) {}
  void start(StageContext& context) override {
    context_ = &context;
    std::thread([] { g_probe_helper_cores = allowed_cores(); }).join();
  }
  StageStatus process() override {
    if (g_probe_cores.empty()) g_probe_cores = allowed_cores();
    ChunkPtr chunk = context_->input().pop(std::chrono::milliseconds(10));
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    context_->emit(std::move(chunk));
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
};

const StageRegistry& test_registry() {
  static const StageRegistry registry = testing::builtin_registry_with(
      {testing::stage_type_of<FailingStartSink>("failing_start", StageRole::sink, "test stage"),
       testing::stage_type_of<TrackingSink>("tracking", StageRole::sink, "test stage"),
       testing::stage_type_of<FailAfter>("fail_after", StageRole::transform, "test stage"),
       test_support::slow_stage_type(StageRole::sink),
       testing::stage_type_of<AffinityProbe>("affinity", StageRole::sink, "test stage")});
  return registry;
}

std::unique_ptr<Pipeline> make(const std::string& yaml) {
  return std::make_unique<Pipeline>(load_pipeline_text(yaml, "lifecycle.yaml", {}, test_registry()));
}

std::uint64_t counter(const StageMetrics& metrics, const std::string& name) {
  for (const auto& drop : metrics.drops()) {
    if (drop.name == name) return drop.get();
  }
  return 0;
}

// Waits (bounded) for a condition the test needs before acting; not a timing assertion.
template <typename Condition>
bool await(Condition condition) {
  for (int i = 0; i < 2000 && !condition(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return condition();
}

TEST(Lifecycle, EndOfStreamDeliversEveryByte) {
  auto pipeline = make(R"(pipeline: {chunk: 256KiB, chunks: 8}
lanes:
  - name: a
    stages: [{type: generator, stop_after: 64MiB, signal: ramp}, {type: link}, {type: null}]
  - name: b
    stages: [{type: generator, stop_after: 10MiB}, {type: null}]
)");
  pipeline->start();
  pipeline->run();
  EXPECT_TRUE(pipeline->failures().empty());
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_EQ(lanes[0][0]->out.bytes, 64U << 20);
  EXPECT_EQ(lanes[0][1]->in.bytes, 64U << 20);
  EXPECT_EQ(lanes[0][1]->out.bytes, 64U << 20);
  EXPECT_EQ(lanes[0][2]->in.bytes, 64U << 20);
  EXPECT_EQ(lanes[0][2]->in.samples, (64U << 20) / 4);
  EXPECT_EQ(lanes[1][1]->in.bytes, 10U << 20);
}

TEST(Lifecycle, StopWhileRunningDrainsQueues) {
  auto pipeline = make(R"(pipeline: {chunk: 64KiB, chunks: 32, queue_depth: 16}
lanes:
  - name: a
    stages: [{type: generator}, {type: link}, {type: slow, delay: 1ms}]
)");
  pipeline->start();
  std::thread stopper([&] {
    const auto lanes = pipeline->metrics_by_lane();
    EXPECT_TRUE(await([&] { return lanes[0][2]->in.chunks.load() >= 20; }));
    pipeline->request_stop();
  });
  pipeline->run();
  stopper.join();
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_TRUE(pipeline->failures().empty());
  EXPECT_GE(lanes[0][2]->in.chunks, 20U);
  EXPECT_EQ(lanes[0][0]->out.chunks, lanes[0][2]->in.chunks);  // queued chunks were drained, not dropped
  EXPECT_EQ(lanes[0][0]->total_drops() + lanes[0][1]->total_drops() + lanes[0][2]->total_drops(), 0U);
}

TEST(Lifecycle, DurationEndsTheRun) {
  auto pipeline = make(R"(pipeline: {chunk: 64KiB, duration: 200ms}
lanes: [{name: a, stages: [{type: generator, rate: 100MB/s}, {type: null}]}]
)");
  pipeline->start();
  pipeline->run();
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_GT(lanes[0][1]->in.bytes, 0U);
  EXPECT_EQ(lanes[0][0]->out.bytes, lanes[0][1]->in.bytes);
  EXPECT_GE(pipeline->elapsed_seconds(), 0.2);
}

TEST(Lifecycle, StartFailureNamesTheStageAndStopsWhatStarted) {
  g_tracking_stops = 0;
  auto pipeline = make(R"(lanes:
  - {name: a, stages: [{type: generator}, {type: tracking}]}
  - {name: b, stages: [{type: generator}, {name: capture, type: failing_start}]}
)");
  try {
    pipeline->start();
    FAIL() << "start should have failed";
  } catch (const PipelineError& error) {
    EXPECT_STREQ(error.what(), "lane b, stage capture (failing_start): open(/dev/sluice0): No such device");
  }
  EXPECT_EQ(g_tracking_stops.load(), 1);  // lane a's sink had started and was stopped again
}

TEST(Lifecycle, MidRunFailureStopsEverythingWithoutDeadlock) {
  auto pipeline = make(R"(pipeline: {chunk: 64KiB, chunks: 4, queue_depth: 2}
lanes:
  - {name: a, stages: [{type: generator}, {name: dsp, type: fail_after, after: 5}, {type: null}]}
  - {name: b, stages: [{type: generator}, {type: null}]}
)");
  pipeline->start();
  pipeline->run();  // returns: the failure stopped every source and the failed stage drained its input
  ASSERT_EQ(pipeline->failures().size(), 1U);
  EXPECT_EQ(pipeline->failures()[0].lane, "a");
  EXPECT_EQ(pipeline->failures()[0].stage, "dsp");
  EXPECT_EQ(pipeline->failures()[0].message, "simulated device error after 5 chunks");
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_EQ(lanes[0][1]->out.chunks, 5U);
  EXPECT_EQ(lanes[0][2]->in.chunks, 5U);
  // Everything the source handed on was either passed or counted as arriving after the failure.
  EXPECT_EQ(lanes[0][0]->out.chunks, lanes[0][1]->in.chunks);
  EXPECT_EQ(lanes[0][1]->in.chunks, 5U + counter(*lanes[0][1], "after_stage_end"));
  // The healthy lane was stopped too and drained cleanly.
  EXPECT_EQ(lanes[1][0]->out.chunks, lanes[1][1]->in.chunks);
}

TEST(Lifecycle, DropPolicyCountsInsteadOfBlocking) {
  auto pipeline = make(R"(pipeline: {chunk: 64KiB, chunks: 64}
lanes:
  - name: a
    stages: [{type: generator, on_full: drop}, {type: slow, delay: 2ms, queue_depth: 2}]
)");
  pipeline->start();
  std::thread stopper([&] {
    const auto lanes = pipeline->metrics_by_lane();
    EXPECT_TRUE(await([&] { return lanes[0][1]->in.chunks.load() >= 10; }));
    pipeline->request_stop();
  });
  pipeline->run();
  stopper.join();
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_GT(counter(*lanes[0][0], "queue_full"), 0U);
  EXPECT_EQ(lanes[0][0]->out.chunks, lanes[0][1]->in.chunks);  // every accepted chunk arrived
}

TEST(Lifecycle, BlockPolicyLosesNothingBehindASlowSink) {
  auto pipeline = make(R"(pipeline: {chunk: 64KiB, chunks: 8}
lanes:
  - name: a
    stages: [{type: generator, stop_after: 2MiB}, {type: slow, delay: 1ms, queue_depth: 2}]
)");
  pipeline->start();
  pipeline->run();
  const auto lanes = pipeline->metrics_by_lane();
  EXPECT_EQ(lanes[0][1]->in.bytes, 2U << 20);
  EXPECT_EQ(lanes[0][0]->total_drops(), 0U);
  EXPECT_GT(lanes[0][0]->wait_ns.load(), 0U);  // the source felt the backpressure
  // ... at the full queue: 8 chunks, of which the sink, its queue and the push hold at most 4.
  EXPECT_EQ(lanes[0][0]->pool_waits.load(), 0U);
}

TEST(Lifecycle, ASourceWhosePoolRunsDryCountsEachWaitAndTheLongest) {
  // Two chunks, a sink that holds each for 3 ms and a deep queue: the generator waits for its
  // pool, not its queue, and the report says how often and for how long.
  auto pipeline = make(R"(pipeline: {chunk: 64KiB, chunks: 2}
lanes:
  - name: a
    stages: [{type: generator, stop_after: 1MiB}, {type: slow, delay: 3ms, queue_depth: 8}]
)");
  pipeline->start();
  pipeline->run();
  const StageMetrics& source = *pipeline->metrics_by_lane()[0][0];
  EXPECT_EQ(pipeline->metrics_by_lane()[0][1]->in.bytes, 1U << 20);
  EXPECT_GE(source.pool_waits.load(), 10U);               // 16 chunks through 2
  EXPECT_GE(source.pool_wait_max_ns.load(), 1'000'000U);  // a chunk comes back only after the sink's 3 ms
  EXPECT_GE(source.pool_wait_ns.load(), source.pool_wait_max_ns.load());
  EXPECT_LE(source.pool_wait_ns.load(), source.wait_ns.load());  // a pool wait is a wait

  const nlohmann::json report = report_json(*pipeline, 0)["lanes"][0]["stages"][0];
  EXPECT_EQ(report["pool_waits"]["count"], source.pool_waits.load());
  EXPECT_GE(report["pool_waits"]["longest_seconds"].get<double>(), 1e-3);
  EXPECT_NE(summary_table(*pipeline).find("pool waits"), std::string::npos) << summary_table(*pipeline);
  EXPECT_NE(prometheus_text(*pipeline).find("sluice_stage_pool_waits_total{"), std::string::npos);
}

TEST(Lifecycle, PinningToACpuThisProcessCannotUseFailsAtStart) {
  auto pipeline = make("lanes: [{name: a, stages: [{type: generator, cpu: 4000}, {type: null}]}]\n");
  try {
    pipeline->start();
    FAIL() << "start should have failed";
  } catch (const PipelineError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot pin to cpu 4000"), std::string::npos) << error.what();
  }
}

// A lane's cpu: set pins its stages that name none to exactly that set; the report says where
// each stage ran and the lane's GPU.
TEST(Lifecycle, ALaneCpuSetPinsItsStagesToThatSet) {
  std::vector<int> usable = allowed_cores();
  if (usable.size() < 2) GTEST_SKIP() << "this process may use one core";
  usable.resize(2);
  const std::string set = std::to_string(usable[0]) + "," + std::to_string(usable[1]);
  g_probe_cores.clear();
  auto pipeline = make("lanes: [{name: a, gpu: 0, cpu: '" + set +
                       "', stages: [{type: generator, stop_after: 8MiB, cpu: " + std::to_string(usable[1]) +
                       "}, {type: affinity}]}]\n");
  pipeline->start();
  pipeline->run();
  ASSERT_TRUE(pipeline->failures().empty()) << pipeline->failures()[0].message;
  EXPECT_EQ(g_probe_cores, usable);
  const nlohmann::json report = report_json(*pipeline, 0);
  const auto& lane = report["lanes"][0];
  EXPECT_EQ(lane["gpu"]["index"], 0);
  EXPECT_EQ(lane["gpu"]["reason"], "set by gpu: (lanes.a.gpu)");
  EXPECT_EQ(lane["stages"][0]["cores"], std::to_string(usable[1]));
  EXPECT_EQ(lane["stages"][1]["cores"], format_core_list(usable));
}

// A stage pinned by cpu: keeps its core: threads no cpu: places (an unpinned stage, a thread a
// stage makes in start()) run on the other cores, and the thread that ran the pipeline has all
// of its cores back afterwards.
TEST(Lifecycle, ThreadsWithoutACpuSettingKeepOffPinnedCores) {
  const std::vector<int> before = allowed_cores();
  if (before.size() < 2) GTEST_SKIP() << "this process may use one core";
  const int pinned = before.back();
  std::vector<int> rest(before.begin(), before.end() - 1);
  g_probe_cores.clear();
  g_probe_helper_cores.clear();
  auto pipeline = make("lanes: [{name: a, stages: [{type: generator, stop_after: 8MiB, cpu: " + std::to_string(pinned) +
                       "}, {type: affinity}]}]\n");
  pipeline->start();
  pipeline->run();
  ASSERT_TRUE(pipeline->failures().empty()) << pipeline->failures()[0].message;
  EXPECT_EQ(g_probe_cores, rest);
  EXPECT_EQ(g_probe_helper_cores, rest);
  EXPECT_EQ(allowed_cores(), before);
}

// A stage pinned to a core another busy thread also runs on waits for it: the report has the
// stage thread's wait and preemptions and a note naming the core, and /metrics has the wait.
TEST(Lifecycle, AStageKeptOffItsCoreByAnotherThreadIsMeasuredAndNamed) {
  const int core = allowed_cores().front();
  auto pipeline = make(
      "pipeline: {chunk: 64KiB, duration: 700ms}\n"
      "lanes: [{name: a, stages: [{type: generator, cpu: " +
      std::to_string(core) + "}, {type: null}]}]\n");
  pipeline->start();
  {
    const test::CoreRival rival(core);
    pipeline->run();
  }
  ASSERT_TRUE(pipeline->failures().empty()) << pipeline->failures()[0].message;
  const nlohmann::json report = report_json(*pipeline, 0);
  const auto& generator = report["lanes"][0]["stages"][0];
  ASSERT_EQ(generator["threads"].size(), 1U);
  const auto& thread = generator["threads"][0];
  EXPECT_EQ(thread["name"], "stage");
  EXPECT_EQ(thread["cores"], std::to_string(core));
  // The generator never waits for its sink here, so it and the rival both always want the core.
  EXPECT_GE(thread["core_wait_seconds"].get<double>(), thread["seconds"].get<double>() / 5) << thread.dump();
  EXPECT_GT(thread["preemptions"].get<std::uint64_t>(), 0U);
  EXPECT_GE(thread["core_wait_peak_seconds"].get<double>(), 0.01) << thread.dump();
  // The hypervisor's steal on its core: a share of the run at most (0 on bare metal), with its note.
  EXPECT_GE(thread["stolen_seconds"].get<double>(), 0.0) << thread.dump();
  EXPECT_LE(thread["stolen_seconds"].get<double>(), thread["seconds"].get<double>() + 0.02) << thread.dump();
  EXPECT_TRUE(thread["steal_note"].is_string()) << thread.dump();
  // The interrupts its pinned core took over the run, the timer's at least, and their main source.
  EXPECT_GT(thread["interrupts"].get<std::uint64_t>(), 0U) << thread.dump();
  EXPECT_FALSE(thread["interrupts_top"].get<std::string>().empty()) << thread.dump();
  // The dashboard's live status has the same figures for the thread.
  const auto live = live_status_json(*pipeline)["lanes"][0]["stages"][0]["threads"][0];
  EXPECT_EQ(live["core_wait_ns"].get<double>() / 1e9, thread["core_wait_seconds"].get<double>()) << live.dump();
  EXPECT_EQ(live["stolen_ns"].get<double>() / 1e9, thread["stolen_seconds"].get<double>()) << live.dump();
  const std::string note = thread["note"];
  EXPECT_NE(note.find("its stage thread (pinned to cores " + std::to_string(core) + ")"), std::string::npos) << note;
  EXPECT_NE(summary_table(*pipeline).find("note: " + note), std::string::npos);
  // The unpinned sink has its figures and never a note: it runs wherever there is room.
  const auto& sink = report["lanes"][0]["stages"][1]["threads"][0];
  EXPECT_EQ(sink["cores"], "");
  EXPECT_EQ(sink["note"], "");
  const std::string text = prometheus_text(*pipeline);
  EXPECT_NE(text.find("sluice_stage_thread_core_wait_seconds_total{lane=\"a\",stage=\"generator\",type=\"generator\","
                      "thread=\"stage\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sluice_stage_thread_stolen_seconds_total{lane=\"a\",stage=\"generator\",type=\"generator\","
                      "thread=\"stage\"}"),
            std::string::npos)
      << text;
}

// Two stages the cpu: settings pin to one core take turns there by design: the note names the
// other one instead of blaming something outside the pipeline.
TEST(Lifecycle, StagesPinnedToOneCoreAreNamedAsEachOthersRivals) {
  const std::string core = std::to_string(allowed_cores().front());
  auto pipeline = make(
      "pipeline: {chunk: 64KiB, duration: 600ms}\n"
      "lanes: [{name: a, stages: [{type: generator, cpu: " +
      core + "}, {type: null}]}, {name: b, stages: [{type: generator, cpu: " + core + "}, {type: null}]}]\n");
  pipeline->start();
  pipeline->run();
  ASSERT_TRUE(pipeline->failures().empty()) << pipeline->failures()[0].message;
  const nlohmann::json report = report_json(*pipeline, 0);
  const std::string note_a = report["lanes"][0]["stages"][0]["threads"][0]["note"];
  const std::string note_b = report["lanes"][1]["stages"][0]["threads"][0]["note"];
  EXPECT_NE(note_a.find("takes turns there with another thread of this pipeline (lane b stage generator)"),
            std::string::npos)
      << note_a;
  EXPECT_NE(note_b.find("takes turns there with another thread of this pipeline (lane a stage generator)"),
            std::string::npos)
      << note_b;
}

}  // namespace
}  // namespace sluice
