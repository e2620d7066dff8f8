// Node placement: which stages run where, how a lane is cut at its link, and the mistakes
// that are configuration errors.
#include "pipeline/placement.hpp"

#include <gtest/gtest.h>

#include "pipeline/config.hpp"

namespace sluice {
namespace {

constexpr const char* kTwoNodes = R"(pipeline: {chunk: 64KiB}
lanes:
  - name: local_only
    stages:
      - {type: generator, node: a}
      - {type: null}
  - name: crossing
    stages:
      - {type: generator, node: a}
      - {type: link, node: b, transport: tcp, address: 127.0.0.1, port: 7001}
      - {type: null}
)";

std::string errors_of(const std::string& yaml, const std::string& node = {}) {
  try {
    PipelineDefinition definition = load_pipeline_text(yaml, "test.yaml");
    if (!node.empty()) select_node(std::move(definition), node);
  } catch (const ConfigException& error) {
    std::string text;
    for (const auto& each : error.errors().all()) text += each.to_string() + "\n";
    return text;
  }
  return {};
}

TEST(Placement, NodesFollowThePreviousStageAndChangeOnlyAtTheLink) {
  const PipelineDefinition definition = load_pipeline_text(kTwoNodes, "test.yaml");
  EXPECT_EQ(pipeline_nodes(definition), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(spans_nodes(definition));
  const auto& crossing = definition.lanes[1].stages;
  EXPECT_EQ(crossing[1].node, "b");
  EXPECT_TRUE(crossing[1].joins_nodes);
  EXPECT_EQ(crossing[2].node, "b");  // inherited
  EXPECT_FALSE(crossing[2].joins_nodes);
  EXPECT_EQ(definition.lanes[0].stages[1].node, "a");
}

TEST(Placement, EachNodeGetsItsStagesAndItsHalfOfTheLink) {
  const PipelineDefinition on_a = select_node(load_pipeline_text(kTwoNodes, "test.yaml"), "a");
  ASSERT_EQ(on_a.lanes.size(), 2U);
  EXPECT_EQ(on_a.lanes[1].name, "crossing");
  ASSERT_EQ(on_a.lanes[1].stages.size(), 2U);
  EXPECT_EQ(on_a.lanes[1].stages[1].type, "link");
  EXPECT_EQ(on_a.lanes[1].stages[1].role, StageRole::sink);  // the sending half
  ASSERT_TRUE(on_a.lanes[1].stages[1].stage);

  const PipelineDefinition on_b = select_node(load_pipeline_text(kTwoNodes, "test.yaml"), "b");
  ASSERT_EQ(on_b.lanes.size(), 1U);  // local_only has nothing on b
  EXPECT_EQ(on_b.lanes[0].name, "crossing");
  EXPECT_EQ(on_b.lanes[0].index, 1U);  // the lane number chunks carry, as on node a
  ASSERT_EQ(on_b.lanes[0].stages.size(), 2U);
  EXPECT_EQ(on_b.lanes[0].stages[0].role, StageRole::source);  // the receiving half
  EXPECT_EQ(on_b.lanes[0].stages[1].type, "null");
}

TEST(Placement, MistakesAreErrorsWithTheirLocation) {
  EXPECT_NE(errors_of(kTwoNodes, "c").find("no stage of this pipeline is placed on node 'c'"), std::string::npos);
  EXPECT_NE(
      errors_of(R"(lanes:
  - name: x
    stages:
      - {type: generator, node: a}
      - {type: null, node: b}
)")
          .find("test.yaml:5:9: lanes.x.null: stage 'null' (null): only a link stage can move a lane to another node"),
      std::string::npos);
  EXPECT_NE(errors_of(R"(lanes:
  - name: x
    stages:
      - {type: generator}
      - {type: link, node: b, transport: tcp, address: 127.0.0.1, port: 7000}
      - {type: null}
)")
                .find("the stages before it name no node"),
            std::string::npos);
  const std::string back_and_forth = errors_of(R"(lanes:
  - name: x
    stages:
      - {type: generator, node: a}
      - {type: link, name: there, node: b, transport: tcp, address: 127.0.0.1, port: 7000}
      - {type: link, name: back, node: a, transport: tcp, address: 127.0.0.1, port: 7001}
      - {type: null}
)",
                                               "a");
  EXPECT_NE(back_and_forth.find("comes back to node 'a'"), std::string::npos) << back_and_forth;
  EXPECT_NE(errors_of(R"(lanes:
  - name: x
    stages:
      - {type: generator}
      - {type: link, transport: tcp, address: 127.0.0.1, port: 7000}
      - {type: null}
)")
                .find("transport tcp carries a lane between two nodes"),
            std::string::npos);
  EXPECT_NE(errors_of(R"(lanes:
  - name: x
    stages:
      - {type: generator}
      - {type: link, port: 7000}
      - {type: null}
)")
                .find("address and port are for a link between nodes"),
            std::string::npos);
}

// Each node's process reads the whole file, but a record tap on node a writes node a's
// disks: node b must not refuse to start because of what its own disk holds (or lacks).
TEST(Placement, AStageOnAnotherNodeIsNotCheckedAgainstThisHostsFiles) {
  const std::string yaml = R"(pipeline: {chunk: 64KiB}
lanes:
  - name: crossing
    stages:
      - {type: generator, node: a}
      - {type: record, directory: /dev/null/captures}
      - {type: link, node: b, transport: tcp, address: 127.0.0.1, port: 7001}
      - {type: null}
)";
  const auto on_a = [&] {
    static_cast<void>(load_pipeline_text(yaml, "test.yaml", {}, StageRegistry::builtin(), "a"));
  };
  EXPECT_THROW(on_a(), ConfigException);  // the tap runs there: its directory must be one it can write
  const PipelineDefinition on_b =
      select_node(load_pipeline_text(yaml, "test.yaml", {}, StageRegistry::builtin(), "b"), "b");
  ASSERT_EQ(on_b.lanes.size(), 1U);
  EXPECT_EQ(on_b.lanes[0].stages.size(), 2U);
  // Without a node (one process runs everything) every stage is checked here.
  EXPECT_NE(errors_of(yaml).find("directory"), std::string::npos);
}

TEST(Placement, APipelineWithoutNodesRunsWhole) {
  const PipelineDefinition definition = load_pipeline_text(R"(lanes:
  - name: x
    stages:
      - {type: generator}
      - {type: link, transport: auto}
      - {type: null}
)",
                                                           "test.yaml");
  EXPECT_FALSE(spans_nodes(definition));
  EXPECT_TRUE(pipeline_nodes(definition).empty());
}

}  // namespace
}  // namespace sluice
