// Byte-order conversion of sample payloads. Loops over 64-bit words with memcpy loads and
// a shift/mask or __builtin_bswap, which GCC vectorises with the dynamic cost model that
// wire/CMakeLists.txt turns on for this file (plain -O2 in GCC 12 leaves them scalar).
#include "wire/samples.hpp"

#include <cstdint>
#include <cstring>

namespace sluice::wire {
namespace {

// Swaps bytes inside each 16-bit lane of a 64-bit word (ci16: four int16 components).
inline std::uint64_t swap16_lanes(std::uint64_t word) {
  return ((word & 0x00FF00FF00FF00FFULL) << 8) | ((word >> 8) & 0x00FF00FF00FF00FFULL);
}
// Swaps bytes inside each 32-bit lane (cf32/rf32: float components).
inline std::uint64_t swap32_lanes(std::uint64_t word) {
  return __builtin_bswap64((word << 32) | (word >> 32));
}

template <typename Swap>
void copy_words(const std::byte* in, std::byte* out, std::size_t bytes, Swap swap) noexcept {
  const std::size_t words = bytes / 8;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t word = 0;
    std::memcpy(&word, in + i * 8, 8);
    word = swap(word);
    std::memcpy(out + i * 8, &word, 8);
  }
  // A tail of one 4-byte sample (ci16) or 4-byte float: swap it as half a word.
  if (bytes % 8 != 0) {
    std::uint64_t word = 0;
    std::memcpy(&word, in + words * 8, bytes % 8);
    word = swap(word);
    std::memcpy(out + words * 8, &word, bytes % 8);
  }
}

}  // namespace

void copy_swapped(SampleFormat format, const std::byte* in, std::byte* out, std::size_t bytes) noexcept {
  switch (format) {
    case SampleFormat::ci8: std::memcpy(out, in, bytes); return;  // single bytes: no order
    case SampleFormat::ci16: copy_words(in, out, bytes, swap16_lanes); return;
    case SampleFormat::cf32:
    case SampleFormat::rf32: copy_words(in, out, bytes, swap32_lanes); return;
  }
}

}  // namespace sluice::wire
