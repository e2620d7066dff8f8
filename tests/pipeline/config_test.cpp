// Pipeline files: every class of error names file:line:column and the key path, several are
// reported at once, and lane templates, per-lane overrides and --set resolve as documented.
#include "pipeline/config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "stages/generator/generator.hpp"

namespace sluice {
namespace {

constexpr const char* kGood = R"(pipeline:
  name: two-port
  chunk: 1MiB
template:
  - name: source
    type: generator
    rate: 1GB/s
  - name: sink
    type: null
lanes:
  - name: port0
  - name: port1
    source: {rate: 2GB/s, signal: ramp}
)";

std::vector<ConfigError> errors_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_pipeline_text(yaml, "test.yaml", overrides);
  } catch (const ConfigException& error) {
    return error.errors().all();
  }
  ADD_FAILURE() << "expected the configuration to be rejected";
  return {};
}

const GeneratorSettings& generator_of(const PipelineDefinition& definition, std::size_t lane) {
  return dynamic_cast<const GeneratorStage&>(*definition.lanes.at(lane).stages.at(0).stage).settings();
}

TEST(Config, TemplateWithPerLaneOverrides) {
  const PipelineDefinition definition = load_pipeline_text(kGood, "test.yaml");
  EXPECT_EQ(definition.settings.name, "two-port");
  EXPECT_EQ(definition.settings.chunk_bytes, 1U << 20);
  ASSERT_EQ(definition.lanes.size(), 2U);
  EXPECT_EQ(definition.lanes[1].name, "port1");
  ASSERT_EQ(definition.lanes[1].stages.size(), 2U);
  EXPECT_EQ(definition.lanes[1].stages[0].name, "source");
  EXPECT_EQ(definition.lanes[1].stages[1].type, "null");
  EXPECT_DOUBLE_EQ(generator_of(definition, 0).rate, 1e9);
  EXPECT_EQ(generator_of(definition, 0).signal, GeneratorSignal::tone);
  EXPECT_DOUBLE_EQ(generator_of(definition, 1).rate, 2e9);
  EXPECT_EQ(generator_of(definition, 1).signal, GeneratorSignal::ramp);
  // The pool chunk size defaults to the pipeline's.
  EXPECT_EQ(generator_of(definition, 0).pool.chunk_bytes, 1U << 20);
}

TEST(Config, SetOverridesAnySettingByPath) {
  const PipelineDefinition definition = load_pipeline_text(
      kGood, "test.yaml", {"lanes.port0.source.rate=3GB/s", "template.source.signal=noise", "pipeline.duration=2s"});
  EXPECT_DOUBLE_EQ(generator_of(definition, 0).rate, 3e9);
  EXPECT_EQ(generator_of(definition, 0).signal, GeneratorSignal::noise);
  EXPECT_EQ(generator_of(definition, 1).signal, GeneratorSignal::ramp);  // the lane's own override still wins
  EXPECT_EQ(definition.settings.duration, std::chrono::seconds(2));
}

TEST(Config, BadSetValueNamesTheCommandLine) {
  const auto errors = errors_of(kGood, {"lanes.port1.source.rate=fast"});
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "--set lanes.port1.source.rate=fast");
  EXPECT_EQ(errors[0].key_path, "lanes.port1.source.rate");
}

TEST(Config, SetWithoutEqualsOrUnknownLaneIsAnError) {
  EXPECT_EQ(errors_of(kGood, {"pipeline.duration"}).size(), 1U);
  const auto errors = errors_of(kGood, {"lanes.port9.source.rate=1GB/s"});
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_NE(errors[0].message.find("port9"), std::string::npos);
}

