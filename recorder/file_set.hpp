// One recording's files while it is written (data through two descriptors, journal, the
// room for its final meta, preallocation), how they are made, and how they are finished.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "pipeline/chunk.hpp"
#include "pipeline/stage.hpp"
#include "recorder/disk_space.hpp"
#include "recorder/journal.hpp"
#include "recorder/uring.hpp"

namespace sluice::recorder {

inline constexpr std::uint64_t kBlock = 4096;  // O_DIRECT alignment of offsets, lengths and buffers

inline bool is_disk_full(int error) { return error == ENOSPC || error == EFBIG || error == EDQUOT; }

// A file set that cannot be made or grown because the volume is full: the clean "disk full"
// stop, not a failure of the recorder.
struct DiskFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct FileSet {
  std::string base;
  dev_t device = 0;                              // the volume: what runs out of space together
  FileDescriptor direct_fd;                      // O_DIRECT (the buffered one when direct is off)
  FileDescriptor buffered_fd;                    // for tails that are not whole blocks
  std::unique_ptr<Preallocation> preallocation;  // null with preallocate: 0
  // BASE.sigmf-meta.tmp, where finalize_recording writes the final meta: blocks set aside
  // for every chunk before it is written, so a full disk still takes the metadata.
  FileDescriptor meta_room;
  std::uint64_t meta_bound = 0;     // what the final meta may take, every chunk submitted so far
  std::uint64_t meta_reserved = 0;  // the room's size
  JournalWriter journal;
  std::uint64_t next_offset = 0;
  std::size_t outstanding = 0;  // chunks in flight that write into this file
  bool unaligned = false;       // an unaligned end: later chunks go through the page cache
  bool closing = false;         // rotated out: finished once `outstanding` is 0
};

// What every file set of one lane's recording shares.
struct FileSetSpec {
  std::string directory;
  std::string name;
  std::string lane;
  std::string recorder_name;
  StreamInfo stream;
  std::uint32_t stripes = 1;
  std::uint64_t rotate_bytes = 0;
  std::uint64_t preallocate_bytes = 0;
  bool direct = true;
};

// DIR/NAME-LANE[-sSTRIPE]-SEGMENT: the base of one recording's files.
std::string file_set_base(const FileSetSpec& spec, std::uint32_t stripe, std::uint32_t segment);

// Creates the file set of `segment` of `stripe` (data, provisional meta, journal, meta room,
// first preallocation). Throws naming the failed call (DiskFull for a full volume) and
// leaves nothing behind then. Safe on any thread.
std::unique_ptr<FileSet> make_file_set(const FileSetSpec& spec, std::uint32_t stripe, std::uint32_t segment);

// Grows the file set's meta room to hold `needed` bytes; 0, else the errno. Hot path.
int grow_meta_room(FileSet& file, std::uint64_t needed) noexcept;

// Appends the journal record of a written chunk, once more after the volume's preallocations
// gave back their room when it was full. 0, else the errno. Hot path.
int journal_chunk(FileSet& file, const Chunk& chunk, std::uint64_t offset, std::uint64_t bytes) noexcept;

// Finishes a file set whose writes all retired (closes, truncates, fsyncs, final meta); the
// error, or "". `remove_if_empty`: a file set without a journaled chunk is removed instead.
std::string finish_file_set(FileSet& file, bool remove_if_empty) noexcept;

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

}  // namespace sluice::recorder
