// Packs received samples into chunks for the socket sources: contiguous received samples
// per chunk, every hole recorded as a gap (absolute stream indices), the first sample's
// timestamp on each chunk. Lost samples are never zero-filled.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pipeline/stage.hpp"

namespace sluice {

class ChunkAssembler {
 public:
  // `swap`: payloads are big-endian on the wire (VITA-49) and are converted while copied.
  // `sample_rate` whole Hz; 0 when timestamps are unknown.
  void start(StageContext& context, Pool& pool, SampleFormat format, std::uint64_t sample_rate, bool swap);
  // Sample index 0 of the stream is sample `epoch_index` since the timestamp epoch (for
  // chunk timestamps); `timed` false: the source has no timestamps.
  void set_origin(std::uint64_t epoch_index, bool timed) noexcept {
    origin_ = epoch_index;
    timed_ = timed;
  }
  // Appends `samples` samples whose first has stream index `first` (>= expected()); the hole
  // since the last appended sample is recorded as a gap and counted lost. False when no chunk
  // could be had (the pool stayed empty): nothing was appended and expected() is unchanged.
  bool append(std::uint64_t first, const std::byte* data, std::size_t samples) noexcept;
  // Moves the stream on to `first` (> expected()) after the sender jumped: the span is a gap
  // downstream (a discontinuity at its exact position) but counted as `resync_samples`, not
  // as lost. False when no chunk could be had.
  bool skip_to(std::uint64_t first) noexcept;
  // Hands the partly filled chunk downstream.
  void flush() noexcept;
  // The sender's time base restarts at the next sample appended: its chunk is marked
  // (Chunk::time_jump) so a capture starts a new segment there. Call after flush().
  void mark_time_jump() noexcept { time_jump_ = true; }
  // The sender's context changes at the next sample appended: its chunk carries the new values
  // (Chunk::context_change) so a capture starts a new segment there. Call after flush().
  void mark_context_change(const StreamContext& context) noexcept {
    context_change_ = true;
    stream_context_ = context;
  }
  [[nodiscard]] std::uint64_t expected() const noexcept { return expected_; }

 private:
  bool ensure_chunk() noexcept;
  bool record_gap(std::uint64_t first, std::uint64_t length) noexcept;
  bool gap_to(std::uint64_t first) noexcept;

  StageContext* context_ = nullptr;
  Pool* pool_ = nullptr;
  SampleFormat format_ = SampleFormat::ci16;
  std::size_t sample_bytes_ = 4;
  unsigned sample_shift_ = 2;  // log2(sample_bytes_): no division per packet
  std::uint64_t sample_rate_ = 0;
  bool swap_ = false;
  std::uint64_t origin_ = 0;
  bool timed_ = false;
  bool time_jump_ = false;
  bool context_change_ = false;
  StreamContext stream_context_{};
  std::uint64_t expected_ = 0;
  std::uint64_t sequence_ = 0;
  ChunkPtr chunk_;
  NamedCounter* lost_packets_ = nullptr;
  NamedCounter* lost_samples_ = nullptr;
  NamedCounter* gaps_ = nullptr;
  NamedCounter* resync_samples_ = nullptr;
  NamedCounter* pool_empty_ = nullptr;
};

}  // namespace sluice
