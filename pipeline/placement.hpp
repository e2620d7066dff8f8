// Node placement: which stages of a pipeline file run on which node.
#pragma once

#include <string>
#include <vector>

#include "pipeline/definition.hpp"
#include "pipeline/settings.hpp"

// Node placement: one pipeline file describes every node; `sluice run FILE --node NAME`
// runs only that node's part. Each stage may name a `node:`; one that does not runs on
// its predecessor's node. A lane moves to another node only at a stage that accepts it
// (Stage::place: the link), which is cut into a sending half (ending the lane upstream)
// and a receiving half (starting it on the new node).

namespace sluice {

// Load time: fills each stage's node from its predecessor's, asks every stage whether it
// may sit where the node changes, and cuts the ones that do. Errors go to `errors`.
void place_lane_stages(LaneDefinition& lane, const std::string& lane_path, ConfigErrors& errors);

// Every node named in the file, sorted.
std::vector<std::string> pipeline_nodes(const PipelineDefinition& definition);
// True when some lane moves between nodes (the file needs --node).
bool spans_nodes(const PipelineDefinition& definition);

// What runs on `node`: each lane's stages there, a cut stage replaced by the half that
// belongs to `node`; lanes with nothing there are left out, lane numbers kept. Throws
// ConfigException when `node` runs nothing or a lane's stages there are not contiguous.
PipelineDefinition select_node(PipelineDefinition definition, const std::string& node);

}  // namespace sluice
