// `sluice capture plot`: the averaged spectrum and spectrogram of a capture, computed with
// FFTW from raw samples (or taken from recorded fft rows) and drawn as one SVG with the
// spectrogram embedded as a PNG (libpng) so the file stays small for any capture length.
#include <fftw3.h>
#include <openssl/evp.h>
#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <memory>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "pipeline/units.hpp"
#include "recorder/capture_tools.hpp"

namespace sluice::recorder {
namespace {

constexpr std::size_t kFramesPerRow = 16;  // at most this many frames are averaged into one spectrogram row

std::string printf_string(const char* format, auto... values) {
  std::array<char, 512> buffer{};
  std::snprintf(buffer.data(), buffer.size(), format, values...);
  return buffer.data();
}

// Where frame `frame` (of `size` samples, never straddling a segment) starts.
struct FramePosition {
  std::size_t segment = 0;
  std::uint64_t offset = 0;  // samples into the segment
};

class FrameIndex {
 public:
  FrameIndex(const CaptureLane& lane, std::size_t size) {
    for (const auto& segment : lane.segments) {
      first_.push_back(total_);
      total_ += segment.sample_count / size;
    }
    size_ = size;
  }
  [[nodiscard]] std::uint64_t total() const { return total_; }
  [[nodiscard]] FramePosition at(std::uint64_t frame) const {
    const auto it = std::upper_bound(first_.begin(), first_.end(), frame) - 1;
    const auto segment = static_cast<std::size_t>(it - first_.begin());
    return {segment, (frame - *it) * size_};
  }

