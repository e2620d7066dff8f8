#include <stdexcept>

#include "suite/cufft_loop.hpp"

namespace sluice::bench {

// CPU-only builds: run_bench asks for the GPU rows only where cuda_glue::device_count() > 0,
// which a build without CUDA never reports.
LoopResult cufft_loop(std::size_t /*size*/, std::size_t /*batch_samples*/, double /*seconds*/) {
  throw std::logic_error("cufft_loop: this build has no CUDA (configure with the CUDA toolkit)");
}

}  // namespace sluice::bench
