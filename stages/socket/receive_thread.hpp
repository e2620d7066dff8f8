// The udp stage's receive batches, and the thread that only fills them: recvmmsg on its own
// core, each filled batch handed to the stage's thread over a lock-free queue and given back.
#pragma once

#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/core_wait.hpp"
#include "pipeline/spsc_queue.hpp"

namespace sluice {

// `count` receive slots of `slot_bytes` each, their iovecs, control space of `control_bytes`
// each and the headers pointing at them, set once. A recvmmsg fills a run of them.
class ReceiveSlots {
 public:
  ReceiveSlots(std::size_t count, std::size_t slot_bytes, std::size_t control_bytes);
  // Before a recvmmsg into slots [first, first + count): the kernel shortens msg_controllen to
  // what it wrote.
  void rearm(std::size_t first, std::size_t count) noexcept;
  [[nodiscard]] mmsghdr* headers(std::size_t first) noexcept { return headers_.data() + first; }
  [[nodiscard]] std::size_t count() const noexcept { return headers_.size(); }
  // Slot `i` as the last recvmmsg left it, and its data.
  [[nodiscard]] const mmsghdr& message(std::size_t i) const noexcept { return headers_[i]; }
  [[nodiscard]] const std::byte* data(std::size_t i) const noexcept { return buffers_.data() + i * slot_bytes_; }

 private:
  std::size_t slot_bytes_;
  std::size_t control_bytes_;
  std::vector<std::byte> buffers_;
  std::vector<iovec> iovs_;
  std::vector<std::byte> controls_;
  std::vector<mmsghdr> headers_;
};

// What one recvmmsg filled: `received` messages in the slots from `first` on.
struct ReceiveBatch {
  const ReceiveSlots* slots = nullptr;
  std::size_t first = 0;
  std::size_t received = 0;
  [[nodiscard]] const mmsghdr& message(std::size_t i) const noexcept { return slots->message(first + i); }
  [[nodiscard]] const std::byte* data(std::size_t i) const noexcept { return slots->data(first + i); }
};

// When a receive loop's next call may block: with a spin, a loop that finds the socket empty
// polls it that long, then lets its calls block until a datagram comes; the time spent polling
// (up to the start of the call that received, so that call's copy is not counted) is summed.
// Header-only, so that the bare loops (bench/) poll exactly as the receive thread does.
class ReceiveSpin {
 public:
  explicit ReceiveSpin(std::uint64_t spin_ns) noexcept : spin_(spin_ns), blocking_(spin_ns == 0) {}
  // Before each call: whether it may block.
  bool may_block() noexcept {
    if (!blocking_ && empty_since_ != 0) {
      polled_at_ = monotonic_ns();
      if (polled_at_ - empty_since_ >= spin_) {  // the stream has paused: block until it goes on
        spun_ += polled_at_ - empty_since_;
        empty_since_ = 0;
        blocking_ = true;
      }
    }
    return blocking_;
  }
  // After a call that received: the next finds the socket empty afresh.
  void received() noexcept {
    if (empty_since_ != 0) spun_ += polled_at_ - empty_since_;
    empty_since_ = 0;
    blocking_ = spin_ == 0;
  }
  // After a call that found nothing.
  void found_empty() noexcept {
    if (!blocking_ && empty_since_ == 0) empty_since_ = monotonic_ns();
  }
  // The loop ends mid-spin: what it polled so far counts.
  void end() noexcept {
    if (empty_since_ != 0) spun_ += monotonic_ns() - empty_since_;
    empty_since_ = 0;
  }
  [[nodiscard]] std::uint64_t spun_ns() const noexcept { return spun_; }

