// The link's two halves as stages, each in its own pipeline (node) joined over loopback tcp:
// a sending half that the receiving node holds back by its credits waits rather than works,
// and its busy share says so.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>

#include "pipeline/config.hpp"
#include "pipeline/placement.hpp"
#include "pipeline/runtime.hpp"
#include "tests/stages/stage_test_util.hpp"
#include "tests/support/free_port.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

constexpr auto kHold = 2ms;  // how long the slow sink keeps each chunk: the lane's pace
std::atomic<std::uint64_t> g_sunk_bytes{0};

// A downstream that takes kHold per chunk, so that the landing ring's slots, and with them the
// sender's credits, come back one every kHold.
class SlowSink final : public Stage {
 public:
  SlowSink(SettingsReader&, const PipelineSettings&) {}
  void start(StageContext& context) override { context_ = &context; }
  StageStatus process() override {
    ChunkPtr chunk = context_->input().pop(10ms);
    if (!chunk) return context_->input().finished() ? StageStatus::end_of_stream : StageStatus::idle;
    std::this_thread::sleep_for(kHold);
    g_sunk_bytes += chunk->size;
    return StageStatus::ok;
  }
  void stop() noexcept override {}

 private:
  StageContext* context_ = nullptr;
};

std::unique_ptr<Pipeline> node(const std::string& yaml, const std::string& name) {
  StageRegistry registry = testing::builtin_registry_with(
      {testing::stage_type_of<SlowSink>("slow_sink", StageRole::sink, "keeps each chunk a while")});
  return std::make_unique<Pipeline>(select_node(load_pipeline_text(yaml, "test.yaml", {}, registry, name), name));
}

const StageMetrics& metrics_of(const Pipeline& pipeline, const std::string& stage) {
  for (const StageMetrics* metrics : pipeline.metrics()) {
    if (metrics->stage() == stage) return *metrics;
  }
  throw std::runtime_error("no stage " + stage);
}

TEST(LinkHalves, ASendingHalfHeldBackByCreditsWaitsRatherThanWorks) {
  constexpr std::uint64_t kBytes = 12 << 20;  // 192 chunks of 64 KiB: about 0.4 s at one per kHold
  g_sunk_bytes = 0;
  const std::string yaml = R"(pipeline: {chunk: 64KiB, chunks: 8}
lanes:
  - name: a
    stages:
      - {type: generator, node: near, signal: ramp, stop_after: )" +
                           std::to_string(kBytes) + R"(}
      - {type: link, node: far, transport: tcp, connections: 2, address: 127.0.0.1, port: )" +
                           std::to_string(testing::free_tcp_port()) + R"(, chunks: 4, connect_timeout: 20s}
      - {type: slow_sink}
)";
  auto far = node(yaml, "far");
  auto near = node(yaml, "near");
  auto receiving = std::async(std::launch::async, [&] {
    far->start();  // waits in accept() for the sending half
    far->run();
  });
  near->start();
  near->run();
  receiving.get();
  ASSERT_TRUE(near->failures().empty()) << near->failures()[0].message;
  ASSERT_TRUE(far->failures().empty()) << far->failures()[0].message;
  EXPECT_EQ(g_sunk_bytes.load(), kBytes);

  // The sink's pace, not the sender's work, set the run's length: the sender spent it waiting
  // for credits, a few microseconds of work per chunk between.
  const StageMetrics& sending = metrics_of(*near, "link");
  const auto run_ns = static_cast<double>(sending.stopped_ns.load() - sending.started_ns.load());
  EXPECT_GE(run_ns, 192 * std::chrono::nanoseconds(kHold).count() * 0.9);
  const double busy = static_cast<double>(sending.busy_ns.load()) / run_ns;
  EXPECT_LT(busy, 0.3) << "the sending half counted its waits for credits as work";
}

}  // namespace
}  // namespace sluice
