// A recording checked against the emulator's signal: every recorded sample, at its stream index,
// must be the sample the emulator's SignalSource makes for that index (`sluice-emulator --check`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emulator/signal.hpp"

namespace sluice::emulator {

struct LaneCheck {
  std::string lane;
  std::uint64_t samples = 0;   // compared, all of them equal unless `mismatch`
  std::uint64_t segments = 0;  // runs between holes
  std::uint64_t lost = 0;      // samples the capture records as lost (holes, not compared)
  bool mismatch = false;
  std::uint64_t first_bad = 0;  // stream index of the first sample that differs
};

// Reads every segment of every lane of `capture` (collection, meta or base path) and compares
// it with `signal`. Throws std::runtime_error when the capture cannot be read or its format is
// not the signal's.
std::vector<LaneCheck> check_capture(const SignalSettings& signal, const std::string& capture);

}  // namespace sluice::emulator
