// The emulated digitizer's VITA-49 IF Context packets: one per stream at start, again every
// `every` data packets, and at once when a value changes (with the change indicator set),
// as a digitizer announces a retune.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline/settings.hpp"
#include "wire/vita49_context.hpp"

namespace sluice::emulator {

struct ContextSettings {
  bool enabled = false;
  double rf_frequency = 0;     // Hz (RF reference frequency)
  double bandwidth = 0;        // Hz; 0: 80 % of the sample rate
  double reference_level = 0;  // dBm
  double gain = 0;             // dB (stage 1)
  // Data packets between repeats, checked at each send batch (so a repeat may come up to one
  // batch later); 0: only at start and on change.
  std::uint64_t every = 0;
  // A retune at a time: from the first data packet whose first sample is at or after
  // `retune_at` of signal time, the RF reference frequency is `retune_rf_frequency`.
  bool retune = false;
  std::chrono::nanoseconds retune_at{0};
  double retune_rf_frequency = 0;
};

// The emulator's `context:` section, e.g. {rf_frequency: 2.4GHz, gain: 20, every: 1000,
// retune: {at: 10ms, rf_frequency: 2.5GHz}}.
// Present: context packets are sent (UDP only).
ContextSettings read_context_settings(const YAML::Node& section, const ConfigSource& source, ConfigErrors& errors);

class ContextSender {
 public:
  // `samples_per_packet`: places a configured retune on the first packet at or after its time.
  ContextSender(const ContextSettings& settings, std::uint32_t stream_id, double sample_rate,
                std::size_t samples_per_packet);
  // Sends a context packet on the connected UDP socket `fd` when one is due before data
  // packet `next_packet`; returns the packets sent (0 or 1). Throws naming send() and errno.
  std::uint64_t maybe_send(int fd, std::uint64_t next_packet);
  // True when data packet `packet` must wait for a configured retune's context packet, so a
  // send batch ends before it and the retune goes out right ahead of the first packet it applies to.
  [[nodiscard]] bool retune_before(std::uint64_t packet) const {
    return retune_packet_ && !retuned_ && packet >= *retune_packet_;
  }
  // A retune: the next maybe_send() sends the new values with the change indicator set.
  void set_rf_frequency(double hz);
  [[nodiscard]] const vita49::ContextPacket& packet() const { return packet_; }

 private:
  vita49::ContextPacket packet_;
  std::uint64_t every_ = 0;
  std::uint64_t last_sent_at_ = 0;
  bool due_ = true;                             // at start
  std::optional<std::uint64_t> retune_packet_;  // first data packet of a configured retune
  double retune_hz_ = 0;
  bool retuned_ = false;
  std::uint8_t count_ = 0;
  std::vector<std::byte> buffer_;
};

}  // namespace sluice::emulator
