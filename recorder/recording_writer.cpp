// The recorder of one lane: chunks go to the stripes in turn, a stripe whose volume is writing
// its share skipped for the next, into that stripe's current file set through that stripe's
// ring, and chunks come back in the order they came.
#include "recorder/recording_writer.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "recorder/sigmf.hpp"

namespace sluice::recorder {

std::string unwritable_reason(const std::string& directory) {
  namespace fs = std::filesystem;
  fs::path path = fs::path(directory);
  std::error_code error;
  while (!path.empty() && !fs::exists(path, error)) path = path.parent_path();
  if (path.empty()) path = ".";
  if (!fs::is_directory(path, error)) return path.string() + " is not a directory";
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    return "cannot write in " + path.string() + " (" + errno_message("access") + ")";
  }
  return {};
}

RecordingWriter::RecordingWriter(RecorderSettings settings, StreamInfo stream, std::string lane)
    : settings_(std::move(settings)),
      stream_(std::move(stream)),
      lane_(std::move(lane)),
      set_aside_(settings_.directories, settings_.name, lane_) {}

RecordingWriter::~RecordingWriter() {
  if (!finished_ && !stripes_.empty()) finish();
}

FileSetSpec RecordingWriter::spec(std::uint32_t stripe) const {
  return FileSetSpec{settings_.directories[stripe],
                     settings_.name,
                     lane_,
                     settings_.recorder_name,
                     stream_,
                     static_cast<std::uint32_t>(settings_.directories.size()),
                     settings_.rotate_bytes,
                     settings_.preallocate_bytes,
                     settings_.direct};
}

std::string RecordingWriter::open(const std::vector<Pool*>& pools) {
  if (settings_.directories.empty()) throw std::runtime_error("no directory to record into");
  if (settings_.queue_depth == 0) throw std::runtime_error("queue depth must be at least 1");
  set_aside_.take(settings_.overwrite);
  std::string note;
  try {
    note = open_stripes(pools);
    collection_ = std::make_unique<CollectionWriter>(settings_.directories, settings_.name);
    collection_->join();
  } catch (...) {
    collection_.reset();  // leaves the collection's writers without a rewrite
    // Nothing of the new recording exists yet that anyone wants: the old capture comes back.
    restore_set_aside();
    throw;
  }
  if (settings_.rotate_bytes > 0) start_rotation();
  return note;
}

std::string RecordingWriter::open_stripes(const std::vector<Pool*>& pools) {
  std::string note;
  const unsigned depth = slots_per_directory(settings_);
  const auto held = static_cast<unsigned>(std::max(writes_in_flight(settings_), settings_.held_chunks));
  placed_.assign(held, 0);
  for (std::uint32_t i = 0; i < settings_.directories.size(); ++i) {
    auto stripe = std::make_unique<Stripe>(error_);
    stripe->index = i;
    if (std::string why = stripe->ring.open(depth, held, pools); !why.empty()) note = why;
    stripes_.push_back(std::move(stripe));
  }
  for (auto& stripe : stripes_) {
    stripe->file = make_file_set(spec(stripe->index), stripe->index, stripe->segment++);
    bases_.push_back(stripe->file->base);
  }
  return note;
}

void RecordingWriter::start_rotation() {
  std::vector<std::uint32_t> next_segments;
  for (const auto& stripe : stripes_) next_segments.push_back(stripe->segment);
  rotation_ = std::make_unique<Rotation>(
      std::move(next_segments),
      [this](std::uint32_t stripe, std::uint32_t segment) { return make_file_set(spec(stripe), stripe, segment); },
      [this](FileSet& file) { return finish_file_set(file, journaled()); },
      [this] { refresh_collection(settings_.directories, settings_.name, true); });
}

RecordingWriter::Stripe* RecordingWriter::next_stripe() const noexcept {
  if (stripes_.empty() || in_flight_ >= placed_.size()) return nullptr;
  for (std::size_t i = 0; i < stripes_.size(); ++i) {
    Stripe& stripe = *stripes_[(turn_ + i) % stripes_.size()];
    if (stripe.ring.has_room()) return &stripe;
  }
  return nullptr;
}

bool RecordingWriter::has_room() const noexcept { return !failed() && next_stripe() != nullptr; }

