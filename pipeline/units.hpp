// Sizes, rates, frequencies and durations written the way people say them
// ("4MiB", "2.5GB/s", "25Gb/s", "100MHz", "500ms"), parsed and printed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

// Each parser returns nullopt for text it does not understand; the caller owns the error message.
std::optional<std::uint64_t> parse_bytes(std::string_view text);                // "4MiB", "1.5GB", "4096"
std::optional<double> parse_byte_rate(std::string_view text);                   // bytes/s: "2.5GB/s", "25Gb/s", "0"
std::optional<double> parse_frequency(std::string_view text);                   // Hz: "100MHz", "250Msps", "1e6"
std::optional<std::chrono::nanoseconds> parse_duration(std::string_view text);  // "10s", "500ms", "2m", "1h"

std::string format_bytes(double bytes);                          // "4.00 MiB"
std::string format_byte_rate(double bytes_per_second);           // "2.50 GB/s"
std::string format_frequency(double hertz);                      // "100 MHz"
std::string format_duration(std::chrono::nanoseconds duration);  // "1.50 s"

}  // namespace sluice
