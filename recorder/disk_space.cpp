// Preallocation that yields and metadata reserves. The unclaimed tail of a data file lies
// past its end (FALLOC_FL_KEEP_SIZE); ext4 ignores a hole punched there, so it is given back
// by truncating the file to its claimed end, which frees the blocks past the end on ext4,
// xfs and tmpfs alike.
#include "recorder/disk_space.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <map>
#include <stdexcept>
#include <vector>


#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice::recorder {

struct Volume {
  std::mutex mutex;                       // guards members; taken before a member's own lock
  std::vector<Preallocation*> members;
  std::atomic<bool> exhausted{false};     // ran out once: preallocate no more
};

namespace {

constexpr std::uint64_t kBlock = 4096;

std::mutex g_volumes_mutex;
std::map<dev_t, std::weak_ptr<Volume>> g_volumes;  // an entry lives while a preallocation uses it

std::shared_ptr<Volume> volume_of(dev_t device) {
  std::lock_guard lock(g_volumes_mutex);
  std::weak_ptr<Volume>& slot = g_volumes[device];
  std::shared_ptr<Volume> volume = slot.lock();
  if (!volume) {
    volume = std::make_shared<Volume>();
    slot = volume;
  }
  return volume;
}

}  // namespace

Preallocation::Preallocation(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw std::runtime_error(errno_message("fstat(" + path_ + ")", errno));
  device_ = status.st_dev;
  volume_ = volume_of(device_);
  std::lock_guard lock(volume_->mutex);
  volume_->members.push_back(this);
}

Preallocation::~Preallocation() {
  {
    std::lock_guard lock(volume_->mutex);
    std::erase(volume_->members, this);
  }
  close();
}

std::uint64_t Preallocation::reserved_end() const {
  std::lock_guard lock(mutex_);
  return reserved_;
}

void Preallocation::claim(std::uint64_t end, std::uint64_t ahead) noexcept {
  std::lock_guard lock(mutex_);
  claimed_ = std::max(claimed_, end);
  if (fd_ < 0 || end <= reserved_ || ahead == 0 || volume_->exhausted.load(std::memory_order_relaxed)) return;
  std::uint64_t wanted = (end + ahead + kBlock - 1) / kBlock * kBlock - reserved_;
  // Never more than half of what is free: the rest stays for the other writers meanwhile.
  struct statvfs space {};
  if (::fstatvfs(fd_, &space) == 0) {
    wanted = std::min(wanted, static_cast<std::uint64_t>(space.f_bavail) * space.f_frsize / 2 / kBlock * kBlock);
  }
  if (wanted < kBlock) return;
  if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(reserved_), static_cast<off_t>(wanted)) == 0) {
    reserved_ += wanted;
    return;
  }
  const int error = errno;
  // ext4 keeps what a failed fallocate allocated: give it back too.
  if (truncate_to_claimed()) reserved_ = std::min(reserved_, claimed_);
  if (error == ENOSPC) volume_->exhausted.store(true, std::memory_order_relaxed);
  log::debug("{}; writing without preallocation",
                errno_message("fallocate(" + path_ + ", " + std::to_string(wanted) + " bytes at " +
                                  std::to_string(reserved_) + ")",
                              error));
}

std::uint64_t Preallocation::release() noexcept {
  std::lock_guard lock(mutex_);
  return release_locked();
}

std::uint64_t Preallocation::release_locked() noexcept {
  if (fd_ < 0 || reserved_ <= claimed_) return 0;
  const std::uint64_t released = reserved_ - claimed_;
  if (!truncate_to_claimed()) return 0;
  reserved_ = claimed_;
  return released;
}

bool Preallocation::truncate_to_claimed() noexcept {
  // Writes in flight lie below claimed_ and none starts while the lock is held. Truncating
  // to the size the file already has frees what lies past it; a file still shorter than
  // its claimed end (writes in flight) is first extended to it.
  struct stat status {};
  const bool shorter = ::fstat(fd_, &status) == 0 && static_cast<std::uint64_t>(status.st_size) < claimed_;
  if ((shorter && ::ftruncate(fd_, static_cast<off_t>(claimed_)) != 0) ||
      ::ftruncate(fd_, static_cast<off_t>(claimed_)) != 0) {
    log::warn("{}", errno_message("ftruncate(" + path_ + ") to give back its preallocation"));
    return false;
  }
  return true;
}

void Preallocation::close() noexcept {
  std::lock_guard lock(mutex_);
  release_locked();
  fd_ = -1;
}

std::uint64_t release_volume(dev_t device) noexcept {
  std::shared_ptr<Volume> volume;
  {
    std::lock_guard lock(g_volumes_mutex);
    const auto found = g_volumes.find(device);
    if (found != g_volumes.end()) volume = found->second.lock();
  }
  if (!volume) return 0;
  std::lock_guard lock(volume->mutex);
  volume->exhausted.store(true, std::memory_order_relaxed);
  std::uint64_t released = 0;
  for (Preallocation* member : volume->members) released += member->release();
  return released;
}

int reserve_bytes(int fd, std::uint64_t size) noexcept {
  if (::fallocate(fd, 0, 0, static_cast<off_t>(size)) == 0) return 0;
  if (errno != EOPNOTSUPP) return errno;
  struct stat status {};
  if (::fstat(fd, &status) != 0) return errno;
  static const std::array<char, 64 * 1024> kZeros{};
  for (auto at = static_cast<std::uint64_t>(status.st_size); at < size;) {
    const std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(kZeros.size(), size - at));
    const ssize_t written = ::pwrite(fd, kZeros.data(), length, static_cast<off_t>(at));
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno;
    at += static_cast<std::uint64_t>(written);
  }
  return 0;
}

}  // namespace sluice::recorder
