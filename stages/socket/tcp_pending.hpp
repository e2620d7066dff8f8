// Connections a tcp server has accepted but does not serve yet, watched side by side so that
// a silent or garbage connection never holds the listener while the real sender waits.
#pragma once

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "pipeline/metrics.hpp"
#include "wire/raw_tcp.hpp"
#include "wire/socket.hpp"

namespace sluice {

class PendingConnections {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kCapacity = 16;
  struct Limits {
    std::chrono::nanoseconds idle{std::chrono::seconds(5)};  // silent this long: closed
    std::uint64_t max_frame = 0;                             // a larger payload is garbage
    bool framed = true;                                      // raw_tcp; false: any byte is a sample
  };
  // What a connection that proved itself a sender hands to the stage: its socket and the bytes
  // read from it (a whole valid frame header; framing none: its first byte).
  struct Sender {
    wire::UniqueFd socket;
    std::array<std::byte, raw_tcp::kHeaderBytes> bytes{};
    std::size_t have = 0;
  };

  // Counters: `connections`, `disconnects`; drop reasons `idle_connection`,
  // `garbage_connection`, `second_sender`, `crowded_out`.
  void start(StageMetrics& metrics, Limits limits);
  // Accepts every waiting connection (`listener` is non-blocking), reads the first bytes of
  // each pending one and closes those that are garbage or past the idle limit. `serving`: a
  // sender is served, so a second one that proved itself waits, and is closed after the limit.
  void service(int listener, Clock::time_point now, bool serving) noexcept;
  // The earliest connection that sent a valid header, if any.
  bool take_sender(Sender& sender) noexcept;
  // Pending connections still being read, for a poll() that waits for any of them.
  [[nodiscard]] std::size_t poll_set(std::span<pollfd> out) const noexcept;
  // Closes them all (the stage stops).
  void clear() noexcept;

 private:
  enum class State : std::uint8_t { empty, reading, ready };
  // Why the stage closed a connection; `left`: the peer closed it after no bytes.
  enum class Close : std::uint8_t { idle, garbage, second_sender, crowded_out, left };
  struct Slot {
    State state = State::empty;
    wire::UniqueFd socket;
    Clock::time_point since{};  // accepted (reading) or proved a sender (ready)
    std::array<std::byte, raw_tcp::kHeaderBytes> bytes{};
    std::size_t have = 0;
  };
  void accept_all(int listener, Clock::time_point now) noexcept;
  void read(Slot& slot, Clock::time_point now) noexcept;
  void close(Slot& slot, Close reason) noexcept;

  Limits limits_;
  std::array<Slot, kCapacity> slots_{};
  NamedCounter* connections_ = nullptr;
  NamedCounter* disconnects_ = nullptr;
  std::array<NamedCounter*, 4> closed_{};  // drop counters by Close reason, `left` aside
};

}  // namespace sluice
