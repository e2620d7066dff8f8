// A benchmark-only source for GPU stages: device chunks filled once with random samples, then
// only re-stamped and emitted, so the stage downstream sets the rate. Registered as
// `device_source` in bench_registry() only: a real lane's samples come from somewhere.
#pragma once

#include <cstddef>
#include <vector>

#include "pipeline/config.hpp"

namespace sluice::bench {

// Random samples, not zeros (zeros can run faster than real data): cf32 in [-1, 1], any ci8/ci16 bytes.
std::vector<std::byte> random_samples(std::size_t bytes, SampleFormat format);

// The built-in stages plus `device_source`, e.g.
//   {type: device_source, format: ci16, chunks_to_send: 1024, memory: device, chunk: 64MiB, chunks: 16}
const StageRegistry& bench_registry();

}  // namespace sluice::bench
