// Space on a volume that several writers share: data preallocation that yields to the others
// when the volume runs out, and reserves that hold the room a file's final metadata needs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace sluice::recorder {

struct Volume;

// The fallocated tail (FALLOC_FL_KEEP_SIZE) of one data file, past what its writer has
// claimed for writes. Registered with the file's volume: when any writer there runs out of
// space, release_volume() gives every unclaimed tail back and the volume is not
// preallocated again, so one lane's reservation never ends another lane's recording.
class Preallocation {
 public:
  // Registers `fd` (the data file at `path`; not owned) with its volume. Throws naming fstat.
  Preallocation(int fd, std::string path);
  Preallocation(const Preallocation&) = delete;
  Preallocation& operator=(const Preallocation&) = delete;
  ~Preallocation();

  // Hot path: the writer is about to write up to `end`. When that passes the reserved end,
  // reserves up to `end + ahead` more (never more than half the space still free), unless
  // the volume ran out before. A failure is no error: the write itself reports a full disk.
  void claim(std::uint64_t end, std::uint64_t ahead) noexcept;
  // Gives back the unclaimed tail. Returns the bytes it held.
  std::uint64_t release() noexcept;
  // Releases, then forgets the descriptor (before it is closed).
  void close() noexcept;
  [[nodiscard]] std::uint64_t reserved_end() const;
  [[nodiscard]] dev_t device() const { return device_; }

 private:
  std::uint64_t release_locked() noexcept;
  bool truncate_to_claimed() noexcept;  // frees every block past the claimed end

  mutable std::mutex mutex_;
  int fd_ = -1;
  std::string path_;
  dev_t device_ = 0;
  std::uint64_t claimed_ = 0;   // every write lies below this
  std::uint64_t reserved_ = 0;  // fallocated up to here
  std::shared_ptr<Volume> volume_;
};

// A writer on `device` ran out of space: every preallocation there gives back its unclaimed
// tail and none grows again while one is registered. Returns the bytes given back (0: the
// volume is truly full). Safe from any thread; takes each preallocation's lock in turn.
std::uint64_t release_volume(dev_t device) noexcept;

// Makes `fd` at least `size` bytes long with its blocks allocated (fallocate, else zeros
// written where the file system cannot fallocate), so that what is later written into it
// needs no new space. 0, else the errno (ENOSPC: the volume is full).
int reserve_bytes(int fd, std::uint64_t size) noexcept;

}  // namespace sluice::recorder
