// Raw TCP frame header encode/decode (little-endian fields, read through memcpy).
#include "wire/raw_tcp.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

namespace sluice::raw_tcp {
namespace {

static_assert(std::endian::native == std::endian::little, "the raw TCP header is little-endian, as is this host");

template <typename T>
void put(std::byte* out, std::size_t offset, T value) {
  std::memcpy(out + offset, &value, sizeof(T));
}
template <typename T>
T get(const std::byte* in, std::size_t offset) {
  T value{};
  std::memcpy(&value, in + offset, sizeof(T));
  return value;
}

}  // namespace

std::string_view to_string(DecodeStatus status) {
  switch (status) {
    case DecodeStatus::ok:
      return "ok";
    case DecodeStatus::truncated:
      return "truncated";
    case DecodeStatus::bad_magic:
      return "bad_magic";
    case DecodeStatus::bad_version:
      return "bad_version";
    case DecodeStatus::unknown_format:
      return "unknown_format";
    case DecodeStatus::bad_size_field:
      return "bad_size_field";
  }
  return "?";
}

void encode_header(const FrameHeader& header, std::span<std::byte, kHeaderBytes> out) {
  std::byte* bytes = out.data();
  put<std::uint32_t>(bytes, 0, kMagic);
  put<std::uint16_t>(bytes, 4, kVersion);
  put<std::uint16_t>(bytes, 6, static_cast<std::uint16_t>(header.format));
  put<std::uint64_t>(bytes, 8, header.sequence);
  put<std::uint64_t>(bytes, 16, header.first_sample);
  put<std::uint32_t>(bytes, 24, header.sample_count);
  put<std::uint32_t>(bytes, 28, header.payload_bytes);
  put<std::uint64_t>(bytes, 32, header.seconds);
  put<std::uint64_t>(bytes, 40, header.picoseconds);
}

DecodeStatus decode_header(std::span<const std::byte> in, FrameHeader& out) {
  if (in.size() < kHeaderBytes) return DecodeStatus::truncated;
  const std::byte* bytes = in.data();
  if (get<std::uint32_t>(bytes, 0) != kMagic) return DecodeStatus::bad_magic;
  if (get<std::uint16_t>(bytes, 4) != kVersion) return DecodeStatus::bad_version;
  const auto format = get<std::uint16_t>(bytes, 6);
  if (format > static_cast<std::uint16_t>(SampleFormat::rf32)) return DecodeStatus::unknown_format;
  out.format = static_cast<SampleFormat>(format);
  out.sequence = get<std::uint64_t>(bytes, 8);
  out.first_sample = get<std::uint64_t>(bytes, 16);
  out.sample_count = get<std::uint32_t>(bytes, 24);
  out.payload_bytes = get<std::uint32_t>(bytes, 28);
  out.seconds = get<std::uint64_t>(bytes, 32);
  out.picoseconds = get<std::uint64_t>(bytes, 40);
  if (out.payload_bytes > kMaxPayloadBytes ||
      static_cast<std::uint64_t>(out.sample_count) * bytes_per_sample(out.format) != out.payload_bytes) {
    return DecodeStatus::bad_size_field;
  }
  return DecodeStatus::ok;
}

DecodeStatus decode_header_past_magic(std::span<const std::byte> in, FrameHeader& out) {
  if (in.size() < kHeaderBytes) return DecodeStatus::truncated;
  std::array<std::byte, kHeaderBytes> repaired{};
  std::copy_n(in.begin(), kHeaderBytes, repaired.begin());
  put<std::uint32_t>(repaired.data(), 0, kMagic);
  return decode_header(repaired, out);
}

}  // namespace sluice::raw_tcp
