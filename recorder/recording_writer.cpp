// The recorder's write engine. A chunk becomes one O_DIRECT write from its registered
// buffer, plus one buffered write for a tail that is not a whole block (O_DIRECT needs
// aligned offsets and lengths); once a file has an unaligned end, later chunks of that file
// are written buffered, so the data file always holds exactly the recorded bytes.
#include "recorder/recording_writer.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <spdlog/spdlog.h>

#include "pipeline/clock.hpp"
#include "pipeline/errno_message.hpp"
#include "recorder/disk_space.hpp"
#include "recorder/sigmf.hpp"

namespace sluice::recorder {
namespace {

constexpr std::uint64_t kBlock = 4096;  // O_DIRECT alignment of offsets, lengths and buffers
constexpr std::size_t kFinishBacklog = 64;  // rotated-out files (3 descriptors each) awaiting their finish
constexpr std::uint64_t kCollectionSlack = 64 * 1024;  // room set aside for a collection's growth
constexpr std::uint64_t kMetaRoomStep = 64 * 1024;     // a file set's meta room grows this far ahead

bool aligned(std::uint64_t value) { return value % kBlock == 0; }

bool is_disk_full(int error) { return error == ENOSPC || error == EFBIG || error == EDQUOT; }

// A file set that cannot be made or grown because the volume is full: the clean "disk full"
// stop, not a failure of the recorder.
struct DiskFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string two_digits(std::uint32_t value, int width) {
  std::string text = std::to_string(value);
  return std::string(static_cast<std::size_t>(std::max(0, width - static_cast<int>(text.size()))), '0') + text;
}

}  // namespace

struct RecordingWriter::File {
  std::string base;
  dev_t device = 0;            // the volume: what runs out of space together
  FileDescriptor direct_fd;    // O_DIRECT (the buffered one when direct is off)
  FileDescriptor buffered_fd;  // for tails that are not whole blocks
  std::unique_ptr<Preallocation> preallocation;  // null with preallocate: 0
  // BASE.sigmf-meta.tmp, where finalize_recording writes the final meta: blocks set aside
  // for every chunk before it is written, so a full disk still takes the metadata.
  FileDescriptor meta_room;
  std::uint64_t meta_bound = 0;     // what the final meta may take, every chunk submitted so far
  std::uint64_t meta_reserved = 0;  // the room's size
  JournalWriter journal;
  std::uint64_t next_offset = 0;
  std::size_t outstanding = 0;  // slots in flight that write into this file
  bool unaligned = false;
  bool closing = false;
};

struct RecordingWriter::Stripe {
  std::string directory;
  std::uint32_t index = 0;
  std::uint32_t segment = 0;  // of the next file set to create
  std::unique_ptr<File> file;
  std::vector<std::unique_ptr<File>> closing;  // rotated out, finished once their last write retires
};

// The rotation thread's work, under `mutex`: spares to prepare (by stripe), files to finish.
// The record thread only swaps pointers and queues; the files are made and finished here.
struct RecordingWriter::Rotation {
  std::mutex mutex;
  std::condition_variable wake;   // work for the thread
  std::condition_variable ready;  // a spare is ready (or the thread failed)
  std::vector<std::unique_ptr<File>> spares;  // by stripe index; null while being prepared
  std::vector<std::uint32_t> next_segment;    // by stripe index
  std::vector<std::uint32_t> to_prepare;
  std::vector<std::unique_ptr<File>> to_finish;
  bool stopping = false;
  bool collection_dirty = false;
  std::string error;                          // first failure, for the record thread
  std::atomic<bool> failed{false};
  // A spare that could not be made (a full volume) fails the recording only once a
  // rotation needs it: the current file set may still take chunks until then.
  std::string prepare_error;
  int prepare_code = 0;
  std::uint64_t waits = 0;                    // rotations that had to wait for their spare
  std::thread preparer;  // makes spares: cheap, so a rotation rarely waits
  std::thread finisher;  // finishes rotated-out files and rewrites the collection: fsyncs
};

std::string collection_path(const RecorderSettings& settings) {
  return (std::filesystem::path(settings.directories.front()) / (settings.name + std::string(kCollectionSuffix))).string();
}

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

bool collection_has_lane(const std::string& path, const std::string& lane) {
  std::ifstream in(path);
  const nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  if (document.is_discarded() || !document.contains("collection")) return false;
  const auto& lanes = document["collection"].value("sluice:lanes", nlohmann::json::object());
  return lanes.is_object() && lanes.contains(lane);
}

namespace {

// What refresh_collection learnt from one .sigmf-meta, valid while its size and mtime hold:
// a rotating recording then re-reads and re-hashes only the files that changed, not every
// meta of the collection each time.
struct MetaEntry {
  std::uint64_t inode = 0;  // write_file_durably renames a new file in: a new inode
  std::uintmax_t size = 0;
  std::int64_t mtime_ns = 0;
  bool usable = false;
  std::string lane;
  std::int64_t segment = 0;
  std::int64_t stripe = 0;
  std::string hash;
};

std::mutex g_meta_cache_mutex;
std::map<std::string, MetaEntry> g_meta_cache;  // by path

// Writers of each collection in this process: room for the next rewrite is set aside while
// one of them still records. A writer leaves and rewrites the collection under the lock, so
// the last one's rewrite comes last and leaves no room behind.
std::mutex g_collection_writers_mutex;
std::map<std::string, int> g_collection_writers;  // by collection path

void join_collection(const std::string& path) {
  std::lock_guard lock(g_collection_writers_mutex);
  ++g_collection_writers[path];
}

// Returns how many writers of `path` remain. Called under g_collection_writers_mutex.
int leave_collection(const std::string& path) {
  const auto found = g_collection_writers.find(path);
  if (found == g_collection_writers.end()) return 0;
  const int left = --found->second;
  if (left <= 0) g_collection_writers.erase(found);
  return std::max(left, 0);
}

// The next rewrite of the collection at `path` lands in this room (write_file_durably
// reuses PATH.tmp), so a volume that fills meanwhile still takes it. Twice its size: it
// grows a little with each rewrite. Best effort: without it, the rewrite asks the volume.
void keep_room_for_collection(const std::string& path) {
  const std::string room = path + std::string(kTemporarySuffix);
  const int fd = ::open(room.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  FileDescriptor owner(fd, room);
  std::error_code error;
  const std::uint64_t size = std::filesystem::file_size(path, error);
  if (const int failed = reserve_bytes(owner.get(), 2 * size + kCollectionSlack); failed != 0) {
    spdlog::debug("{}", errno_message("setting aside room for the collection in " + room, failed));
  }
}

}  // namespace

void refresh_collection(const std::vector<std::string>& directories, const std::string& name, bool keep_room) {
  namespace fs = std::filesystem;
  const std::string& first = directories.front();
  const int lock_fd = ::open(first.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd < 0) throw std::runtime_error(errno_message("open(" + first + ")", errno));
  FileDescriptor lock(lock_fd, first);
  if (::flock(lock.get(), LOCK_EX) != 0) throw std::runtime_error(errno_message("flock(" + first + ")", errno));
  struct Entry {
    std::string lane;
    std::int64_t segment;
    std::int64_t stripe;
    std::string base;
    std::string hash;
  };
  std::vector<Entry> entries;
  const std::string prefix = name + "-";
  {
    std::lock_guard cache_lock(g_meta_cache_mutex);
    for (const auto& directory : directories) {
      for (const auto& item : fs::directory_iterator(directory)) {
        const std::string file = item.path().filename().string();
        if (file.rfind(prefix, 0) != 0 || item.path().extension() != kMetaSuffix) continue;
        const std::string path = item.path().string();
        struct stat status {};
        if (::stat(path.c_str(), &status) != 0) continue;  // removed meanwhile
        const std::int64_t mtime_ns = static_cast<std::int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec;
        MetaEntry& cached = g_meta_cache[path];
        if (cached.hash.empty() || cached.inode != status.st_ino || cached.size != static_cast<std::uintmax_t>(status.st_size) ||
            cached.mtime_ns != mtime_ns) {
          std::ifstream in(path);
          if (!in) {  // another lane removed or replaced it since the stat: a later rewrite sees it
            g_meta_cache.erase(path);
            continue;
          }
          const nlohmann::json meta = nlohmann::json::parse(in, nullptr, false);
          cached = MetaEntry{};
          cached.inode = status.st_ino;
          cached.size = static_cast<std::uintmax_t>(status.st_size);
          cached.mtime_ns = mtime_ns;
          cached.usable = !meta.is_discarded() && meta.contains("global");
          if (cached.usable) {
            const auto& global = meta["global"];
            cached.lane = global.value("sluice:lane", std::string());
            cached.segment = global.value("sluice:segment", std::int64_t{0});
            cached.stripe = global.value("sluice:stripe", std::int64_t{0});
          }
          try {
            cached.hash = sha512_of_file(path);
          } catch (const std::runtime_error&) {  // gone between the parse and the hash: likewise
            g_meta_cache.erase(path);
            continue;
          }
        }
        // NAME-LANE-…: a capture whose name extends this one plus '-' (NAME-raw beside NAME) has
        // files that start with this prefix too; they belong to their own collection.
        if (!cached.usable || file.rfind(prefix + cached.lane + "-", 0) != 0) continue;
        entries.push_back(Entry{cached.lane, cached.segment, cached.stripe, strip_capture_suffix(path), cached.hash});
      }
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.lane, a.segment, a.stripe) < std::tie(b.lane, b.segment, b.stripe);
  });
  std::vector<std::string> bases;
  std::vector<std::string> hashes;
  nlohmann::json lanes = nlohmann::json::object();
  const fs::path home = fs::path(collection_path(RecorderSettings{directories, name})).parent_path();
  for (const auto& entry : entries) {
    bases.push_back(entry.base);
    hashes.push_back(entry.hash);
    lanes[entry.lane].push_back(fs::relative(fs::path(entry.base), home).string());
  }
  const std::string path = collection_path(RecorderSettings{directories, name});
  write_collection(path, bases, lanes,
                   "sluice capture " + name + ": " + std::to_string(lanes.size()) + " lane(s), " +
                       std::to_string(bases.size()) + " recording(s)",
                   &hashes);
  if (keep_room) keep_room_for_collection(path);
}

void remove_recording(const std::string& base) {
  for (std::string_view suffix : {kDataSuffix, kMetaSuffix, kJournalSuffix}) {
    const std::string path = base + std::string(suffix);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw std::runtime_error(errno_message("unlink(" + path + ")", errno));
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

namespace {

// fsync of a directory, so that renames in it survive a crash. Throws naming the call.
void sync_directory(const std::string& directory) {
  FileDescriptor fd = open_file(directory, O_RDONLY | O_DIRECTORY);
  if (::fsync(fd.get()) != 0) throw std::runtime_error(errno_message("fsync(" + directory + ")", errno));
}

// The lane's files in `directory`: names that start with NAME-LANE-.
std::vector<std::filesystem::path> lane_files(const std::string& directory, const std::string& prefix) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(directory, error)) {
    if (item.path().filename().string().rfind(prefix, 0) == 0) files.push_back(item.path());
  }
  return files;
}

}  // namespace

std::string replaced_directory(const std::string& directory, const std::string& name, const std::string& lane) {
  return (std::filesystem::path(directory) / (name + "-" + lane + std::string(kReplacedSuffix))).string();
}

std::vector<std::string> find_replaced(const std::vector<std::string>& directories, const std::string& name) {
  std::vector<std::string> found;
  for (const auto& directory : directories) {
    std::error_code error;
    for (const auto& item : std::filesystem::directory_iterator(directory, error)) {
      const std::string file = item.path().filename().string();
      if ((name.empty() || file.rfind(name + "-", 0) == 0) && file.size() > kReplacedSuffix.size() &&
          file.compare(file.size() - kReplacedSuffix.size(), kReplacedSuffix.size(), kReplacedSuffix) == 0 &&
          item.is_directory(error)) {
        found.push_back(item.path().string());
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::size_t swap_replaced(const std::string& replaced) {
  namespace fs = std::filesystem;
  const fs::path aside(replaced);
  const fs::path home = aside.parent_path().empty() ? fs::path(".") : aside.parent_path();
  std::string stem = aside.filename().string();
  stem.resize(stem.size() - kReplacedSuffix.size());  // NAME-LANE
  const fs::path swap = home / (stem + ".sluice-swap");
  fs::create_directory(swap);
  // Current files into a scratch directory, the set-aside ones back, then the scratch
  // directory becomes the set-aside one: each step a rename, nothing removed.
  for (const auto& file : lane_files(home.string(), stem + "-")) fs::rename(file, swap / file.filename());
  std::size_t restored = 0;
  for (const auto& item : fs::directory_iterator(aside)) {
    fs::rename(item.path(), home / item.path().filename());
    ++restored;
  }
  fs::remove(aside);
  fs::rename(swap, aside);
  sync_directory(home.string());
  return restored;
}

void RecordingWriter::set_aside_existing() {
  namespace fs = std::filesystem;
  const std::string prefix = settings_.name + "-" + lane_ + "-";
  // A failure in any directory puts back what earlier directories had set aside.
  try {
  for (const auto& directory : settings_.directories) {
    std::error_code error;
    fs::create_directories(directory, error);
    if (error) throw std::runtime_error("mkdir(" + directory + "): " + error.message());
    const std::string aside = replaced_directory(directory, settings_.name, lane_);
    if (fs::exists(aside, error)) {
      throw std::runtime_error("an earlier overwrite of this capture was cut off: the capture it replaced is kept in " +
                               aside + " (run `sluice capture repair " + collection_path(settings_) +
                               "` to see it, `--restore-replaced` to bring it back, or remove it)");
    }
    const std::vector<fs::path> existing = lane_files(directory, prefix);
    if (existing.empty()) continue;
    if (!settings_.overwrite) {
      throw std::runtime_error("capture " + existing.front().string() +
                               " exists: a capture is never overwritten (set overwrite: true, or choose another name)");
    }
    if (!fs::create_directory(aside, error) || error) {
      throw std::runtime_error("mkdir(" + aside + "): " + (error ? error.message() : std::string("exists")));
    }
    set_aside_.push_back(aside);
    for (const auto& file : existing) {
      fs::rename(file, fs::path(aside) / file.filename(), error);
      if (error) throw std::runtime_error("rename(" + file.string() + ", " + aside + "): " + error.message());
    }
    sync_directory(directory);
    spdlog::info("overwrite: the previous {} files of lane {} are set aside in {} until the new recording finishes",
                 existing.size(), lane_, aside);
  }
  } catch (...) {
    restore_set_aside();
    throw;
  }
}

void RecordingWriter::restore_set_aside() noexcept {
  namespace fs = std::filesystem;
  // Close what open() made before its files are removed.
  for (auto& stripe : stripes_) stripe->file.reset();
  stripes_.clear();
  for (const auto& aside : set_aside_) {
    std::error_code error;
    const fs::path home = fs::path(aside).parent_path();
    for (const auto& file : lane_files(home.string(), settings_.name + "-" + lane_ + "-")) fs::remove(file, error);
    bool all_back = true;
    for (const auto& item : fs::directory_iterator(aside, error)) {
      fs::rename(item.path(), home / item.path().filename(), error);
      if (error) {
        all_back = false;
        spdlog::error("overwrite: could not move {} back: {} (it stays in {})", item.path().string(), error.message(), aside);
      }
    }
    if (all_back) fs::remove(aside, error);
    try {
      sync_directory(home.string());
    } catch (const std::exception& failure) {
      spdlog::error("overwrite: {}", failure.what());
    }
  }
  set_aside_.clear();
  try {
    refresh_collection(settings_.directories, settings_.name);
  } catch (const std::exception& failure) {
    spdlog::error("overwrite: rewriting the collection after restoring the old capture: {}", failure.what());
  }
}

void RecordingWriter::settle_set_aside() noexcept {
  if (set_aside_.empty()) return;
  if (journaled_ == 0) {
    // Nothing recorded (a start failure elsewhere in the pipeline, a source that never sent):
    // an empty recording is not worth the capture it would replace.
    restore_set_aside();
    if (failed()) {
      try {
        error_message_ += "; nothing was recorded, so the capture it would have replaced is back in place";
      } catch (...) {
      }
    } else {
      spdlog::warn("overwrite: lane {} recorded nothing, so the capture it would have replaced is back in place", lane_);
    }
    return;
  }
  if (!failed()) {
    for (const auto& aside : set_aside_) {
      std::error_code error;
      std::filesystem::remove_all(aside, error);
      if (error) spdlog::warn("overwrite: could not remove the replaced capture in {}: {}", aside, error.message());
    }
    set_aside_.clear();
    return;
  }
  try {
    error_message_ += "; the capture it replaces is kept in " + set_aside_.front() +
                      " (`sluice capture repair --restore-replaced` brings it back)";
  } catch (...) {
  }
}

RecordingWriter::RecordingWriter(RecorderSettings settings, StreamInfo stream, std::string lane)
    : settings_(std::move(settings)), stream_(std::move(stream)), lane_(std::move(lane)) {}

RecordingWriter::~RecordingWriter() {
  if (!finished_ && !stripes_.empty()) finish();
}

std::string RecordingWriter::open(const std::vector<Pool*>& pools) {
  namespace fs = std::filesystem;
  if (settings_.directories.empty()) throw std::runtime_error("no directory to record into");
  if (settings_.queue_depth == 0) throw std::runtime_error("queue depth must be at least 1");
  set_aside_existing();
  std::string note;
  try {
  ring_ = Uring(static_cast<unsigned>(settings_.queue_depth * 2));
  slots_.resize(settings_.queue_depth);
  if (std::string why = ring_.register_pools(pools); !why.empty()) {
    note = "fixed buffers off (" + why + "): plain io_uring writes";
  }
  for (std::uint32_t i = 0; i < settings_.directories.size(); ++i) {
    auto stripe = std::make_unique<Stripe>();
    stripe->directory = settings_.directories[i];
    stripe->index = i;
    stripes_.push_back(std::move(stripe));
  }
  for (auto& stripe : stripes_) open_file_set(*stripe);
  join_collection(collection_path(settings_));
  joined_collection_ = true;
  refresh_collection(settings_.directories, settings_.name, true);
  } catch (...) {
    if (joined_collection_) {
      std::lock_guard lock(g_collection_writers_mutex);
      leave_collection(collection_path(settings_));
    }
    joined_collection_ = false;
    // Nothing of the new recording exists yet that anyone wants: the old capture comes back.
    restore_set_aside();
    throw;
  }
  if (settings_.rotate_bytes > 0) {
    rotation_ = std::make_unique<Rotation>();
    rotation_->spares.resize(stripes_.size());
    for (const auto& stripe : stripes_) {
      rotation_->next_segment.push_back(stripe->segment);
      rotation_->to_prepare.push_back(stripe->index);
    }
    const auto loop = [this](bool preparing) {
      Rotation& work = *rotation_;
      std::unique_lock lock(work.mutex);
      std::uint64_t last_refresh = monotonic_ns();
      for (;;) {
        work.wake.wait_for(lock, std::chrono::milliseconds(500), [&] {
          return work.stopping || (preparing ? !work.to_prepare.empty() && work.to_finish.size() <= kFinishBacklog
                                             : !work.to_finish.empty());
        });
        if (preparing && work.stopping) return;
        // A long backlog of rotated-out files (three descriptors each) holds back new spares:
        // then the writes wait, which is the honest backpressure.
        while (preparing && !work.to_prepare.empty() && !work.failed && work.to_finish.size() <= kFinishBacklog) {
          const std::uint32_t stripe = work.to_prepare.back();
          work.to_prepare.pop_back();
          const std::uint32_t segment = work.next_segment[stripe]++;
          lock.unlock();
          std::unique_ptr<File> file;
          std::string error;
          int code = 0;
          try {
            file = make_file_set(stripe, segment);
          } catch (const DiskFull& failure) {
            error = failure.what();
            code = ENOSPC;
          } catch (const std::exception& failure) {
            error = std::string("preparing the next file set: ") + failure.what();
            code = EIO;
          }
          lock.lock();
          if (file) work.spares[stripe] = std::move(file);
          if (code != 0 && work.prepare_code == 0) {
            work.prepare_error = error;
            work.prepare_code = code;
          }
          work.ready.notify_all();
        }
        if (preparing) continue;
        while (!work.to_finish.empty()) {
          std::unique_ptr<File> file = std::move(work.to_finish.front());
          work.to_finish.erase(work.to_finish.begin());
          lock.unlock();
          std::string error = finish_file(*file, journaled_.load(std::memory_order_relaxed) > 0);
          file.reset();
          lock.lock();
          work.collection_dirty = true;
          if (!error.empty() && !work.failed) {
            work.error = error;
            work.failed = true;
          }
          work.wake.notify_all();  // the preparer may wait for the backlog to shrink
        }
        // The collection lists every file of every lane: rewriting it costs more as the
        // recording grows, so it is refreshed at most every 2 s here (and at the end).
        const std::uint64_t now = monotonic_ns();
        if (work.collection_dirty && (now - last_refresh > 2'000'000'000ULL || work.stopping)) {
          work.collection_dirty = false;
          last_refresh = now;
          lock.unlock();
          std::string error;
          try {
            refresh_collection(settings_.directories, settings_.name, true);
          } catch (const std::exception& failure) {
            error = std::string("writing the collection: ") + failure.what();
          }
          lock.lock();
          if (!error.empty() && !work.failed) {
            work.error = error;
            work.failed = true;
          }
        }
        if (work.stopping && work.to_finish.empty()) return;
      }
    };
    rotation_->preparer = std::thread(loop, true);
    rotation_->finisher = std::thread(loop, false);
  }
  return note;
}

std::uint64_t RecordingWriter::rotation_waits() const {
  if (!rotation_) return 0;
  std::lock_guard lock(rotation_->mutex);
  return rotation_->waits;
}

void RecordingWriter::take_rotation_error() noexcept {
  if (!rotation_ || !rotation_->failed.load(std::memory_order_relaxed) || rotation_error_taken_) return;
  std::lock_guard lock(rotation_->mutex);
  add_error(EIO, rotation_->error);
  rotation_error_taken_ = true;
}

void RecordingWriter::rotate(Stripe& stripe) {
  std::unique_ptr<File> next;
  {
    std::unique_lock lock(rotation_->mutex);
    if (!rotation_->spares[stripe.index]) ++rotation_->waits;  // prepared too late: the writes wait
    rotation_->ready.wait(lock, [&] {
      return rotation_->spares[stripe.index] != nullptr || rotation_->failed || rotation_->prepare_code != 0;
    });
    if (!rotation_->spares[stripe.index]) {
      if (rotation_->prepare_code == ENOSPC) throw DiskFull(rotation_->prepare_error);
      throw std::runtime_error(rotation_->failed ? rotation_->error : rotation_->prepare_error);
    }
    next = std::move(rotation_->spares[stripe.index]);
    rotation_->to_prepare.push_back(stripe.index);
  }
  bases_.push_back(next->base);
  ++stripe.segment;
  std::unique_ptr<File> old = std::move(stripe.file);
  old->closing = true;
  stripe.file = std::move(next);
  File& retiring = *old;
  stripe.closing.push_back(std::move(old));
  if (retiring.outstanding == 0) {
    retire(stripe, retiring);
  } else {
    rotation_->wake.notify_all();  // prepare the next spare now
  }
}

void RecordingWriter::retire(Stripe& stripe, File& file) noexcept {
  for (auto& closing : stripe.closing) {
    if (closing.get() != &file) continue;
    if (rotation_) {
      std::lock_guard lock(rotation_->mutex);
      rotation_->to_finish.push_back(std::move(closing));
      rotation_->wake.notify_all();
    } else {
      close_file_set(stripe);
      return;
    }
  }
  std::erase_if(stripe.closing, [](const std::unique_ptr<File>& each) { return !each; });
}

std::unique_ptr<RecordingWriter::File> RecordingWriter::make_file_set(std::uint32_t stripe, std::uint32_t segment) {
  auto file = std::make_unique<File>();
  const bool striped = settings_.directories.size() > 1;
  file->base = (std::filesystem::path(settings_.directories[stripe]) /
                (settings_.name + "-" + lane_ + (striped ? "-s" + std::to_string(stripe) : std::string()) + "-" +
                 two_digits(segment, 4)))
                   .string();
  const std::string data_path = file->base + std::string(kDataSuffix);
  file->buffered_fd = open_file(data_path, O_WRONLY | O_CREAT | O_EXCL);
  // What failed part-way is removed again: a data file without a journal would be listed
  // as an empty recording.
  try {
    file->direct_fd = settings_.direct ? open_file(data_path, O_WRONLY | O_DIRECT) : open_file(data_path, O_WRONLY);
    struct stat status {};
    if (::fstat(file->buffered_fd.get(), &status) != 0) throw std::runtime_error(errno_message("fstat(" + data_path + ")"));
    file->device = status.st_dev;
    const nlohmann::json global = make_global(stream_, lane_, settings_.recorder_name, stripe,
                                              static_cast<std::uint32_t>(settings_.directories.size()), segment);
    // Provisional meta first: a valid (empty) capture exists from the first moment, and the
    // journal beside it is what `sluice capture repair` completes it (and the meta) from, so
    // it needs no fsync: rotation prepares these often.
    const std::string provisional = build_meta(global, {}, false).dump(2) + "\n";
    write_file_durably(file->base + std::string(kMetaSuffix), provisional, false);
    file->journal = JournalWriter(file->base + std::string(kJournalSuffix), global);
    // The room for the final meta: the provisional one plus what finishing adds to the global object.
    file->meta_room = open_file(file->base + std::string(kMetaSuffix) + std::string(kTemporarySuffix), O_WRONLY | O_CREAT);
    file->meta_bound = provisional.size() + 512;
    if (const int error = grow_meta_room(*file, file->meta_bound); error != 0) {
      const std::string why = errno_message("room for the metadata of the new file set " + file->base, error);
      if (is_disk_full(error)) throw DiskFull("disk full: " + why);
      throw std::runtime_error(why);
    }
    if (settings_.preallocate_bytes > 0) {
      file->preallocation = std::make_unique<Preallocation>(file->buffered_fd.get(), data_path);
      const std::uint64_t first = settings_.rotate_bytes > 0 ? std::min(settings_.rotate_bytes, settings_.preallocate_bytes)
                                                             : settings_.preallocate_bytes;
      file->preallocation->claim(0, first);
    }
  } catch (const std::exception& failure) {
    const std::string base = file->base;
    file.reset();  // closes every descriptor first
    try {
      remove_recording(base);
    } catch (const std::exception& cleanup) {
      spdlog::warn("removing the unfinished file set {}: {}", base, cleanup.what());
    }
    if (dynamic_cast<const DiskFull*>(&failure) != nullptr) throw;
    // Setup calls name their errno in the text; a full volume is still a full disk.
    const std::string what = failure.what();
    if (what.find(std::strerror(ENOSPC)) != std::string::npos) throw DiskFull("disk full: " + what);
    throw;
  }
  return file;
}

int RecordingWriter::grow_meta_room(File& file, std::uint64_t needed) noexcept {
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

void RecordingWriter::open_file_set(Stripe& stripe) {
  stripe.file = make_file_set(stripe.index, stripe.segment);
  bases_.push_back(stripe.file->base);
  ++stripe.segment;
}

std::string RecordingWriter::finish_file(File& file, bool remove_if_empty) noexcept {
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

void RecordingWriter::close_file_set(Stripe& stripe) noexcept {
  for (auto& file : stripe.closing) {
    if (!file || file->outstanding > 0) continue;
    if (std::string error = finish_file(*file, journaled_.load(std::memory_order_relaxed) > 0); !error.empty()) {
      add_error(EIO, error);
    }
    file.reset();
  }
  std::erase_if(stripe.closing, [](const std::unique_ptr<File>& file) { return !file; });
}

void RecordingWriter::set_error(int code, const std::string& message) noexcept {
  if (error_ != 0) return;  // the first cause is the one to report
  error_ = code;
  try {
    error_message_ = message;
  } catch (...) {
  }
}

void RecordingWriter::add_error(int code, const std::string& message) noexcept {
  if (error_ == 0) {
    set_error(code, message);
    return;
  }
  try {
    error_message_ += "; then " + message;
  } catch (...) {
  }
}

bool RecordingWriter::queue(std::size_t slot_index, std::size_t operation_index) noexcept {
  Slot& slot = slots_[slot_index];
  Operation& operation = slot.operations[operation_index];
  io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
  if (sqe == nullptr) {
    io_uring_submit(ring_.get());
    sqe = io_uring_get_sqe(ring_.get());
    if (sqe == nullptr) {
      set_error(EBUSY, "io_uring submission queue full");
      return false;
    }
  }
  const std::uint64_t offset = operation.offset + operation.done;
  const std::uint64_t remaining = operation.length - operation.done;
  // A short O_DIRECT write may leave an unaligned rest: that rest goes through the page cache.
  const bool direct = operation.direct && aligned(offset) && aligned(remaining);
  const int fd = direct ? slot.file->direct_fd.get() : slot.file->buffered_fd.get();
  const std::byte* data = operation.data + operation.done;
  if (slot.buffer_index >= 0) {
    io_uring_prep_write_fixed(sqe, fd, data, static_cast<unsigned>(remaining), offset, slot.buffer_index);
  } else {
    io_uring_prep_write(sqe, fd, data, static_cast<unsigned>(remaining), offset);
  }
  io_uring_sqe_set_data64(sqe, slot_index * 2 + operation_index);
  operation.pending = true;
  return true;
}

bool RecordingWriter::submit(ChunkPtr chunk, ChunkPtr bounce) noexcept {
  if (!has_room()) return false;
  Stripe& stripe = *stripes_[chunk_counter_ % stripes_.size()];
  const std::uint64_t size = chunk->size;
  take_rotation_error();
  if (failed()) return false;
  try {
    if (settings_.rotate_bytes > 0 && stripe.file->next_offset > 0 &&
        stripe.file->next_offset + size > settings_.rotate_bytes) {
      rotate(stripe);
    }
  } catch (const DiskFull& error) {
    set_error(ENOSPC, std::string(error.what()) + " (rotating to a new file set)");
    return false;
  } catch (const std::exception& error) {
    set_error(EIO, std::string("rotating to a new file set: ") + error.what());
    return false;
  }
  File& file = *stripe.file;
  // Room for what this chunk adds to the final meta, before its bytes take the space.
  const std::uint64_t meta_bound = file.meta_bound + meta_bytes_bound(*chunk);
  if (const int error = grow_meta_room(file, meta_bound); error != 0) {
    set_error(error, (is_disk_full(error) ? "disk full: recording stopped before " : "write failed: before ") +
                         file.base + std::string(kDataSuffix) + " byte " + std::to_string(file.next_offset) +
                         ", with no room left for the metadata of one more chunk (" +
                         errno_message("fallocate", error) + ")");
    return false;
  }
  file.meta_bound = meta_bound;
  // Failure here is not an error: the write itself reports a full disk.
  if (file.preallocation) file.preallocation->claim(file.next_offset + size, settings_.preallocate_bytes);
  const std::size_t index = (head_ + in_flight_) % slots_.size();
  Slot& slot = slots_[index];
  const Chunk& source = bounce ? *bounce : *chunk;
  slot.file = &file;
  slot.offset = file.next_offset;
  slot.bytes = size;
  slot.failed = false;
  slot.buffer_index = ring_.buffer_index(source);
  const std::uint64_t direct_part = (!settings_.direct || file.unaligned || !aligned(file.next_offset)) ? 0 : size / kBlock * kBlock;
  slot.operations[0] = Operation{file.next_offset, source.data, direct_part, 0, true, false, false};
  slot.operations[1] = Operation{file.next_offset + direct_part, source.data + direct_part, size - direct_part, 0, false, false, false};
  if (direct_part != size) file.unaligned = true;
  slot.chunk = std::move(chunk);
  slot.bounce = std::move(bounce);
  file.next_offset += size;
  ++file.outstanding;
  ++in_flight_;
  ++chunk_counter_;
  for (std::size_t op = 0; op < 2; ++op) {
    if (slot.operations[op].length > 0 && !queue(index, op)) return false;
  }
  if (const int result = io_uring_submit(ring_.get()); result < 0) {
    set_error(-result, errno_message("io_uring_submit", -result));
    return false;
  }
  return true;
}

void RecordingWriter::complete(std::uint64_t user_data, int result) noexcept {
  const std::size_t index = static_cast<std::size_t>(user_data / 2);
  Slot& slot = slots_[index];
  Operation& operation = slot.operations[user_data % 2];
  operation.pending = false;
  if (result == -EAGAIN || result == -EINTR) {
    queue(index, user_data % 2);  // normal control flow: try again
    return;
  }
  if (result < 0 && is_disk_full(-result) && !operation.retried) {
    // Preallocation on the volume gives back what it holds, then the write tries once more
    // (also when another write's failure took it back first: several fail at once).
    operation.retried = true;
    release_volume(slot.file->device);
    queue(index, user_data % 2);
    return;
  }
  if (result <= 0) {
    const int code = result == 0 ? EIO : -result;
    slot.failed = true;
    const std::string where = slot.file->base + std::string(kDataSuffix);
    set_error(code, (is_disk_full(code) ? "disk full: recording stopped writing " : "write failed: ") + where +
                        " at byte " + std::to_string(operation.offset + operation.done) + ": " +
                        (result == 0 ? std::string("wrote 0 bytes") : std::string(std::strerror(code))));
    return;
  }
  operation.done += static_cast<std::uint64_t>(result);
  if (operation.done < operation.length) queue(index, user_data % 2);  // short write: the rest, now
}

bool RecordingWriter::poll(std::chrono::microseconds timeout) noexcept {
  take_rotation_error();
  const int submitted = ring_.reap(timeout, in_flight_ > 0,
                                   [this](std::uint64_t user_data, int result) { complete(user_data, result); });
  if (submitted < 0) set_error(-submitted, errno_message("io_uring_submit", -submitted));
  return !failed();
}

ChunkPtr RecordingWriter::take_done() noexcept {
  if (in_flight_ == 0) return nullptr;
  Slot& slot = slots_[head_];
  if (slot.failed || slot.operations[0].pending || slot.operations[1].pending) return nullptr;
  if (slot.operations[0].done < slot.operations[0].length || slot.operations[1].done < slot.operations[1].length) {
    return nullptr;  // a short write is being completed
  }
  File& file = *slot.file;
  const JournalRecord record = make_journal_record(*slot.chunk, slot.offset, slot.bytes);
  int error = file.journal.append(record);
  if (is_disk_full(error)) {
    release_volume(file.device);
    error = file.journal.append(record);
  }
  if (error != 0) {
    slot.failed = true;
    // The journal shares the data's file system: running out of room here is the same clean
    // "disk full" stop as a data write's (the chunk is not journaled, so finishing drops it).
    set_error(error, (is_disk_full(error) ? "disk full: recording stopped journaling " : "write failed: ") +
                         errno_message(file.journal.path(), error));
    return nullptr;
  }
  bytes_written_ += slot.bytes;
  ++journaled_;
  slot.bounce.reset();
  ChunkPtr done = std::move(slot.chunk);
  slot.file = nullptr;
  head_ = (head_ + 1) % slots_.size();
  --in_flight_;
  if (--file.outstanding == 0 && file.closing) {
    // The last write of a rotated-out file: the rotation thread finishes it.
    for (auto& stripe : stripes_) {
      const bool here = std::any_of(stripe->closing.begin(), stripe->closing.end(),
                                    [&](const std::unique_ptr<File>& closing) { return closing.get() == &file; });
      if (here) {
        retire(*stripe, file);
        break;
      }
    }
  }
  return done;
}

bool RecordingWriter::drain() noexcept {
  // Waits until nothing is pending in the ring (writes completed or failed).
  for (;;) {
    bool pending = false;
    for (std::size_t i = 0; i < in_flight_; ++i) {
      const Slot& slot = slots_[(head_ + i) % slots_.size()];
      pending = pending || slot.operations[0].pending || slot.operations[1].pending;
    }
    if (!pending) return !failed();
    poll(std::chrono::milliseconds(10));
  }
}

void RecordingWriter::finish(std::size_t* abandoned) noexcept {
  if (finished_) return;
  finished_ = true;
  drain();
  std::size_t dropped = 0;
  while (in_flight_ > 0) {
    if (ChunkPtr done = take_done()) continue;  // written but not emitted: the caller took what it wanted first
    // The head failed (or its journal did): nothing after it is kept.
    for (std::size_t i = 0; i < in_flight_; ++i) {
      Slot& slot = slots_[(head_ + i) % slots_.size()];
      slot.chunk.reset();
      slot.bounce.reset();
      if (slot.file != nullptr) --slot.file->outstanding;
      slot.file = nullptr;
      ++dropped;
    }
    in_flight_ = 0;
  }
  if (abandoned != nullptr) *abandoned = dropped;
  for (auto& stripe : stripes_) {
    if (stripe->file) {
      stripe->file->closing = true;
      stripe->closing.push_back(std::move(stripe->file));
    }
    close_file_set(*stripe);
  }
  if (rotation_) {
    {
      std::lock_guard lock(rotation_->mutex);
      rotation_->stopping = true;
      rotation_->to_prepare.clear();
    }
    rotation_->wake.notify_all();
    rotation_->preparer.join();
    rotation_->finisher.join();
    take_rotation_error();
    // Spares never written to: not part of the recording.
    for (auto& spare : rotation_->spares) {
      if (!spare) continue;
      const std::string base = spare->base;
      spare.reset();  // its descriptors close first
      try {
        remove_recording(base);
      } catch (const std::exception& error) {
        add_error(EIO, std::string("removing the unused file set: ") + error.what());
      }
    }
  }
  try {
    // The last writer of this capture in this process leaves no room set aside behind it.
    std::lock_guard lock(g_collection_writers_mutex);
    const bool others = joined_collection_ && leave_collection(collection_path(settings_)) > 0;
    joined_collection_ = false;
    refresh_collection(settings_.directories, settings_.name, others);
  } catch (const std::exception& error) {
    add_error(EIO, std::string("writing the collection: ") + error.what());
  }
  settle_set_aside();
}

}  // namespace sluice::recorder
