// Sorts a socket source's packets by where its stream stands: a packet behind the stream is a
// duplicate of one already placed or a late one whose hole was declared lost; a packet behind
// the furthest one seen is counted reordered. Shared by the udp and tcp sources.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "pipeline/metrics.hpp"

namespace sluice {

class PacketHistory {
 public:
  enum class Verdict : std::uint8_t {
    fresh,      // at or after the stream's next sample: place it
    duplicate,  // starts where a recently placed packet started: dropped ("duplicate")
    late,       // came after its hole was declared lost: dropped ("late"), its samples stay lost
  };
  // Packets remembered for telling duplicates from late ones.
  static constexpr std::size_t kRemembered = 64;

  // Counters: "duplicates", "reordered"; drop reasons "duplicate", "late".
  void start(StageMetrics& metrics);
  // Sorts a packet starting at stream index `index` while the stream's next sample is
  // `expected`; counts what it drops. Never allocates.
  Verdict sort(std::uint64_t index, std::uint64_t expected) noexcept;
  // The stream index of a fresh packet at `position` in the sender's index space (stream index
  // 0 at `origin`, modulo 2^64): nullopt when sort() drops it or it lies before the stream's
  // first sample (late). `position` is within max_jump of the stream, so the signed offset is exact.
  std::optional<std::uint64_t> fresh_index(std::uint64_t position, std::uint64_t origin,
                                           std::uint64_t expected) noexcept;
  // A fresh packet arrived at `index`: counted reordered when a later one came before it.
  void arrived(std::uint64_t index) noexcept {
    if (index < highest_) reordered_->add();
    reach(index);
  }
  // The stream moved on to `index` without this packet being sorted (after a kernel drop).
  void reach(std::uint64_t index) noexcept { highest_ = index > highest_ ? index : highest_; }
  // The packet at `index` is in the stream: a second copy of it is a duplicate.
  void placed(std::uint64_t index) noexcept {
    placed_[placed_count_ % placed_.size()] = index;
    ++placed_count_;
  }
  // Counts a duplicate found elsewhere (a copy of a packet held for reordering).
  void count_duplicate() noexcept;
  // Counts a packet from before the stream's first sample as late.
  void count_late() noexcept;
  // After a resynchronisation: the stream goes on at `expected`; nothing before it is known.
  void restart(std::uint64_t expected) noexcept;

 private:
  [[nodiscard]] bool remembered(std::uint64_t index) const noexcept;

  std::array<std::uint64_t, kRemembered> placed_{};  // start indices of recently placed packets
  std::size_t placed_count_ = 0;
  std::uint64_t highest_ = 0;
  NamedCounter* duplicates_ = nullptr;
  NamedCounter* reordered_ = nullptr;
  NamedCounter* drop_late_ = nullptr;
  NamedCounter* drop_duplicate_ = nullptr;
};

}  // namespace sluice
