// FFT window functions (periodic, the DFT-even form used for spectral analysis) and their
// coherent gain, which the fft stage divides out so a tone reads its true amplitude.
#pragma once

#include <span>
#include <string_view>

namespace sluice {

enum class WindowKind { none, hann, hamming, blackman };

std::string_view to_string(WindowKind kind);

// Fills `out` with the periodic window of out.size() points: w[n] for n = 0..N-1 over a
// period of N (not N-1), so that the window tiles exactly and the DFT sees no endpoint doubling.
void fill_window(WindowKind kind, std::span<float> out);

// Coherent gain: the mean of the window, sum(w) / N. A complex tone of amplitude A on a
// bin centre transforms to |X| = A · N · gain (1 for none, 0.5 hann, 0.54 hamming, 0.42 blackman).
double coherent_gain(std::span<const float> window);

}  // namespace sluice
