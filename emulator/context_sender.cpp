// IF Context packets from the emulated digitizer (wire/vita49_context.hpp lays them out).
#include "emulator/context_sender.hpp"

#include <sys/socket.h>

#include <stdexcept>

#include "wire/socket.hpp"

namespace sluice::emulator {

ContextSettings read_context_settings(const YAML::Node& section, const ConfigSource& source, ConfigErrors& errors) {
  ContextSettings settings;
  if (!section) return settings;
  settings.enabled = true;
  SettingsReader reader({SettingsLayer{section, "emulator.context"}}, source, errors);
  settings.rf_frequency = reader.frequency("rf_frequency", 0, "RF reference frequency sent in IF Context packets", 0, 1e12);
  settings.bandwidth = reader.frequency("bandwidth", 0, "bandwidth sent in IF Context packets (0: 80 % of the sample rate)", 0, 1e12);
  settings.reference_level = reader.number("reference_level", 0, "reference level in dBm", -256, 255);
  settings.gain = reader.number("gain", 0, "gain in dB", -256, 255);
  settings.every = static_cast<std::uint64_t>(
      reader.integer("every", 0, "data packets between repeated context packets (0: only at start)", 0));
  reader.finish();
  return settings;
}

ContextSender::ContextSender(const ContextSettings& settings, std::uint32_t stream_id, double sample_rate)
    : every_(settings.every) {
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
    throw std::runtime_error("emulator context: a value does not fit its VITA-49 field (gain and level within +-256 dB)");
  }
}

void ContextSender::set_rf_frequency(double hz) {
  packet_.rf_reference_frequency_hz = hz;
  packet_.changed = true;
  due_ = true;
}

std::uint64_t ContextSender::maybe_send(int fd, std::uint64_t next_packet) {
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
