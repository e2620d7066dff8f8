// The fft stage's row bookkeeping: which input samples each output row stands for (the batch's
// segments, from which chunk and when each run of samples came), the input gaps and context
// changes not yet reached by a row, and the marking of rows made from input with a hole.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipeline/chunk.hpp"

namespace sluice {

// Every absolute input sample index belongs to exactly one row: the input after the previous
// row's last sample up to this row's last sample. A row is marked when an input gap overlaps
// that range, so a gap that falls between rows (input that skips ahead) marks the row after it.
class RowLedger {
 public:
  // What a row needs to know of a frame, worked out from the batch's segments where needed.
  struct FrameInfo {
    std::uint64_t first_sample = 0;  // absolute input index of the frame's first sample
    std::uint64_t end_sample = 0;    // absolute input index after its last sample
    Timestamp chunk_timestamp;       // of the input chunk its first sample came in
    std::uint64_t chunk_offset = 0;  // that sample's position in the chunk
    std::uint64_t created_ns = 0;    // of that chunk
  };

  // Setup: frames of `size` samples, `average` frames a row, input at `sample_rate`.
  void start(std::size_t size, std::size_t average, double sample_rate);

  // A chunk arrives: its gaps and its context change wait for the rows they touch.
  void note_chunk(const Chunk& chunk) noexcept;
  // `count` samples of `chunk` from `position` on were loaded at batch position `batch_start`.
  void note_load(const Chunk& chunk, std::size_t position, std::uint64_t batch_start) noexcept;
  // The batch was transformed: only the carried partial frame (`fill` samples of frame `loaded`)
  // stays, moved to the batch's start.
  void keep_carried(std::size_t loaded, std::size_t fill) noexcept;

  [[nodiscard]] FrameInfo frame_info(std::size_t frame) const noexcept;
  // No gap and no context change waits: rows may be taken without marking each.
  [[nodiscard]] bool quiet() const noexcept { return pending_count_ == 0 && !change_pending_; }
  // Takes `rows` rows of frames from `first` on as clean: moves past them in one pass over the segments.
  void pass_rows(std::size_t first, std::size_t rows) noexcept;
  // Whether a row whose first sample is `first_sample` is made wholly from input under the
  // sender's new context (a retune not yet passed on); take_change() then passes it on.
  [[nodiscard]] bool change_reached(std::uint64_t first_sample) const noexcept {
    return change_pending_ && first_sample >= change_at_;
  }
  StreamContext take_change() noexcept;
  // Takes the row ending with frame `last`, whose first output value is `first_value`, marking it
  // in `out`'s gap table where its input had a hole (`marked`); false, changing nothing, when the
  // table has no room.
  bool mark_row(const FrameInfo& last, Chunk& out, std::uint64_t first_value, bool& marked) noexcept;
  // The time of the frame's first sample (invalid where its chunk had no time).
  [[nodiscard]] Timestamp time_of(const FrameInfo& frame) const noexcept;

 private:
  // One run of input samples loaded into the batch from one chunk: noting one per load instead
  // of one per frame keeps the CPU's work per input chunk constant (a 64 MiB ci16 chunk is 16384
  // frames, and per-frame records were what bound the cuFFT path).
  struct Segment {
    std::uint64_t batch_start = 0;   // batch position (in samples) of the run's first sample
    std::uint64_t first_sample = 0;  // its absolute input index
    Timestamp chunk_timestamp;
    std::uint64_t chunk_offset = 0;  // its position in the chunk
    std::uint64_t created_ns = 0;
  };
  struct PendingGap {
    std::uint64_t first = 0;
    std::uint64_t end = 0;
  };
  static constexpr std::size_t kPendingGaps = 4 * Chunk::kMaxGaps;

  void remember_gap(const Gap& gap) noexcept;
  [[nodiscard]] const Segment& segment_at(
      std::uint64_t position) const noexcept;  // the segment holding a batch position
  // The greatest end sample of `rows` rows of `average` frames from frame `first` on: what marking
  // each of them without a gap would leave in owned_from_, in one pass over the segments.
  [[nodiscard]] std::uint64_t rows_end(std::size_t first, std::size_t rows) const noexcept;

  std::size_t size_ = 0;
  std::size_t average_ = 1;
  double sample_rate_ = 0;
  std::vector<Segment> segments_;  // of the batch, in batch order; capacity reserved at start
  bool started_input_ = false;
  std::uint64_t owned_from_ = 0;  // absolute input index where the next row's share of the input starts
  std::array<PendingGap, kPendingGaps> pending_{};
  std::size_t pending_count_ = 0;
  // A context change (a retune) on the input, not yet reached by a row.
  bool change_pending_ = false;
  std::uint64_t change_at_ = 0;  // input index of the first sample under the new context
  StreamContext change_context_{};
};

}  // namespace sluice