 private:
  std::vector<std::uint64_t> first_;  // first frame of each segment
  std::uint64_t total_ = 0;
  std::size_t size_ = 0;
};

void to_complex(const std::byte* input, SampleFormat format, std::size_t count, std::complex<float>* out) {
  for (std::size_t i = 0; i < count; ++i) {
    switch (format) {
      case SampleFormat::ci8: {
        std::array<std::int8_t, 2> pair{};
        std::memcpy(pair.data(), input + i * 2, 2);
        out[i] = {static_cast<float>(pair[0]) / 128.0F, static_cast<float>(pair[1]) / 128.0F};
        break;
      }
      case SampleFormat::ci16: {
        std::array<std::int16_t, 2> pair{};
        std::memcpy(pair.data(), input + i * 4, 4);
        out[i] = {static_cast<float>(pair[0]) / 32768.0F, static_cast<float>(pair[1]) / 32768.0F};
        break;
      }
      case SampleFormat::cf32:
        std::memcpy(&out[i], input + i * 8, 8);
        break;
      case SampleFormat::rf32: {
        float value = 0;
        std::memcpy(&value, input + i * 4, 4);
        out[i] = {value, 0.0F};
        break;
      }
    }
  }
}

double to_db(double power) { return 10.0 * std::log10(std::max(power, 1e-30)); }

struct FftwPlanDeleter {
  void operator()(fftwf_plan_s* plan) const noexcept { fftwf_destroy_plan(plan); }
};
struct FftwFree {
  void operator()(void* memory) const noexcept { fftwf_free(memory); }
};

// The spectrogram skeleton both kinds share: blocks of `size` values (FFT frames or recorded
// rows, never straddling a hole) spread evenly into at most `max_rows` rows, each block's
// power added into its row by `add_power`, rows and their mean kept in dB.
template <typename AddPower>
void build_spectrogram(const CaptureLane& lane, std::size_t size, std::size_t max_rows, double blocks_per_second,
                       CaptureSpectrum& result, AddPower add_power) {
  const FrameIndex blocks(lane, size);
  if (blocks.total() == 0) {
    throw std::runtime_error("lane " + lane.name + " holds fewer than " + std::to_string(size) + " contiguous values");
  }
  std::vector<std::byte> raw(size * lane.sample_bytes);
  std::vector<double> row(size);
  std::vector<double> total(size, 0.0);
  result.available = blocks.total();
  const std::uint64_t rows = std::min<std::uint64_t>(max_rows, blocks.total());
  const std::uint64_t first_global = lane.segments.front().global_index;
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t begin = r * blocks.total() / rows;
    const std::uint64_t end = std::min((r + 1) * blocks.total() / rows, begin + kFramesPerRow);
    std::fill(row.begin(), row.end(), 0.0);
    for (std::uint64_t block = begin; block < end; ++block) {
      const FramePosition position = blocks.at(block);
      const CaptureSegment& segment = lane.segments[position.segment];
      if (read_segment(lane, segment, position.offset, size, raw.data()) != size) {
        throw std::runtime_error("short read from " + segment.data_path);
      }
      add_power(raw.data(), row);
      if (block == begin && blocks_per_second > 0) {
        const auto values = static_cast<double>(segment.global_index + position.offset - first_global);
        result.row_seconds.push_back(values / static_cast<double>(size) / blocks_per_second);
      }
    }
    std::vector<float>& out = result.rows_db.emplace_back(size);
    for (std::size_t bin = 0; bin < size; ++bin) {
      total[bin] += row[bin];
      out[bin] = static_cast<float>(to_db(row[bin] / static_cast<double>(end - begin)));
    }
    result.frames += end - begin;
  }
  result.average_db.resize(size);
  for (std::size_t bin = 0; bin < size; ++bin)
    result.average_db[bin] = to_db(total[bin] / static_cast<double>(result.frames));
  result.bins = size;
  // A spectra capture's core:sample_rate counts values (input rate / averaging): bins are
  // spaced by the rate of the input the FFT saw.
  const double input_rate = lane.fft_size > 0
                                ? lane.sample_rate * static_cast<double>(std::max<std::size_t>(lane.averaging, 1))
                                : lane.sample_rate;
  result.bin_hz = input_rate > 0 ? input_rate / static_cast<double>(size) : 0;
}

// Raw samples: Hann-windowed FFTs of frames spread evenly over the capture.
void spectrum_of_samples(const CaptureLane& lane, std::size_t size, std::size_t max_rows, CaptureSpectrum& result) {
  std::unique_ptr<fftwf_complex, FftwFree> buffer(fftwf_alloc_complex(size));
  auto* data = reinterpret_cast<std::complex<float>*>(buffer.get());
  const std::unique_ptr<fftwf_plan_s, FftwPlanDeleter> plan(
      fftwf_plan_dft_1d(static_cast<int>(size), buffer.get(), buffer.get(), FFTW_FORWARD, FFTW_ESTIMATE));
  if (!plan) throw std::runtime_error("fftwf_plan_dft_1d(" + std::to_string(size) + ") failed");
  std::vector<float> window(size);
  double gain = 0;
  for (std::size_t i = 0; i < size; ++i) {
    window[i] = static_cast<float>(
        0.5 - 0.5 * std::cos(2 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(size)));
    gain += static_cast<double>(window[i]);
  }
  // |X|² / (N · coherent gain)²: a full-scale complex tone on a bin centre reads 0 dB, as in the fft stage.
  const double scale = 1.0 / (gain * gain);
  const double frames_per_second = lane.sample_rate / static_cast<double>(size);
  build_spectrogram(lane, size, max_rows, frames_per_second, result,
                    [&](const std::byte* raw, std::vector<double>& row) {
                      to_complex(raw, *lane.format, size, data);
                      for (std::size_t i = 0; i < size; ++i) data[i] *= window[i];
                      fftwf_execute(plan.get());
                      for (std::size_t bin = 0; bin < size; ++bin)
                        row[(bin + size / 2) % size] += static_cast<double>(std::norm(data[bin])) * scale;  // fftshift
                    });
}

// Recorded fft rows: power_db rows as they are, linear power and complex bins converted to dB.
void spectrum_of_rows(const CaptureLane& lane, std::size_t max_rows, CaptureSpectrum& result) {
  const bool complex = lane.format == SampleFormat::cf32;
  const bool linear = !complex && lane.description.find("spectra (power,") != std::string::npos;
  // core:sample_rate counts values (fft_size per row, input rate / averaging): rows per second.
  const double rows_per_second = lane.sample_rate / static_cast<double>(lane.fft_size);
  build_spectrogram(
      lane, lane.fft_size, max_rows, rows_per_second, result, [&](const std::byte* raw, std::vector<double>& row) {
        for (std::size_t bin = 0; bin < row.size(); ++bin) {
          std::array<float, 2> value{};
          std::memcpy(value.data(), raw + bin * lane.sample_bytes, lane.sample_bytes);
          const auto real = static_cast<double>(value[0]);
          const auto imaginary = static_cast<double>(value[1]);
          row[bin] += complex ? real * real + imaginary * imaginary : linear ? real : std::pow(10.0, real / 10.0);
        }
      });
}

// A perceptually even dark-blue → teal → yellow map (viridis' anchor colours).
std::array<std::uint8_t, 3> colour_of(double fraction) {
  static constexpr std::array<std::array<double, 3>, 6> kAnchors{
      {{68, 1, 84}, {65, 68, 135}, {42, 120, 142}, {34, 168, 132}, {122, 209, 81}, {253, 231, 37}}};
  fraction = std::clamp(fraction, 0.0, 1.0) * (kAnchors.size() - 1);
  const auto low = std::min(static_cast<std::size_t>(fraction), kAnchors.size() - 2);
  const double mix = fraction - static_cast<double>(low);
  std::array<std::uint8_t, 3> colour{};
  for (std::size_t c = 0; c < 3; ++c) {
    colour[c] = static_cast<std::uint8_t>(std::lround(kAnchors[low][c] * (1 - mix) + kAnchors[low + 1][c] * mix));
  }
  return colour;
}

// The colour scale: from the 2nd percentile of every spectrogram value to its maximum.
std::pair<double, double> db_range(const CaptureSpectrum& lane) {
  std::vector<float> values;
  for (const auto& row : lane.rows_db) values.insert(values.end(), row.begin(), row.end());
  if (values.empty()) return {-100, 0};
  const auto low = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 50);
  std::nth_element(values.begin(), low, values.end());
  const double floor = *low;
  const double ceiling = *std::max_element(values.begin(), values.end());
  return {floor, ceiling > floor ? ceiling : floor + 1};
}

