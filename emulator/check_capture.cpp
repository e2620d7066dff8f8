#include "emulator/check_capture.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "recorder/capture_reader.hpp"

namespace sluice::emulator {
namespace {

constexpr std::uint64_t kBlockSamples = 1 << 20;  // compared a block at a time

// The first differing sample of `segment`, or none; counts what it compared into `check`.
void check_segment(const recorder::CaptureLane& lane, const recorder::CaptureSegment& segment, SignalSource& source,
                   std::vector<std::byte>& got, std::vector<std::byte>& expected, LaneCheck& check) {
  for (std::uint64_t done = 0; done < segment.sample_count && !check.mismatch;) {
    const std::uint64_t count = std::min(kBlockSamples, segment.sample_count - done);
    const std::size_t bytes = count * lane.sample_bytes;
    if (recorder::read_segment(lane, segment, done, count, got.data()) != count) {
      throw std::runtime_error("lane " + lane.name + ": the data file ends inside the segment at stream sample " +
                               std::to_string(segment.global_index));
    }
    source.fill(segment.global_index + done, std::span(expected.data(), bytes));
    if (std::memcmp(got.data(), expected.data(), bytes) != 0) {
      for (std::uint64_t i = 0; i < count; ++i) {
        if (std::memcmp(got.data() + i * lane.sample_bytes, expected.data() + i * lane.sample_bytes,
                        lane.sample_bytes) != 0) {
          check.mismatch = true;
          check.first_bad = segment.global_index + done + i;
          break;
        }
      }
    }
    check.samples += check.mismatch ? check.first_bad - segment.global_index - done : count;
    done += count;
  }
}

}  // namespace

std::vector<LaneCheck> check_capture(const SignalSettings& signal, const std::string& capture) {
  const recorder::Capture opened = recorder::open_capture(capture);
  std::vector<LaneCheck> checks;
  for (const recorder::CaptureLane& lane : opened.lanes) {
    if (!lane.format || *lane.format != signal.format) {
      throw std::runtime_error("lane " + lane.name + " holds " + lane.datatype + ", not the emulator's " +
                               std::string(to_string(signal.format)) + " signal");
    }
    SignalSource source(signal);
    std::vector<std::byte> got(kBlockSamples * lane.sample_bytes);
    std::vector<std::byte> expected(got.size());
    LaneCheck& check = checks.emplace_back(LaneCheck{lane.name, 0, lane.segments.size(), lane.lost_samples});
    for (const recorder::CaptureSegment& segment : lane.segments) {
      check_segment(lane, segment, source, got, expected, check);
      if (check.mismatch) break;
    }
  }
  return checks;
}

}  // namespace sluice::emulator
