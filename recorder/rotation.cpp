// The rotation threads. A long backlog of rotated-out files (three descriptors each) holds
// back new spares: then the writes wait, which is the honest backpressure.
#include "recorder/rotation.hpp"

#include "pipeline/clock.hpp"

namespace sluice::recorder {
namespace {

constexpr std::size_t kFinishBacklog = 64;  // rotated-out files awaiting their finish
// The collection lists every file of every lane: rewriting it costs more as the recording
// grows, so the finishing thread rewrites it at most this often (and at the end).
constexpr std::uint64_t kRefreshIntervalNs = 2'000'000'000ULL;

}  // namespace

Rotation::Rotation(std::vector<std::uint32_t> next_segments, Make make, Finish finish, Refresh refresh)
    : make_(std::move(make)),
      finish_(std::move(finish)),
      refresh_(std::move(refresh)),
      spares_(next_segments.size()),
      next_segment_(std::move(next_segments)) {
  for (std::uint32_t stripe = 0; stripe < next_segment_.size(); ++stripe) to_prepare_.push_back(stripe);
  preparer_ = std::thread([this] { prepare_loop(); });
  finisher_ = std::thread([this] { finish_loop(); });
}

Rotation::~Rotation() {
  if (preparer_.joinable() || finisher_.joinable()) stop();
}

std::unique_ptr<FileSet> Rotation::take_spare(std::uint32_t stripe) {
  std::unique_lock lock(mutex_);
  if (!spares_[stripe]) ++waits_;  // prepared too late: the writes wait
  ready_.wait(lock, [&] { return spares_[stripe] != nullptr || failed_ || prepare_code_ != 0; });
  if (!spares_[stripe]) {
    if (prepare_code_ == ENOSPC) throw DiskFull(prepare_error_);
    throw std::runtime_error(failed_ ? error_ : prepare_error_);
  }
  std::unique_ptr<FileSet> spare = std::move(spares_[stripe]);
  to_prepare_.push_back(stripe);
  wake_.notify_all();
  return spare;
}

void Rotation::finish_later(std::unique_ptr<FileSet> file) {
  std::lock_guard lock(mutex_);
  to_finish_.push_back(std::move(file));
  wake_.notify_all();
}

std::vector<std::unique_ptr<FileSet>> Rotation::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    to_prepare_.clear();
  }
  wake_.notify_all();
  if (preparer_.joinable()) preparer_.join();
  if (finisher_.joinable()) finisher_.join();
  std::vector<std::unique_ptr<FileSet>> unused;
  for (auto& spare : spares_) {
    if (spare) unused.push_back(std::move(spare));
  }
  return unused;
}

std::string Rotation::take_error() {
  if (!failed_.load(std::memory_order_relaxed)) return {};
  std::lock_guard lock(mutex_);
  if (error_taken_) return {};
  error_taken_ = true;
  return error_;
}

std::uint64_t Rotation::waits() const {
  std::lock_guard lock(mutex_);
  return waits_;
}

void Rotation::fail(const std::string& error) {
  if (error.empty() || failed_) return;
  error_ = error;
  failed_ = true;
  ready_.notify_all();
}

void Rotation::prepare_loop() {
  std::unique_lock lock(mutex_);
  const auto can_prepare = [this] { return !to_prepare_.empty() && !failed_ && to_finish_.size() <= kFinishBacklog; };
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || can_prepare(); });
    if (stopping_) return;
    while (can_prepare() && !stopping_) prepare_one(lock);
  }
}

void Rotation::prepare_one(std::unique_lock<std::mutex>& lock) {
  const std::uint32_t stripe = to_prepare_.back();
  to_prepare_.pop_back();
  const std::uint32_t segment = next_segment_[stripe]++;
  lock.unlock();
  std::unique_ptr<FileSet> file;
  std::string error;
  int code = 0;
  try {
    file = make_(stripe, segment);
  } catch (const DiskFull& failure) {
    error = failure.what();
    code = ENOSPC;
  } catch (const std::exception& failure) {
    error = std::string("preparing the next file set: ") + failure.what();
    code = EIO;
  }
  lock.lock();
  if (file) spares_[stripe] = std::move(file);
  if (code != 0 && prepare_code_ == 0) {
    prepare_error_ = error;
    prepare_code_ = code;
  }
  ready_.notify_all();
}

void Rotation::finish_loop() {
  std::unique_lock lock(mutex_);
  std::uint64_t last_refresh = monotonic_ns();
  for (;;) {
    wake_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stopping_ || !to_finish_.empty(); });
    while (!to_finish_.empty()) {
      std::unique_ptr<FileSet> file = std::move(to_finish_.front());
      to_finish_.erase(to_finish_.begin());
      lock.unlock();
      std::string error = finish_(*file);
      file.reset();
      lock.lock();
      collection_dirty_ = true;
      fail(error);
      wake_.notify_all();  // the preparer may wait for the backlog to shrink
    }
    const std::uint64_t now = monotonic_ns();
    if (collection_dirty_ && (now - last_refresh > kRefreshIntervalNs || stopping_)) {
      last_refresh = now;
      refresh_collection(lock);
    }
    if (stopping_ && to_finish_.empty()) return;
  }
}

void Rotation::refresh_collection(std::unique_lock<std::mutex>& lock) {
  collection_dirty_ = false;
  lock.unlock();
  std::string error;
  try {
    refresh_();
  } catch (const std::exception& failure) {
    error = std::string("writing the collection: ") + failure.what();
  }
  lock.lock();
  fail(error);
}

}  // namespace sluice::recorder
