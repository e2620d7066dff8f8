// Chunk assembly with gap records for the socket sources.
#include "stages/socket/assembler.hpp"

#include <algorithm>
#include <bit>

#include "wire/samples.hpp"
#include "wire/vita49.hpp"

namespace sluice {

void ChunkAssembler::start(StageContext& context, Pool& pool, SampleFormat format, std::uint64_t sample_rate,
                           bool swap) {
  context_ = &context;
  pool_ = &pool;
  format_ = format;
  sample_bytes_ = bytes_per_sample(format);
  sample_shift_ = static_cast<unsigned>(std::countr_zero(sample_bytes_));  // every sample size is a power of two
  sample_rate_ = sample_rate;
  swap_ = swap;
  lost_packets_ = &context.metrics().counter("lost_packets");
  lost_samples_ = &context.metrics().counter("lost_samples");
  gaps_ = &context.metrics().counter("gaps");
  resync_samples_ = &context.metrics().counter("resync_samples");
  pool_empty_ = &context.metrics().drop_counter("pool_empty");
}

bool ChunkAssembler::ensure_chunk() noexcept {
  if (chunk_) return true;
  // Wait a while: an empty pool is backpressure from downstream, not an error.
  chunk_ = context_->acquire(*pool_, std::chrono::milliseconds(200));
  return static_cast<bool>(chunk_);
}

bool ChunkAssembler::record_gap(std::uint64_t first, std::uint64_t length) noexcept {
  if (chunk_->add_gap(first, length)) return true;
  // Gap table full: this chunk goes on, the gap goes into the next one. Never forgotten.
  flush();
  if (!ensure_chunk()) return false;
  chunk_->first_sample = first + length;
  return chunk_->add_gap(first, length);
}

bool ChunkAssembler::gap_to(std::uint64_t first) noexcept {
  if (!record_gap(expected_, first - expected_)) {
    pool_empty_->add();
    return false;
  }
  gaps_->add();
  expected_ = first;
  return true;
}

bool ChunkAssembler::skip_to(std::uint64_t first) noexcept {
  if (first <= expected_) return true;
  if (!ensure_chunk()) {
    pool_empty_->add();
    return false;
  }
  const std::uint64_t skipped = first - expected_;
  if (!gap_to(first)) return false;
  resync_samples_->add(skipped);
  return true;
}

bool ChunkAssembler::append(std::uint64_t first, const std::byte* data, std::size_t samples) noexcept {
  if (!ensure_chunk()) {
    pool_empty_->add();
    return false;
  }
  if (first > expected_) {
    const std::uint64_t gap = first - expected_;
    if (!gap_to(first)) return false;
    lost_samples_->add(gap);
    lost_packets_->add(samples == 0 ? 1 : (gap + samples - 1) / samples);
  }
  const std::size_t usable = chunk_->capacity & ~(sample_bytes_ - 1);
  std::size_t done = 0;
  while (done < samples) {
    if (!chunk_ && !ensure_chunk()) {
      // The rest of this packet is lost; the next append records it as a gap.
      pool_empty_->add();
      return true;
    }
    Chunk& chunk = *chunk_;
    if (chunk.size == 0) {
      chunk.first_sample = expected_;
      chunk.format = format_;
      chunk.sequence = sequence_;
      chunk.lane = context_->lane_index();
      chunk.time_jump = time_jump_;
      time_jump_ = false;
      chunk.context_change = context_change_;
      if (context_change_) chunk.context = stream_context_;
      context_change_ = false;
      if (timed_ && sample_rate_ != 0) {
        std::uint64_t seconds = 0;
        std::uint64_t picoseconds = 0;
        vita49::timestamp_of(origin_ + expected_, sample_rate_, seconds, picoseconds);
        chunk.timestamp = Timestamp{seconds, picoseconds, true};
      }
    }
    const std::size_t take = std::min((usable - chunk.size) >> sample_shift_, samples - done);
    const std::byte* from = data + done * sample_bytes_;
    // Streamed past the cache: the chunk is read next by another thread or a DMA engine.
    wire::stream_copy(format_, swap_, from, chunk.data + chunk.size, take * sample_bytes_);
    chunk.size += take * sample_bytes_;
    chunk.sample_count += take;
    done += take;
    expected_ += take;
    if (chunk.size + sample_bytes_ > usable) flush();
  }
  if (chunk_) ++chunk_->packets;
  return true;
}

void ChunkAssembler::flush() noexcept {
  if (!chunk_) return;
  if (chunk_->size == 0 && chunk_->gap_count == 0) return;
  ++sequence_;
  wire::stream_fence();  // every streamed store into the chunk lands before it is published
  context_->emit(std::move(chunk_));
  chunk_.reset();
}

}  // namespace sluice
