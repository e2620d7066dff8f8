// Monotonic nanoseconds for latency and rate measurement.
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice {

inline std::uint64_t monotonic_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace sluice