TEST(Config, SyntaxErrorNamesLineAndColumn) {
  const auto errors = errors_of("pipeline:\n  name: [unclosed\nlanes: []\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location.rfind("test.yaml:", 0), 0U);
  EXPECT_NE(errors[0].message.find("YAML syntax error"), std::string::npos);
}

TEST(Config, SyntaxErrorNamesTheKeyPathItIsUnder) {
  // The flow sequence under pipeline.name never closes: the parser fails inside it.
  const auto errors = errors_of("pipeline:\n  name: [unclosed\nlanes: []\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].key_path.rfind("pipeline.name", 0), 0U) << errors[0].to_string();
  // A tab where indentation is expected, deep in a lane.
  const auto deep = errors_of("lanes:\n  - name: a\n    source:\n      rate: 1GB/s\n     bad: [\n");
  ASSERT_EQ(deep.size(), 1U);
  EXPECT_FALSE(deep[0].key_path.empty());
  EXPECT_EQ(deep[0].location.rfind("test.yaml:", 0), 0U);
  // Nothing parsed yet: the path still says where.
  const auto first = errors_of("[: x\n");
  ASSERT_EQ(first.size(), 1U);
  EXPECT_FALSE(first[0].key_path.empty());
}

TEST(Config, TextThatIsNotUtf8IsRejectedWhereItIs) {
  // Latin-1 "é" (0xE9) in a value on line 2, column 9.
  std::string yaml = std::string(kGood);
  yaml.replace(yaml.find("two-port"), 8, std::string("two-p\xE9rt"));
  const auto errors = errors_of(yaml);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:2:14");
  EXPECT_NE(errors[0].message.find("UTF-8"), std::string::npos);
  // Each malformed form: a stray continuation byte, a truncated sequence, an overlong "/",
  // a UTF-16 surrogate, a code point above U+10FFFF.
  for (const std::string& bad : {std::string("\x80"), std::string("\xC3"), std::string("\xC0\xAF"),
                                 std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80")}) {
    const auto each = errors_of("pipeline: {name: " + bad + "}\nlanes: []\n");
    ASSERT_EQ(each.size(), 1U);
    EXPECT_EQ(each[0].location, "test.yaml:1:18");
  }
  // Well-formed UTF-8 of every length passes this check (and fails only on content).
  const auto good = errors_of("pipeline: {name: \"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x93\xA1\"}\nlanes: []\n");
  ASSERT_EQ(good.size(), 1U);
  EXPECT_EQ(good[0].key_path, "lanes");
}

TEST(Config, AliasBombIsRejectedAtOnce) {
  // Billion laughs: nine levels of ten aliases each, 10^9 nodes from under 600 bytes.
  std::string yaml = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char level = 'b'; level <= 'i'; ++level) {
    const std::string previous(1, static_cast<char>(level - 1));
    yaml += std::string(1, level) + ": &" + level + " [";
    for (int i = 0; i < 9; ++i) yaml += std::string(i == 0 ? "" : ",") + "*" + previous;
    yaml += "]\n";
  }
  ASSERT_LT(yaml.size(), 600U);
  const auto started = std::chrono::steady_clock::now();
  const auto errors = errors_of(yaml);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_NE(errors[0].message.find("aliases expand the document by more than 100000 nodes"), std::string::npos)
      << errors[0].to_string();
  // Lines 1 to 5 write 56 nodes that expand to 74,738; the first *e on line 6 adds 66,429
  // more, past 100,000: it is the alias refused.
  EXPECT_EQ(errors[0].location, "test.yaml:6:8") << errors[0].to_string();
  EXPECT_EQ(errors[0].key_path, "f[0]");
  // Not a timing test: the limit is 10^5 nodes; walking 10^9 would take tens of seconds.
  EXPECT_LT(took, std::chrono::seconds(5));
  // A few aliases (the normal use) are fine.
  const auto fine = load_pipeline_text(
      "template:\n  - &gen {name: source, type: generator}\n  - {name: sink, type: null}\nlanes: [{name: a}, {name: "
      "b}]\n",
      "test.yaml");
  EXPECT_EQ(fine.lanes.size(), 2U);
}

// One lane of a real file, with its stages written out (no template, no aliases).
std::string written_out_lane(std::size_t lane) {
  return "  - name: port" + std::to_string(lane) + "\n" +
         "    stages:\n"
         "      - name: source\n"
         "        type: generator\n"
         "        format: ci16\n"
         "        sample_rate: 100Msps\n"
         "        rate: " +
         std::to_string(lane % 1000 + 1) +
         "MB/s\n"
         "        signal: tone\n"
         "        amplitude: 0.25\n"
         "      - name: link\n"
         "        type: link\n"
         "        memory: host\n"
         "      - name: sink\n"
         "        type: \"null\"\n"
         "        queue_depth: 8\n";
}

TEST(Config, ALargeFileWithoutAliasesLoads) {
  // Over 10 MB and 454,551 lines of lanes: a size no alias rule may refuse.
  std::string yaml = "pipeline:\n  name: many-lanes\n  chunk: 1MiB\nlanes:\n";
  std::size_t lanes = 0;
  while (yaml.size() < 10'000'000) yaml += written_out_lane(lanes++);
  ASSERT_GE(std::count(yaml.begin(), yaml.end(), '\n'), 454'551);
  const PipelineDefinition definition = load_pipeline_text(yaml, "large.yaml");
  ASSERT_EQ(definition.lanes.size(), lanes);
  // Each lane is the one written at its place, settings included.
  for (const std::size_t lane : {std::size_t{0}, std::size_t{12'345}, lanes - 1}) {
    SCOPED_TRACE(lane);
    EXPECT_EQ(definition.lanes[lane].name, "port" + std::to_string(lane));
    ASSERT_EQ(definition.lanes[lane].stages.size(), 3U);
    EXPECT_EQ(definition.lanes[lane].stages[2].queue_depth, 8U);
    EXPECT_DOUBLE_EQ(generator_of(definition, lane).rate, static_cast<double>(lane % 1000 + 1) * 1e6);
  }
}

TEST(Config, ModestAliasingInALargeFileLoads) {
  // Every lane takes its generator from one anchor: each alias adds its 14 nodes, more than
  // 100,000 in all, and still a fraction of what the file writes.
  std::string yaml =
      "pipeline: {name: aliased}\nlanes:\n"
      "  - name: port0\n    stages:\n      - &source {type: generator, format: ci16, sample_rate: 100Msps,"
      " rate: 3MB/s, signal: ramp, amplitude: 0.25, stop_after: 1MiB}\n      - {type: \"null\"}\n";
  constexpr std::size_t kLanes = 10'000;
  for (std::size_t lane = 1; lane < kLanes; ++lane) {
    yaml += "  - name: port" + std::to_string(lane) +
            "\n    stages:\n      - *source\n      - {type: link, memory: host}\n"
            "      - {type: \"null\", queue_depth: 8}\n";
  }
  const PipelineDefinition definition = load_pipeline_text(yaml, "test.yaml");
  ASSERT_EQ(definition.lanes.size(), kLanes);
  EXPECT_EQ(definition.lanes.back().stages.size(), 3U);
  EXPECT_DOUBLE_EQ(generator_of(definition, kLanes - 1).rate, 3e6);
  EXPECT_EQ(generator_of(definition, kLanes - 1).signal, GeneratorSignal::ramp);
}

TEST(Config, DeepNestingIsRefusedWhereItGoesTooDeep) {
  // Block maps, each key one level in: the 65th map (line 65) is one too many. It starts
  // at its first key, indented 2 × 64 columns.
  std::string block;
  for (std::size_t level = 0; level < 600; ++level)
    block += std::string(2 * level, ' ') + "k" + std::to_string(level) + ":\n";
  auto errors = errors_of(block);
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:65:129") << errors[0].to_string();
  EXPECT_EQ(errors[0].message, "maps and lists nested deeper than 64 levels");
  std::string path = "k0";
  for (int level = 1; level < 64; ++level) path += ".k" + std::to_string(level);
  EXPECT_EQ(errors[0].key_path, path);
  // Flow lists on line 2 after "lanes: ", from column 8: the top-level map is the first
  // level, so the 64th "[" (column 71) is the first list too deep.
  errors = errors_of("pipeline: {}\nlanes: " + std::string(1000, '[') + std::string(1000, ']') + "\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:2:71") << errors[0].to_string();
  EXPECT_EQ(errors[0].message, "maps and lists nested deeper than 64 levels");
  path = "lanes";
  for (int level = 1; level < 64; ++level) path += "[0]";
  EXPECT_EQ(errors[0].key_path, path);
  // 64 levels are read (and then refused for what they hold, not for their depth).
  errors = errors_of("pipeline: {}\nlanes: " + std::string(63, '[') + std::string(63, ']') + "\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:2:9") << errors[0].to_string();
  EXPECT_EQ(errors[0].message, "expected a map with at least 'name'");
}

TEST(Config, UnknownKeyWithDidYouMeanHint) {
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - type: generator
        rat: 1GB/s
      - type: null
)");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:5:9");
  EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].rat");
  EXPECT_NE(errors[0].message.find("unknown setting 'rat'"), std::string::npos);
  EXPECT_EQ(errors[0].hint, "did you mean 'rate'?");
}

TEST(Config, WrongTypeNamesTheExpectedForm) {
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - type: generator
        rate: [1, 2]
        chunk: lots
      - type: null
)");
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].location, "test.yaml:5:15");
  EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].rate");
  EXPECT_NE(errors[0].message.find("expected a rate"), std::string::npos);
  EXPECT_EQ(errors[1].location, "test.yaml:6:16");
  EXPECT_NE(errors[1].message.find("'lots'"), std::string::npos);
}

