// The receive thread's loop is the bare receive loop's (suite/bare_udp.cpp) plus two queue
// operations a batch, so that its core costs what the kernel's receive costs.
#include "stages/socket/receive_thread.hpp"

#include <poll.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "pipeline/clock.hpp"
#include "pipeline/thread_cores.hpp"
#include "wire/socket.hpp"

namespace sluice {

ReceiveSlots::ReceiveSlots(std::size_t count, std::size_t slot_bytes, std::size_t control_bytes)
    : slot_bytes_(slot_bytes),
      control_bytes_(control_bytes),
      buffers_(count * slot_bytes),
      iovs_(count),
      controls_(count * control_bytes),
      headers_(count) {
  for (std::size_t i = 0; i < count; ++i) {
    iovs_[i] = {buffers_.data() + i * slot_bytes_, slot_bytes_};
    msghdr& header = headers_[i].msg_hdr;
    header = {};
    header.msg_iov = &iovs_[i];
    header.msg_iovlen = 1;
    header.msg_control = controls_.data() + i * control_bytes_;
    header.msg_controllen = control_bytes_;
  }
}

void ReceiveSlots::rearm(std::size_t first, std::size_t count) noexcept {
  for (std::size_t i = first; i < first + count; ++i) headers_[i].msg_hdr.msg_controllen = control_bytes_;
}

void ReceiveStandby::check(int fd) noexcept {
  if (raised()) return;
  const std::uint64_t now = monotonic_ns();
  if (now - checked_ns_ < kCheckNs) return;
  checked_ns_ = now;
  const std::optional<wire::ReceiveMemory> memory = wire::receive_memory(fd);
  if (!memory || memory->queued < above_) return;
  {
    const std::lock_guard lock(mutex_);
    raised_.store(true, std::memory_order_release);
  }
  raises_.fetch_add(1, std::memory_order_relaxed);
  woken_.notify_all();
}

bool ReceiveStandby::wait(std::chrono::milliseconds timeout) noexcept {
  std::unique_lock lock(mutex_);
  return woken_.wait_for(lock, timeout, [this] { return raised(); });
}

ReceiveThread::ReceiveThread(int fd, std::size_t batches, std::size_t messages, std::size_t slot_bytes,
                             std::size_t control_bytes, std::chrono::nanoseconds spin)
    : fd_(fd),
      messages_(messages),
      slots_(batches * messages, slot_bytes, control_bytes),
      batches_(batches * messages),
      spin_(static_cast<std::uint64_t>(std::max<std::int64_t>(0, spin.count()))),
      filled_(batches * messages),
      free_(batches * messages) {
  for (std::size_t i = 0; i < batches_.size(); ++i) batches_[i] = ReceiveBatch{&slots_, i, 0};
}

void ReceiveThread::start(const std::vector<int>& cores, const std::string& name, CoreWait* core_wait) {
  core_wait_ = core_wait;
  cores_ = cores;
  stopping_.store(false, std::memory_order_relaxed);
  running_.store(true, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
  handle_ = thread_.native_handle();
  if (!cores.empty()) {
    try {
      pin_thread(handle_, cores, "receive thread");
    } catch (...) {
      stop();
      throw;
    }
  }
  // A name longer than 15 bytes is cut, which harms nothing.
  static_cast<void>(pthread_setname_np(thread_.native_handle(), name.substr(0, 15).c_str()));
}

void ReceiveThread::run() noexcept {
  go_.wait(false, std::memory_order_acquire);
  if (core_wait_ != nullptr) core_wait_->begin(cores_);
  std::uint64_t bytes = 0;
  const std::size_t ring = slots_.count();
  while (wait_for_free_slots()) {
    // The free slots from next_slot_ on, up to the ring's end: a run that one call can fill.
    const std::size_t first = next_slot_;
    const std::size_t count = std::min({messages_, ring - slots_in_use_, ring - first});
    slots_.rearm(first, count);
    const int received = receive(first, count);
    if (received < 0) {
      if (!stopping_.load(std::memory_order_relaxed)) failed_errno_.store(errno, std::memory_order_release);
      break;
    }
    ReceiveBatch& batch = batches_[first];
    batch.received = static_cast<std::size_t>(received);
    for (std::size_t i = 0; i < batch.received; ++i) bytes += batch.message(i).msg_len;
    received_bytes_.store(bytes, std::memory_order_relaxed);  // this thread is its one writer
    slots_in_use_ += batch.received;
    next_slot_ = (first + batch.received) % ring;
    filled_.try_push(&batch);  // never full: a batch holds one slot at least
    calls_.fetch_add(1);       // even: the call's datagrams are in the ring
    if (watched_ != nullptr && batch.received == count) watched_->check(fd_);
  }
  final_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
  if (core_wait_ != nullptr) core_wait_->end();
  running_.store(false, std::memory_order_release);
  filled_.close();
}

int ReceiveThread::receive(std::size_t first, std::size_t count) noexcept {
  // The sum goes out before a call that may sleep, at the end, and otherwise once it has grown
  // by kSpinPublishNs: spins between datagrams end on most calls at a high rate, and a store on
  // each would take the line from any core that reads the counts. Without a spin it is never written.
  const auto publish_spin = [this](bool now) {
    const std::uint64_t spun = spin_.spun_ns();
    if (spun != published_spin_ns_ && (now || spun - published_spin_ns_ >= kSpinPublishNs)) {
      spun_ns_.store(spun, std::memory_order_relaxed);
      published_spin_ns_ = spun;
    }
  };
  int received = -1;
  while (!stopping_.load(std::memory_order_relaxed)) {
    if (standby_ != nullptr && !standby_->raised()) {
      static_cast<void>(standby_->wait(std::chrono::milliseconds(kPollMs)));  // then stop() is seen
      continue;
    }
    const bool blocking = standby_ == nullptr && spin_.may_block();
    if (blocking) {
      blocking_calls_.store(blocking_calls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      publish_spin(true);  // before it sleeps
    }
    if (blocking && wait_outside_calls_) {
      // Sleep in poll() rather than in the call, so that every call is short: a merge that
      // waits for this thread's call to end (calls()) never waits for the stream to go on.
      pollfd readable{fd_, POLLIN, 0};
      static_cast<void>(::poll(&readable, 1, kPollMs));
    }
    calls_.fetch_add(1);  // odd: in a call, which may take datagrams off the socket
    received = ::recvmmsg(fd_, slots_.headers(first), static_cast<unsigned>(count),
                          blocking && !wait_outside_calls_ ? MSG_WAITFORONE : MSG_DONTWAIT, nullptr);
    if (received > 0) {  // the call stays open until run() has handed its batch on
      spin_.received();
      break;
    }
    calls_.fetch_add(1);  // an atomic add leaves errno as the call set it
    if (received == 0) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    if (standby_ != nullptr && errno != EINTR) {
      standby_->lower();  // the backlog is gone: stand by again
      continue;
    }
    spin_.found_empty();
  }
  if (received < 0) spin_.end();  // stopping
  publish_spin(received < 0);
  return received;
}

bool ReceiveThread::wait_for_free_slots() noexcept {
  bool counted = false;
  while (!stopping_.load(std::memory_order_relaxed)) {
    while (const auto batch = free_.try_pop()) slots_in_use_ -= (*batch)->received;
    if (slots_in_use_ < slots_.count()) return true;
    if (!counted) {
      waits_for_batch_.fetch_add(1, std::memory_order_relaxed);
      counted = true;
    }
    free_.wait_for_push(std::chrono::milliseconds(10));
  }
  return false;
}

ReceiveBatch* ReceiveThread::next(std::chrono::nanoseconds timeout) noexcept {
  if (!consumer_asked_) {
    consumer_asked_ = true;
    if (pthread_getcpuclockid(pthread_self(), &consumer_clock_) == 0)
      have_consumer_clock_.store(true, std::memory_order_release);
    release();
  }
  const auto wait_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
  const std::uint64_t begin = monotonic_ns();
  for (;;) {
    if (const auto batch = filled_.try_pop()) return *batch;
    if (filled_.finished()) return nullptr;
    const std::uint64_t waited = monotonic_ns() - begin;
    if (waited >= wait_ns) return nullptr;
    if (waited < kConsumerSpinNs) {
      cpu_relax();
    } else if (waited < kConsumerNapsForNs) {
      std::this_thread::sleep_for(kConsumerNap);
    } else {
      filled_.wait_for_push(std::chrono::nanoseconds(wait_ns - waited));
      const auto batch = filled_.try_pop();
      return batch ? *batch : nullptr;
    }
  }
}

void ReceiveThread::give_back(ReceiveBatch* batch) noexcept { free_.try_push(batch); }

std::uint64_t ReceiveThread::cpu_ns() const noexcept {
  if (!running_.load(std::memory_order_acquire)) return final_cpu_ns_.load(std::memory_order_relaxed);
  clockid_t clock{};
  timespec now{};
  if (pthread_getcpuclockid(handle_, &clock) != 0 || ::clock_gettime(clock, &now) != 0)
    return final_cpu_ns_.load(std::memory_order_relaxed);
  return to_ns(now);
}

std::uint64_t ReceiveThread::consumer_cpu_ns() const noexcept {
  timespec now{};
  if (!have_consumer_clock_.load(std::memory_order_acquire) || ::clock_gettime(consumer_clock_, &now) != 0) return 0;
  return to_ns(now);
}

void ReceiveThread::release() noexcept {
  go_.store(true, std::memory_order_release);
  go_.notify_one();
}

void ReceiveThread::stop() noexcept {
  stopping_.store(true, std::memory_order_relaxed);
  release();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sluice
