// Capture playback for the emulator: segment cursor, recorded timestamps, block read-ahead.
#include "emulator/capture_stream.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace sluice::emulator {
namespace {
constexpr std::size_t kReadAheadBytes = 4 << 20;
}  // namespace

CaptureStream::CaptureStream(recorder::CaptureLane lane) : lane_(std::move(lane)) {
  if (!lane_.journals.empty()) {
    throw std::runtime_error("lane " + lane_.name + " was cut off: run `sluice capture repair` on the capture first");
  }
  if (lane_.segments.empty() || lane_.sample_bytes == 0)
    throw std::runtime_error("lane " + lane_.name + " holds no samples");
  origin_ = lane_.segments.front().global_index;
  const std::size_t samples = std::max<std::size_t>(1, kReadAheadBytes / lane_.sample_bytes);
  buffer_.resize(samples * lane_.sample_bytes);
  skip_ended_segments();
}

void CaptureStream::skip_ended_segments() noexcept {
  while (segment_ < lane_.segments.size() && offset_ >= lane_.segments[segment_].sample_count) {
    ++segment_;
    offset_ = 0;
  }
}

bool CaptureStream::peek(std::size_t max_samples, PacketSpan& span) const {
  if (segment_ >= lane_.segments.size() || max_samples == 0) return false;
  const recorder::CaptureSegment& current = lane_.segments[segment_];
  span.first_sample = current.global_index + offset_;
  span.count = static_cast<std::size_t>(std::min<std::uint64_t>(max_samples, current.sample_count - offset_));
  span.time = recorder::time_of_sample(current, span.first_sample, lane_.sample_rate);
  // A hole lies before this packet when the previous segment ended short of its first sample.
  const recorder::CaptureSegment* previous = segment_ > 0 ? &lane_.segments[segment_ - 1] : nullptr;
  span.after_gap =
      offset_ == 0 && previous != nullptr && previous->global_index + previous->sample_count < current.global_index;
  return true;
}

void CaptureStream::take(const PacketSpan& span, std::byte* out) {
  if (segment_ >= lane_.segments.size()) return;
  const recorder::CaptureSegment& current = lane_.segments[segment_];
  if (out != nullptr) {
    const bool buffered = buffer_samples_ > 0 && buffer_segment_ == segment_ && offset_ >= buffer_offset_ &&
                          offset_ + span.count <= buffer_offset_ + buffer_samples_;
    if (!buffered) {
      buffer_segment_ = segment_;
      buffer_offset_ = offset_;
      buffer_samples_ =
          recorder::read_segment(lane_, current, offset_, buffer_.size() / lane_.sample_bytes, buffer_.data());
      if (buffer_samples_ < span.count) {
        throw std::runtime_error(current.data_path + " ends before the samples its metadata lists (" +
                                 std::to_string(current.sample_count) + " from byte " +
                                 std::to_string(current.file_offset) + ")");
      }
    }
    std::memcpy(out, buffer_.data() + (offset_ - buffer_offset_) * lane_.sample_bytes, span.count * lane_.sample_bytes);
  }
  offset_ += span.count;
  skip_ended_segments();
}

double CaptureStream::seconds_until(const PacketSpan& span) const {
  return lane_.sample_rate > 0 ? static_cast<double>(span.first_sample - origin_) / lane_.sample_rate : 0;
}

}  // namespace sluice::emulator