bool RecordingWriter::submit(ChunkPtr chunk, ChunkPtr bounce) noexcept {
  if (!has_room()) return false;
  take_rotation_error();
  if (failed()) return false;
  Stripe& stripe = *next_stripe();
  if (!make_room(stripe, *chunk)) return false;
  FileSet& file = *stripe.file;
  if (file.preallocation) {
    // Never asks for room past the rotation size (a rotating file is reserved whole when made).
    const std::uint64_t end = file.next_offset + chunk->size;
    std::uint64_t ahead = reserve_ahead(settings_.preallocate_bytes, end);
    if (settings_.rotate_bytes > 0)
      ahead = end < settings_.rotate_bytes ? std::min(settings_.preallocate_bytes, settings_.rotate_bytes - end) : 0;
    file.preallocation->claim(end, ahead);
  }
  placed_[submitted_ % placed_.size()] = stripe.index;
  if (stripe.index != turn_) ++turns_passed_;
  ++stripe.chunks;
  turn_ = static_cast<std::uint32_t>((stripe.index + 1) % stripes_.size());
  ++in_flight_;
  ++submitted_;
  return stripe.ring.submit(std::move(chunk), std::move(bounce), file, settings_.direct);
}

bool RecordingWriter::make_room(Stripe& stripe, const Chunk& chunk) noexcept {
  try {
    if (settings_.rotate_bytes > 0 && stripe.file->next_offset > 0 &&
        stripe.file->next_offset + chunk.size > settings_.rotate_bytes) {
      rotate(stripe);
    }
  } catch (const DiskFull& error) {
    error_.set(ENOSPC, std::string(error.what()) + " (rotating to a new file set)");
    return false;
  } catch (const std::exception& error) {
    error_.set(EIO, std::string("rotating to a new file set: ") + error.what());
    return false;
  }
  FileSet& file = *stripe.file;
  // Room for what this chunk adds to the final meta, before its bytes take the space.
  const std::uint64_t meta_bound = file.meta_bound + meta_bytes_bound(chunk);
  if (const int error = grow_meta_room(file, meta_bound); error != 0) {
    error_.set(error, (is_disk_full(error) ? "disk full: recording stopped before " : "write failed: before ") +
                          file.base + std::string(kDataSuffix) + " byte " + std::to_string(file.next_offset) +
                          ", with no room left for the metadata of one more chunk (" +
                          errno_message("fallocate", error) + ")");
    return false;
  }
  file.meta_bound = meta_bound;
  return true;
}

void RecordingWriter::rotate(Stripe& stripe) {
  std::unique_ptr<FileSet> next = rotation_->take_spare(stripe.index);
  bases_.push_back(next->base);
  ++stripe.segment;
  std::unique_ptr<FileSet> old = std::move(stripe.file);
  old->closing = true;
  stripe.file = std::move(next);
  FileSet& retiring = *old;
  stripe.closing.push_back(std::move(old));
  if (retiring.outstanding == 0) retire(stripe, retiring);
}

void RecordingWriter::retire(Stripe& stripe, FileSet& file) noexcept {
  for (auto& closing : stripe.closing) {
    if (closing.get() != &file) continue;
    if (rotation_) {
      rotation_->finish_later(std::move(closing));
    } else if (std::string error = finish_file_set(*closing, journaled()); !error.empty()) {
      error_.add(EIO, error);
    }
    closing.reset();
  }
  std::erase_if(stripe.closing, [](const std::unique_ptr<FileSet>& each) { return !each; });
}

void RecordingWriter::take_rotation_error() noexcept {
  if (!rotation_) return;
  try {
    if (std::string error = rotation_->take_error(); !error.empty()) error_.add(EIO, error);
  } catch (...) {
    error_.add(EIO, "the rotation thread failed");
  }
}

bool RecordingWriter::poll(std::chrono::microseconds timeout) noexcept {
  take_rotation_error();
  if (stripes_.empty()) return !failed();
  // Every ring's completions are taken; only the ring of the oldest chunk is waited on.
  const Stripe* oldest = in_flight_ > 0 ? &oldest_stripe() : nullptr;
  for (const auto& stripe : stripes_) {
    if (stripe.get() != oldest) stripe->ring.poll(std::chrono::microseconds(0), false);
  }
  if (oldest != nullptr) oldest_stripe().ring.poll(timeout, true);
  return !failed();
}

