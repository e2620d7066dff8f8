// Collection rewrites: each one re-reads and re-hashes only the metas that changed since
// the last, and forgets those that are gone.
#include "recorder/collection.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"
#include "recorder/disk_space.hpp"
#include "recorder/sigmf.hpp"
#include "recorder/uring.hpp"

namespace sluice::recorder {
namespace {

constexpr std::uint64_t kCollectionSlack = 64 * 1024;  // room set aside for a collection's growth

// What refresh_collection learnt from one .sigmf-meta, valid while its inode, size and mtime hold.
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

std::mutex g_collection_writers_mutex;
std::map<std::string, int> g_collection_writers;  // by collection path

// One recording as the collection lists it.
struct Listed {
  std::string lane;
  std::int64_t segment;
  std::int64_t stripe;
  std::string base;
  std::string hash;
};

std::int64_t mtime_ns(const struct stat& status) {
  return static_cast<std::int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec;
}

// Brings `cached` up to date with the meta at `path`. False when the file went away
// meanwhile (another lane removed or replaced it): a later rewrite sees it.
bool read_meta(const std::string& path, const struct stat& status, MetaEntry& cached) {
  if (!cached.hash.empty() && cached.inode == status.st_ino &&
      cached.size == static_cast<std::uintmax_t>(status.st_size) && cached.mtime_ns == mtime_ns(status)) {
    return true;
  }
  std::ifstream in(path);
  if (!in) return false;
  const nlohmann::json meta = nlohmann::json::parse(in, nullptr, false);
  cached = MetaEntry{};
  cached.inode = status.st_ino;
  cached.size = static_cast<std::uintmax_t>(status.st_size);
  cached.mtime_ns = mtime_ns(status);
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
    return false;
  }
  return true;
}

// Every recording of capture `name` in `directories`, sorted by lane, segment, stripe. The
// cache keeps exactly the metas of this capture found now.
std::vector<Listed> list_recordings(const std::vector<std::string>& directories, const std::string& name) {
  namespace fs = std::filesystem;
  const std::string prefix = name + "-";
  std::vector<Listed> listed;
  std::set<std::string> seen;
  std::lock_guard cache_lock(g_meta_cache_mutex);
  for (const auto& directory : directories) {
    for (const auto& item : fs::directory_iterator(directory)) {
      const std::string file = item.path().filename().string();
      if (file.rfind(prefix, 0) != 0 || item.path().extension() != kMetaSuffix) continue;
      const std::string path = item.path().string();
      struct stat status {};
      if (::stat(path.c_str(), &status) != 0) continue;  // removed meanwhile
      MetaEntry& cached = g_meta_cache[path];
      if (!read_meta(path, status, cached)) {
        g_meta_cache.erase(path);
        continue;
      }
      seen.insert(path);
      // NAME-LANE-…: a capture whose name extends this one plus '-' (NAME-raw beside NAME) has
      // files that start with this prefix too; they belong to their own collection.
      if (!cached.usable || file.rfind(prefix + cached.lane + "-", 0) != 0) continue;
      listed.push_back(Listed{cached.lane, cached.segment, cached.stripe, strip_capture_suffix(path), cached.hash});
    }
  }
  // Metas of this capture in these directories that are gone: forgotten.
  std::set<fs::path> homes;
  for (const auto& directory : directories) homes.insert((fs::path(directory) / "meta").parent_path());
  std::erase_if(g_meta_cache, [&](const auto& entry) {
    const fs::path path(entry.first);
    return !seen.contains(entry.first) && path.filename().string().rfind(prefix, 0) == 0 &&
           homes.contains(path.parent_path());
  });
  std::sort(listed.begin(), listed.end(), [](const Listed& a, const Listed& b) {
    return std::tie(a.lane, a.segment, a.stripe) < std::tie(b.lane, b.segment, b.stripe);
  });
  return listed;
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
    log::debug("{}", errno_message("setting aside room for the collection in " + room, failed));
  }
}

// Returns how many writers of `path` remain. Called under g_collection_writers_mutex.
int leave_locked(const std::string& path) {
  const auto found = g_collection_writers.find(path);
  if (found == g_collection_writers.end()) return 0;
  const int left = --found->second;
  if (left <= 0) g_collection_writers.erase(found);
  return std::max(left, 0);
}

