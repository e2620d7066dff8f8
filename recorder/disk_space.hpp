// Space on a volume that several writers share: data preallocation that keeps every write
// inside its file's size and yields to the others when the volume runs out, and reserves
// that hold the room a file's final metadata needs.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace sluice::recorder {

struct Volume;

// The preallocated tail of one data file, past what its writer has claimed for writes. It
// is allocated with a size-changing fallocate (mode 0), so the file is longer than its
// data: every O_DIRECT write then lands inside the file's size, which ext4 and xfs issue
// inline from io_uring instead of handing each one to an io-wq worker that runs one write
// of a file at a time. The zero tail is no data: the journal says where the data ends, and
// finishing or repair truncates the file there. Growth ahead of the writes runs on a thread
// of the file's volume, never on the writer's. When any writer there runs out of space,
// release_volume() gives every unclaimed tail back and the volume is not preallocated
// again, so one lane's reservation never ends another lane's recording.
class Preallocation {
 public:
  // Registers `fd` (the data file at `path`; not owned) with its volume. Throws naming fstat
  // or the start of the volume's thread.
  Preallocation(int fd, std::string path);
  Preallocation(const Preallocation&) = delete;
  Preallocation& operator=(const Preallocation&) = delete;
  ~Preallocation();

  // Setup, on the calling thread: makes the file `size` bytes long with its blocks allocated
  // (never more than half the space still free). A failure is no error: writes past the
  // reserved end allocate their own blocks and report a full disk themselves.
  void reserve(std::uint64_t size) noexcept;
  // Hot path: the writer is about to write up to `end`. Once less than `ahead / 2` stays
  // reserved past it, asks the volume's thread to reserve up to `end + ahead`, unless the
  // volume ran out before. Never waits for fallocate.
  void claim(std::uint64_t end, std::uint64_t ahead) noexcept;
  // Gives back the unclaimed tail (truncates the file to its claimed end). Returns the
  // bytes it held.
  std::uint64_t release() noexcept;
  // Releases, then forgets the descriptor (before it is closed).
  void close() noexcept;
  [[nodiscard]] std::uint64_t reserved_end() const;
  [[nodiscard]] dev_t device() const { return device_; }

 private:
  friend void grow_members(Volume& volume) noexcept;
  // On the volume's thread: the growth claim() asked for. fallocate runs without mutex_
  // held, so claim() never waits for it; growing_ keeps truncation and close out meanwhile.
  void grow() noexcept;
  // Under both locks: fallocates [reserved_, target) (at most half of what is free) and
  // records what the file's size now covers.
  void grow_locked(std::uint64_t target, std::unique_lock<std::mutex>& lock) noexcept;
  std::uint64_t release_locked() noexcept;

  std::mutex growing_;        // held while the file's size changes: growth, release, close
  mutable std::mutex mutex_;  // guards the members below; taken after growing_
  int fd_ = -1;
  std::string path_;
  dev_t device_ = 0;
  std::uint64_t claimed_ = 0;    // every write lies below this
  std::uint64_t reserved_ = 0;   // the file's size covers this much
  std::uint64_t requested_ = 0;  // claim() asked the volume's thread to reserve up to here
  bool stopped_ = false;         // a fallocate failed: this file grows no more
  std::shared_ptr<Volume> volume_;
};

// The most a growing data file is reserved ahead of its writes (8 GiB).
inline constexpr std::uint64_t kMostReservedAhead = 8ULL << 30;

// How far past `end` (where its writes reach) a data file that does not rotate is reserved:
// `preallocate` at first, then as far as the file already reaches, up to kMostReservedAhead.
// On ext4 every growth waits for the file's direct writes in flight and holds the writes
// that come meanwhile (the inode's lock), so growths get rarer as the file grows: a few
// dozen for a file of terabytes instead of one every `preallocate / 2`.
inline std::uint64_t reserve_ahead(std::uint64_t preallocate, std::uint64_t end) {
  return preallocate == 0 ? 0 : std::max(preallocate, std::min(end, kMostReservedAhead));
}

// A writer on `device` ran out of space: every preallocation there gives back its unclaimed
// tail and none grows again while one is registered. Returns the bytes given back (0: the
// volume is truly full). Safe from any thread.
std::uint64_t release_volume(dev_t device) noexcept;

// Makes `fd` at least `size` bytes long with its blocks allocated (fallocate, else zeros
// written where the file system cannot fallocate), so that what is later written into it
// needs no new space. 0, else the errno (ENOSPC: the volume is full).
int reserve_bytes(int fd, std::uint64_t size) noexcept;

}  // namespace sluice::recorder
