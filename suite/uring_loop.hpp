// Raw io_uring reads or writes of one file, the ceiling of the record and replay stages in
// `sluice bench` and bench/recorder/recorder_bench: the same I/O minus everything else they do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sluice::bench {

// The process's CPU time so far (user and system, every thread), in seconds.
double process_cpu_seconds();

struct UringLoopResult {
  double bytes = 0;
  double seconds = 0;      // first submission to last completion
  double cpu_seconds = 0;  // process CPU time (all threads) over that span
};

// `total` bytes in `block`-byte blocks at `depth` in flight, sequential, to or from `path`,
// with O_DIRECT when `direct`, from registered buffers in the stages' allocator (MemoryRegion,
// host): huge pages or not as the pools. Throws naming the failed call.
UringLoopResult uring_loop(const std::string& path, std::uint64_t total, std::size_t block, unsigned depth, bool write,
                           bool direct);

}  // namespace sluice::bench
