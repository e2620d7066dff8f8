// The outlier/resynchronisation rule shared by the udp and tcp sources.
#include "stages/socket/jump_guard.hpp"

#include <algorithm>
#include <cstring>

namespace sluice {
namespace {

std::uint64_t distance(std::uint64_t a, std::uint64_t b) noexcept { return a > b ? a - b : b - a; }

}  // namespace

void JumpGuard::start(StageMetrics& metrics, std::uint64_t bound, std::size_t confirm, std::size_t max_bytes) {
  bound_ = bound;
  max_bytes_ = max_bytes;
  slots_.assign(std::max<std::size_t>(confirm, 1), Slot{});
  storage_.assign(slots_.size() * max_bytes, std::byte{0});
  count_ = 0;
  outliers_ = &metrics.drop_counter("outlier");
  resyncs_ = &metrics.counter("resyncs");
}

JumpGuard::Verdict JumpGuard::check(std::uint64_t position, std::size_t samples, std::uint64_t expected,
                                    std::span<const std::byte> payload, std::uint64_t tag) noexcept {
  if (distance(position, expected) <= bound_) {
    discard();
    return Verdict::plausible;
  }
  // Agrees with the held ones when it is as close to the last of them as a plausible packet
  // would be to the stream (reordering and loss in the new segment are normal).
  if (count_ > 0) {
    const Slot& last = slots_[count_ - 1];
    if (distance(position, last.position + last.samples) > bound_) discard();
  }
  if (payload.size() > max_bytes_) {
    outliers_->add();
    return Verdict::held;
  }
  hold(position, samples, payload, tag);
  return count_ == slots_.size() ? Verdict::confirmed : Verdict::held;
}

void JumpGuard::hold(std::uint64_t position, std::size_t samples, std::span<const std::byte> payload,
                     std::uint64_t tag) noexcept {
  Slot& slot = slots_[count_];
  slot = Slot{position, samples, tag, payload.size()};
  if (!payload.empty()) std::memcpy(storage_.data() + count_ * max_bytes_, payload.data(), payload.size());
  ++count_;
}

JumpGuard::Packet JumpGuard::held(std::size_t index) const noexcept {
  const Slot& slot = slots_[index];
  return Packet{slot.position, slot.samples, slot.tag,
                std::span<const std::byte>(storage_.data() + index * max_bytes_, slot.bytes)};
}

std::size_t JumpGuard::lowest() const noexcept {
  std::size_t lowest = 0;
  for (std::size_t i = 1; i < count_; ++i) {
    if (slots_[i].position < slots_[lowest].position) lowest = i;
  }
  return lowest;
}

void JumpGuard::resynchronised() noexcept {
  count_ = 0;
  resyncs_->add();
}

void JumpGuard::discard() noexcept {
  if (count_ == 0) return;
  outliers_->add(count_);
  count_ = 0;
}

}  // namespace sluice