TEST(Config, MissingRequiredSettingPointsAtTheStage) {
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - type: generator
      - type: file
)");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:5:9");
  EXPECT_EQ(errors[0].key_path, "lanes.a.stages[1].path");
  EXPECT_NE(errors[0].message.find("required setting 'path' is missing"), std::string::npos);
}

TEST(Config, OutOfRangeValues) {
  const auto errors = errors_of(R"(pipeline:
  queue_depth: 0
lanes:
  - name: a
    stages:
      - type: generator
        amplitude: 1.5
      - type: null
)");
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].key_path, "pipeline.queue_depth");
  EXPECT_EQ(errors[0].location, "test.yaml:2:16");
  EXPECT_NE(errors[0].message.find("out of range"), std::string::npos);
  EXPECT_EQ(errors[1].key_path, "lanes.a.stages[0].amplitude");
}

TEST(Config, QueueSettingsOnAStageWithoutThatQueueAreErrors) {
  // A source has no input queue and a sink no output queue: accepting these would do nothing.
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - type: generator
        queue_depth: 8
      - type: null
        on_full: drop
)");
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].queue_depth");
  EXPECT_NE(errors[0].message.find("a source has no input queue"), std::string::npos) << errors[0].message;
  EXPECT_NE(errors[0].hint.find("next stage"), std::string::npos) << errors[0].hint;
  EXPECT_EQ(errors[1].key_path, "lanes.a.stages[1].on_full");
  EXPECT_NE(errors[1].message.find("a sink has no output queue"), std::string::npos) << errors[1].message;
  // Where the queue exists, both are accepted and reach the definition.
  const auto definition = load_pipeline_text(
      "lanes: [{name: a, stages: [{type: generator, on_full: drop}, {type: null, queue_depth: 8}]}]\n", "test.yaml",
      {});
  EXPECT_EQ(definition.lanes[0].stages[0].on_full, OverflowPolicy::drop);
  EXPECT_EQ(definition.lanes[0].stages[1].queue_depth, 8U);
}

