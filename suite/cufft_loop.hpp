// The ceiling of the fft stage on the GPU: a bare cufftExecC2C loop, kept apart so that only
// cufft_loop_cuda.cpp (CUDA builds) sees CUDA.
#pragma once

#include <cstddef>

namespace sluice::bench {

struct LoopResult {
  double samples = 0;  // complex samples transformed
  double seconds = 0;  // wall time, up to the stream's completion
};

// `size`-point C2C, out of place, batches of `batch_samples` rotating over 16 device buffers (a
// lane's usual pool depth) with random cf32 input, enqueued on one stream for about `seconds`.
LoopResult cufft_loop(std::size_t size, std::size_t batch_samples, double seconds);

}  // namespace sluice::bench
