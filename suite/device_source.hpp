// A benchmark-only source for measuring GPU stages at their own speed: device chunks filled
// once with random samples at start, then only re-stamped and emitted (no copy per chunk, so
// the stage downstream, not the source, sets the rate). Registered as `device_source` in
// bench_registry(), never in the pipeline's own registry: a real lane's samples come from
// somewhere.
//
//   {type: device_source, format: ci16, chunks_to_send: 1024, memory: device, chunk: 64MiB, chunks: 16}
#pragma once

#include <cstddef>
#include <vector>

#include "pipeline/config.hpp"

namespace sluice::bench {

// Random samples, not zeros (zeros can run faster than real data): cf32 in [-1, 1], any ci8/ci16 bytes.
std::vector<std::byte> random_samples(std::size_t bytes, SampleFormat format);

// The built-in stages plus `device_source`.
const StageRegistry& bench_registry();

}  // namespace sluice::bench
