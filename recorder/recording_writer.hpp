// The io_uring recorder of one lane: O_DIRECT writes from registered chunk buffers, several in
// flight on each volume, into SigMF file sets that rotate and stripe across directories. Chunks
// retire in submission order, each once its bytes are in the file and its journal is written.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/chunk.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/stage.hpp"
#include "recorder/collection.hpp"
#include "recorder/file_set.hpp"
#include "recorder/rotation.hpp"
#include "recorder/set_aside.hpp"
#include "recorder/write_ring.hpp"

namespace sluice::recorder {

struct RecorderSettings {
  std::vector<std::string> directories;  // one per drive: a lane's chunks go to them in turn, a busy one skipped
  std::string name = "capture";          // capture base name: NAME.sigmf-collection, NAME-LANE-....sigmf-*
  bool overwrite = false;                // replace an existing capture of this name and lane
  std::uint64_t rotate_bytes = 0;        // start a new file set once a data file would pass this; 0 = never
  std::uint64_t preallocate_bytes =
      1ULL << 30;                        // reserved ahead of the writes (reserve_ahead; a rotating file whole); 0 = off
  unsigned queue_depth = 8;              // writes in the kernel for the lane, shared out over its directories
  std::size_t held_chunks = 0;           // chunks the writer may hold (chunks_held()); at least its writes
  bool direct = true;                    // O_DIRECT (some filesystems refuse it)
  std::string recorder_name = "sluice";  // core:recorder
};

// The collection path for a capture: first directory / NAME.sigmf-collection.
inline std::string collection_path(const RecorderSettings& settings) {
  return collection_path(settings.directories, settings.name);
}

// Writes in the kernel at once on each directory's volume: the lane's queue depth shared out,
// at least one.
inline unsigned slots_per_directory(const RecorderSettings& settings) {
  const auto directories = static_cast<unsigned>(std::max<std::size_t>(settings.directories.size(), 1));
  return std::max(1U, (settings.queue_depth + directories - 1) / directories);
}
// Writes in the kernel at once for the lane: each directory's share, summed.
inline std::size_t writes_in_flight(const RecorderSettings& settings) {
  return static_cast<std::size_t>(slots_per_directory(settings)) *
         std::max<std::size_t>(settings.directories.size(), 1);
}
// Chunks a writer may hold when its chunks come from pools of `pool_chunks` or more: its writes
// in the kernel and, striped, up to as many again written on a volume ahead of the others and
// waiting for an older chunk on a slower one (chunks leave in order), as far as that leaves the
// pool half its chunks.
inline std::size_t chunks_held(const RecorderSettings& settings, std::size_t pool_chunks) {
  const std::size_t writes = writes_in_flight(settings);
  if (settings.directories.size() < 2) return writes;
  return std::max(writes, std::min(2 * writes, pool_chunks / 2));
}

// Why a recording could not be written into `directory` (it, or the nearest parent that
// exists, is not a directory this process may write), else an empty string. Creates nothing.
std::string unwritable_reason(const std::string& directory);

class RecordingWriter {
 public:
  // Opens nothing.
  RecordingWriter(RecorderSettings settings, StreamInfo stream, std::string lane);
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;
  ~RecordingWriter();

  // Setup: refuses to overwrite (or sets the old lane's files aside when asked), creates a
  // ring per directory, registers `pools` with each, opens the first file set of every
  // stripe. Throws naming the failed call. Returns a note when it fell back (no fixed
  // buffers), else an empty string.
  std::string open(const std::vector<Pool*>& pools);

  // Hot path. True when another chunk may be submitted now (its volume has a write free).
  [[nodiscard]] bool has_room() const noexcept;
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }
  // Of those, the chunks whose write is still in the kernel, over every volume.
  [[nodiscard]] std::size_t writes_in_kernel() const noexcept;
  // Whether some volume has no write in the kernel.
  [[nodiscard]] bool a_volume_idles() const noexcept;
  // Queues the chunk's bytes (from `bounce` when given: a pinned copy of a device chunk).
  // False when it failed (see error()).
  bool submit(ChunkPtr chunk, ChunkPtr bounce) noexcept;
  // Reaps completions of every volume, waiting up to `timeout` for the oldest chunk's when
  // none is ready; resubmits short writes and EAGAIN. False once a write failed.
  bool poll(std::chrono::microseconds timeout) noexcept;
  // The oldest chunk once it is written and journaled, else null.
  ChunkPtr take_done() noexcept;

