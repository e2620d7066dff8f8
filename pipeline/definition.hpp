// What a loaded pipeline file describes: its settings, its lanes and their stages (constructed,
// nothing opened). config.hpp loads one; placement.hpp cuts it between nodes.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/gpu_placement.hpp"
#include "pipeline/pipeline_settings.hpp"
#include "pipeline/stage.hpp"

namespace sluice {

struct StageDefinition {
  std::string name;
  std::string type;
  StageRole role = StageRole::transform;
  std::vector<int> cpus;     // its cpu: setting, the cores to pin its thread to; empty: none
  int gpu = -1;              // its gpu: setting; -1: its lane's
  int cuda_device = 0;       // the GPU it uses (placement, after loading)
  std::vector<int> cores;    // where its thread runs: cpu:, the lane's cpu:, its GPU's NUMA node; empty: anywhere
  std::string cores_reason;  // "cpu:", "lane cpu:", "NUMA node 1 of GPU 1", ""
  OverflowPolicy on_full = OverflowPolicy::block;
  std::uint64_t queue_depth = 16;  // of the queue in front of this stage
  std::string location;            // file:line:column of its YAML, for messages
  std::unique_ptr<Stage> stage;
  std::string node;          // where it runs (pipeline/placement.hpp); "" = unplaced
  bool enabled = true;       // false: a tap left out of its lane (`enabled: false`)
  bool joins_nodes = false;  // its lane moves from the previous stage's node to `node` here
  StageHalves halves;        // when joins_nodes: the two halves that replace it
};

struct LaneDefinition {
  std::string name;
  std::uint32_t index = 0;  // position in the file: the lane number chunks carry on every node
  int gpu = -1;             // its gpu: setting (or the pipeline's); -1: placement chooses
  std::vector<int> cpus;    // its cpu: setting: the cores of its stages that name none
  LaneGpu placement;        // its GPU and why (pipeline/gpu_placement.hpp)
  std::vector<StageDefinition> stages;
};

struct PipelineDefinition {
  std::string file;
  PipelineSettings settings;
  std::vector<LaneDefinition> lanes;
  YAML::Node root;  // the whole document, for sections other tools own (emulator:)
};

}  // namespace sluice
