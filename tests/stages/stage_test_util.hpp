// Helpers for stage tests: run a YAML pipeline on the real runtime and read files back.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pipeline/config.hpp"
#include "pipeline/runtime.hpp"
#include "pipeline/stage.hpp"

namespace sluice::testing {

inline std::unique_ptr<Pipeline> run_pipeline(const std::string& yaml) {
  auto pipeline = std::make_unique<Pipeline>(load_pipeline_text(yaml, "test.yaml"));
  pipeline->start();
  pipeline->run();
  return pipeline;
}

// A stage type whose stages are `T(reader, pipeline)`: how a test adds its own source or sink.
template <typename T>
StageType stage_type_of(std::string name, StageRole role, std::string description) {
  return StageType{std::move(name), role, std::move(description),
                   [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                     return std::make_unique<T>(reader, pipeline);
                   }};
}

// The built-in stages and `extra` (test stages made with stage_type_of).
inline StageRegistry builtin_registry_with(std::vector<StageType> extra) {
  StageRegistry registry;
  register_builtin_stages(registry);
  for (StageType& type : extra) registry.add(std::move(type));
  return registry;
}

inline std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), {});
  std::vector<std::byte> result(bytes.size());
  std::memcpy(result.data(), bytes.data(), bytes.size());
  return result;
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir()
      : path_(std::filesystem::temp_directory_path() /
              ("sluice_test_" + std::to_string(getpid()) + "_" + std::to_string(counter()++))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int value = 0;
    return value;
  }
  std::filesystem::path path_;
};

}  // namespace sluice::testing
