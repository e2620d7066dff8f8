// Late and duplicate packets of the socket sources.
#include "stages/socket/packet_history.hpp"

#include <algorithm>

namespace sluice {

void PacketHistory::start(StageMetrics& metrics) {
  duplicates_ = &metrics.counter("duplicates");
  reordered_ = &metrics.counter("reordered");
  drop_late_ = &metrics.drop_counter("late");
  drop_duplicate_ = &metrics.drop_counter("duplicate");
}

PacketHistory::Verdict PacketHistory::sort(std::uint64_t index, std::uint64_t expected) noexcept {
  if (index >= expected) return Verdict::fresh;
  if (remembered(index)) {
    count_duplicate();
    return Verdict::duplicate;
  }
  reordered_->add();
  drop_late_->add();
  return Verdict::late;
}

std::optional<std::uint64_t> PacketHistory::fresh_index(std::uint64_t position, std::uint64_t origin,
                                                        std::uint64_t expected) noexcept {
  const auto offset = static_cast<std::int64_t>(position - (origin + expected));
  if (offset < 0 && static_cast<std::uint64_t>(-offset) > expected) {
    count_late();
    return std::nullopt;
  }
  const std::uint64_t index = expected + static_cast<std::uint64_t>(offset);
  if (sort(index, expected) != Verdict::fresh) return std::nullopt;
  return index;
}

void PacketHistory::count_duplicate() noexcept {
  duplicates_->add();
  drop_duplicate_->add();
}

void PacketHistory::count_late() noexcept { drop_late_->add(); }

void PacketHistory::restart(std::uint64_t expected) noexcept {
  highest_ = expected;
  placed_count_ = 0;
}

bool PacketHistory::remembered(std::uint64_t index) const noexcept {
  const auto end = placed_.begin() + static_cast<std::ptrdiff_t>(std::min(placed_count_, placed_.size()));
  return std::find(placed_.begin(), end, index) != end;
}

}  // namespace sluice
