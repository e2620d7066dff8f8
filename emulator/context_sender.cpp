// IF Context packets from the emulated digitizer (wire/vita49_context.hpp lays them out).
#include "emulator/context_sender.hpp"

#include <sys/socket.h>

#include <cmath>
#include <stdexcept>

#include "wire/socket.hpp"

namespace sluice::emulator {

ContextSettings read_context_settings(const YAML::Node& section, const ConfigSource& source, ConfigErrors& errors) {
  ContextSettings settings;
  if (!section) return settings;
  settings.enabled = true;
  YAML::Node own(YAML::NodeType::Map);  // without `retune`, which has its own reader
  if (section.IsMap()) {
    for (const auto& entry : section) {
      if (entry.first.Scalar() != "retune") own[entry.first] = entry.second;
    }
  }
  SettingsReader reader({SettingsLayer{section.IsMap() ? own : section, "emulator.context"}}, source, errors);
  settings.rf_frequency =
      reader.frequency("rf_frequency", 0, "RF reference frequency sent in IF Context packets", 0, 1e12);
  settings.bandwidth =
      reader.frequency("bandwidth", 0, "bandwidth sent in IF Context packets (0: 80 % of the sample rate)", 0, 1e12);
  settings.reference_level = reader.number("reference_level", 0, "reference level in dBm", -256, 255);
  settings.gain = reader.number("gain", 0, "gain in dB", -256, 255);
  settings.every = static_cast<std::uint64_t>(
      reader.integer("every", 0, "data packets between repeated context packets (0: only at start)", 0));
  reader.finish();
  if (const YAML::Node retune = section["retune"]) {
    SettingsReader step({SettingsLayer{retune, "emulator.context.retune"}}, source, errors);
    settings.retune = true;
    settings.retune_at = step.duration("at", std::chrono::nanoseconds(0), "signal time of the retune (from sample 0)");
    settings.retune_rf_frequency = step.frequency("rf_frequency", 0, "RF reference frequency from then on", 0, 1e12);
    if (!step.has("rf_frequency"))
      step.error("rf_frequency", "a retune needs its new frequency", "retune: {at: 10ms, rf_frequency: 2.5GHz}");
    step.finish();
  }
  return settings;
}

ContextSender::ContextSender(const ContextSettings& settings, std::uint32_t stream_id, double sample_rate,
                             std::size_t samples_per_packet)
    : every_(settings.every), retune_hz_(settings.retune_rf_frequency) {
  if (settings.retune && samples_per_packet > 0) {
    // First packet whose first sample is at or after the retune's sample index.
    const auto sample =
        static_cast<std::uint64_t>(std::ceil(std::chrono::duration<double>(settings.retune_at).count() * sample_rate));
    retune_packet_ = (sample + samples_per_packet - 1) / samples_per_packet;
  }
  packet_.stream_id = stream_id;
  packet_.has_class_id = true;
  packet_.class_id = {0x0012A2, 1, 1};  // same OUI as the data packets' class ID
  packet_.rf_reference_frequency_hz = settings.rf_frequency;
  packet_.sample_rate_hz = sample_rate;
  packet_.bandwidth_hz = settings.bandwidth > 0 ? settings.bandwidth : 0.8 * sample_rate;
  packet_.reference_level_dbm = settings.reference_level;
  packet_.gain_stage1_db = settings.gain;
  packet_.gain_stage2_db = 0.0;
  buffer_.resize(vita49::context_packet_bytes(packet_));
  if (vita49::encode_context(packet_, buffer_) == 0) {
    throw std::runtime_error(
        "emulator context: a value does not fit its VITA-49 field (gain and level within +-256 dB)");
  }
}

void ContextSender::set_rf_frequency(double hz) {
  packet_.rf_reference_frequency_hz = hz;
  packet_.changed = true;
  due_ = true;
}

std::uint64_t ContextSender::maybe_send(int fd, std::uint64_t next_packet) {
  if (retune_before(next_packet)) {
    set_rf_frequency(retune_hz_);
    retuned_ = true;
  }
  if (!due_ && !(every_ != 0 && next_packet >= last_sent_at_ + every_)) return 0;
  packet_.packet_count = count_;
  count_ = static_cast<std::uint8_t>((count_ + 1) & 0xF);
  const std::size_t bytes = vita49::encode_context(packet_, buffer_);
  if (bytes == 0) throw std::runtime_error("emulator context: a value does not fit its VITA-49 field");
  if (::send(fd, buffer_.data(), bytes, 0) < 0) throw std::runtime_error(wire::errno_message("send(context)"));
  packet_.changed = false;
  due_ = false;
  last_sent_at_ = next_packet;
  return 1;
}

}  // namespace sluice::emulator
