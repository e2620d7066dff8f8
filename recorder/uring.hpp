// Owners of the C handles the recorder uses: a file descriptor and an io_uring instance
// with its registered fixed buffers (one per chunk of each pool).
#pragma once

#include <liburing.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pipeline/pool.hpp"
#include "pipeline/unique_fd.hpp"

namespace sluice::recorder {

// An open file and its path: a UniqueFd that names the file when its close fails.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  FileDescriptor(FileDescriptor&& other) noexcept = default;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      close();
      fd_ = std::move(other.fd_);
      path_ = std::move(other.path_);
    }
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { close(); }
  [[nodiscard]] int get() const { return fd_.get(); }
  [[nodiscard]] const std::string& path() const { return path_; }
  void close() noexcept;  // logs a failed close with the path

 private:
  UniqueFd fd_;
  std::string path_;
};

// Opens `path` with `flags`; throws "open(path): strerror" (with a hint for EEXIST).
FileDescriptor open_file(const std::string& path, int flags, mode_t mode = 0644);

class Uring {
 public:
  Uring() = default;
  // io_uring_queue_init; throws naming it.
  explicit Uring(unsigned queue_depth);
  Uring(Uring&& other) noexcept;
  Uring& operator=(Uring&& other) noexcept;
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;
  ~Uring();

  // Registers every chunk of `pools` as one fixed buffer each. Returns an empty string on
  // success, else why not (RLIMIT_MEMLOCK, device memory): the caller falls back to plain
  // writes and says so once.
  std::string register_pools(const std::vector<Pool*>& pools);
  // The fixed-buffer index of `chunk`, or -1 when its pool is not registered.
  [[nodiscard]] int buffer_index(const Chunk& chunk) const noexcept;
  [[nodiscard]] io_uring* get() { return &ring_; }
  [[nodiscard]] bool valid() const { return initialised_; }

 private:
  io_uring ring_{};
  bool initialised_ = false;
  bool buffers_registered_ = false;
  std::map<const Pool*, int> pool_base_;
};

}  // namespace sluice::recorder
