// Sample byte order between the wire (VITA-49 payloads are big-endian) and chunks
// (little-endian): one fused copy-and-swap, so the socket stage's single copy also converts.
#pragma once

#include <cstddef>

#include "pipeline/chunk.hpp"

namespace sluice::wire {

// Copies `bytes` (a whole number of samples) from `in` to `out` swapping each component's
// byte order; the same function converts either way. `in` and `out` must not overlap.
void copy_swapped(SampleFormat format, const std::byte* in, std::byte* out, std::size_t bytes) noexcept;

}  // namespace sluice::wire
