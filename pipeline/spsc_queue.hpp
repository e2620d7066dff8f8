// Bounded lock-free single-producer single-consumer ring. Between two stage threads it
// carries chunk pointers; close() marks end of stream once everything pushed is popped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>

#include "pipeline/futex.hpp"

namespace sluice {

inline constexpr std::size_t kCacheLine = 64;

template <typename T>
class SpscQueue {
 public:
  // Capacity is rounded up to a power of two so that indices wrap with a mask.
  explicit SpscQueue(std::size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("SpscQueue capacity must be at least 1");
    std::size_t rounded = 1;
    while (rounded < capacity) rounded <<= 1;
    mask_ = rounded - 1;
    slots_ = std::make_unique<T[]>(rounded);
  }

  // Producer side. False when full.
  bool try_push(const T& value) noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (tail - head_cache_ > mask_) return false;
    }
    slots_[tail & mask_] = value;
    // seq_cst pairs with wait_for_push(): either the consumer sees this item or we see it waiting.
    tail_.store(tail + 1, std::memory_order_seq_cst);
    wake_consumer();
    return true;
  }

  // Consumer side. Empty optional when nothing is queued.
  std::optional<T> try_pop() noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head == tail_cache_) return std::nullopt;
    }
    T value = slots_[head & mask_];
    head_.store(head + 1, std::memory_order_release);
    return value;
  }

  // Producer: no more pushes will come.
  void close() noexcept {
    closed_.store(true, std::memory_order_seq_cst);
    wake_consumer();
  }

  // Consumer: sleeps until a push or close(), or for `timeout`, whichever comes first (it may
  // also return early). A consumer that has nothing to do blocks here instead of polling, so
  // an idle stage thread takes no CPU from the threads (and kernel workers) that feed it.
  void wait_for_push(std::chrono::nanoseconds timeout) noexcept {
    const std::uint32_t seen = wakeups_.load(std::memory_order_acquire);
    consumer_waiting_.store(true, std::memory_order_seq_cst);
    if (size() == 0 && !closed()) futex_wait(wakeups_, seen, timeout);
    consumer_waiting_.store(false, std::memory_order_relaxed);
  }
  [[nodiscard]] bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  // Consumer: closed and drained. Checks closed first so that a push racing with close is seen.
  [[nodiscard]] bool finished() const noexcept { return closed() && size() == 0; }

  [[nodiscard]] std::size_t size() const noexcept {
    return static_cast<std::size_t>(tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_acquire));
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }

 private:
  void wake_consumer() noexcept {
    if (!consumer_waiting_.load(std::memory_order_seq_cst)) return;
    wakeups_.fetch_add(1, std::memory_order_release);
    futex_wake_one(wakeups_);
  }

  // Producer and consumer indices on separate cache lines; each side caches the other's.
  alignas(kCacheLine) std::atomic<std::uint64_t> tail_{0};
  std::uint64_t head_cache_ = 0;
  alignas(kCacheLine) std::atomic<std::uint64_t> head_{0};
  std::uint64_t tail_cache_ = 0;
  alignas(kCacheLine) std::atomic<bool> closed_{false};
  std::atomic<bool> consumer_waiting_{false};  // the consumer is in (or entering) wait_for_push()
  std::atomic<std::uint32_t> wakeups_{0};      // the futex word: bumped by each wake_consumer()
  std::size_t mask_ = 0;
  std::unique_ptr<T[]> slots_;
};

}  // namespace sluice
