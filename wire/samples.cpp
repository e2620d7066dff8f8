// Byte-order conversion of sample payloads, and stream_copy: the one copy of each into a chunk.
#include "wire/samples.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__SSE2__) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SLUICE_STREAM_AVX512 1  // compiled for AVX-512BW beside SSE2, chosen at run time
#endif

// Byte-order conversion of sample payloads. copy_swapped loops over 64-bit words with memcpy
// loads and a shift/mask or __builtin_bswap, which GCC vectorises with the dynamic cost model
// that wire/CMakeLists.txt turns on for this file (plain -O2 in GCC 12 leaves them scalar).
// stream_copy, for chunks, is written with SSE2 intrinsics, its stores non-temporal; where the
// CPU has AVX-512BW, whole 64-byte lines go out in one streamed store each.

namespace sluice::wire {
namespace {

// Swaps bytes inside each 16-bit lane of a 64-bit word (ci16: four int16 components).
inline std::uint64_t swap16_lanes(std::uint64_t word) {
  return ((word & 0x00FF00FF00FF00FFULL) << 8) | ((word >> 8) & 0x00FF00FF00FF00FFULL);
}
// Swaps bytes inside each 32-bit lane (cf32/rf32: float components).
inline std::uint64_t swap32_lanes(std::uint64_t word) { return __builtin_bswap64((word << 32) | (word >> 32)); }
struct Swap16 {
  std::uint64_t operator()(std::uint64_t word) const noexcept { return swap16_lanes(word); }
};
struct Swap32 {
  std::uint64_t operator()(std::uint64_t word) const noexcept { return swap32_lanes(word); }
};

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

#if defined(__SSE2__)
enum class Lanes { none, bits16, bits32 };

template <Lanes L>
inline __m128i swap_vector(__m128i v) noexcept {
  if constexpr (L == Lanes::none) return v;
  // Bytes within each 16-bit lane: [a b] -> [b a].
  v = _mm_or_si128(_mm_slli_epi16(v, 8), _mm_srli_epi16(v, 8));
  if constexpr (L == Lanes::bits32) {
    // Then the two 16-bit halves of each 32-bit lane: [b a d c] -> [d c b a].
    v = _mm_shufflehi_epi16(_mm_shufflelo_epi16(v, 0xB1), 0xB1);
  }
  return v;
}

template <Lanes L>
inline __m128i swapped_at(const std::byte* in) noexcept {
  return swap_vector<L>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
}

// One 4-byte lane (or two 16-bit ones), swapped like swap_vector and streamed (movnti).
template <Lanes L>
inline void stream_word(const std::byte* in, std::byte* out) noexcept {
  std::uint32_t word = 0;
  std::memcpy(&word, in, 4);
  if constexpr (L == Lanes::bits16) word = ((word & 0x00FF00FFU) << 8) | ((word >> 8) & 0x00FF00FFU);
  if constexpr (L == Lanes::bits32) word = __builtin_bswap32(word);
  _mm_stream_si32(reinterpret_cast<int*>(out), static_cast<int>(word));
}

#if defined(SLUICE_STREAM_AVX512)
// Whole 64-byte lines, `out` 64-byte aligned: one unaligned load, one in-lane byte shuffle and
// one streamed store (vmovntdq zmm) per line. Returns the bytes done.
template <Lanes L>
__attribute__((target("avx512f,avx512bw"))) std::size_t stream_lines_avx512(const std::byte* in, std::byte* out,
                                                                            std::size_t bytes) noexcept {
  // Byte order within each 16-byte lane, as 32-bit words from the lowest: [1 0 3 2 ...] swaps
  // 16-bit components, [3 2 1 0 ...] 32-bit ones.
  const __m512i order = L == Lanes::bits16 ? _mm512_set4_epi32(0x0E0F0C0D, 0x0A0B0809, 0x06070405, 0x02030001)
                                           : _mm512_set4_epi32(0x0C0D0E0F, 0x08090A0B, 0x04050607, 0x00010203);
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __m512i v = _mm512_loadu_si512(in + i);
    if constexpr (L != Lanes::none) v = _mm512_shuffle_epi8(v, order);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), v);
  }
  return i;
}

bool cpu_has_avx512bw() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
#endif

template <Lanes L>
void stream_lanes(const std::byte* in, std::byte* out, std::size_t bytes, [[maybe_unused]] StreamWidth width) noexcept {
  // Every store is non-temporal: 4-byte ones up to the first 16-byte boundary of `out` and after
  // the last, 16-byte ones between (64-byte ones from the first 64-byte boundary on, with
  // AVX-512). (Ordinary stores into the same lines as streamed ones made the copy slower: a cached
  // line must be evicted before a streamed store to it.) `out` and `bytes` are whole numbers of
  // samples into a chunk, so 4-byte aligned; only ci8 (2-byte samples) can leave a 2-byte rest,
  // copied plainly.
  const auto aligned = [out](std::size_t at, std::uintptr_t mask) {
    return (reinterpret_cast<std::uintptr_t>(out + at) & mask) == 0;
  };
  std::size_t i = 0;
  if (aligned(0, 3)) {
    for (; i + 4 <= bytes && !aligned(i, 15); i += 4) stream_word<L>(in + i, out + i);
#if defined(SLUICE_STREAM_AVX512)
    if (width == StreamWidth::avx512) {
      for (; i + 16 <= bytes && !aligned(i, 63); i += 16)
        _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), swapped_at<L>(in + i));
      if (aligned(i, 63)) i += stream_lines_avx512<L>(in + i, out + i, bytes - i);
    }