TEST(Config, QueueDepthIsExactOrAnError) {
  // The queue is a power-of-two ring: 5 would silently become 8, so it is refused with the choices.
  const auto errors = errors_of(R"(pipeline:
  queue_depth: 12
lanes:
  - name: a
    stages:
      - type: generator
      - type: null
        queue_depth: 5
)");
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].key_path, "pipeline.queue_depth");
  EXPECT_NE(errors[0].hint.find("use 8 or 16"), std::string::npos) << errors[0].hint;
  EXPECT_EQ(errors[1].key_path, "lanes.a.stages[1].queue_depth");
  EXPECT_NE(errors[1].message.find("5 is not a power of two"), std::string::npos) << errors[1].message;
  EXPECT_NE(errors[1].hint.find("use 4 or 8"), std::string::npos) << errors[1].hint;
}

TEST(Config, ImpossibleCombinations) {
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - type: generator
        sample_rate: 10MHz
        frequency: 8MHz
        chunk: 6000
      - type: null
)");
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].chunk");
  EXPECT_NE(errors[0].hint.find("O_DIRECT"), std::string::npos);
  EXPECT_EQ(errors[1].key_path, "lanes.a.stages[0].frequency");
  EXPECT_NE(errors[1].message.find("Nyquist"), std::string::npos);
}

