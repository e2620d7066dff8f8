// Node placement: node inheritance along a lane, cuts at links, one node's share of a file.
#include "pipeline/placement.hpp"

#include <algorithm>
#include <set>

namespace sluice {
namespace {

std::string node_list(const std::vector<std::string>& nodes) {
  std::string text;
  for (const auto& node : nodes) text += (text.empty() ? "" : ", ") + node;
  return text.empty() ? "(none)" : text;
}

StageDefinition half_of(const StageDefinition& whole, std::unique_ptr<Stage> stage, StageRole role, std::string node) {
  StageDefinition half;
  half.name = whole.name;
  half.type = whole.type;
  half.role = role;
  half.cpus = whole.cpus;
  half.gpu = whole.gpu;
  half.cuda_device = whole.cuda_device;
  half.cores = whole.cores;
  half.cores_reason = whole.cores_reason;
  half.on_full = whole.on_full;
  half.queue_depth = whole.queue_depth;
  half.location = whole.location;
  half.stage = std::move(stage);
  half.node = std::move(node);
  return half;
}

}  // namespace

void place_lane_stages(LaneDefinition& lane, const std::string& lane_path, ConfigErrors& errors) {
  std::string previous;
  for (std::size_t i = 0; i < lane.stages.size(); ++i) {
    StageDefinition& stage = lane.stages[i];
    const std::string stage_path = lane_path + "." + stage.name;
    if (stage.node.empty()) stage.node = previous;
    stage.joins_nodes = i > 0 && stage.node != previous;
    if (stage.joins_nodes && previous.empty()) {
      errors.add({stage.location, stage_path + ".node",
                  "stage '" + stage.name + "' moves lane '" + lane.name + "' to node '" + stage.node +
                      "', but the stages before it name no node",
                  "give the lane's first stage a node: too"});
    } else if (stage.stage) {
      if (std::string problem = stage.stage->place(stage.joins_nodes, stage.halves); !problem.empty()) {
        errors.add({stage.location, stage_path, "stage '" + stage.name + "' (" + stage.type + "): " + problem, ""});
      }
    }
    previous = stage.node;
  }
}

std::vector<std::string> pipeline_nodes(const PipelineDefinition& definition) {
  std::set<std::string> nodes;
  for (const auto& lane : definition.lanes) {
    for (const auto& stage : lane.stages) {
      if (!stage.node.empty()) nodes.insert(stage.node);
    }
  }
  return {nodes.begin(), nodes.end()};
}

bool spans_nodes(const PipelineDefinition& definition) {
  return std::any_of(definition.lanes.begin(), definition.lanes.end(), [](const LaneDefinition& lane) {
    return std::any_of(lane.stages.begin(), lane.stages.end(),
                       [](const StageDefinition& stage) { return stage.joins_nodes; });
  });
}

PipelineDefinition select_node(PipelineDefinition definition, const std::string& node) {
  const std::vector<std::string> nodes = pipeline_nodes(definition);
  ConfigErrors errors;
  if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
    errors.add({definition.file, "--node", "no stage of this pipeline is placed on node '" + node + "'",
                "nodes named in the file: " + node_list(nodes)});
    throw ConfigException(std::move(errors));
  }
  std::vector<LaneDefinition> lanes;
  for (auto& lane : definition.lanes) {
    LaneDefinition local;
    local.name = lane.name;
    local.index = lane.index;
    local.gpu = lane.gpu;
    local.cpus = lane.cpus;
    local.placement = lane.placement;
    enum class Part { before, inside, after } part = Part::before;  // this node's share is one run of stages
    std::vector<std::string> placed;                                // read before stages are moved out below
    for (const auto& stage : lane.stages) placed.push_back(stage.node);
    for (std::size_t i = 0; i < lane.stages.size(); ++i) {
      StageDefinition& stage = lane.stages[i];
      const std::string& previous = i > 0 ? placed[i - 1] : std::string();
      const bool here = stage.node == node;
      const bool sends_from_here = stage.joins_nodes && previous == node;
      if (!here && !sends_from_here) {
        if (part == Part::inside) part = Part::after;
        continue;
      }
      if (part == Part::after) {
        errors.add({stage.location, "lanes." + lane.name,
                    "lane '" + lane.name + "' comes back to node '" + node + "' at stage '" + stage.name + "'",
                    "a lane visits each node once: place its stages on one node, then the next"});
        break;
      }
      part = Part::inside;
      if (sends_from_here) {
        local.stages.push_back(half_of(stage, std::move(stage.halves.sending), StageRole::sink, previous));
        part = Part::after;
      } else if (stage.joins_nodes) {
        local.stages.push_back(half_of(stage, std::move(stage.halves.receiving), StageRole::source, node));
      } else {
        local.stages.push_back(std::move(stage));
      }
    }
    if (!local.stages.empty()) lanes.push_back(std::move(local));
  }
  if (!errors.empty()) throw ConfigException(std::move(errors));
  definition.lanes = std::move(lanes);
  return definition;
}

}  // namespace sluice
