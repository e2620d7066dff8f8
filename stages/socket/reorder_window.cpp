// The udp source's reorder window.
#include "stages/socket/reorder_window.hpp"

#include <cstring>

namespace sluice {

void ReorderWindow::start(std::size_t slots, std::size_t max_bytes) {
  max_bytes_ = max_bytes;
  slots_.assign(slots, Slot{});
  storage_.assign(slots * max_bytes, std::byte{0});
  count_ = 0;
}

bool ReorderWindow::holds(std::uint64_t index) const noexcept {
  if (count_ == 0) return false;
  for (const Slot& slot : slots_) {
    if (slot.used && slot.index == index) return true;
  }
  return false;
}

bool ReorderWindow::hold(std::uint64_t index, std::span<const std::byte> payload, std::size_t samples) noexcept {
  if (payload.size() > max_bytes_) return false;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].used) continue;
    slots_[i] = Slot{index, samples, payload.size(), true};
    if (!payload.empty()) std::memcpy(storage_.data() + i * max_bytes_, payload.data(), payload.size());
    ++count_;
    return true;
  }
  return false;
}

std::optional<ReorderWindow::Packet> ReorderWindow::take(std::uint64_t index) noexcept {
  if (count_ == 0) return std::nullopt;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].used && slots_[i].index == index) return release(i);
  }
  return std::nullopt;
}

std::optional<ReorderWindow::Packet> ReorderWindow::take_oldest() noexcept {
  if (count_ == 0) return std::nullopt;
  std::size_t oldest = slots_.size();
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].used && (oldest == slots_.size() || slots_[i].index < slots_[oldest].index)) oldest = i;
  }
  return release(oldest);
}

ReorderWindow::Packet ReorderWindow::release(std::size_t slot) noexcept {
  Slot& held = slots_[slot];
  held.used = false;
  --count_;
  return Packet{held.index, held.samples, std::span<const std::byte>(storage_.data() + slot * max_bytes_, held.bytes)};
}

}  // namespace sluice