TEST(Config, SourcesThatWriteFromTheCpuRefuseGpuMemory) {
  // recvmmsg and io_uring reads cannot land in cudaMalloc memory: that is a link's job.
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - {type: udp, memory: device}
      - {type: link, memory: device}
      - {type: null}
)");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].memory");
  EXPECT_EQ(errors[0].location, "test.yaml:4:29");  // the value
  EXPECT_NE(errors[0].hint.find("link with memory: device"), std::string::npos);
}

TEST(Config, UnknownStageTypeSuggestsTheNearestOne) {
  const auto errors = errors_of("lanes:\n  - name: a\n    stages:\n      - type: generatr\n      - type: null\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].key_path, "lanes.a.stages[0].type");
  EXPECT_EQ(errors[0].hint, "did you mean 'generator'?");
}

// `enabled: false` leaves a tap out of its lane; the lane that remains must still end well,
// and a tap switched off is not built into the lane at all.
TEST(Config, ASwitchedOffTapIsLeftOutAndTheLaneMustStillEnd) {
  const PipelineDefinition kept = load_pipeline_text(R"(lanes:
  - name: a
    stages:
      - type: generator
      - {type: record, directory: /tmp, enabled: false}
      - type: "null"
)",
                                                     "test.yaml");
  ASSERT_EQ(kept.lanes[0].stages.size(), 2U);
  EXPECT_EQ(kept.lanes[0].stages[1].type, "null");
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - type: generator
      - type: link
      - {type: record, directory: /tmp, enabled: false}
)");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_NE(errors[0].message.find("switched-off taps left out"), std::string::npos) << errors[0].message;
}

TEST(Config, StageOrderMustRunSourceToSink) {
  const auto errors = errors_of(R"(lanes:
  - name: a
    stages:
      - type: null
      - type: generator
  - name: b
    stages:
      - type: generator
      - type: link
)");
  ASSERT_EQ(errors.size(), 3U);
  EXPECT_NE(errors[0].message.find("cannot start a lane"), std::string::npos);
  EXPECT_NE(errors[1].message.find("only be the first stage"), std::string::npos);
  EXPECT_NE(errors[2].message.find("cannot end a lane"), std::string::npos);
  EXPECT_EQ(errors[2].location, "test.yaml:9:9");
}

TEST(Config, LaneEntriesAreChecked) {
  const auto errors = errors_of(R"(template:
  - {name: source, type: generator}
  - {name: sink, type: null}
lanes:
  - name: a
  - name: a
    sorce: {rate: 1GB/s}
  - {}
)");
  ASSERT_EQ(errors.size(), 3U);
  EXPECT_NE(errors[0].message.find("two lanes are named 'a'"), std::string::npos);
  EXPECT_EQ(errors[1].hint, "did you mean 'source'?");
  EXPECT_EQ(errors[1].location, "test.yaml:7:5");
  EXPECT_NE(errors[2].message.find("needs a name"), std::string::npos);
}

TEST(Config, DuplicateKeysAreNotSilentlyMerged) {
  const auto errors = errors_of(
      "pipeline:\n  chunk: 1MiB\n  chunk: 2MiB\nlanes: [{name: a, stages: [{type: generator}, {type: null}]}]\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:3:3");
  EXPECT_NE(errors[0].message.find("duplicate key"), std::string::npos);
}

TEST(Config, ManyErrorsAreReportedTogether) {
  const auto errors = errors_of(R"(pipelin: {}
pipeline:
  chunk: 3MB
lanes:
  - name: a
    stages:
      - type: generator
        rate: quick
        signal: square
      - type: file
)");
  EXPECT_EQ(errors.size(), 5U);
  ConfigErrors collected;
  for (const auto& error : errors) collected.add(error);
  EXPECT_NE(collected.to_string().find("did you mean 'pipeline'?"), std::string::npos);
  EXPECT_NE(collected.to_string().find("one of: tone, ramp, noise"), std::string::npos);
}

