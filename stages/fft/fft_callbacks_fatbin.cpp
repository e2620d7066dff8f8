// The callbacks' LTO-IR fatbin, embedded at build time (bin2c of nvcc -dlto -fatbin output).
#include <cstddef>

#include "fft_callbacks_fatbin.h"  // generated: sluice_fft_callbacks_fatbin[]
#include "stages/fft/fft_callbacks.hpp"

namespace sluice::fft_callbacks {

const unsigned char* fatbin() noexcept { return sluice_fft_callbacks_fatbin; }
std::size_t fatbin_size() noexcept { return sizeof(sluice_fft_callbacks_fatbin); }

}  // namespace sluice::fft_callbacks
