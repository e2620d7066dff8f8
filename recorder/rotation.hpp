// Rotation off the write path: one thread prepares each stripe's next file set ahead of
// time, another finishes rotated-out ones (fsyncs, final meta) and rewrites the collection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "recorder/file_set.hpp"

namespace sluice::recorder {

class Rotation {
 public:
  using Make = std::function<std::unique_ptr<FileSet>(std::uint32_t stripe, std::uint32_t segment)>;
  using Finish = std::function<std::string(FileSet&)>;  // the error, or ""
  using Refresh = std::function<void()>;                // rewrites the collection; throws

  // Starts both threads; the first spare of stripe i is its segment `next_segments[i]`.
  Rotation(std::vector<std::uint32_t> next_segments, Make make, Finish finish, Refresh refresh);
  Rotation(const Rotation&) = delete;
  Rotation& operator=(const Rotation&) = delete;
  ~Rotation();

  // The stripe's prepared file set, waiting for it when it is not ready (counted in
  // waits()); the next one is prepared at once. Throws DiskFull when the volume had no room
  // for it, else std::runtime_error with the cause.
  std::unique_ptr<FileSet> take_spare(std::uint32_t stripe);
  // A rotated-out file set whose writes all retired: finished on the finishing thread.
  void finish_later(std::unique_ptr<FileSet> file);
  // Finishes what is queued, rewrites the collection, joins both threads. Returns the spares
  // never taken (not part of the recording).
  std::vector<std::unique_ptr<FileSet>> stop();

  // The finishing thread's first failure, once; "" when there is none or it was taken.
  std::string take_error();
  [[nodiscard]] std::uint64_t waits() const;

 private:
  void prepare_loop();
  void prepare_one(std::unique_lock<std::mutex>& lock);
  void finish_loop();
  void refresh_collection(std::unique_lock<std::mutex>& lock);
  void fail(const std::string& error);  // under mutex_

  Make make_;
  Finish finish_;
  Refresh refresh_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;                  // work for a thread
  std::condition_variable ready_;                 // a spare is ready (or the preparer failed)
  std::vector<std::unique_ptr<FileSet>> spares_;  // by stripe; null while being prepared
  std::vector<std::uint32_t> next_segment_;       // by stripe
  std::vector<std::uint32_t> to_prepare_;
  std::vector<std::unique_ptr<FileSet>> to_finish_;
  bool stopping_ = false;
  bool collection_dirty_ = false;
  std::string error_;  // first failure of the finishing thread
  std::atomic<bool> failed_{false};
  bool error_taken_ = false;
  // A spare that could not be made (a full volume) fails the recording only once a
  // rotation needs it: the current file set may still take chunks until then.
  std::string prepare_error_;
  int prepare_code_ = 0;
  std::uint64_t waits_ = 0;
  std::thread preparer_;  // makes spares: cheap, so a rotation rarely waits
  std::thread finisher_;  // finishes rotated-out files and rewrites the collection: fsyncs
};

}  // namespace sluice::recorder
