// A chunk: one fixed-size block of sample bytes from a pool, plus what downstream stages
// need to know about it (position in the stream, source timestamp, gaps, where it lives).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include "pipeline/memory.hpp"

namespace sluice {

class Pool;

// Sample formats on the wire and in chunks (little-endian in memory, as SigMF names them).
enum class SampleFormat : std::uint8_t { ci8, ci16, cf32, rf32 };

std::string_view to_string(SampleFormat format);  // "ci16", ...
std::optional<SampleFormat> sample_format_from_string(std::string_view text);
constexpr std::size_t bytes_per_sample(SampleFormat format) {
  switch (format) {
    case SampleFormat::ci8:
      return 2;
    case SampleFormat::ci16:
      return 4;
    case SampleFormat::cf32:
      return 8;
    case SampleFormat::rf32:
      return 4;
  }
  return 1;
}

// Writes one sample (I, Q in [-1, 1], clamped) in `format` at `out`: integers scaled to
// full scale (127, 32767) and rounded; rf32 keeps I only.
void quantise_sample(SampleFormat format, double in_phase, double quadrature, std::byte* out) noexcept;

// VRT-style source time: integer seconds (UTC) and fractional picoseconds.
struct Timestamp {
  std::uint64_t seconds = 0;
  std::uint64_t picoseconds = 0;
  bool valid = false;
};

// The time of the sample `samples` after the one at `time`, at `sample_rate`: exact (integer
// picoseconds, truncated) where the rate is a whole number of Hz, long double otherwise. The one
// timestamp-plus-samples conversion (sources, the fft stage's rows, SigMF segments, replay).
// Invalid when `time` is, or when the rate is unknown (0) and `samples` is not 0.
Timestamp time_after(const Timestamp& time, std::uint64_t samples, double sample_rate);

// What the sender says about its stream (a VITA-49 IF Context packet's values), as carried by
// a chunk where they change. NaN where the sender gave no value.
struct StreamContext {
  static constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  double rf_frequency = kAbsent;  // Hz: the capture's core:frequency
  double sample_rate = kAbsent;   // Hz
  double bandwidth = kAbsent;     // Hz
  double reference_level_dbm = kAbsent;
  double gain_db = kAbsent;  // stage 1 + stage 2
};

// Samples lost before they reached Sluice: `length` samples starting at absolute stream
// sample index `first_sample`. Recorded so captures show holes instead of splicing.
// Lost samples are absent from the chunk's bytes (in_data false): the chunk's samples run
// from first_sample in stream order, skipping every gap at or after it, so a gap inside a
// chunk is a jump in the stream between two adjacent samples of the chunk. A gap before
// first_sample says what was lost just ahead of it. in_data true is for derived streams:
// the chunk does hold values for those indices, but they were computed from input that
// had lost samples (an FFT row over a hole); they are marked, not missing.
struct Gap {
  std::uint64_t first_sample = 0;
  std::uint64_t length = 0;
  bool in_data = false;
};

struct Chunk {
  static constexpr std::size_t kMaxGaps = 32;

  // Fixed at pool creation.
  std::byte* data = nullptr;
  std::size_t capacity = 0;
  MemoryKind memory = MemoryKind::host;
  Pool* pool = nullptr;
  std::uint32_t index = 0;  // position in the pool: io_uring fixed-buffer index, MR offset

  // Set by whoever fills the chunk.
  std::size_t size = 0;  // valid bytes
  std::uint32_t lane = 0;
  std::uint64_t sequence = 0;      // per-lane chunk counter from the source
  std::uint64_t first_sample = 0;  // absolute index of the first sample in the stream
  std::uint64_t sample_count = 0;
  SampleFormat format = SampleFormat::ci16;
  Timestamp timestamp;        // of the first sample
  std::uint32_t packets = 0;  // network packets that filled it (0 for non-network sources)
  // The sender's time base restarts at this chunk's first sample (a resynchronisation after
  // its clock or counter went back): its timestamp does not follow from the chunk before, so
  // a capture starts a new segment here even where the stream index is contiguous.
  bool time_jump = false;
  // The sender's stream context changed (a retune) from this chunk's first sample on: `context`
  // holds the new values, and a capture starts a new segment here with them. A change never
  // falls inside a chunk: the source ends the chunk before it.
  bool context_change = false;
  StreamContext context{};
  std::uint64_t created_ns = 0;  // steady clock when acquired: chunk latency starts here
  // A CUDA event (opaque) that completes once the producer's GPU work on the bytes has: set by a
  // stage that hands the chunk on with that work still queued (GpuStream::hand_off). A consumer
  // orders its own GPU work after it, or waits on the host (pipeline/gpu_stream.hpp). Null: the
  // bytes are final. Never copied with the metadata: each chunk's own producer sets it.
  void* ready_event = nullptr;
  std::uint32_t gap_count = 0;
  std::array<Gap, kMaxGaps> gaps{};

  // False when the gap table is full: the producer must hand this chunk on and record
  // the gap in the next one, so that no gap is ever forgotten.
  bool add_gap(std::uint64_t first, std::uint64_t length, bool in_data = false) noexcept {
    if (gap_count == kMaxGaps) return false;
    gaps[gap_count++] = Gap{first, length, in_data};
    return true;
  }
  // Stream index after the chunk's last sample: first_sample + sample_count plus every
  // absent gap that lies between its samples.
  [[nodiscard]] std::uint64_t end_sample() const noexcept;
  // Copies everything but the fixed pool fields (data, capacity, memory, pool, index).
  void copy_metadata_from(const Chunk& other) noexcept;
  // Clears what a producer sets; called when the chunk returns to its pool.
  void reset_metadata() noexcept;
};

struct ChunkReleaser {
  void operator()(Chunk* chunk) const noexcept;
};
// The one owner of a chunk in flight; destroying it returns the chunk to its pool.
using ChunkPtr = std::unique_ptr<Chunk, ChunkReleaser>;

}  // namespace sluice
