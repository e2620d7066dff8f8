// What can be known about a recording volume before writing to it: a loop device whose
// backing file is sparse (memory or blocks never touched) writes slowly at first.
#pragma once

#include <string>

namespace sluice::recorder {

// A warning when `directory` (or its nearest existing parent) lies on a loop device whose
// backing file is not fully allocated, naming the file, how much of it is allocated, whether
// it lies in memory (tmpfs), and how to fill it; else "".
std::string fresh_volume_warning(const std::string& directory);

}  // namespace sluice::recorder
