// Loop devices name their backing file in sysfs (/sys/dev/block/MAJOR:MINOR/loop/backing_file).
#include "recorder/volume_check.hpp"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>

#include "pipeline/units.hpp"

namespace sluice::recorder {

std::string fresh_volume_warning(const std::string& directory) {
  namespace fs = std::filesystem;
  fs::path path(directory);
  std::error_code error;
  while (!path.empty() && !fs::exists(path, error)) path = path.parent_path();
  struct stat volume {};
  if (path.empty() || ::stat(path.c_str(), &volume) != 0) return {};
  const std::string device = std::to_string(major(volume.st_dev)) + ":" + std::to_string(minor(volume.st_dev));
  std::ifstream sysfs("/sys/dev/block/" + device + "/loop/backing_file");
  std::string backing;
  if (!std::getline(sysfs, backing) || backing.empty()) return {};  // not a loop device
  struct stat file {};
  if (::stat(backing.c_str(), &file) != 0 || file.st_size <= 0) return {};
  const auto allocated = static_cast<std::uint64_t>(file.st_blocks) * 512;
  const auto size = static_cast<std::uint64_t>(file.st_size);
  if (allocated >= size) return {};
  struct statfs where {};
  const bool memory = ::statfs(backing.c_str(), &where) == 0 && where.f_type == TMPFS_MAGIC;
  return directory + " lies on loop device " + device + " over " + backing + (memory ? " (in memory, tmpfs)" : "") +
         ", of which only " + format_bytes(static_cast<double>(allocated)) + " of " +
         format_bytes(static_cast<double>(size)) + " are allocated: the first writes into it " +
         (memory ? "fault in memory never touched" : "allocate its blocks") +
         " and run slower than later ones (fill it first: fallocate -l " + std::to_string(size) + " " + backing + ")";
}

}  // namespace sluice::recorder