  [[nodiscard]] bool failed() const noexcept { return error_.failed(); }
  [[nodiscard]] int error_code() const noexcept { return error_.code(); }
  [[nodiscard]] const std::string& error() const { return error_.message(); }
  [[nodiscard]] std::uint64_t bytes_written() const noexcept { return bytes_written_; }
  // Chunks submitted to directory `directory` (its index in the settings' list).
  [[nodiscard]] std::uint64_t chunks_to(std::size_t directory) const noexcept {
    return directory < stripes_.size() ? stripes_[directory]->chunks : 0;
  }
  // Chunks that went past the volume whose turn it was, which had all its writes in the kernel.
  [[nodiscard]] std::uint64_t turns_passed() const noexcept { return turns_passed_; }

  // Waits until no write is pending in any ring (each completed or failed). Not hot path.
  void wait_all() noexcept;
  // Waits for every write in flight, then finishes every file set (truncate, fsync, final
  // meta, collection). Chunks still held are released (counted by `abandoned`). Not hot path.
  void finish(std::size_t* abandoned = nullptr) noexcept;
  // Every data file base written (for tests and the summary).
  [[nodiscard]] const std::vector<std::string>& bases() const { return bases_; }
  // Rotations that found their next file set not ready yet and waited for it.
  [[nodiscard]] std::uint64_t rotation_waits() const { return rotation_ ? rotation_->waits() : 0; }

 private:
  // One directory: its volume's ring, its current file set, those rotated out.
  struct Stripe {
    explicit Stripe(RecorderError& error) : ring(error) {}
    std::uint32_t index = 0;
    std::uint32_t segment = 0;  // of the next file set to create
    std::uint64_t chunks = 0;   // submitted to it
    WriteRing ring;
    std::unique_ptr<FileSet> file;
    std::vector<std::unique_ptr<FileSet>> closing;  // rotated out, finished once their last write retires
  };

  [[nodiscard]] FileSetSpec spec(std::uint32_t stripe) const;
  // The stripe the next chunk goes to: the next in turn whose volume has a write free, else
  // none (every volume is writing its share, or the writer holds all it may).
  [[nodiscard]] Stripe* next_stripe() const noexcept;
  // The stripe holding the oldest chunk not yet taken back.
  [[nodiscard]] Stripe& oldest_stripe() const noexcept { return *stripes_[placed_[retired_ % placed_.size()]]; }
  std::string open_stripes(const std::vector<Pool*>& pools);
  void start_rotation();
  // Swaps in the stripe's prepared file set; the old one is finished once its writes retire.
  void rotate(Stripe& stripe);
  // Rotates when due and sets aside the meta room for one more chunk. False when it failed.
  bool make_room(Stripe& stripe, const Chunk& chunk) noexcept;
  // A closing file's last write retired: finished now, or on the rotation thread.
  void retire(Stripe& stripe, FileSet& file) noexcept;
  void take_rotation_error() noexcept;
  [[nodiscard]] bool journaled() const noexcept { return journaled_.load(std::memory_order_relaxed) > 0; }
  void finish_stripes() noexcept;
  void stop_rotation() noexcept;
  // Drops the new recording's files and brings the set-aside ones back.
  void restore_set_aside() noexcept;

  RecorderSettings settings_;
  StreamInfo stream_;
  std::string lane_;
  RecorderError error_;
  SetAside set_aside_;
  std::unique_ptr<CollectionWriter> collection_;
  std::vector<std::unique_ptr<Stripe>> stripes_;
  std::uint64_t submitted_ = 0;        // chunks submitted
  std::uint64_t retired_ = 0;          // chunks taken back, in the same order
  std::vector<std::uint32_t> placed_;  // the stripe of each chunk held, by submitted % size
  std::uint32_t turn_ = 0;             // the stripe first in line for the next chunk
  std::uint64_t turns_passed_ = 0;     // chunks that went past a busy volume (turns_passed())
  std::size_t in_flight_ = 0;
  std::uint64_t bytes_written_ = 0;
  std::vector<std::string> bases_;
  std::atomic<std::uint64_t> journaled_{0};  // chunk records written: the recording holds data
  bool finished_ = false;
  // With rotation: prepares each stripe's next file set ahead and finishes rotated-out ones.
  std::unique_ptr<Rotation> rotation_;
};

}  // namespace sluice::recorder