#endif
    for (; i + 64 <= bytes; i += 64) {  // aligned to 16 here, or too short to enter
      const __m128i a = swapped_at<L>(in + i);
      const __m128i b = swapped_at<L>(in + i + 16);
      const __m128i c = swapped_at<L>(in + i + 32);
      const __m128i d = swapped_at<L>(in + i + 48);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 48), d);
    }
    for (; i + 16 <= bytes; i += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), swapped_at<L>(in + i));
    for (; i + 4 <= bytes; i += 4) stream_word<L>(in + i, out + i);
  }
  if (i == bytes) return;
  if constexpr (L == Lanes::none) {
    std::memcpy(out + i, in + i, bytes - i);
  } else {
    copy_words(in + i, out + i, bytes - i, std::conditional_t<L == Lanes::bits16, Swap16, Swap32>{});
  }
}

// In place, ordinary stores: the bytes were just written by the kernel and are still in cache,
// so each line is read and written back there once.
#if defined(SLUICE_STREAM_AVX512)
// 32 bytes a step: one load, one in-lane byte shuffle, one store. Returns the bytes done.
template <Lanes L>
__attribute__((target("avx2"))) std::size_t swap_in_place_avx2(std::byte* data, std::size_t bytes) noexcept {
  const __m256i order = L == Lanes::bits16 ? _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14, 1,
                                                              0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)
                                           : _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3,
                                                              2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m256i a = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i)), order);
    const __m256i b = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 32)), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(data + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(data + i + 32), b);
  }
  return i;
}

bool cpu_has_avx2() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#endif

template <Lanes L>
void swap_lanes_in_place(std::byte* data, std::size_t bytes) noexcept {
  std::size_t i = 0;
#if defined(SLUICE_STREAM_AVX512)
  static const bool avx2 = cpu_has_avx2();
  if (avx2) i = swap_in_place_avx2<L>(data, bytes);
#endif
  for (; i + 16 <= bytes; i += 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(data + i), swapped_at<L>(data + i));
  if (i != bytes) copy_words(data + i, data + i, bytes - i, std::conditional_t<L == Lanes::bits16, Swap16, Swap32>{});
}
#endif

}  // namespace

StreamWidth stream_width() noexcept {
#if defined(SLUICE_STREAM_AVX512)
  static const StreamWidth widest = cpu_has_avx512bw() ? StreamWidth::avx512 : StreamWidth::sse2;
  return widest;
#else
  return StreamWidth::sse2;
#endif
}

void stream_copy(SampleFormat format, bool swap, const std::byte* in, std::byte* out, std::size_t bytes) noexcept {
  stream_copy(format, swap, in, out, bytes, stream_width());
}

void stream_copy(SampleFormat format, bool swap, const std::byte* in, std::byte* out, std::size_t bytes,
                 [[maybe_unused]] StreamWidth width) noexcept {
  if (!swap || format == SampleFormat::ci8) {
#if defined(__SSE2__)
    stream_lanes<Lanes::none>(in, out, bytes, width);
#else
    std::memcpy(out, in, bytes);
#endif
    return;
  }
#if defined(__SSE2__)
  switch (format) {
    case SampleFormat::ci8:
      return;  // handled above
    case SampleFormat::ci16:
      stream_lanes<Lanes::bits16>(in, out, bytes, width);
      return;
    case SampleFormat::cf32:
    case SampleFormat::rf32:
      stream_lanes<Lanes::bits32>(in, out, bytes, width);
      return;
  }
#else
  copy_swapped(format, in, out, bytes);
#endif
}

void swap_in_place(SampleFormat format, std::byte* data, std::size_t bytes) noexcept {
#if defined(__SSE2__)
  switch (format) {
    case SampleFormat::ci8:
      return;
    case SampleFormat::ci16:
      swap_lanes_in_place<Lanes::bits16>(data, bytes);
      return;
    case SampleFormat::cf32:
    case SampleFormat::rf32:
      swap_lanes_in_place<Lanes::bits32>(data, bytes);
      return;
  }
#else
  copy_swapped(format, data, data, bytes);
#endif
}

void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

void copy_swapped(SampleFormat format, const std::byte* in, std::byte* out, std::size_t bytes) noexcept {
  switch (format) {
    case SampleFormat::ci8:
      std::memcpy(out, in, bytes);
      return;  // single bytes: no order
    case SampleFormat::ci16:
      copy_words(in, out, bytes, Swap16{});
      return;
    case SampleFormat::cf32:
    case SampleFormat::rf32:
      copy_words(in, out, bytes, Swap32{});
      return;
  }
}

}  // namespace sluice::wire
