// The wire tests' byte vectors, written as the standards lay them out: one value per byte.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace sluice::test {

inline std::vector<std::byte> bytes(std::initializer_list<unsigned> values) {
  std::vector<std::byte> out;
  for (unsigned value : values) out.push_back(static_cast<std::byte>(value));
  return out;
}

}  // namespace sluice::test