 private:
  std::uint64_t spin_;
  bool blocking_;
  std::uint64_t empty_since_ = 0;  // polling: when the socket was first found empty
  std::uint64_t polled_at_ = 0;    // and when the latest poll began
  std::uint64_t spun_ = 0;
};

// The signal between a socket's first receive thread and its standby threads (the udp stage's
// receive_standby). Once a socket's queue is longer than the caches hold, each datagram costs its
// receiver more (the kernel copies it from memory, not from cache), so a receiver that falls
// behind falls further behind. The first thread raises the signal after a call that filled every
// slot it offered, when the socket still holds `above` bytes or more (SO_MEMINFO's receive
// allocation, looked at no more often than every kCheckNs); a standby thread receives while it is
// raised and lowers it when a call of its own finds the socket empty. Standby threads wait on a
// condition variable, so that while the first thread keeps up they cost no core time.
class ReceiveStandby {
 public:
  explicit ReceiveStandby(std::uint64_t above_bytes) noexcept : above_(above_bytes) {}
  ReceiveStandby(const ReceiveStandby&) = delete;
  ReceiveStandby& operator=(const ReceiveStandby&) = delete;
  [[nodiscard]] bool raised() const noexcept { return raised_.load(std::memory_order_acquire); }
  // The first thread, after a call that filled what it offered: raises the signal when socket
  // `fd` holds `above` bytes or more.
  void check(int fd) noexcept;
  // A standby thread found the socket empty.
  void lower() noexcept { raised_.store(false, std::memory_order_release); }
  // A standby thread: waits up to `timeout` for the signal; whether it is raised.
  bool wait(std::chrono::milliseconds timeout) noexcept;
  // Times the signal was raised.
  [[nodiscard]] std::uint64_t raises() const noexcept { return raises_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::uint64_t kCheckNs = 50'000;
  std::uint64_t above_;
  std::uint64_t checked_ns_ = 0;  // the first thread's
  alignas(kCacheLine) std::atomic<bool> raised_{false};
  std::atomic<std::uint64_t> raises_{0};
  std::mutex mutex_;
  std::condition_variable woken_;
};

// A thread that does nothing but receive. From the consumer's first next() on (until then the
// socket keeps what arrives, as for a stage that receives itself) it fills the free slots after
// the last filled one, up to a batch of them, with one blocking recvmmsg (MSG_WAITFORONE; the
// socket's SO_RCVTIMEO bounds the wait, so that it sees stop() soon) and hands on what it got. A
// batch takes only the slots the kernel filled: a short one leaves the rest of the ring free, so
// that the ring holds as many messages as it has slots whatever the calls returned. When every
// slot is with the consumer it waits for a batch to come back, and the socket's buffer takes the
// stream meanwhile: what overflows it is the kernel's drop count, as without this thread. The
// consumer (the stage's thread) takes batches with next(), gives each back with give_back() in the
// order it took them, and learns of a failed receive from failed_errno().
// With a `spin`, a call that finds the socket empty polls it (MSG_DONTWAIT) for up to that long
// before it blocks: while datagrams keep coming the thread never sleeps, so whoever queues them
// (the kernel's receive on the NIC's core, or a sender on loopback) never pays to wake it.
class ReceiveThread {
 public:
  // How the consumer waits for a batch in next(): it spins a little, then naps and looks again,
  // and only after a pause in the stream sleeps until woken. While batches flow, the receive
  // thread never pays for a wake-up (a futex call on its core); the naps are paid on the consumer's.
  static constexpr std::uint64_t kConsumerSpinNs = 10'000;
  static constexpr std::chrono::microseconds kConsumerNap{50};
  static constexpr std::uint64_t kConsumerNapsForNs = 2'000'000;  // then the stream has paused: sleep

  // A ring of `batches` x `messages` slots, recvmmsg calls of up to `messages` messages, on socket
  // `fd` (which the caller keeps open until stop()); an empty socket polled for `spin` first.
  ReceiveThread(int fd, std::size_t batches, std::size_t messages, std::size_t slot_bytes, std::size_t control_bytes,
                std::chrono::nanoseconds spin = {});
  ReceiveThread(const ReceiveThread&) = delete;
  ReceiveThread& operator=(const ReceiveThread&) = delete;
  ~ReceiveThread() { stop(); }

