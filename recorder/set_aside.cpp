// Overwrite without loss: the old lane's files move aside by rename and come back by rename.
#include "recorder/set_aside.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"
#include "recorder/collection.hpp"
#include "recorder/uring.hpp"

namespace sluice::recorder {
namespace {

namespace fs = std::filesystem;

// fsync of a directory, so that renames in it survive a crash. Throws naming the call.
void sync_directory(const std::string& directory) {
  FileDescriptor fd = open_file(directory, O_RDONLY | O_DIRECTORY);
  if (::fsync(fd.get()) != 0) throw std::runtime_error(errno_message("fsync(" + directory + ")", errno));
}

// The lane's files in `directory`: names that start with NAME-LANE-.
std::vector<fs::path> lane_files(const std::string& directory, const std::string& prefix) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(directory, error)) {
    if (item.path().filename().string().rfind(prefix, 0) == 0) files.push_back(item.path());
  }
  return files;
}

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string replaced_directory(const std::string& directory, const std::string& name, const std::string& lane) {
  return (fs::path(directory) / (name + "-" + lane + std::string(kReplacedSuffix))).string();
}

std::vector<std::string> find_replaced(const std::vector<std::string>& directories, const std::string& name) {
  std::vector<std::string> found;
  for (const auto& directory : directories) {
    std::error_code error;
    for (const auto& item : fs::directory_iterator(directory, error)) {
      const std::string file = item.path().filename().string();
      if ((name.empty() || file.rfind(name + "-", 0) == 0) && ends_with(file, kReplacedSuffix) &&
          item.is_directory(error)) {
        found.push_back(item.path().string());
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::size_t swap_replaced(const std::string& replaced) {
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

SetAside::SetAside(std::vector<std::string> directories, std::string name, std::string lane)
    : directories_(std::move(directories)), name_(std::move(name)), lane_(std::move(lane)) {}

void SetAside::take(bool overwrite) {
  const std::string prefix = name_ + "-" + lane_ + "-";
  // A failure in any directory puts back what earlier directories had set aside.
  try {
    for (const auto& directory : directories_) {
      std::error_code error;
      fs::create_directories(directory, error);
      if (error) throw std::runtime_error("mkdir(" + directory + "): " + error.message());
      const std::string aside = replaced_directory(directory, name_, lane_);
      if (fs::exists(aside, error)) {
        throw std::runtime_error(
            "an earlier overwrite of this capture was cut off: the capture it replaced is kept in " + aside +
            " (run `sluice capture repair " + collection_path(directories_, name_) +
            "` to see it, `--restore-replaced` to bring it back, or remove it)");
      }
      const std::vector<fs::path> existing = lane_files(directory, prefix);
      if (existing.empty()) continue;
      if (!overwrite) {
        throw std::runtime_error(
            "capture " + existing.front().string() +
            " exists: a capture is never overwritten (set overwrite: true, or choose another name)");
      }
      if (!fs::create_directory(aside, error) || error) {
        throw std::runtime_error("mkdir(" + aside + "): " + (error ? error.message() : std::string("exists")));
      }
      taken_.push_back(aside);
      for (const auto& file : existing) {
        fs::rename(file, fs::path(aside) / file.filename(), error);
        if (error) throw std::runtime_error("rename(" + file.string() + ", " + aside + "): " + error.message());
      }
      sync_directory(directory);
      log::info("overwrite: the previous {} files of lane {} are set aside in {} until the new recording finishes",
                existing.size(), lane_, aside);
    }
  } catch (...) {
    restore();
    throw;
  }
}

void SetAside::restore() noexcept {
  for (const auto& aside : taken_) {
    std::error_code error;
    const fs::path home = fs::path(aside).parent_path();
    for (const auto& file : lane_files(home.string(), name_ + "-" + lane_ + "-")) fs::remove(file, error);
    bool all_back = true;
    for (const auto& item : fs::directory_iterator(aside, error)) {
      fs::rename(item.path(), home / item.path().filename(), error);
      if (error) {
        all_back = false;
        log::error("overwrite: could not move {} back: {} (it stays in {})", item.path().string(), error.message(),
                   aside);
      }
    }
    if (all_back) fs::remove(aside, error);
    try {
      sync_directory(home.string());
    } catch (const std::exception& failure) {
      log::error("overwrite: {}", failure.what());
    }
  }
  taken_.clear();
  try {
    refresh_collection(directories_, name_);
  } catch (const std::exception& failure) {
    log::error("overwrite: rewriting the collection after restoring the old capture: {}", failure.what());
  }
}

std::string SetAside::settle(bool journaled, bool failed) noexcept {
  if (taken_.empty()) return {};
  if (!journaled) {
    // Nothing recorded (a start failure elsewhere in the pipeline, a source that never sent):
    // an empty recording is not worth the capture it would replace.
    restore();
    if (failed) return "nothing was recorded, so the capture it would have replaced is back in place";
    log::warn("overwrite: lane {} recorded nothing, so the capture it would have replaced is back in place", lane_);
    return {};
  }
  if (!failed) {
    for (const auto& aside : taken_) {
      std::error_code error;
      fs::remove_all(aside, error);
      if (error) log::warn("overwrite: could not remove the replaced capture in {}: {}", aside, error.message());
    }
    taken_.clear();
    return {};
  }
  try {
    return "the capture it replaces is kept in " + taken_.front() +
           " (`sluice capture repair --restore-replaced` brings it back)";
  } catch (...) {
    return {};
  }
}

}  // namespace sluice::recorder
