// The one owner of a file descriptor, for every module (sockets, recording files, journals,
// directories to fsync, dma-buf exports): header-only, so the lowest libraries can use it.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace sluice {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { close(); }
  // Closes now; returns close(2)'s errno, or 0 (also when nothing was open), for owners that
  // report a failed close (a recording file's last write error can surface only there).
  int close() noexcept {
    int error = 0;
    if (fd_ >= 0 && ::close(fd_) != 0) error = errno;
    fd_ = -1;
    return error;
  }
  void reset(int fd = -1) noexcept {
    close();
    fd_ = fd;
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace sluice