  // Before start(): wait for datagrams in poll() and take them with non-blocking calls, so that
  // no call lasts longer than its copying (for a ReceiveMerge of several threads; each poll
  // counts as a blocking call).
  void wait_outside_calls() noexcept { wait_outside_calls_ = true; }
  // Before start(): this is the socket's first thread, which raises `standby` when it falls
  // behind (ReceiveStandby::check).
  void watch_for_standby(ReceiveStandby* standby) noexcept { watched_ = standby; }
  // Before start(): this thread stands by, receiving only while `standby` is raised (no spin, no
  // blocking call: it waits on the signal, and lowers it when a call finds the socket empty).
  void stand_by(ReceiveStandby* standby) noexcept { standby_ = standby; }
  // Starts the thread, pinned to `cores` (empty: not pinned) and named `name` for top -H and
  // perf; its wait for a core goes to `core_wait` where given (kept until stop()). Throws
  // naming pthread_setaffinity_np and its error.
  void start(const std::vector<int>& cores, const std::string& name, CoreWait* core_wait = nullptr);
  // Consumer: the next filled batch, or null after waiting up to `timeout` (also once the
  // thread has ended: failed or stopped, and every batch it filled taken).
  ReceiveBatch* next(std::chrono::nanoseconds timeout) noexcept;
  // Consumer: done with `batch`, the oldest it holds; its slots go back to the thread.
  void give_back(ReceiveBatch* batch) noexcept;
  // The errno of the recvmmsg that ended the thread, or 0. Read it once next() returns null.
  [[nodiscard]] int failed_errno() const noexcept { return failed_errno_.load(std::memory_order_acquire); }
  // Times the thread found every slot with the consumer and waited (the consumer was the bound).
  [[nodiscard]] std::uint64_t waits_for_batch() const noexcept {
    return waits_for_batch_.load(std::memory_order_relaxed);
  }
  // recvmmsg calls that were let block: each one with no spin, else each that came after a whole
  // spin found nothing (the stream paused longer than the spin).
  [[nodiscard]] std::uint64_t blocking_calls() const noexcept {
    return blocking_calls_.load(std::memory_order_relaxed);
  }
  // Time spent polling an empty socket: CPU time that received nothing. While the thread runs it
  // may lag by up to a millisecond; exact once the thread has ended, and before each call that may sleep.
  [[nodiscard]] std::uint64_t spin_ns() const noexcept { return spun_ns_.load(std::memory_order_relaxed); }
  // The thread's CPU time (user and system) so far, or in all once it has ended; 0 before
  // start(). Read from any thread while the thread runs or after stop(), not during stop().
  [[nodiscard]] std::uint64_t cpu_ns() const noexcept;
  // Odd while the thread is in a recvmmsg call whose datagrams are not yet in the ring, even
  // between calls: a consumer that found the ring empty and then reads an even count (and the
  // ring still empty) knows that whatever the thread takes next left the socket after now.
  [[nodiscard]] std::uint64_t calls() const noexcept { return calls_.load(); }
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
  // One recvmmsg into slots [first, first + count), spinning first as set: what it returned, or
  // -1 with errno on a failure, or -1 once stopping.
  int receive(std::size_t first, std::size_t count) noexcept;
  // Lets the thread start receiving (the first next(), or stop()).
  void release() noexcept;
  // Takes back what the consumer returned; while it holds every slot, waits for a batch to come
  // back. False once stopping.
  bool wait_for_free_slots() noexcept;

  static constexpr int kPollMs = 10;                          // as the socket's receive timeout: stop() is seen soon
  static constexpr std::uint64_t kSpinPublishNs = 1'000'000;  // see receive()

  // The members fall in groups by who writes them and how often, each group on cache lines of its
  // own: a line this thread writes on every call and the consumer reads would move between their
  // cores on every batch, and the kernel's copy of the next datagrams would wait for it.
  // Set before start(), then only read (the consumer reads the slots through every batch).
  int fd_;
  bool wait_outside_calls_ = false;
  std::size_t messages_;  // the most slots one recvmmsg fills
  ReceiveSlots slots_;
  std::vector<ReceiveBatch> batches_;  // batches_[i]: the batch whose first slot is i
  CoreWait* core_wait_ = nullptr;
  std::vector<int> cores_;             // the cores it is pinned to, for core_wait_
  ReceiveStandby* watched_ = nullptr;  // see watch_for_standby()
  ReceiveStandby* standby_ = nullptr;  // see stand_by()
  // This thread's, written on every call; calls_ and received_bytes_ are read by a merge or a test.
  alignas(kCacheLine) ReceiveSpin spin_;  // whether a call may block, and the time spent polling
  std::size_t next_slot_ = 0;             // where the next recvmmsg starts
  std::size_t slots_in_use_ = 0;          // slots filled and not yet given back
  std::uint64_t published_spin_ns_ = 0;   // spin_'s sum as spun_ns_ last showed it
  std::atomic<std::uint64_t> received_bytes_{0};
  std::atomic<std::uint64_t> calls_{0};  // see calls()
  SpscQueue<ReceiveBatch*> filled_;      // this thread → consumer
  SpscQueue<ReceiveBatch*> free_;        // consumer → this thread
  // The consumer's.
  alignas(kCacheLine) bool consumer_asked_ = false;  // it has called next()
  std::atomic<bool> have_consumer_clock_{false};
  clockid_t consumer_clock_{};
  // Written now and then: at the start and the stop, when the ring is full, when the time spun
  // has grown by kSpinPublishNs or a call may sleep.
  alignas(kCacheLine) std::atomic<bool> go_{false};  // the thread may receive
  std::atomic<bool> stopping_{false};
  std::atomic<bool> running_{false};
  std::atomic<int> failed_errno_{0};
  std::atomic<std::uint64_t> waits_for_batch_{0};
  std::atomic<std::uint64_t> blocking_calls_{0};  // this thread writes them, anyone reads
  std::atomic<std::uint64_t> spun_ns_{0};         // spin_'s sum, for other threads
  std::atomic<std::uint64_t> final_cpu_ns_{0};
  std::thread thread_;
  pthread_t handle_{};
};

}  // namespace sluice
