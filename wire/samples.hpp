// Sample byte order between the wire (VITA-49 payloads are big-endian) and chunks
// (little-endian): a fused copy-and-swap, and a swap in place for payloads received straight
// into a chunk.
#pragma once

#include <cstddef>

#include "pipeline/chunk.hpp"

namespace sluice::wire {

// Copies `bytes` (a whole number of samples) from `in` to `out` swapping each component's
// byte order; the same function converts either way. `in` and `out` must not overlap.
void copy_swapped(SampleFormat format, const std::byte* in, std::byte* out, std::size_t bytes) noexcept;

// The same copy (swapping when `swap`, a plain copy otherwise) for a destination that is
// written once here and read later by another thread or a DMA engine, such as a chunk: on x86
// every store is non-temporal, so the copy neither reads each destination line in first
// (write-allocate) nor evicts the receive buffers it reads from, which spares the udp stage's
// core (docs/PERFORMANCE.md). Non-temporal stores are weakly ordered: call stream_fence() before
// another thread may read `out` (before the chunk is emitted).
void stream_copy(SampleFormat format, bool swap, const std::byte* in, std::byte* out, std::size_t bytes) noexcept;

// The widest streamed store stream_copy uses: 16 bytes (SSE2), or a whole 64-byte line where the
// CPU has AVX-512BW (checked once at run time).
enum class StreamWidth { sse2, avx512 };
[[nodiscard]] StreamWidth stream_width() noexcept;
// stream_copy with a given width, for its test and benchmark: `width` must not exceed stream_width().
void stream_copy(SampleFormat format, bool swap, const std::byte* in, std::byte* out, std::size_t bytes,
                 StreamWidth width) noexcept;

// Swaps each component's byte order of `bytes` (a whole number of samples) where they lie, with
// ordinary stores: for payloads the kernel has just written into a chunk (still in cache).
void swap_in_place(SampleFormat format, std::byte* data, std::size_t bytes) noexcept;

// Orders every stream_copy store before the stores that follow (publishing the chunk).
void stream_fence() noexcept;

}  // namespace sluice::wire
