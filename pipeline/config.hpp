// A pipeline file: global settings, a lane template, lanes with per-lane overrides.
// Loading validates everything and constructs every stage (which opens nothing), so a
// file that loads is a file that can start.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "pipeline/definition.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/settings.hpp"
#include "pipeline/stage.hpp"

namespace sluice {

// Throws ConfigException with every error found. `overrides` are "key.path=value" (--set).
// `node`: the node this process will run (--node); stages placed on other nodes are checked
// for their settings only, not against this host's files (SettingsReader::on_this_host).
PipelineDefinition load_pipeline_file(const std::string& path, const std::vector<std::string>& overrides = {},
                                      const StageRegistry& registry = StageRegistry::builtin(),
                                      const std::string& node = {});
// `gpus`: the GPUs and sysfs that `gpu:` and placement go by; null: this machine's.
PipelineDefinition load_pipeline_text(const std::string& yaml, const std::string& name = "<text>",
                                      const std::vector<std::string>& overrides = {},
                                      const StageRegistry& registry = StageRegistry::builtin(),
                                      const std::string& node = {}, const GpuHost* gpus = nullptr);

// Parses YAML text, applying --set overrides; syntax errors become ConfigErrors.
YAML::Node parse_yaml(const std::string& text, ConfigSource& source, const std::vector<std::string>& overrides);

// Reads the `pipeline:` section (shared by run and the emulator).
PipelineSettings read_pipeline_settings(SettingsReader& reader);

}  // namespace sluice
