// What a loaded pipeline file describes: its settings, its lanes and their stages (constructed,
// nothing opened). config.hpp loads one; placement.hpp cuts it between nodes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "pipeline/pipeline_settings.hpp"
#include "pipeline/stage.hpp"

namespace sluice {

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

}  // namespace sluice
