// Monotonic and thread-CPU nanoseconds for measurement, and the one pacing rule.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace sluice {

inline std::uint64_t monotonic_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// A duration in the unit of monotonic_ns(), to compare with the difference of two readings.
inline std::uint64_t to_ns(std::chrono::nanoseconds duration) noexcept {
  return static_cast<std::uint64_t>(duration.count());
}

// A clock_gettime reading (of any clock) in nanoseconds.
inline std::uint64_t to_ns(const timespec& time) noexcept {
  return static_cast<std::uint64_t>(time.tv_sec) * 1'000'000'000 + static_cast<std::uint64_t>(time.tv_nsec);
}

// The calling thread's CPU time: what a call cost it, apart from the time it waited.
inline std::uint64_t thread_cpu_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return to_ns(now);
}

// One pause in a polling loop: lets the sibling hyperthread run and saves power while a
// thread waits microseconds for another (or for the GPU).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// When the next unit may leave: units (bytes, samples) are due at `rate` per second from the
// first. Pure, for tests. The emulator, the generator and replay all pace with it.
class Pacer {
 public:
  explicit Pacer(double units_per_second = 0) : rate_(units_per_second) {}
  // Nanoseconds to wait before sending more, given `sent` units `elapsed_ns` after the start.
  [[nodiscard]] std::uint64_t wait_ns(std::uint64_t sent, std::uint64_t elapsed_ns) const {
    if (rate_ <= 0) return 0;
    const auto due_ns = static_cast<std::uint64_t>(static_cast<double>(sent) / rate_ * 1e9);
    return due_ns > elapsed_ns ? due_ns - elapsed_ns : 0;
  }

 private:
  double rate_;
};

}  // namespace sluice
