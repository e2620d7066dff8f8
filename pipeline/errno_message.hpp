// The one way Sluice words a failed system call: "call: strerror(error)". Header-only, so
// every library (the lowest included) uses it; errno by default, or a saved / returned code.
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sluice {

inline std::string errno_message(std::string_view call, int error = errno) {
  std::string text(call);
  text += ": ";
  text += std::strerror(error);
  return text;
}

// A failed call on a file, to throw: "call(path): strerror(error)".
inline std::runtime_error errno_error(std::string_view call, const std::string& path, int error) {
  return std::runtime_error(std::string(call) + errno_message("(" + path + ")", error));
}

}  // namespace sluice
