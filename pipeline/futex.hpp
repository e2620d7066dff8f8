// Linux futex wait and wake on a 32-bit atomic, with a timeout (std::atomic::wait has none).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice {

// Sleeps while `word` holds `expected`, for up to `timeout`; returns on a wake, a timeout, a
// signal or when `word` already differs.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept;
// Wakes one thread sleeping in futex_wait() on `word`.
void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept;

}  // namespace sluice
