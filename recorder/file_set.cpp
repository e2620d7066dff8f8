// Making and finishing one recording's file set. What fails part-way is removed again: a
// data file without a journal would be listed as an empty recording.
#include "recorder/file_set.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"
#include "recorder/sigmf.hpp"

namespace sluice::recorder {
namespace {

constexpr std::uint64_t kMetaRoomStep = 64 * 1024;  // a file set's meta room grows this far ahead

std::string zero_padded(std::uint32_t value, int width) {
  std::string text = std::to_string(value);
  return std::string(static_cast<std::size_t>(std::max(0, width - static_cast<int>(text.size()))), '0') + text;
}

// The files of `file` past its data descriptors: provisional meta, journal, meta room,
// first preallocation.
void open_companions(const FileSetSpec& spec, FileSet& file, std::uint32_t stripe, std::uint32_t segment) {
  const std::string data_path = file.base + std::string(kDataSuffix);
  const nlohmann::json global = make_global(spec.stream, spec.lane, spec.recorder_name, stripe, spec.stripes, segment);
  // The journal first: `sluice capture repair` completes a recording (and writes its meta)
  // from it, so a process killed at any point here leaves nothing repair cannot finish, while
  // a provisional meta without its journal would stay an incomplete recording. The
  // provisional meta makes the recording a valid (empty) capture at once; it needs no fsync,
  // as rotation prepares these often.
  file.journal = JournalWriter(file.base + std::string(kJournalSuffix), global);
  const std::string provisional = build_meta(global, {}, false).dump(2) + "\n";
  write_file_durably(file.base + std::string(kMetaSuffix), provisional, false);
  // The room for the final meta: the provisional one plus what finishing adds to the global object.
  file.meta_room = open_file(file.base + std::string(kMetaSuffix) + std::string(kTemporarySuffix), O_WRONLY | O_CREAT);
  file.meta_bound = provisional.size() + 512;
  if (const int error = grow_meta_room(file, file.meta_bound); error != 0) {
    const std::string why = errno_message("room for the metadata of the new file set " + file.base, error);
    if (is_disk_full(error)) throw DiskFull("disk full: " + why);
    throw std::runtime_error(why);
  }
  if (spec.preallocate_bytes > 0) {
    // A file that rotates is reserved whole here (on the rotation thread for every spare), so
    // its writes never ask for more; a file that does not is grown ahead by its volume's thread.
    file.preallocation = std::make_unique<Preallocation>(file.buffered_fd.get(), data_path);
    file.preallocation->reserve(spec.rotate_bytes > 0 ? spec.rotate_bytes : spec.preallocate_bytes);
  }
}

}  // namespace

std::string file_set_base(const FileSetSpec& spec, std::uint32_t stripe, std::uint32_t segment) {
  const std::string striped = spec.stripes > 1 ? "-s" + std::to_string(stripe) : std::string();
  return (std::filesystem::path(spec.directory) /
          (spec.name + "-" + spec.lane + striped + "-" + zero_padded(segment, 4)))
      .string();
}

std::unique_ptr<FileSet> make_file_set(const FileSetSpec& spec, std::uint32_t stripe, std::uint32_t segment) {
  auto file = std::make_unique<FileSet>();
  file->base = file_set_base(spec, stripe, segment);
  const std::string data_path = file->base + std::string(kDataSuffix);
  file->buffered_fd = open_file(data_path, O_WRONLY | O_CREAT | O_EXCL);
  try {
    file->direct_fd = spec.direct ? open_file(data_path, O_WRONLY | O_DIRECT) : open_file(data_path, O_WRONLY);
    struct stat status {};
    if (::fstat(file->buffered_fd.get(), &status) != 0)
      throw std::runtime_error(errno_message("fstat(" + data_path + ")"));
    file->device = status.st_dev;
    open_companions(spec, *file, stripe, segment);
  } catch (const std::exception& failure) {
    const std::string base = file->base;
    file.reset();  // closes every descriptor first
    try {
      remove_recording(base);
    } catch (const std::exception& cleanup) {
      log::warn("removing the unfinished file set {}: {}", base, cleanup.what());
    }
    if (dynamic_cast<const DiskFull*>(&failure) != nullptr) throw;
    // Setup calls name their errno in the text; a full volume is still a full disk.
    const std::string what = failure.what();
    if (what.find(std::strerror(ENOSPC)) != std::string::npos) throw DiskFull("disk full: " + what);
    throw;
  }
  return file;
}

int grow_meta_room(FileSet& file, std::uint64_t needed) noexcept {
  if (needed <= file.meta_reserved) return 0;
  const std::uint64_t size = needed + kMetaRoomStep;
  int error = reserve_bytes(file.meta_room.get(), size);
  // Preallocation on the volume may hold what is left: it gives it back, then try again.
  if (is_disk_full(error)) {
    release_volume(file.device);
    error = reserve_bytes(file.meta_room.get(), size);
  }
  if (error == 0) file.meta_reserved = size;
  return error;
}

int journal_chunk(FileSet& file, const Chunk& chunk, std::uint64_t offset, std::uint64_t bytes) noexcept {
  const JournalRecord record = make_journal_record(chunk, offset, bytes);
  int error = file.journal.append(record);
  if (is_disk_full(error)) {
    release_volume(file.device);
    error = file.journal.append(record);
  }
  return error;
}

std::string finish_file_set(FileSet& file, bool remove_if_empty) noexcept {
  std::string error;
  try {
    // finalize_recording fsyncs the data once it is truncated to its journaled bytes, and
    // writes the final meta into the room set aside for it.
    if (file.preallocation) file.preallocation->close();
    file.direct_fd.close();
    file.buffered_fd.close();
    file.meta_room.close();
    file.journal.close();
    finalize_recording(file.base, remove_if_empty);
  } catch (const std::exception& failure) {
    const bool journal_kept = std::filesystem::exists(file.base + std::string(kJournalSuffix));
    error = std::string("finishing ") + file.base + ": " + failure.what() +
            (journal_kept ? " (the journal is kept: run `sluice capture repair`)"
                          : " (its journal is gone: was the capture removed by another process?)");
  }
  return error;
}

void remove_recording(const std::string& base) {
  for (std::string_view suffix : {kDataSuffix, kMetaSuffix, kJournalSuffix}) {
    const std::string path = base + std::string(suffix);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw std::runtime_error(errno_message("unlink(" + path + ")", errno));
  }
  const std::string room = base + std::string(kMetaSuffix) + std::string(kTemporarySuffix);
  static_cast<void>(::unlink(room.c_str()));  // set aside for the meta, maybe never made
}

FinalizeResult finalize_recording(const std::string& base, bool remove_if_empty) {
  const std::string journal_path = base + std::string(kJournalSuffix);
  const std::string data_path = base + std::string(kDataSuffix);
  JournalContents contents = read_journal(journal_path);
  FinalizeResult result;
  result.records = contents.records.size();
  result.discarded = contents.discarded;
  for (const auto& record : contents.records) result.bytes += record.bytes;
  if (remove_if_empty && contents.records.empty()) {
    // Never written to (a rotation's next file set, a stripe that got no chunk): its data
    // file would be empty, which readers that map every data file cannot open.
    remove_recording(base);
    result.removed = true;
    return result;
  }
  {
    FileDescriptor data = open_file(data_path, O_WRONLY);
    // Drops bytes of writes that never got a journal record and the preallocated tail.
    if (::ftruncate(data.get(), static_cast<off_t>(result.bytes)) != 0) {
      throw std::runtime_error(errno_message("ftruncate(" + data_path + ")", errno));
    }
    if (::fsync(data.get()) != 0) throw std::runtime_error(errno_message("fsync(" + data_path + ")", errno));
  }
  const nlohmann::json meta = build_meta(contents.global, contents.records, true);
  write_file_durably(base + std::string(kMetaSuffix), meta.dump(2) + "\n");
  if (::unlink(journal_path.c_str()) != 0) {
    throw std::runtime_error(errno_message("unlink(" + journal_path + ")", errno));
  }
  return result;
}

}  // namespace sluice::recorder
