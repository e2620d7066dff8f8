// Holds back this process's reads or writes on one block device with the kernel's blkio
// throttle (cgroup v1 blkio.throttle.{read,write}_bps_device, or v2 io.max) until lift(): a
// slow device made by the kernel, not a mock. ready() is false (with why()) where cgroups cannot
// be written. Direct I/O is what it holds back (buffered writes reach the device later, from the
// kernel's flusher threads).
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace sluice::test {

bool in_ci();  // tests/stages/record/record_test_support.hpp

// Skips the test where `throttle` could not be set up (fails it in CI, where it must run).
#define SLUICE_REQUIRE_THROTTLED(throttle)                                                                            \
  if (!(throttle).ready()) {                                                                                          \
    if (::sluice::test::in_ci()) FAIL() << "cannot throttle I/O in CI: " << (throttle).why();                         \
    GTEST_SKIP() << "cannot throttle I/O here (needs root and the blkio/io cgroup controller): " << (throttle).why(); \
  }

class IoThrottle {
 public:
  enum class Direction { read, write };

  // The block device holding `path` (a directory on the volume), `bytes_per_second` each way asked.
  IoThrottle(const std::string& path, std::uint64_t bytes_per_second, Direction direction) {
    struct stat status {};
    if (::stat(path.c_str(), &status) != 0) {
      why_ = "stat " + path + ": " + std::strerror(errno);
      return;
    }
    const std::string number = std::to_string(major(status.st_dev)) + ":" + std::to_string(minor(status.st_dev));
    const bool reads = direction == Direction::read;
    if (std::filesystem::exists("/sys/fs/cgroup/blkio/cgroup.procs")) {
      root_ = "/sys/fs/cgroup/blkio";
      limit_file_ = reads ? "blkio.throttle.read_bps_device" : "blkio.throttle.write_bps_device";
      limit_ = number + " " + std::to_string(bytes_per_second);
      unlimited_ = number + " 0";
    } else if (std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) {
      root_ = "/sys/fs/cgroup";
      limit_file_ = "io.max";
      const std::string key = reads ? " rbps=" : " wbps=";
      limit_ = number + key + std::to_string(bytes_per_second);
      unlimited_ = number + key + "max";
      if (!write(root_ + "/cgroup.subtree_control", "+io")) return;
    } else {
      why_ = "neither /sys/fs/cgroup/blkio (v1) nor a cgroup v2 hierarchy at /sys/fs/cgroup";
      return;
    }
    original_ = root_ + own_group(root_ == "/sys/fs/cgroup" ? "" : "blkio");
    group_ = root_ + "/sluice-io-throttle-" + std::to_string(::getpid());
    if (::mkdir(group_.c_str(), 0755) != 0) {
      why_ = "mkdir " + group_ + ": " + std::strerror(errno);
      group_.clear();
      return;
    }
    ready_ = write(group_ + "/" + limit_file_, limit_) && write(group_ + "/cgroup.procs", std::to_string(::getpid()));
  }
  IoThrottle(const IoThrottle&) = delete;
  IoThrottle& operator=(const IoThrottle&) = delete;
  ~IoThrottle() {
    if (group_.empty()) return;
    lift();
    write(original_ + "/cgroup.procs", std::to_string(::getpid()));
    ::rmdir(group_.c_str());
  }
  void lift() { write(group_ + "/" + limit_file_, unlimited_); }
  [[nodiscard]] bool ready() const { return ready_; }
  [[nodiscard]] const std::string& why() const { return why_; }

 private:
  // This process's group in the hierarchy holding `controller` ("" for v2), from /proc/self/cgroup.
  static std::string own_group(const std::string& controller) {
    std::ifstream file("/proc/self/cgroup");
    for (std::string line; std::getline(file, line);) {
      const std::size_t first = line.find(':');
      const std::size_t second = line.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      const std::string controllers = line.substr(first + 1, second - first - 1);
      if (controllers == controller || ("," + controllers + ",").find("," + controller + ",") != std::string::npos) {
        const std::string path = line.substr(second + 1);
        return path == "/" ? "" : path;
      }
    }
    return "";
  }
  bool write(const std::string& path, const std::string& text) {
    std::ofstream file(path);
    file << text << std::flush;
    if (file) return true;
    if (why_.empty()) why_ = "cannot write '" + text + "' to " + path;
    return false;
  }

  std::string root_;
  std::string limit_file_;
  std::string limit_;
  std::string unlimited_;
  std::string original_;
  std::string group_;
  std::string why_;
  bool ready_ = false;
};

}  // namespace sluice::test
