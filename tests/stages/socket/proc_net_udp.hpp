// Test support: the kernel's own count of datagrams a UDP socket dropped, read from outside the
// stage (/proc/net/udp, column `drops`), as ground truth for the stage's SO_RXQ_OVFL count.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace sluice::test_support {

// Drops of the IPv4 UDP socket bound to `port`; nullopt when there is none.
inline std::optional<std::uint64_t> proc_udp_drops(std::uint16_t port) {
  std::ifstream table("/proc/net/udp");
  std::string line;
  std::getline(table, line);  // the column names
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::vector<std::string> columns;
    for (std::string column; fields >> column;) columns.push_back(column);
    if (columns.size() < 13) continue;
    const std::string& local = columns[1];  // "0100007F:C350": address and port in hex
    const auto colon = local.find(':');
    if (colon == std::string::npos || std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
    return std::stoull(columns.back());
  }
  return std::nullopt;
}

}  // namespace sluice::test_support
