// Preallocation inside the file's size (fallocate mode 0), given back by a truncate to the
// claimed end, and metadata reserves. Nothing here makes a file longer by truncating, which on
// xfs would zero what an extending write still in flight puts past the old size.
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
#include <system_error>
#include <thread>
#include <vector>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice::recorder {

// The preallocations of one volume and the thread that grows them.
struct Volume {
  Volume();
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;
  ~Volume();
  void wake() noexcept;

  std::mutex mutex;  // guards members; taken before a member's own locks
  std::vector<Preallocation*> members;
  std::atomic<bool> exhausted{false};      // ran out once: preallocate no more
  std::atomic<std::uint32_t> requests{0};  // bumped when a member asks to grow, and to stop
  std::atomic<bool> stopping{false};
  std::thread grower;  // runs every fallocate that claim() asks for
};

void grow_members(Volume& volume) noexcept {
  std::uint32_t seen = 0;
  for (;;) {
    volume.requests.wait(seen, std::memory_order_acquire);
    seen = volume.requests.load(std::memory_order_acquire);
    if (volume.stopping.load(std::memory_order_relaxed)) return;
    std::lock_guard lock(volume.mutex);
    for (Preallocation* member : volume.members) member->grow();
  }
}

Volume::Volume() : grower([this] { grow_members(*this); }) {}

Volume::~Volume() {
  stopping.store(true, std::memory_order_relaxed);
  wake();
  grower.join();
}

void Volume::wake() noexcept {
  requests.fetch_add(1, std::memory_order_release);
  requests.notify_one();
}

namespace {

constexpr std::uint64_t kBlock = 4096;

std::mutex g_volumes_mutex;
std::map<dev_t, std::weak_ptr<Volume>> g_volumes;  // an entry lives while a preallocation uses it

std::shared_ptr<Volume> volume_of(dev_t device) {
  std::lock_guard lock(g_volumes_mutex);
  std::weak_ptr<Volume>& slot = g_volumes[device];
  std::shared_ptr<Volume> volume = slot.lock();
  if (!volume) {
    try {
      volume = std::make_shared<Volume>();
    } catch (const std::system_error& error) {
      throw std::runtime_error(std::string("starting the preallocation thread of a volume: ") + error.what());
    }
    slot = volume;
  }
  return volume;
}

// What to fallocate past `from` to reach `target`: at most half of what is free on the
// volume of `fd` (the rest stays for the other writers meanwhile), whole blocks, or 0.
std::uint64_t growth(int fd, std::uint64_t from, std::uint64_t target) noexcept {
  if (target <= from) return 0;
  std::uint64_t wanted = (target + kBlock - 1) / kBlock * kBlock - from;
  struct statvfs space {};
  if (::fstatvfs(fd, &space) == 0) {
    wanted = std::min(wanted, static_cast<std::uint64_t>(space.f_bavail) * space.f_frsize / 2 / kBlock * kBlock);
  }
  return wanted < kBlock ? 0 : wanted;
}

}  // namespace

Preallocation::Preallocation(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw std::runtime_error(errno_message("fstat(" + path_ + ")", errno));
  device_ = status.st_dev;
  reserved_ = static_cast<std::uint64_t>(status.st_size);
  volume_ = volume_of(device_);
  std::lock_guard lock(volume_->mutex);
  volume_->members.push_back(this);
}

Preallocation::~Preallocation() {
  close();
  std::lock_guard lock(volume_->mutex);  // the volume's thread is not growing this one meanwhile
  std::erase(volume_->members, this);
}

std::uint64_t Preallocation::reserved_end() const {
  std::lock_guard lock(mutex_);
  return reserved_;
}

void Preallocation::reserve(std::uint64_t size) noexcept {
  std::lock_guard growing(growing_);
  std::unique_lock lock(mutex_);
  if (fd_ >= 0 && !stopped_ && !volume_->exhausted.load(std::memory_order_relaxed)) grow_locked(size, lock);
}

void Preallocation::claim(std::uint64_t end, std::uint64_t ahead) noexcept {
  {
    std::lock_guard lock(mutex_);
    claimed_ = std::max(claimed_, end);
    const std::uint64_t low_water = end + ahead / 2;
    if (fd_ < 0 || ahead == 0 || stopped_ || reserved_ >= low_water || requested_ >= low_water ||
        volume_->exhausted.load(std::memory_order_relaxed)) {
      return;
    }
    requested_ = end + ahead;
  }
  volume_->wake();
}

void Preallocation::grow() noexcept {
  std::lock_guard growing(growing_);
  std::unique_lock lock(mutex_);
  if (fd_ < 0 || stopped_ || requested_ <= reserved_ || volume_->exhausted.load(std::memory_order_relaxed)) return;
  grow_locked(requested_, lock);
}

void Preallocation::grow_locked(std::uint64_t target, std::unique_lock<std::mutex>& lock) noexcept {
  // growing_ is held: the descriptor stays open and nothing truncates while mutex_ is let go.
  const std::uint64_t from = reserved_;
  lock.unlock();
  const std::uint64_t length = growth(fd_, from, target);
  const int error =
      length == 0 || ::fallocate(fd_, 0, static_cast<off_t>(from), static_cast<off_t>(length)) == 0 ? 0 : errno;
  struct stat status {};
  const bool sized = error != 0 && ::fstat(fd_, &status) == 0;
  lock.lock();
  if (error == 0) {
    reserved_ = from + length;
    return;
  }
  // ext4 keeps what a failed fallocate allocated, and the size that covers it: the file's
  // size says what is reserved now, and release gives it back.
  stopped_ = true;
  if (sized) reserved_ = std::max(reserved_, static_cast<std::uint64_t>(status.st_size));
  release_locked();
  if (error == ENOSPC || error == EDQUOT) volume_->exhausted.store(true, std::memory_order_relaxed);
  log::debug(
      "{}; writing past the preallocated end",
      errno_message("fallocate(" + path_ + ", " + std::to_string(length) + " bytes at " + std::to_string(from) + ")",
                    error));
}

std::uint64_t Preallocation::release() noexcept {
  std::lock_guard growing(growing_);
  std::lock_guard lock(mutex_);
  return release_locked();
}

std::uint64_t Preallocation::release_locked() noexcept {
  // Every write lies below claimed_ and none is claimed while mutex_ is held, so the file
  // only shrinks here: its size covers reserved_, which lies past claimed_.
  if (fd_ < 0 || reserved_ <= claimed_) return 0;
  if (::ftruncate(fd_, static_cast<off_t>(claimed_)) != 0) {
    log::warn("{}", errno_message("ftruncate(" + path_ + ") to give back its preallocation"));
    return 0;
  }
  const std::uint64_t released = reserved_ - claimed_;
  reserved_ = claimed_;
  return released;
}

void Preallocation::close() noexcept {
  std::lock_guard growing(growing_);
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
