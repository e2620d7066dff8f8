// The io_uring recorder of one lane: O_DIRECT writes from registered chunk buffers, several
// in flight, into SigMF file sets that rotate at a set size and stripe across directories.
// Chunks retire in the order they were submitted, each once its bytes are in the file and
// its journal record is written.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/chunk.hpp"
#include "pipeline/pool.hpp"
#include "pipeline/stage.hpp"
#include "recorder/journal.hpp"
#include "recorder/uring.hpp"

namespace sluice::recorder {

struct RecorderSettings {
  std::vector<std::string> directories;     // one per drive: a lane's chunks go round-robin across them
  std::string name = "capture";             // capture base name: NAME.sigmf-collection, NAME-LANE-....sigmf-*
  bool overwrite = false;                   // replace an existing capture of this name and lane
  std::uint64_t rotate_bytes = 0;           // start a new file set once a data file would pass this; 0 = never
  std::uint64_t preallocate_bytes = 1ULL << 30;  // fallocate ahead of the writes, this much at a time; 0 = off
  unsigned queue_depth = 8;                 // writes in flight
  bool direct = true;                       // O_DIRECT (some filesystems refuse it)
  std::string recorder_name = "sluice";     // core:recorder
};

// The collection path for a capture: first directory / NAME.sigmf-collection.
std::string collection_path(const RecorderSettings& settings);

// Why a recording could not be written into `directory` (it, or the nearest parent that
// exists, is not a directory this process may write), else an empty string. Creates nothing.
std::string unwritable_reason(const std::string& directory);

// Whether the collection at `path` lists recordings of `lane` (false when it cannot be read).
bool collection_has_lane(const std::string& path, const std::string& lane);

// Rewrites NAME.sigmf-collection from every NAME-*.sigmf-meta found in `directories`
// (under an exclusive flock on the first directory: lanes finish concurrently). `keep_room`:
// then sets aside room for the next rewrite (while recordings go on that may fill the volume).
void refresh_collection(const std::vector<std::string>& directories, const std::string& name, bool keep_room = false);

// `overwrite: true` never deletes the old capture before the new one has shown it works: the
// old lane's files are renamed into DIR/NAME-LANE.sluice-replaced/ (same file system) at
// open, moved back if the new recording fails before a chunk was journaled, and removed
// once it finished cleanly. A kill in between leaves the set-aside directory, which
// find_replaced() finds (validation refuses to start over it; `sluice capture repair`
// reports it) and swap_replaced() restores.
inline constexpr std::string_view kReplacedSuffix = ".sluice-replaced";
std::string replaced_directory(const std::string& directory, const std::string& name, const std::string& lane);
// Every set-aside directory of capture `name` in `directories` (NAME-*.sluice-replaced).
std::vector<std::string> find_replaced(const std::vector<std::string>& directories, const std::string& name);
// Swaps the files in `replaced` with the lane's current files beside it (renames only, so
// nothing is lost and a second swap undoes the first). Returns how many files came back.
std::size_t swap_replaced(const std::string& replaced);

// Finishes one recording (data + journal): truncates the data file to the journal's valid
// prefix, writes the final meta (into the room set aside for it beside the meta, when there
// is one), removes the journal. Returns the records kept and discarded. `remove_if_empty`:
// a recording without a single journaled chunk is removed instead (every file of it).
struct FinalizeResult {
  std::size_t records = 0;
  std::size_t discarded = 0;
  std::uint64_t bytes = 0;
  bool removed = false;
};
FinalizeResult finalize_recording(const std::string& base, bool remove_if_empty = false);
// Removes the files of one recording (data, meta, journal, the meta's set-aside room).
void remove_recording(const std::string& base);

class RecordingWriter {
 public:
  // Opens nothing.
  RecordingWriter(RecorderSettings settings, StreamInfo stream, std::string lane);
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;
  ~RecordingWriter();

  // Setup: refuses to overwrite (or sets the old lane's files aside when asked), creates the ring, registers `pools`, opens the first file
  // set of every stripe. Throws naming the failed call. Returns a note when it fell back
  // (no fixed buffers, no O_DIRECT), else an empty string.
  std::string open(const std::vector<Pool*>& pools);

  // Hot path. True when another chunk may be submitted now.
  [[nodiscard]] bool has_room() const noexcept { return in_flight_ < slots_.size() && !failed(); }
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }
  // Queues the chunk's bytes (from `bounce` when given: a pinned copy of a device chunk).
  // False when it failed (see error()).
  bool submit(ChunkPtr chunk, ChunkPtr bounce) noexcept;
  // Reaps completions, waiting up to `timeout` for one when none is ready; resubmits short
  // writes and EAGAIN. False once a write failed.
  bool poll(std::chrono::microseconds timeout) noexcept;
  // The oldest chunk once it is written and journaled, else null.
  ChunkPtr take_done() noexcept;

