// Chunk metadata helpers and the release path back to the owning pool.
#include "pipeline/chunk.hpp"

#include "pipeline/pool.hpp"

namespace sluice {

std::string_view to_string(SampleFormat format) {
  switch (format) {
    case SampleFormat::ci8: return "ci8";
    case SampleFormat::ci16: return "ci16";
    case SampleFormat::cf32: return "cf32";
    case SampleFormat::rf32: return "rf32";
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

void Chunk::copy_metadata_from(const Chunk& other) noexcept {
  size = other.size;
  lane = other.lane;
  sequence = other.sequence;
  first_sample = other.first_sample;
  sample_count = other.sample_count;
  format = other.format;
  timestamp = other.timestamp;
  packets = other.packets;
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
  created_ns = 0;
  gap_count = 0;
}

void ChunkReleaser::operator()(Chunk* chunk) const noexcept {
  if (chunk != nullptr && chunk->pool != nullptr) chunk->pool->release(chunk);
}

}  // namespace sluice
