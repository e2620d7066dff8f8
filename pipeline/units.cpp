// Unit parsing: a number followed by an optional unit, case-sensitive where SI needs it (Mb vs MB).
#include "pipeline/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

namespace sluice {
namespace {

struct Split {
  double value = 0;
  std::string_view unit;
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

std::optional<Split> split_number(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  Split split;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(begin, end, split.value);
  if (error != std::errc{} || ptr == begin) return std::nullopt;
  if (!std::isfinite(split.value) || split.value < 0) return std::nullopt;
  split.unit = trim(std::string_view(ptr, static_cast<std::size_t>(end - ptr)));
  return split;
}

template <std::size_t N>
std::optional<double> lookup(std::string_view unit, const std::array<std::pair<std::string_view, double>, N>& table) {
  for (const auto& [name, factor] : table) {
    if (unit == name) return factor;
  }
  return std::nullopt;
}

constexpr double kKi = 1024.0;
constexpr std::array<std::pair<std::string_view, double>, 17> kByteUnits{{
    {"", 1.0},
    {"B", 1.0},
    {"k", 1e3},
    {"kB", 1e3},
    {"KB", 1e3},
    {"KiB", kKi},
    {"M", 1e6},
    {"MB", 1e6},
    {"MiB", kKi* kKi},
    {"G", 1e9},
    {"GB", 1e9},
    {"GiB", kKi* kKi* kKi},
    {"T", 1e12},
    {"TB", 1e12},
    {"TiB", kKi* kKi* kKi* kKi},
    {"Ki", kKi},
    {"Mi", kKi* kKi},
}};

constexpr std::array<std::pair<std::string_view, double>, 10> kBitUnits{{
    {"b", 1.0},
    {"bit", 1.0},
    {"kb", 1e3},
    {"Kb", 1e3},
    {"kbit", 1e3},
    {"Mb", 1e6},
    {"Mbit", 1e6},
    {"Gb", 1e9},
    {"Gbit", 1e9},
    {"Tb", 1e12},
}};

constexpr std::array<std::pair<std::string_view, double>, 16> kFrequencyUnits{{
    {"", 1.0},
    {"Hz", 1.0},
    {"kHz", 1e3},
    {"MHz", 1e6},
    {"GHz", 1e9},
    {"sps", 1.0},
    {"ksps", 1e3},
    {"Msps", 1e6},
    {"Gsps", 1e9},
    {"S/s", 1.0},
    {"kS/s", 1e3},
    {"MS/s", 1e6},
    {"GS/s", 1e9},
    {"k", 1e3},
    {"M", 1e6},
    {"G", 1e9},
}};

constexpr std::array<std::pair<std::string_view, double>, 9> kDurationUnits{{
    {"ns", 1.0},
    {"us", 1e3},
    {"µs", 1e3},
    {"ms", 1e6},
    {"s", 1e9},
    {"", 1e9},
    {"m", 60e9},
    {"min", 60e9},
    {"h", 3600e9},
}};

}  // namespace

std::optional<std::uint64_t> parse_bytes(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  auto factor = lookup(split->unit, kByteUnits);
  if (!factor) return std::nullopt;
  const double bytes = split->value * *factor;
  if (bytes > 1.8e19 || bytes != std::floor(bytes)) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::optional<double> parse_byte_rate(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  std::string_view unit = split->unit;
  if (unit.empty()) return split->value;  // plain number: bytes per second
  for (std::string_view suffix : {"/s", "ps"}) {
    if (unit.size() > suffix.size() && unit.substr(unit.size() - suffix.size()) == suffix) {
      std::string_view base = unit.substr(0, unit.size() - suffix.size());
      if (auto factor = lookup(base, kByteUnits); factor && !base.empty()) return split->value * *factor;
      if (auto factor = lookup(base, kBitUnits)) return split->value * *factor / 8.0;
    }
  }
  return std::nullopt;
}

std::optional<double> parse_frequency(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  auto factor = lookup(split->unit, kFrequencyUnits);
  if (!factor) return std::nullopt;
  return split->value * *factor;
}

std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  auto split = split_number(text);
  if (!split) return std::nullopt;
  auto factor = lookup(split->unit, kDurationUnits);
  if (!factor) return std::nullopt;
  const double nanoseconds = split->value * *factor;
  if (nanoseconds > 9.2e18) return std::nullopt;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(nanoseconds)));
}

std::string format_bytes(double bytes) {
  constexpr std::array<const char*, 5> kUnits{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t unit = 0;
  while (bytes >= kKi && unit + 1 < kUnits.size()) {
    bytes /= kKi;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} {}", bytes, kUnits[unit]) : fmt::format("{:.2f} {}", bytes, kUnits[unit]);
}

std::string format_byte_rate(double bytes_per_second) {
  if (bytes_per_second >= 1e9) return fmt::format("{:.2f} GB/s", bytes_per_second / 1e9);
  if (bytes_per_second >= 1e6) return fmt::format("{:.1f} MB/s", bytes_per_second / 1e6);
  if (bytes_per_second >= 1e3) return fmt::format("{:.1f} kB/s", bytes_per_second / 1e3);
  return fmt::format("{:.0f} B/s", bytes_per_second);
}

std::string format_frequency(double hertz) {
  if (hertz >= 1e9) return fmt::format("{:g} GHz", hertz / 1e9);
  if (hertz >= 1e6) return fmt::format("{:g} MHz", hertz / 1e6);
  if (hertz >= 1e3) return fmt::format("{:g} kHz", hertz / 1e3);
  return fmt::format("{:g} Hz", hertz);
}

std::string format_duration(std::chrono::nanoseconds duration) {
  const double seconds = std::chrono::duration<double>(duration).count();
  if (seconds >= 1.0) return fmt::format("{:.2f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

}  // namespace sluice
