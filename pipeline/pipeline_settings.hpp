// The `pipeline:` section's settings, which every stage reads its defaults from.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sluice {

struct PipelineSettings {
  std::string name = "sluice";
  std::chrono::nanoseconds duration{0};  // 0: until end of stream or a signal
  std::uint64_t chunk_bytes = 4ULL << 20;
  std::uint64_t chunk_count = 32;
  std::uint64_t queue_depth = 16;
  std::chrono::nanoseconds progress_interval{std::chrono::seconds(1)};
  int gpu = -1;      // GPU of every lane and stage that names none; -1: placement chooses
  std::string http;  // "ADDR:PORT" of the /metrics and dashboard server; empty: off
};

}  // namespace sluice
