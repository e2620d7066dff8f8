// Several receive threads reading one socket, their messages handed on in the order the socket
// queued them. Each thread's ring holds its messages in the order it took them off the socket,
// so that order is the order of their keys (the time the kernel received each, which grows
// along the queue) across the rings' heads, with one catch: a thread whose ring is empty may be
// in a call holding a message that left the socket before the others' heads. The merge then
// waits until that call is over (ReceiveThread::calls()): whatever the thread takes after it
// left the socket later. The stream's own order (and its reordering on the way) is the stage's
// to judge, as with one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "stages/socket/receive_thread.hpp"

namespace sluice {

class ReceiveMerge {
 public:
  // A message's place in the socket's queue as (high, low), compared in that order; false when
  // it has none, which then sorts first.
  using KeyOf = bool (*)(const mmsghdr& message, const std::byte* data, std::uint64_t& high,
                         std::uint64_t& low) noexcept;
  struct Message {
    ReceiveBatch* batch = nullptr;
    std::size_t index = 0;   // in the batch
    std::size_t reader = 0;  // whose batch
  };

  ReceiveMerge(std::vector<ReceiveThread*> readers, KeyOf key_of);

  // The next message in the socket's queue order, after waiting up to `timeout` for one
  // (spinning, then napping); none when no ring has one, or when a thread may still hold an
  // earlier one.
  std::optional<Message> next(std::chrono::nanoseconds timeout) noexcept;
  // Done with the message next() gave last: true when it was its batch's last, which then went
  // back to its thread.
  bool done(const Message& message) noexcept;
  // Times next() found the next message held back by a thread in a call.
  [[nodiscard]] std::uint64_t holds() const noexcept { return holds_; }

 private:
  struct Head {
    ReceiveBatch* batch = nullptr;
    std::size_t index = 0;
    std::uint64_t id = 0;  // this merge's count of messages seen (batches are reused: their slots are not ids)
    std::uint64_t high = 0;
    std::uint64_t low = 0;
  };
  // A thread seen in a call while message `id` was the next one: its call count then.
  struct Watch {
    std::uint64_t calls = 0;
    std::uint64_t id = 0;
  };
  enum class Attempt { found, empty, held };

  // Takes reader j's next batch when it has none; whether it has a head now.
  bool fill(std::size_t j) noexcept;
  void key(Head& head) noexcept;
  // One look at every ring: the reader whose head goes next, when nothing can come before it.
  Attempt attempt(std::size_t& chosen) noexcept;
  // Whether reader j, with its ring empty, can hand on nothing that goes before `best`.
  bool cannot_precede(std::size_t j, const Head& best) noexcept;

  std::vector<ReceiveThread*> readers_;
  KeyOf key_of_;
  std::vector<Head> heads_;
  std::vector<Watch> watches_;
  std::uint64_t holds_ = 0;
  std::uint64_t seen_ = 0;  // messages that became a head, for Head::id
};

}  // namespace sluice
