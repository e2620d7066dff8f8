// A capture's collection (NAME.sigmf-collection): every recording of every lane, rewritten
// from the metas on disk, with the room for its next rewrite set aside while lanes record.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sluice::recorder {

// The collection path for a capture: first directory / NAME.sigmf-collection.
std::string collection_path(const std::vector<std::string>& directories, const std::string& name);

// Whether the collection at `path` lists recordings of `lane` (false when it cannot be read).
bool collection_has_lane(const std::string& path, const std::string& lane);

// Rewrites NAME.sigmf-collection from every NAME-*.sigmf-meta found in `directories`
// (under an exclusive flock on the first directory: lanes finish concurrently). `keep_room`:
// then sets aside room for the next rewrite (while recordings go on that may fill the volume).
void refresh_collection(const std::vector<std::string>& directories, const std::string& name, bool keep_room = false);

// What refresh_collection remembers of metas it read (hash, lane, segment), by path: only
// metas that existed at the last rewrite of their collection, so it never outgrows the
// captures on disk.
[[nodiscard]] std::size_t meta_cache_entries();

// One recording lane's membership among this process's writers of a collection: room for
// the next rewrite is set aside while one of them still records, and the last one to leave
// leaves none behind. Lanes leave and rewrite under one lock, so the last rewrite comes last.
class CollectionWriter {
 public:
  CollectionWriter(std::vector<std::string> directories, std::string name);
  CollectionWriter(const CollectionWriter&) = delete;
  CollectionWriter& operator=(const CollectionWriter&) = delete;
  ~CollectionWriter();  // leaves without a rewrite, when leave() was not called

  // Joins the collection's writers and rewrites it with room kept. Throws naming the cause.
  void join();
  // Leaves, then rewrites the collection (room kept only while other writers remain).
  // Throws naming the cause; leaves either way.
  void leave();

 private:
  std::vector<std::string> directories_;
  std::string name_;
  bool joined_ = false;
};

}  // namespace sluice::recorder