TEST(Config, MissingFileIsAnError) { EXPECT_THROW(load_pipeline_file("/nonexistent/pipeline.yaml"), ConfigException); }

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Three GPUs without sysfs behind them: lanes that name none go round-robin.
GpuHost three_gpus() {
  GpuHost host{{{0, "0000:17:00.0"}, {1, "0000:65:00.0"}, {2, "0000:ca:00.0"}}, "", SysfsTopology("/nonexistent")};
  return host;
}

constexpr const char* kGpuLayers = R"(pipeline: {gpu: 2}
template:
  - {name: source, type: generator}
  - {name: link, type: link, memory: device}
  - {name: sink, type: null, gpu: 0}
lanes:
  - name: a
  - name: b
    gpu: 1
    link: {gpu: 0}
)";

TEST(Config, GpuAtEveryLevelTheStagesOwnFirst) {
  const GpuHost host = three_gpus();
  const PipelineDefinition definition =
      load_pipeline_text(kGpuLayers, "test.yaml", {}, StageRegistry::builtin(), {}, &host);
  const auto& a = definition.lanes[0];
  EXPECT_EQ(a.placement.gpu, 2);
  EXPECT_EQ(a.placement.reason, "set by gpu: (pipeline.gpu)");
  EXPECT_EQ(a.placement.pci_bus_id, "0000:ca:00.0");
  EXPECT_EQ(a.stages[0].cuda_device, 2);
  EXPECT_EQ(a.stages[1].cuda_device, 2);
  EXPECT_EQ(a.stages[2].cuda_device, 0);  // the template stage's own gpu:
  const auto& b = definition.lanes[1];
  EXPECT_EQ(b.placement.gpu, 1);
  EXPECT_EQ(b.placement.reason, "set by gpu: (lanes.b.gpu)");
  EXPECT_EQ(b.stages[0].cuda_device, 1);
  EXPECT_EQ(b.stages[1].cuda_device, 0);  // the lane's override of its link
  EXPECT_EQ(b.stages[2].cuda_device, 0);
}

TEST(Config, WithoutGpuSettingsLanesSpreadOverTheGpus) {
  const GpuHost host = three_gpus();
  const PipelineDefinition definition = load_pipeline_text(
      "lanes: [{name: a, stages: [{type: udp, address: '127.0.0.1:50000'}, {type: null}]},\n"
      "        {name: b, stages: [{type: udp, address: '127.0.0.1:50001'}, {type: null}]},\n"
      "        {name: c, stages: [{type: generator}, {type: null}]}]\n",
      "test.yaml", {}, StageRegistry::builtin(), {}, &host);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(definition.lanes[i].placement.gpu, static_cast<int>(i));
  EXPECT_EQ(definition.lanes[0].placement.reason, "round-robin (lo has no PCI device)");
  EXPECT_EQ(definition.lanes[2].placement.reason, "round-robin (no local NIC holds the source's address)");
}

TEST(Config, AGpuThatIsNotThereIsAnErrorListingTheGpus) {
  const GpuHost host = three_gpus();
  std::vector<ConfigError> errors;
  try {
    load_pipeline_text(
        "pipeline: {gpu: 3}\nlanes:\n  - name: a\n    gpu: 7\n    stages:\n      - {type: generator, gpu: 5}\n"
        "      - {type: null}\n",
        "test.yaml", {}, StageRegistry::builtin(), {}, &host);
    ADD_FAILURE() << "loaded";
  } catch (const ConfigException& error) {
    errors = error.errors().all();
  }
  ASSERT_EQ(errors.size(), 3U);
  EXPECT_EQ(errors[0].location, "test.yaml:1:17");
  EXPECT_EQ(errors[0].message,
            "gpu: 3 does not exist; GPUs present: 0 (0000:17:00.0), 1 (0000:65:00.0), 2 (0000:ca:00.0)");
  EXPECT_EQ(errors[0].hint, "use 0 to 2, or leave gpu: out for the GPU nearest the lane's NIC");
  EXPECT_EQ(errors[1].location, "test.yaml:4:10");
  EXPECT_EQ(errors[1].key_path, "lanes.a.gpu");
  EXPECT_NE(errors[1].message.find("gpu: 7 does not exist"), std::string::npos);
  EXPECT_EQ(errors[2].location, "test.yaml:6:32");
  EXPECT_NE(errors[2].message.find("gpu: 5 does not exist"), std::string::npos);
}