  [[nodiscard]] bool failed() const noexcept { return error_ != 0; }
  [[nodiscard]] int error_code() const noexcept { return error_; }
  [[nodiscard]] const std::string& error() const { return error_message_; }
  [[nodiscard]] std::uint64_t bytes_written() const noexcept { return bytes_written_; }

  // Waits until no write is pending in the ring (each completed or failed). Not hot path.
  void wait_all() noexcept { drain(); }
  // Waits for every write in flight, then finishes every file set (truncate, fsync, final
  // meta, collection). Chunks still held are released (counted by `abandoned`). Not hot path.
  void finish(std::size_t* abandoned = nullptr) noexcept;
  // Every data file base written (for tests and the summary).
  [[nodiscard]] const std::vector<std::string>& bases() const { return bases_; }
  // Rotations that found their next file set not ready yet and waited for it.
  [[nodiscard]] std::uint64_t rotation_waits() const;

 private:
  struct File;
  struct Stripe;
  struct Operation {
    std::uint64_t offset = 0;   // in the file
    const std::byte* data = nullptr;
    std::uint64_t length = 0;
    std::uint64_t done = 0;
    bool direct = false;
    bool pending = false;
    bool retried = false;  // once after a full disk, when the volume gave back what it could
  };
  struct Slot {
    ChunkPtr chunk;
    ChunkPtr bounce;
    File* file = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    int buffer_index = -1;
    std::array<Operation, 2> operations{};
    bool failed = false;
  };

  struct Rotation;
  // Creates the file set of `segment` of a stripe (data, provisional meta, journal,
  // preallocation). Throws naming the failed call. Safe on the rotation thread.
  std::unique_ptr<File> make_file_set(std::uint32_t stripe, std::uint32_t segment);
  void open_file_set(Stripe& stripe);
  // Finishes a file whose writes all retired (fsync, truncate, final meta); the error, or "".
  // `remove_if_empty`: a file set without a journaled chunk is removed instead.
  static std::string finish_file(File& file, bool remove_if_empty) noexcept;
  // Grows the file set's meta room to hold `needed` bytes; 0, else the errno. Hot path.
  static int grow_meta_room(File& file, std::uint64_t needed) noexcept;
  void close_file_set(Stripe& stripe) noexcept;
  // Rotation: swap in the stripe's prepared file set, hand the old one to the rotation thread.
  void rotate(Stripe& stripe);
  void retire(Stripe& stripe, File& file) noexcept;  // a closing file's last write retired
  void take_rotation_error() noexcept;
  bool queue(std::size_t slot_index, std::size_t operation_index) noexcept;
  void complete(std::uint64_t user_data, int result) noexcept;
  void set_error(int code, const std::string& message) noexcept;
  // Like set_error, but a message after the first is added to it (what finishing failed at).
  void add_error(int code, const std::string& message) noexcept;
  // Sets the lane's existing files aside (overwrite), or refuses. Throws naming the cause.
  void set_aside_existing();
  // Open failed or nothing was journaled: the new files go, the set-aside ones come back.
  void restore_set_aside() noexcept;
  // The end of the recording: drop the set-aside files after a clean finish, else restore
  // them (nothing journaled) or keep them and say where (error message).
  void settle_set_aside() noexcept;
  bool drain() noexcept;

  RecorderSettings settings_;
  StreamInfo stream_;
  std::string lane_;
  Uring ring_;
  std::vector<std::unique_ptr<Stripe>> stripes_;
  std::vector<Slot> slots_;
  std::size_t head_ = 0;  // oldest slot in flight
  std::size_t in_flight_ = 0;
  std::uint64_t chunk_counter_ = 0;
  std::uint64_t bytes_written_ = 0;
  int error_ = 0;
  std::string error_message_;
  std::vector<std::string> bases_;
  std::vector<std::string> set_aside_;  // NAME-LANE.sluice-replaced directories this writer made
  std::atomic<std::uint64_t> journaled_{0};  // chunk records written: the recording holds data
  bool rotation_error_taken_ = false;
  bool joined_collection_ = false;  // counted among this process's writers of the collection
  bool finished_ = false;
  // With rotation: a thread that prepares each stripe's next file set ahead of time and
  // finishes rotated-out ones (fsyncs, final meta, collection), off the write path.
  std::unique_ptr<Rotation> rotation_;
};

}  // namespace sluice::recorder
