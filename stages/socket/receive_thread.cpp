// The receive thread's loop is the bare receive loop's (suite/bare_udp.cpp) plus two queue
// operations a batch, so that its core costs what the kernel's receive costs.
#include "stages/socket/receive_thread.hpp"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "pipeline/clock.hpp"
#include "pipeline/thread_cores.hpp"

namespace sluice {
namespace {

// How the consumer waits for a batch: it spins a little, then naps and looks again, and only
// after a pause in the stream sleeps until woken. While batches flow, the receive thread never
// pays for a wake-up (a futex call on its core); the naps are paid on the consumer's core.
constexpr std::uint64_t kConsumerSpinNs = 10'000;
constexpr auto kConsumerNap = std::chrono::microseconds(50);
constexpr std::uint64_t kConsumerNapsForNs = 2'000'000;  // then the stream has paused: sleep

}  // namespace

ReceiveBatch::ReceiveBatch(std::size_t messages, std::size_t slot_bytes, std::size_t control_bytes)
    : slot_bytes_(slot_bytes),
      control_bytes_(control_bytes),
      buffers_(messages * slot_bytes),
      iovs_(messages),
      controls_(messages * control_bytes),
      headers_(messages) {
  for (std::size_t i = 0; i < messages; ++i) {
    iovs_[i] = {buffers_.data() + i * slot_bytes_, slot_bytes_};
    msghdr& header = headers_[i].msg_hdr;
    header = {};
    header.msg_iov = &iovs_[i];
    header.msg_iovlen = 1;
    header.msg_control = controls_.data() + i * control_bytes_;
    header.msg_controllen = control_bytes_;
  }
}

void ReceiveBatch::rearm() noexcept {
  for (auto& header : headers_) header.msg_hdr.msg_controllen = control_bytes_;
}

ReceiveThread::ReceiveThread(int fd, std::size_t batches, std::size_t messages, std::size_t slot_bytes,
                             std::size_t control_bytes)
    : fd_(fd), filled_(batches), free_(batches) {
  for (std::size_t i = 0; i < batches; ++i) {
    batches_.push_back(std::make_unique<ReceiveBatch>(messages, slot_bytes, control_bytes));
    free_.try_push(batches_.back().get());
  }
}

void ReceiveThread::start(const std::vector<int>& cores, const std::string& name) {
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
  std::uint64_t bytes = 0;
  while (ReceiveBatch* batch = take_free()) {
    batch->rearm();
    int received = -1;
    while (!stopping_.load(std::memory_order_relaxed)) {
      received = ::recvmmsg(fd_, batch->headers(), static_cast<unsigned>(batch->capacity()), MSG_WAITFORONE, nullptr);
      if (received >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    }
    if (received < 0) {
      if (!stopping_.load(std::memory_order_relaxed)) failed_errno_.store(errno, std::memory_order_release);
      break;
    }
    batch->received = static_cast<std::size_t>(received);
    for (std::size_t i = 0; i < batch->received; ++i) bytes += batch->message(i).msg_len;
    received_bytes_.store(bytes, std::memory_order_relaxed);  // this thread is its one writer
    filled_.try_push(batch);                                  // never full: it holds every batch at most
  }
  final_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
  running_.store(false, std::memory_order_release);
  filled_.close();
}

ReceiveBatch* ReceiveThread::take_free() noexcept {
  bool counted = false;
  while (!stopping_.load(std::memory_order_relaxed)) {
    if (const auto batch = free_.try_pop()) return *batch;
    if (!counted) {
      waits_for_batch_.fetch_add(1, std::memory_order_relaxed);
      counted = true;
    }
    free_.wait_for_push(std::chrono::milliseconds(10));
  }
  return nullptr;
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