std::size_t RecordingWriter::writes_in_kernel() const noexcept {
  std::size_t writing = 0;
  for (const auto& stripe : stripes_) writing += stripe->ring.writes_in_kernel();
  return writing;
}

bool RecordingWriter::a_volume_idles() const noexcept {
  return std::any_of(stripes_.begin(), stripes_.end(), [](const auto& stripe) { return !stripe->ring.pending(); });
}

ChunkPtr RecordingWriter::take_done() noexcept {
  if (in_flight_ == 0) return nullptr;
  Stripe& stripe = oldest_stripe();
  const WriteRing::Written* written = stripe.ring.written_head();
  if (written == nullptr) return nullptr;
  FileSet& file = written->file;
  if (const int error = journal_chunk(file, written->chunk, written->offset, written->bytes); error != 0) {
    stripe.ring.fail_head();
    // The journal shares the data's file system: running out of room here is the same clean
    // "disk full" stop as a data write's (the chunk is not journaled, so finishing drops it).
    error_.set(error, (is_disk_full(error) ? "disk full: recording stopped journaling " : "write failed: ") +
                          errno_message(file.journal.path(), error));
    return nullptr;
  }
  bytes_written_ += written->bytes;
  ++journaled_;
  ChunkPtr done = stripe.ring.pop_head();
  --in_flight_;
  ++retired_;
  if (file.outstanding == 0 && file.closing) retire(stripe, file);  // a rotated-out file's last write
  return done;
}

void RecordingWriter::wait_all() noexcept {
  const auto pending = [this] {
    return std::any_of(stripes_.begin(), stripes_.end(), [](const auto& stripe) { return stripe->ring.pending(); });
  };
  while (pending()) poll(std::chrono::milliseconds(10));
}

void RecordingWriter::finish(std::size_t* abandoned) noexcept {
  if (finished_) return;
  finished_ = true;
  wait_all();
  std::size_t dropped = 0;
  while (in_flight_ > 0) {
    if (ChunkPtr done = take_done()) continue;  // written but not emitted: the caller took what it wanted first
    // The oldest failed (or its journal did): nothing after it is kept.
    for (auto& stripe : stripes_) dropped += stripe->ring.abandon();
    in_flight_ = 0;
  }
  if (abandoned != nullptr) *abandoned = dropped;
  finish_stripes();
  stop_rotation();
  try {
    // The last writer of this capture in this process leaves no room set aside behind it.
    if (collection_) collection_->leave();
  } catch (const std::exception& error) {
    error_.add(EIO, std::string("writing the collection: ") + error.what());
  }
  if (std::string more = set_aside_.settle(journaled(), failed()); !more.empty()) error_.append(more);
}

void RecordingWriter::finish_stripes() noexcept {
  for (auto& stripe : stripes_) {
    if (stripe->file) {
      stripe->file->closing = true;
      stripe->closing.push_back(std::move(stripe->file));
    }
    for (auto& file : stripe->closing) {
      if (std::string error = finish_file_set(*file, journaled()); !error.empty()) error_.add(EIO, error);
      file.reset();
    }
    stripe->closing.clear();
  }
}

void RecordingWriter::stop_rotation() noexcept {
  if (!rotation_) return;
  std::vector<std::unique_ptr<FileSet>> unused;
  try {
    unused = rotation_->stop();
  } catch (const std::exception& error) {
    error_.add(EIO, std::string("stopping the rotation threads: ") + error.what());
  }
  take_rotation_error();
  // Spares never written to: not part of the recording.
  for (auto& spare : unused) {
    const std::string base = spare->base;
    spare.reset();  // its descriptors close first
    try {
      remove_recording(base);
    } catch (const std::exception& error) {
      error_.add(EIO, std::string("removing the unused file set: ") + error.what());
    }
  }
}

void RecordingWriter::restore_set_aside() noexcept {
  stripes_.clear();  // closes what open() made before its files are removed
  set_aside_.restore();
}

}  // namespace sluice::recorder
