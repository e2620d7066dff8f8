// What `sluice capture repair` and `sluice capture info` do, as functions the CLI and the
// tests share.
#pragma once

#include <string>
#include <vector>

#include "recorder/capture_reader.hpp"

namespace sluice::recorder {

struct RepairReport {
  std::vector<std::string> repaired;  // bases rebuilt from their journal
  std::uint64_t bytes_kept = 0;
  std::size_t records_discarded = 0;  // torn or out-of-order journal records at the end
  std::vector<std::string> lines;     // human-readable, one per recording
};

// Rebuilds every recording of the capture at `path` that still has a journal (cut by
// kill -9 or a crash): data truncated to the last chunk that reached the disk, final meta,
// then the collection. Throws std::runtime_error when nothing there is a capture.
RepairReport repair_capture(const std::string& path);

// Format, duration, rate, gaps and size of every lane, as text.
std::string describe_capture(const Capture& capture);

}  // namespace sluice::recorder
