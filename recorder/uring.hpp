// Owners of the C handles the recorder uses: a file descriptor and an io_uring instance
// with its registered fixed buffers (one per chunk of each pool).
#pragma once

#include <liburing.h>

#include <chrono>
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

  // The one completion loop (recorder and replay): hands every completion waiting to
  // `on_done(user_data, res)`; when none was waiting and `wait` is true, waits up to
  // `timeout` for one. Then submits whatever the callbacks queued. Returns io_uring_submit's
  // negative error, else 0.
  template <typename OnDone>
  int reap(std::chrono::microseconds timeout, bool wait, OnDone&& on_done) noexcept {
    io_uring_cqe* cqe = nullptr;
    unsigned seen = 0;
    unsigned head = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      on_done(io_uring_cqe_get_data64(cqe), cqe->res);
      ++seen;
    }
    if (seen > 0) {
      io_uring_cq_advance(&ring_, seen);
    } else if (wait && timeout.count() > 0) {
      __kernel_timespec limit{};
      limit.tv_sec = timeout.count() / 1'000'000;
      limit.tv_nsec = (timeout.count() % 1'000'000) * 1000;
      if (io_uring_wait_cqe_timeout(&ring_, &cqe, &limit) == 0) {
        on_done(io_uring_cqe_get_data64(cqe), cqe->res);
        io_uring_cqe_seen(&ring_, cqe);
      }
    }
    if (io_uring_sq_ready(&ring_) == 0) return 0;
    const int submitted = io_uring_submit(&ring_);
    return submitted < 0 ? submitted : 0;
  }
  [[nodiscard]] bool valid() const { return initialised_; }

 private:
  io_uring ring_{};
  bool initialised_ = false;
  bool buffers_registered_ = false;
  std::map<const Pool*, int> pool_base_;
};

}  // namespace sluice::recorder