// The loader as `sluice validate` runs it, on this machine's GPUs (none here: a CPU-only
// machine says so; on a GPU host, the first index past its GPUs).
TEST(Config, AGpuThisMachineLacksIsAnErrorWithTheRealLoader) {
  const GpuHost& host = GpuHost::this_machine();
  const int missing = std::max<int>(1, static_cast<int>(host.gpus.size()));
  const auto errors = errors_of("lanes: [{name: a, gpu: " + std::to_string(missing) +
                                ", stages: [{type: generator}, {type: null}]}]\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:1:24");
  if (host.gpus.empty()) {
    EXPECT_EQ(errors[0].message, "gpu: 1 names a GPU, but this machine has none (" + host.unavailable_reason + ")");
    EXPECT_FALSE(host.unavailable_reason.empty());
    // gpu: 0 is what a CPU-only pipeline runs with: accepted, pools fall back to host memory.
    EXPECT_NO_THROW(load_pipeline_text("lanes: [{name: a, gpu: 0, stages: [{type: generator}, {type: null}]}]\n"));
  } else {
    EXPECT_EQ(errors[0].message,
              "gpu: " + std::to_string(missing) + " does not exist; GPUs present: " + host.describe());
  }
}

TEST(Config, CudaDeviceIsReplacedByGpu) {
  const auto errors =
      errors_of("pipeline: {cuda_device: 1}\nlanes: [{name: a, stages: [{type: generator}, {type: null}]}]\n");
  ASSERT_EQ(errors.size(), 1U);
  EXPECT_EQ(errors[0].location, "test.yaml:1:25");
  EXPECT_EQ(errors[0].message, "cuda_device is replaced by gpu:");
  EXPECT_NE(errors[0].hint.find("gpu: N"), std::string::npos);
}

TEST(Config, CpuTakesACoreOrASetAtStageAndLane) {
  const PipelineDefinition definition = load_pipeline_text(R"(template:
  - {name: source, type: generator, cpu: 3}
  - {name: link, type: link}
  - {name: sink, type: null}
lanes:
  - name: a
    link: {cpu: "3,7,9-10"}
    sink: {cpu: [4, "5-6"]}
  - name: b
    cpu: 12-13
    source: {cpu: -1}
)",
                                                           "test.yaml");
  const auto& a = definition.lanes[0].stages;
  EXPECT_EQ(a[0].cpus, (std::vector<int>{3}));
  EXPECT_EQ(a[0].cores, (std::vector<int>{3}));
  EXPECT_EQ(a[0].cores_reason, "cpu:");
  EXPECT_EQ(a[1].cpus, (std::vector<int>{3, 7, 9, 10}));
  EXPECT_EQ(a[2].cpus, (std::vector<int>{4, 5, 6}));
  const auto& b = definition.lanes[1].stages;
  EXPECT_TRUE(b[0].cpus.empty());  // -1: not pinned, so the lane's set applies
  for (const auto& stage : b) {
    EXPECT_EQ(stage.cores, (std::vector<int>{12, 13}));
    EXPECT_EQ(stage.cores_reason, "lane cpu:");
  }
  const auto errors =
      errors_of("lanes: [{name: a, stages: [{type: generator, cpu: 5-3}, {type: null, cpu: [1, x]}]}]\n");
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].location, "test.yaml:1:51");
  EXPECT_EQ(errors[0].message, "expected cores like 3, 3-5, 3,7,9-10 or a list of them, got '5-3'");
  EXPECT_EQ(errors[1].message, "expected cores like 3, 3-5, 3,7,9-10 or a list of them, got '1,x'");
}

}  // namespace
}  // namespace sluice
