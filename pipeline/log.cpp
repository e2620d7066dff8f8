#include "pipeline/log.hpp"

#include <spdlog/spdlog.h>

namespace sluice::log {
namespace {

spdlog::level::level_enum to_spdlog(Level level) noexcept {
  switch (level) {
    case Level::trace:
      return spdlog::level::trace;
    case Level::debug:
      return spdlog::level::debug;
    case Level::info:
      return spdlog::level::info;
    case Level::warn:
      return spdlog::level::warn;
    case Level::error:
      return spdlog::level::err;
  }
  return spdlog::level::err;
}

}  // namespace

bool enabled(Level level) noexcept { return spdlog::should_log(to_spdlog(level)); }

void write(Level level, std::string_view message) noexcept {
  spdlog::log(to_spdlog(level), "{}", message);  // spdlog catches what its sinks throw
}

}  // namespace sluice::log