std::string base64(const std::string& bytes) {
  std::string text(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int length =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  text.resize(static_cast<std::size_t>(length));
  return text;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string hz_text(double hertz) { return hertz == 0 ? std::string("0") : format_frequency(hertz); }

// A 1-2-2.5-5 step at least `value`.
double nice_step(double value) {
  const double power = std::pow(10.0, std::floor(std::log10(value)));
  for (const double step : {1.0, 2.0, 2.5, 5.0}) {
    if (step * power >= value) return step * power;
  }
  return 10 * power;
}

// An axis label at a round frequency: unit chosen by the tick step, signed, no exponent.
std::string tick_text(double hertz, double step) {
  if (std::abs(hertz) < step / 2) return "0";
  const std::array<std::pair<double, const char*>, 4> units{{{1e9, "GHz"}, {1e6, "MHz"}, {1e3, "kHz"}, {1, "Hz"}}};
  for (const auto& [size, unit] : units) {
    if (step >= size || size == 1) {
      const double scaled = step / size;
      const int digits = scaled >= 1 && std::abs(scaled - std::round(scaled)) < 1e-9 ? 0 : scaled >= 0.1 ? 1 : 2;
      return printf_string("%.*f %s", digits, hertz / size, unit);
    }
  }
  return printf_string("%.0f Hz", hertz);
}

}  // namespace

std::size_t CaptureSpectrum::peak_bin() const {
  return static_cast<std::size_t>(std::max_element(average_db.begin(), average_db.end()) - average_db.begin());
}

CaptureSpectrum capture_spectrum(const CaptureLane& lane, std::size_t fft_size, std::size_t max_rows) {
  if (lane.segments.empty()) throw std::runtime_error("lane " + lane.name + " holds no samples");
  if (!lane.format) throw std::runtime_error("lane " + lane.name + ": cannot read datatype " + lane.datatype);
  if (fft_size < 2 || max_rows < 1) throw std::runtime_error("the FFT size must be at least 2 and rows at least 1");
  CaptureSpectrum result;
  result.lane = lane.name;
  result.gaps = lane.gaps.size();
  result.from_spectra = lane.fft_size > 0;
  if (result.from_spectra) {
    spectrum_of_rows(lane, max_rows, result);
  } else {
    if (lane.sample_rate <= 0) throw std::runtime_error("lane " + lane.name + " has no sample rate (core:sample_rate)");
    spectrum_of_samples(lane, fft_size, max_rows, result);
  }
  result.first_hz = lane.frequency - static_cast<double>(result.bins / 2) * result.bin_hz;
  const auto& last = lane.segments.back();
  const double rate = lane.sample_rate;  // samples, or spectrum values, per second: index span / rate is the duration
  if (rate > 0) {
    result.duration_seconds =
        static_cast<double>(last.global_index + last.sample_count - lane.segments.front().global_index) / rate;
  }
  return result;
}

std::string spectrogram_png(const CaptureSpectrum& lane) {
  const auto [floor, ceiling] = db_range(lane);
  const std::size_t width = lane.bins;
  const std::size_t height = lane.rows_db.size();
  std::vector<std::uint8_t> pixels(width * height * 3);
  for (std::size_t y = 0; y < height; ++y) {
    for (std::size_t x = 0; x < width; ++x) {
      const auto colour = colour_of((static_cast<double>(lane.rows_db[y][x]) - floor) / (ceiling - floor));
      std::memcpy(&pixels[(y * width + x) * 3], colour.data(), 3);
    }
  }
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr) == 0) {
    throw std::runtime_error(std::string("png_image_write_to_memory: ") + image.message);
  }
  std::string png(size, '\0');
  if (png_image_write_to_memory(&image, png.data(), &size, 0, pixels.data(), 0, nullptr) == 0) {
    throw std::runtime_error(std::string("png_image_write_to_memory: ") + image.message);
  }
  png.resize(size);
  return png;
}

