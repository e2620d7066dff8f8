// make_cufft_backend for builds without the CUDA toolkit: the stage refuses backend: cufft
// before it gets here (cuda_available() is false), so this only names the reason.
#include <stdexcept>

#include "stages/fft/fft_backend.hpp"

namespace sluice {

std::unique_ptr<FftBackend> make_cufft_backend(const FftBackendSpec& /*spec*/) {
  throw std::runtime_error(
      "fft backend cufft: this build of Sluice has no CUDA (configure found no CUDA toolkit with cuFFT)");
}

}  // namespace sluice