// `directories` and every other directory that the collection at `path` lists recordings
// in: lanes that share a capture may record into different directories, and each lane's
// rewrite must keep the others' recordings.
std::vector<std::string> with_listed_directories(const std::vector<std::string>& directories, const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> searched = directories;
  std::set<fs::path> known;
  for (const auto& directory : directories) known.insert(fs::weakly_canonical(directory));
  std::ifstream in(path);
  const nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  if (document.is_discarded() || !document.contains("collection")) return searched;
  const auto& lanes = document["collection"].value("sluice:lanes", nlohmann::json::object());
  if (!lanes.is_object()) return searched;
  const fs::path home = fs::path(path).parent_path();
  for (const auto& [lane, bases] : lanes.items()) {
    if (!bases.is_array()) continue;
    for (const auto& base : bases) {
      if (!base.is_string()) continue;
      std::error_code error;
      const fs::path directory = fs::weakly_canonical(home / base.get<std::string>(), error).parent_path();
      if (error || !fs::is_directory(directory, error) || !known.insert(directory).second) continue;
      searched.push_back(directory.string());
    }
  }
  return searched;
}

}  // namespace

std::string collection_path(const std::vector<std::string>& directories, const std::string& name) {
  return (std::filesystem::path(directories.front()) / (name + std::string(kCollectionSuffix))).string();
}

bool collection_has_lane(const std::string& path, const std::string& lane) {
  std::ifstream in(path);
  const nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  if (document.is_discarded() || !document.contains("collection")) return false;
  const auto& lanes = document["collection"].value("sluice:lanes", nlohmann::json::object());
  return lanes.is_object() && lanes.contains(lane);
}

void refresh_collection(const std::vector<std::string>& directories, const std::string& name, bool keep_room) {
  namespace fs = std::filesystem;
  const std::string& first = directories.front();
  const int lock_fd = ::open(first.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd < 0) throw std::runtime_error(errno_message("open(" + first + ")", errno));
  FileDescriptor lock(lock_fd, first);
  if (::flock(lock.get(), LOCK_EX) != 0) throw std::runtime_error(errno_message("flock(" + first + ")", errno));
  const std::string path = collection_path(directories, name);
  const std::vector<Listed> listed = list_recordings(with_listed_directories(directories, path), name);
  std::vector<std::string> bases;
  std::vector<std::string> hashes;
  nlohmann::json lanes = nlohmann::json::object();
  const fs::path home = fs::path(path).parent_path();
  for (const auto& entry : listed) {
    bases.push_back(entry.base);
    hashes.push_back(entry.hash);
    lanes[entry.lane].push_back(fs::relative(fs::path(entry.base), home).string());
  }
  write_collection(path, bases, lanes,
                   "sluice capture " + name + ": " + std::to_string(lanes.size()) + " lane(s), " +
                       std::to_string(bases.size()) + " recording(s)",
                   &hashes);
  if (keep_room) keep_room_for_collection(path);
}

std::size_t meta_cache_entries() {
  std::lock_guard lock(g_meta_cache_mutex);
  return g_meta_cache.size();
}

CollectionWriter::CollectionWriter(std::vector<std::string> directories, std::string name)
    : directories_(std::move(directories)), name_(std::move(name)) {}

CollectionWriter::~CollectionWriter() {
  if (!joined_) return;
  std::lock_guard lock(g_collection_writers_mutex);
  leave_locked(collection_path(directories_, name_));
}

void CollectionWriter::join() {
  {
    std::lock_guard lock(g_collection_writers_mutex);
    ++g_collection_writers[collection_path(directories_, name_)];
    joined_ = true;
  }
  refresh_collection(directories_, name_, true);
}

void CollectionWriter::leave() {
  std::lock_guard lock(g_collection_writers_mutex);
  const bool others = joined_ && leave_locked(collection_path(directories_, name_)) > 0;
  joined_ = false;
  refresh_collection(directories_, name_, others);
}

}  // namespace sluice::recorder
