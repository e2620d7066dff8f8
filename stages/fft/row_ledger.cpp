// RowLedger: the input each row stands for, and the gaps and retunes waiting for the rows they touch.
#include "stages/fft/row_ledger.hpp"

#include <algorithm>

namespace sluice {

void RowLedger::start(std::size_t size, std::size_t average, double sample_rate) {
  size_ = size;
  average_ = average;
  sample_rate_ = sample_rate;
  // Segments between two flushes: every chunk that completes a frame is flushed at its end, so the
  // others (and the carried partial frame) hold fewer than `size` samples, at least one each, plus
  // the loads of the chunk that completes frames: at most size + 2.
  segments_.reserve(size + 2);
}

void RowLedger::note_chunk(const Chunk& chunk) noexcept {
  if (!started_input_) {
    owned_from_ = chunk.first_sample;
    started_input_ = true;
  }
  for (std::uint32_t i = 0; i < chunk.gap_count; ++i) remember_gap(chunk.gaps[i]);
  if (chunk.context_change) {  // the sender retuned from this chunk's first sample on
    change_pending_ = true;
    change_at_ = chunk.first_sample;
    change_context_ = chunk.context;
  }
}

void RowLedger::note_load(const Chunk& chunk, std::size_t position, std::uint64_t batch_start) noexcept {
  if (segments_.size() < segments_.capacity()) {  // always true (see start()); never reallocates on the hot path
    segments_.push_back(
        Segment{batch_start, chunk.first_sample + position, chunk.timestamp, position, chunk.created_ns});
  }
}

void RowLedger::keep_carried(std::size_t loaded, std::size_t fill) noexcept {
  if (fill == 0) {
    segments_.clear();
    return;
  }
  // The carried samples keep their segments, moved to batch position 0 on.
  const std::uint64_t from = loaded * size_;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const bool last = i + 1 == segments_.size();
    if (!last && segments_[i + 1].batch_start <= from) continue;  // ends before the carried samples
    Segment segment = segments_[i];
    if (segment.batch_start < from) {
      const std::uint64_t skip = from - segment.batch_start;
      segment.first_sample += skip;
      segment.chunk_offset += skip;
      segment.batch_start = from;
    }
    segment.batch_start -= from;
    segments_[kept++] = segment;
  }
  segments_.resize(kept);
}

void RowLedger::pass_rows(std::size_t first, std::size_t rows) noexcept {
  owned_from_ = std::max(owned_from_, rows_end(first, rows));
}

StreamContext RowLedger::take_change() noexcept {
  change_pending_ = false;
  return change_context_;
}

bool RowLedger::mark_row(const FrameInfo& last, Chunk& out, std::uint64_t first_value, bool& marked) noexcept {
  // This row owns the input from the previous row's end to its own last sample.
  const std::uint64_t row_end = std::max(last.end_sample, owned_from_);
  marked = false;
  for (std::size_t i = 0; i < pending_count_; ++i) {
    // A gap reported after the rows it overlaps were made (late) marks the next row: never forgotten.
    const PendingGap gap = pending_[i];
    if (gap.end <= owned_from_ || (gap.first < row_end && gap.end > owned_from_)) marked = true;
  }
  if (marked) {
    Gap* previous = out.gap_count > 0 ? &out.gaps[out.gap_count - 1] : nullptr;
    // in_data: the row is in the output, computed from input with a hole (marked, not missing).
    if (previous != nullptr && previous->in_data && previous->first_sample + previous->length == first_value) {
      previous->length += size_;
    } else if (!out.add_gap(first_value, size_, true)) {
      marked = false;
      return false;
    }
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_count_; ++i) {
    if (pending_[i].end > row_end) pending_[kept++] = pending_[i];
  }
  pending_count_ = kept;
  owned_from_ = row_end;
  return true;
}

void RowLedger::remember_gap(const Gap& gap) noexcept {
  if (gap.length == 0) return;
  const PendingGap pending{gap.first_sample, gap.first_sample + gap.length};
  if (pending_count_ == kPendingGaps) {
    // Full: widen the last entry to cover this one too; rows between them get marked as well,
    // which overstates the loss but never hides it.
    PendingGap& last = pending_[kPendingGaps - 1];
    last.first = std::min(last.first, pending.first);
    last.end = std::max(last.end, pending.end);
    return;
  }
  pending_[pending_count_++] = pending;
}

const RowLedger::Segment& RowLedger::segment_at(std::uint64_t position) const noexcept {
  // The last segment starting at or before `position` (segments are in batch order).
  auto after = std::upper_bound(segments_.begin(), segments_.end(), position,
                                [](std::uint64_t at, const Segment& segment) { return at < segment.batch_start; });
  return after == segments_.begin() ? segments_.front() : *(after - 1);
}

RowLedger::FrameInfo RowLedger::frame_info(std::size_t frame) const noexcept {
  const std::uint64_t first = frame * size_;
  const std::uint64_t last = first + size_ - 1;
  const Segment& head = segment_at(first);
  const Segment& tail = segment_at(last);
  return FrameInfo{head.first_sample + (first - head.batch_start), tail.first_sample + (last - tail.batch_start) + 1,
                   head.chunk_timestamp, head.chunk_offset + (first - head.batch_start), head.created_ns};
}

std::uint64_t RowLedger::rows_end(std::size_t first, std::size_t rows) const noexcept {
  // Row r's last sample sits at batch position last0 + r·step. Within one segment a row's end
  // sample grows with r, so the greatest is that of the last row ending in some segment.
  const std::uint64_t step = static_cast<std::uint64_t>(average_) * size_;
  const std::uint64_t last0 = (first + average_) * size_ - 1;
  const std::uint64_t last_row = last0 + (rows - 1) * step;
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const std::uint64_t low =
        i == 0 ? 0 : segments_[i].batch_start;  // segment_at() gives the first segment to what precedes it
    const std::uint64_t high = i + 1 < segments_.size() ? segments_[i + 1].batch_start : ~std::uint64_t{0};
    if (high <= last0 || low > last_row) continue;
    const std::uint64_t last = std::min(last_row, last0 + (high - 1 - last0) / step * step);
    if (last < low) continue;
    end = std::max(end, segments_[i].first_sample + (last - segments_[i].batch_start) + 1);
  }
  return end;
}

Timestamp RowLedger::time_of(const FrameInfo& frame) const noexcept {
  if (!frame.chunk_timestamp.valid) return {};
  return time_after(frame.chunk_timestamp, frame.chunk_offset, sample_rate_);
}

}  // namespace sluice
