// Test support: the kernel's own view of a UDP socket, read from outside the stage
// (/proc/net/udp): its count of dropped datagrams, ground truth for the stage's SO_RXQ_OVFL
// count, and its descriptor in this process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace sluice::test_support {

// The columns of the IPv4 UDP socket bound to `port`; empty when there is none.
inline std::vector<std::string> proc_udp_row(std::uint16_t port) {
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
    return columns;
  }
  return {};
}

// Drops of the IPv4 UDP socket bound to `port`; nullopt when there is none.
inline std::optional<std::uint64_t> proc_udp_drops(std::uint16_t port) {
  const std::vector<std::string> row = proc_udp_row(port);
  if (row.empty()) return std::nullopt;
  return std::stoull(row.back());
}

// This process's descriptor of the UDP socket bound to `port` (the socket inode of its
// /proc/net/udp row, found among /proc/self/fd), or -1.
inline int udp_socket_fd(std::uint16_t port) {
  const std::vector<std::string> row = proc_udp_row(port);
  if (row.empty()) return -1;
  const std::string target = "socket:[" + row[9] + "]";
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    if (std::filesystem::read_symlink(entry.path(), error).string() == target)
      return std::stoi(entry.path().filename().string());
  }
  return -1;
}

}  // namespace sluice::test_support
