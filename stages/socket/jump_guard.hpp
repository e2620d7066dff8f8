// JumpGuard: the outlier and resynchronisation rule of the socket sources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pipeline/stage.hpp"

namespace sluice {

// Keeps one stray packet from moving a socket source's stream. A packet whose position (in
// the sender's sample index space: timestamp or first_sample) is further than `bound`
// samples from where the stream continues is held aside, not used. When `confirm` held
// packets in a row agree with each other, the sender really jumped and the source
// resynchronises onto them; a plausible packet in between discards them as outliers.
class JumpGuard {
 public:
  enum class Verdict : std::uint8_t {
    plausible,  // within the bound: use the packet
    held,       // implausible: kept aside until more packets agree or one contradicts it
    confirmed,  // the held packets (this one the last) agree: resynchronise onto them
  };
  struct Packet {
    std::uint64_t position = 0;
    std::size_t samples = 0;
    std::uint64_t tag = 0;  // the caller's (e.g. the frame's time as an epoch sample index)
    std::span<const std::byte> payload;
  };

  // `bound` samples; `confirm` packets (>= 1) agreeing make a jump; payloads up to `max_bytes`.
  // Counters: drop reason "outlier" (held packets discarded), "resyncs".
  void start(StageMetrics& metrics, std::uint64_t bound, std::size_t confirm, std::size_t max_bytes);
  // `expected`: the position where the stream continues. Never allocates.
  Verdict check(std::uint64_t position, std::size_t samples, std::uint64_t expected, std::span<const std::byte> payload,
                std::uint64_t tag = 0) noexcept;
  [[nodiscard]] std::size_t held_count() const noexcept { return count_; }
  // Nothing held: a plausible packet passes check() with no other effect.
  [[nodiscard]] bool idle() const noexcept { return count_ == 0; }
  [[nodiscard]] Packet held(std::size_t index) const noexcept;
  // The held packet with the lowest position (where the new segment starts).
  [[nodiscard]] std::size_t lowest() const noexcept;
  // After a resynchronisation: the held packets were used; counts one resync.
  void resynchronised() noexcept;
  // Drops the held packets as outliers (also at the end of the stream: unconfirmed).
  void discard() noexcept;
  [[nodiscard]] std::uint64_t bound() const noexcept { return bound_; }

  // check() and what the sources do with its verdict: a plausible packet goes to
  // `place(packet)`; the one that confirms a jump has `move(first)` move the stream onto the
  // held packets (`first` the lowest) and each of them then goes to `place`. When `move` cannot
  // (false: no chunk to be had), the held packets are discarded as outliers, so that the next
  // ones start over. True when `packet` itself went to `place`. Never allocates.
  template <class Place, class Move>
  bool admit(const Packet& packet, std::uint64_t expected, Place&& place, Move&& move) noexcept {
    switch (check(packet.position, packet.samples, expected, packet.payload, packet.tag)) {
      case Verdict::plausible:
        place(packet);
        return true;
      case Verdict::held:
        return false;
      case Verdict::confirmed:
        break;
    }
    if (!move(held(lowest()))) {
      discard();
      return false;
    }
    for (std::size_t i = 0; i < count_; ++i) place(held(i));
    resynchronised();
    return false;
  }

 private:
  struct Slot {
    std::uint64_t position = 0;
    std::size_t samples = 0;
    std::uint64_t tag = 0;
    std::size_t bytes = 0;
  };
  void hold(std::uint64_t position, std::size_t samples, std::span<const std::byte> payload,
            std::uint64_t tag) noexcept;

  std::uint64_t bound_ = 0;
  std::size_t max_bytes_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::byte> storage_;
  std::size_t count_ = 0;
  NamedCounter* outliers_ = nullptr;
  NamedCounter* resyncs_ = nullptr;
};

}  // namespace sluice
