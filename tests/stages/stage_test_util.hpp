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

namespace sluice::testing {

inline std::unique_ptr<Pipeline> run_pipeline(const std::string& yaml) {
  auto pipeline = std::make_unique<Pipeline>(load_pipeline_text(yaml, "test.yaml"));
  pipeline->start();
  pipeline->run();
  return pipeline;
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
  TempDir() : path_(std::filesystem::temp_directory_path() / ("sluice_test_" + std::to_string(getpid()) + "_" + std::to_string(counter()++))) {
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
