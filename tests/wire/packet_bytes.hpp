// A packet's bytes written out in a test, as the decoders take them.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace sluice {

inline std::vector<std::byte> bytes(std::initializer_list<unsigned> values) {
  std::vector<std::byte> out;
  for (unsigned value : values) out.push_back(static_cast<std::byte>(value));
  return out;
}

}  // namespace sluice
