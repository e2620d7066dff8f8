// Packets a udp source holds while it waits for an earlier one: each packet's stream index,
// sample count and payload, copied aside into storage sized at start. Never allocates after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace sluice {

class ReorderWindow {
 public:
  struct Packet {
    std::uint64_t index = 0;
    std::size_t samples = 0;
    std::span<const std::byte> payload;  // valid until the next hold()
  };

  // `slots` packets of at most `max_bytes` each.
  void start(std::size_t slots, std::size_t max_bytes);
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] bool full() const noexcept { return count_ == slots_.size(); }
  // Whether a packet starting at `index` is held.
  [[nodiscard]] bool holds(std::uint64_t index) const noexcept;
  // Copies the packet aside; false (nothing held) when the window is full or the payload too large.
  bool hold(std::uint64_t index, std::span<const std::byte> payload, std::size_t samples) noexcept;
  // Takes out the held packet starting at `index`, if there is one.
  std::optional<Packet> take(std::uint64_t index) noexcept;
  // Takes out the held packet with the lowest index, if there is one.
  std::optional<Packet> take_oldest() noexcept;

 private:
  struct Slot {
    std::uint64_t index = 0;
    std::size_t samples = 0;
    std::size_t bytes = 0;
    bool used = false;
  };
  Packet release(std::size_t slot) noexcept;

  std::size_t max_bytes_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::byte> storage_;
  std::size_t count_ = 0;
};

}  // namespace sluice