namespace {

// The plot's geometry: each lane a title, its averaged spectrum, then its spectrogram, one
// frequency axis under each.
struct PlotLayout {
  static constexpr double kWidth = 1000, kLeft = 80, kRight = 110, kSpectrumHeight = 220, kSpectrogramHeight = 300,
                          kGap = 70;
  static constexpr double kLaneHeight = 40 + kSpectrumHeight + kGap + kSpectrogramHeight + 50;
  static constexpr double kPlotWidth = kWidth - kLeft - kRight;

  // The x of a bin of `lane`.
  static double x_of(const CaptureSpectrum& lane, double bin) {
    return kLeft + kPlotWidth * bin / static_cast<double>(std::max<std::size_t>(lane.bins - 1, 1));
  }
};

void plot_lane_title(std::ostringstream& svg, const CaptureSpectrum& lane, double top) {
  const std::size_t peak = lane.peak_bin();
  const double peak_hz = lane.frequency_of(peak);
  svg << printf_string(R"(<g class="lane" data-lane="%s" data-peak-hz="%.3f" data-peak-db="%.2f" data-bin-hz="%.6f">)",
                       xml_escape(lane.lane).c_str(), peak_hz, lane.average_db[peak], lane.bin_hz)
      << "\n";
  svg << printf_string(
             R"(<text x="%.0f" y="%.0f" font-size="14">lane %s: %s, %s, %llu %s, %llu averaged; peak %s at %.1f dB</text>)",
             PlotLayout::kLeft, top + 18, xml_escape(lane.lane).c_str(),
             lane.from_spectra ? "recorded spectra" : "averaged spectrum",
             format_duration(std::chrono::nanoseconds(static_cast<std::int64_t>(lane.duration_seconds * 1e9))).c_str(),
             static_cast<unsigned long long>(lane.available), lane.from_spectra ? "rows" : "frames",
             static_cast<unsigned long long>(lane.frames), hz_text(peak_hz).c_str(), lane.average_db[peak])
      << "\n";
}

// The averaged spectrum in dB, with level lines and its peak marked.
void plot_average_spectrum(std::ostringstream& svg, const CaptureSpectrum& lane, double spectrum_top) {
  constexpr double kLeft = PlotLayout::kLeft, kSpectrumHeight = PlotLayout::kSpectrumHeight;
  const std::size_t peak = lane.peak_bin();
  const double max_db = std::ceil(lane.average_db[peak] / 10) * 10 + 5;
  const double min_db =
      std::max(std::floor(*std::min_element(lane.average_db.begin(), lane.average_db.end()) / 10) * 10, max_db - 150);
  auto x_of = [&](double bin) { return PlotLayout::x_of(lane, bin); };
  auto y_of = [&](double db) {
    return spectrum_top + kSpectrumHeight * (max_db - std::max(db, min_db)) / (max_db - min_db);
  };
  const double db_step = (max_db - min_db) > 80 ? 20 : 10;
  for (double level = std::ceil(min_db / db_step) * db_step; level <= max_db; level += db_step) {
    svg << printf_string(
               R"(<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f dB</text>)",
               kLeft, kLeft + PlotLayout::kPlotWidth, y_of(level), y_of(level), kLeft - 6, y_of(level) + 4, level)
        << "\n";
  }
  svg << "<polyline class=\"average\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.2\" points=\"";
  for (std::size_t bin = 0; bin < lane.bins; ++bin)
    svg << printf_string("%.1f,%.1f ", x_of(static_cast<double>(bin)), y_of(lane.average_db[bin]));
  svg << "\"/>\n";
  svg << printf_string(R"(<circle cx="%.1f" cy="%.1f" r="3.5" fill="#d62728"/>)", x_of(static_cast<double>(peak)),
                       y_of(lane.average_db[peak]))
      << printf_string(R"(<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>)", kLeft,
                       spectrum_top, PlotLayout::kPlotWidth, kSpectrumHeight)
      << "\n";
}

// Ticks at round frequencies (or bins, without a sample rate), about ten across, under each
// of the two plots (whose bottom edges are `axes`).
void plot_frequency_axis(std::ostringstream& svg, const CaptureSpectrum& lane, std::array<double, 2> axes) {
  const double span =
      lane.bin_hz > 0 ? lane.bin_hz * static_cast<double>(lane.bins - 1) : static_cast<double>(lane.bins - 1);
  const double origin = lane.bin_hz > 0 ? lane.first_hz : 0;
  const double tick_step = nice_step(span / 10);
  for (double value = std::ceil(origin / tick_step) * tick_step; value <= origin + span + tick_step * 1e-9;
       value += tick_step) {
    const double bin = lane.bin_hz > 0 ? (value - origin) / lane.bin_hz : value;
    const double x = PlotLayout::x_of(lane, bin);
    const std::string label = lane.bin_hz > 0 ? tick_text(value, tick_step) : printf_string("bin %.0f", value);
    for (const double axis : axes) {
      svg << printf_string(R"(<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#444"/>)", x, x, axis, axis + 4)
          << printf_string(R"(<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>)", x, axis + 17, label.c_str());
    }
  }
}

// The spectrogram (time downwards) with its time axis, colour bar and caption; closes the lane's group.
void plot_spectrogram(std::ostringstream& svg, const CaptureSpectrum& lane, double spectrogram_top) {
  constexpr double kLeft = PlotLayout::kLeft, kPlotWidth = PlotLayout::kPlotWidth,
                   kSpectrogramHeight = PlotLayout::kSpectrogramHeight;
  svg << "<image x=\"" << kLeft << "\" y=\"" << spectrogram_top << "\" width=\"" << kPlotWidth << "\" height=\""
      << kSpectrogramHeight
      << "\" preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,"
      << base64(spectrogram_png(lane)) << "\"/>\n";
  svg << printf_string(R"(<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>)", kLeft,
                       spectrogram_top, kPlotWidth, kSpectrogramHeight)
      << "\n";
  // Rows are spread evenly over the recorded frames, so each tick shows its own row's time.
  for (int tick = 0; tick <= 5 && !lane.row_seconds.empty(); ++tick) {
    const std::size_t row =
        std::min(lane.row_seconds.size() - 1, lane.row_seconds.size() * static_cast<std::size_t>(tick) / 5);
    const double y =
        spectrogram_top + kSpectrogramHeight * static_cast<double>(row) / static_cast<double>(lane.row_seconds.size());
    svg << printf_string(R"(<text x="%.1f" y="%.1f" text-anchor="end">%.3g s</text>)", kLeft - 6, y + 4,
                         lane.row_seconds[row])
        << "\n";
  }
  const auto [floor, ceiling] = db_range(lane);
  const double bar_x = kLeft + kPlotWidth + 24;
  for (int step = 0; step < 50; ++step) {
    const auto colour = colour_of(1.0 - step / 49.0);
    svg << printf_string(R"svg(<rect x="%.1f" y="%.2f" width="16" height="%.2f" fill="rgb(%d,%d,%d)"/>)svg", bar_x,
                         spectrogram_top + kSpectrogramHeight * step / 50.0, kSpectrogramHeight / 50.0 + 0.5, colour[0],
                         colour[1], colour[2]);
  }
  svg << "\n"
      << printf_string(R"(<text x="%.1f" y="%.1f">%.0f dB</text><text x="%.1f" y="%.1f">%.0f dB</text>)", bar_x + 20,
                       spectrogram_top + 10, ceiling, bar_x + 20, spectrogram_top + kSpectrogramHeight, floor)
      << printf_string(R"(<text x="%.1f" y="%.1f" fill="#666">spectrogram: time runs down%s</text>)", kLeft,
                       spectrogram_top - 8,
                       lane.gaps > 0 ? printf_string(" (%zu gap(s) closed up)", lane.gaps).c_str() : "")
      << "\n</g>\n";
}

}  // namespace

std::string capture_plot_svg(const std::string& title, const std::vector<CaptureSpectrum>& lanes) {
  std::ostringstream svg;
  svg << printf_string(
             R"(<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">)",
             PlotLayout::kWidth, 40 + PlotLayout::kLaneHeight * static_cast<double>(lanes.size()))
      << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << printf_string(R"(<text x="%.0f" y="24" font-size="16">%s</text>)", PlotLayout::kLeft,
                       xml_escape(title).c_str())
      << "\n";
  double top = 40;
  for (const auto& lane : lanes) {
    plot_lane_title(svg, lane, top);
    const double spectrum_top = top + 36;
    plot_average_spectrum(svg, lane, spectrum_top);
    const double spectrogram_top = spectrum_top + PlotLayout::kSpectrumHeight + PlotLayout::kGap;
    plot_frequency_axis(svg, lane,
                        {spectrum_top + PlotLayout::kSpectrumHeight, spectrogram_top + PlotLayout::kSpectrogramHeight});
    plot_spectrogram(svg, lane, spectrogram_top);
    top += PlotLayout::kLaneHeight;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace sluice::recorder
