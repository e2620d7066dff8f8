// Logging: the message is formatted here with fmt (checked at compile time) and handed to
// spdlog's default logger as a finished string by log.cpp, the one file that calls spdlog.
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace sluice::log {

enum class Level { trace, debug, info, warn, error };

[[nodiscard]] bool enabled(Level level) noexcept;
void write(Level level, std::string_view message) noexcept;

template <typename... Args>
void at(Level level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (!enabled(level)) return;
  try {
    write(level, fmt::vformat(static_cast<fmt::string_view>(format), fmt::make_format_args(args...)));
  } catch (...) {
    const fmt::string_view bare = format;  // out of memory while formatting: the bare format string
    write(level, std::string_view(bare.data(), bare.size()));
  }
}

template <typename... Args>
void trace(fmt::format_string<Args...> format, Args&&... args) noexcept {
  at(Level::trace, format, std::forward<Args>(args)...);
}
template <typename... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) noexcept {
  at(Level::debug, format, std::forward<Args>(args)...);
}
template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) noexcept {
  at(Level::info, format, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) noexcept {
  at(Level::warn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) noexcept {
  at(Level::error, format, std::forward<Args>(args)...);
}

// A message that is already a string (no formatting, braces printed as they are).
inline void trace(std::string_view message) noexcept { write(Level::trace, message); }
inline void debug(std::string_view message) noexcept { write(Level::debug, message); }
inline void info(std::string_view message) noexcept { write(Level::info, message); }
inline void warn(std::string_view message) noexcept { write(Level::warn, message); }
inline void error(std::string_view message) noexcept { write(Level::error, message); }

}  // namespace sluice::log
