// The udp stage's receive batches, and the thread that only fills them: recvmmsg on its own
// core, each filled batch handed to the stage's thread over a lock-free queue and given back.
#pragma once

#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/spsc_queue.hpp"

namespace sluice {

// One recvmmsg batch: `messages` receive slots of `slot_bytes` each, their iovecs, control space
// of `control_bytes` each and the headers pointing at them, set once.
class ReceiveBatch {
 public:
  ReceiveBatch(std::size_t messages, std::size_t slot_bytes, std::size_t control_bytes);
  // Before each recvmmsg: the kernel shortens msg_controllen to what it wrote.
  void rearm() noexcept;
  [[nodiscard]] mmsghdr* headers() noexcept { return headers_.data(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return headers_.size(); }
  // Message `i` as the last recvmmsg left it, and its data.
  [[nodiscard]] const mmsghdr& message(std::size_t i) const noexcept { return headers_[i]; }
  [[nodiscard]] const std::byte* data(std::size_t i) const noexcept { return buffers_.data() + i * slot_bytes_; }
  std::size_t received = 0;  // messages the last recvmmsg filled

 private:
  std::size_t slot_bytes_;
  std::size_t control_bytes_;
  std::vector<std::byte> buffers_;
  std::vector<iovec> iovs_;
  std::vector<std::byte> controls_;
  std::vector<mmsghdr> headers_;
};

// A thread that does nothing but receive. From the consumer's first next() on (until then the
// socket keeps what arrives, as for a stage that receives itself) it takes a free batch, fills it
// with one blocking recvmmsg (MSG_WAITFORONE; the socket's SO_RCVTIMEO bounds the wait, so that
// it sees stop() soon) and hands it on. When every batch is with the consumer it waits for one to
// come back, and the socket's buffer takes the stream meanwhile: what overflows it is the kernel's
// drop count, as without this thread. The consumer (the stage's thread) takes batches with
// next(), gives each back with give_back(), and learns of a failed receive from failed_errno().
class ReceiveThread {
 public:
  // `batches` batches of `messages` messages on socket `fd` (which the caller keeps open until
  // stop()).
  ReceiveThread(int fd, std::size_t batches, std::size_t messages, std::size_t slot_bytes, std::size_t control_bytes);
  ReceiveThread(const ReceiveThread&) = delete;
  ReceiveThread& operator=(const ReceiveThread&) = delete;
  ~ReceiveThread() { stop(); }

  // Starts the thread, pinned to `cores` (empty: not pinned) and named `name` for top -H and
  // perf. Throws naming pthread_setaffinity_np and its error.
  void start(const std::vector<int>& cores, const std::string& name);
  // Consumer: the next filled batch, or null after waiting up to `timeout` (also once the
  // thread has ended: failed or stopped, and every batch it filled taken).
  ReceiveBatch* next(std::chrono::nanoseconds timeout) noexcept;
  // Consumer: done with `batch`; it goes back to the thread.
  void give_back(ReceiveBatch* batch) noexcept;
  // The errno of the recvmmsg that ended the thread, or 0. Read it once next() returns null.
  [[nodiscard]] int failed_errno() const noexcept { return failed_errno_.load(std::memory_order_acquire); }
  // Times the thread found every batch with the consumer and waited (the consumer was the bound).
  [[nodiscard]] std::uint64_t waits_for_batch() const noexcept {
    return waits_for_batch_.load(std::memory_order_relaxed);
  }
  // The thread's CPU time (user and system) so far, or in all once it has ended; 0 before
  // start(). Read from any thread while the thread runs or after stop(), not during stop().
  [[nodiscard]] std::uint64_t cpu_ns() const noexcept;
  // Bytes (whole datagrams, GRO segments summed) the thread has received so far.
  [[nodiscard]] std::uint64_t received_bytes() const noexcept {
    return received_bytes_.load(std::memory_order_relaxed);
  }
  // The consumer's CPU time so far, from its first next() until its thread ends; 0 before.
  [[nodiscard]] std::uint64_t consumer_cpu_ns() const noexcept;
  // Ends the thread and joins it; batches it filled stay for next(). Idempotent.
  void stop() noexcept;

 private:
  void run() noexcept;
  // Lets the thread start receiving (the first next(), or stop()).
  void release() noexcept;
  // A free batch, waiting while the consumer holds them all; null once stopping.
  ReceiveBatch* take_free() noexcept;

  int fd_;
  std::vector<std::unique_ptr<ReceiveBatch>> batches_;
  SpscQueue<ReceiveBatch*> filled_;  // this thread → consumer
  SpscQueue<ReceiveBatch*> free_;    // consumer → this thread
  std::atomic<bool> go_{false};      // the thread may receive
  bool consumer_asked_ = false;      // the consumer's: it has called next()
  std::atomic<bool> have_consumer_clock_{false};
  clockid_t consumer_clock_{};
  std::atomic<bool> stopping_{false};
  std::atomic<int> failed_errno_{0};
  std::atomic<std::uint64_t> waits_for_batch_{0};
  std::atomic<std::uint64_t> received_bytes_{0};
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> final_cpu_ns_{0};
  std::thread thread_;
  pthread_t handle_{};
};

}  // namespace sluice
