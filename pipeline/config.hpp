// A pipeline file: global settings, a lane template, lanes with per-lane overrides.
// Loading validates everything and constructs every stage (which opens nothing), so a
// file that loads is a file that can start.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "pipeline/settings.hpp"
#include "pipeline/stage.hpp"

namespace sluice {

struct PipelineSettings {
  std::string name = "sluice";
  std::chrono::nanoseconds duration{0};  // 0: until end of stream or a signal
  std::uint64_t chunk_bytes = 4ULL << 20;
  std::uint64_t chunk_count = 32;
  std::uint64_t queue_depth = 16;
  std::chrono::nanoseconds progress_interval{std::chrono::seconds(1)};
  int cuda_device = 0;
  std::string http;  // "ADDR:PORT" of the /metrics and dashboard server; empty: off
};

struct StageDefinition {
  std::string name;
  std::string type;
  StageRole role = StageRole::transform;
  int cpu = -1;                        // core to pin the stage's thread to; -1: not pinned
  OverflowPolicy on_full = OverflowPolicy::block;
  std::uint64_t queue_depth = 16;      // of the queue in front of this stage
  std::string location;                // file:line:column of its YAML, for messages
  std::unique_ptr<Stage> stage;
  std::string node;                    // where it runs (pipeline/placement.hpp); "" = unplaced
  bool enabled = true;                 // false: a tap left out of its lane (`enabled: false`)
  bool joins_nodes = false;            // its lane moves from the previous stage's node to `node` here
  StageHalves halves;                  // when joins_nodes: the two halves that replace it
};

struct LaneDefinition {
  std::string name;
  std::uint32_t index = 0;  // position in the file: the lane number chunks carry on every node
  std::vector<StageDefinition> stages;
};

struct PipelineDefinition {
  std::string file;
  PipelineSettings settings;
  std::vector<LaneDefinition> lanes;
  YAML::Node root;  // the whole document, for sections other tools own (emulator:)
};

// Throws ConfigException with every error found. `overrides` are "key.path=value" (--set).
// `node`: the node this process will run (--node); stages placed on other nodes are checked
// for their settings only, not against this host's files (SettingsReader::on_this_host).
PipelineDefinition load_pipeline_file(const std::string& path, const std::vector<std::string>& overrides = {},
                                      const StageRegistry& registry = StageRegistry::builtin(),
                                      const std::string& node = {});
PipelineDefinition load_pipeline_text(const std::string& yaml, const std::string& name = "<text>",
                                      const std::vector<std::string>& overrides = {},
                                      const StageRegistry& registry = StageRegistry::builtin(),
                                      const std::string& node = {});

// Parses YAML text, applying --set overrides; syntax errors become ConfigErrors.
YAML::Node parse_yaml(const std::string& text, ConfigSource& source, const std::vector<std::string>& overrides);

// Reads the `pipeline:` section (shared by run and the emulator).
PipelineSettings read_pipeline_settings(SettingsReader& reader);

}  // namespace sluice
