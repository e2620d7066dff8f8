// Chunk metadata helpers.
#include "pipeline/chunk.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace sluice {

__extension__ using Wide128 = unsigned __int128;  // exact sample-to-picosecond products

std::string_view to_string(SampleFormat format) {
  switch (format) {
    case SampleFormat::ci8:
      return "ci8";
    case SampleFormat::ci16:
      return "ci16";
    case SampleFormat::cf32:
      return "cf32";
    case SampleFormat::rf32:
      return "rf32";
  }
  return "?";
}

std::optional<SampleFormat> sample_format_from_string(std::string_view text) {
  if (text == "ci8") return SampleFormat::ci8;
  if (text == "ci16") return SampleFormat::ci16;
  if (text == "cf32") return SampleFormat::cf32;
  if (text == "rf32") return SampleFormat::rf32;
  return std::nullopt;
}

void quantise_sample(SampleFormat format, double in_phase, double quadrature, std::byte* out) noexcept {
  in_phase = std::clamp(in_phase, -1.0, 1.0);
  quadrature = std::clamp(quadrature, -1.0, 1.0);
  switch (format) {
    case SampleFormat::ci8: {
      const std::array<std::int8_t, 2> value{static_cast<std::int8_t>(std::lround(in_phase * 127)),
                                             static_cast<std::int8_t>(std::lround(quadrature * 127))};
      std::memcpy(out, value.data(), sizeof(value));
      break;
    }
    case SampleFormat::ci16: {
      const std::array<std::int16_t, 2> value{static_cast<std::int16_t>(std::lround(in_phase * 32767)),
                                              static_cast<std::int16_t>(std::lround(quadrature * 32767))};
      std::memcpy(out, value.data(), sizeof(value));
      break;
    }
    case SampleFormat::cf32: {
      const std::array<float, 2> value{static_cast<float>(in_phase), static_cast<float>(quadrature)};
      std::memcpy(out, value.data(), sizeof(value));
      break;
    }
    case SampleFormat::rf32: {
      const float value = static_cast<float>(in_phase);
      std::memcpy(out, &value, sizeof(value));
      break;
    }
  }
}

std::uint64_t Chunk::end_sample() const noexcept {
  // Gaps are few and usually in order; a pass per gap keeps this exact for any order.
  std::uint64_t end = first_sample + sample_count;
  for (bool grew = true; grew;) {
    grew = false;
    std::uint64_t skipped = 0;
    for (std::uint32_t i = 0; i < gap_count; ++i) {
      const Gap& gap = gaps[i];
      if (!gap.in_data && gap.first_sample >= first_sample && gap.first_sample < end) skipped += gap.length;
    }
    const std::uint64_t next = first_sample + sample_count + skipped;
    grew = next != end;
    end = next;
  }
  return end;
}

void Chunk::copy_metadata_from(const Chunk& other) noexcept {
  size = other.size;
  lane = other.lane;
  sequence = other.sequence;
  first_sample = other.first_sample;
  sample_count = other.sample_count;
  format = other.format;
  timestamp = other.timestamp;
  packets = other.packets;
  time_jump = other.time_jump;
  context_change = other.context_change;
  context = other.context;
  created_ns = other.created_ns;
  gap_count = other.gap_count;
  gaps = other.gaps;
}

void Chunk::reset_metadata() noexcept {
  size = 0;
  sequence = 0;
  first_sample = 0;
  sample_count = 0;
  timestamp = {};
  packets = 0;
  time_jump = false;
  context_change = false;
  context = {};
  created_ns = 0;
  ready_event = nullptr;
  gap_count = 0;
}

Timestamp time_after(const Timestamp& time, std::uint64_t samples, double sample_rate) {
  if (!time.valid || samples == 0) return time;
  if (sample_rate <= 0) return Timestamp{};
  const auto rate = static_cast<std::uint64_t>(sample_rate);
  std::uint64_t seconds = 0;
  std::uint64_t picoseconds = 0;
  if (static_cast<double>(rate) == sample_rate) {
    // Integer arithmetic where the rate is whole (it nearly always is): exact timestamps.
    seconds = samples / rate;
    picoseconds = static_cast<std::uint64_t>(static_cast<Wide128>(samples % rate) * 1'000'000'000'000ULL / rate);
  } else {
    const long double elapsed = static_cast<long double>(samples) / static_cast<long double>(sample_rate);
    seconds = static_cast<std::uint64_t>(elapsed);
    picoseconds = static_cast<std::uint64_t>((elapsed - static_cast<long double>(seconds)) * 1e12L);
  }
  picoseconds += time.picoseconds;
  return Timestamp{time.seconds + seconds + picoseconds / 1'000'000'000'000ULL, picoseconds % 1'000'000'000'000ULL,
                   true};
}

}  // namespace sluice
