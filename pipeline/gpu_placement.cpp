// GPU placement: sysfs reads (NIC and GPU PCIe paths, NUMA nodes and their cores), the
// interface of a local address, and the choice of a GPU per lane.
#include "pipeline/gpu_placement.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "pipeline/cuda_glue.hpp"

namespace sluice {
namespace {

constexpr int kMaxCore = 65535;  // a list longer than any host's cores is a typo, not a set

std::string read_line(const std::filesystem::path& file) {
  std::ifstream stream(file);
  std::string line;
  if (stream) std::getline(stream, line);
  return line;
}

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

std::size_t shared_prefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::size_t shared = 0;
  while (shared < a.size() && shared < b.size() && a[shared] == b[shared]) ++shared;
  return shared;
}

}  // namespace

std::optional<PciPosition> SysfsTopology::position_of(const std::string& link) const {
  std::error_code error;
  const std::filesystem::path device = std::filesystem::canonical(link, error);
  if (error) return std::nullopt;
  const std::filesystem::path devices = std::filesystem::canonical(std::filesystem::path(root_) / "devices", error);
  if (error) return std::nullopt;
  const std::filesystem::path below = device.lexically_relative(devices);
  if (below.empty() || *below.begin() == "..") return std::nullopt;
  PciPosition position;
  for (const auto& part : below) position.path.push_back(part.string());
  // A NIC's own node (virtio0 below its PCI function) may have no numa_node: its parent's holds.
  for (std::filesystem::path at = device; at.string().size() > devices.string().size(); at = at.parent_path()) {
    const std::string text = read_line(at / "numa_node");
    if (text.empty()) continue;
    position.numa_node = parse_int(text).value_or(-1);
    break;
  }
  return position;
}

std::optional<PciPosition> SysfsTopology::network_interface(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos) return std::nullopt;
  return position_of(root_ + "/class/net/" + name + "/device");
}

std::optional<PciPosition> SysfsTopology::pci_device(const std::string& bus_id) const {
  const std::string normal = normalise_pci_bus_id(bus_id);
  if (normal.empty() || normal.find('/') != std::string::npos) return std::nullopt;
  return position_of(root_ + "/bus/pci/devices/" + normal);
}

std::vector<int> SysfsTopology::node_cores(int node) const {
  if (node < 0) return {};
  const std::string text = read_line(root_ + "/devices/system/node/node" + std::to_string(node) + "/cpulist");
  return parse_core_list(text).value_or(std::vector<int>{});
}

std::string normalise_pci_bus_id(std::string bus_id) {
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto colon = bus_id.find(':');
  if (colon != std::string::npos && colon > 4) bus_id.erase(0, colon - 4);  // sysfs writes a 4-digit domain
  return bus_id;
}

std::string interface_holding(const std::string& address) {
  std::string host = address;
  if (!host.empty() && host.front() == '[') {
    host = host.substr(1, host.find(']') == std::string::npos ? std::string::npos : host.find(']') - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));
  }
  in_addr ipv4{};
  in6_addr ipv6{};
  const bool is_ipv4 = inet_pton(AF_INET, host.c_str(), &ipv4) == 1;
  const bool is_ipv6 = !is_ipv4 && inet_pton(AF_INET6, host.c_str(), &ipv6) == 1;
  if ((!is_ipv4 && !is_ipv6) || (is_ipv4 && ipv4.s_addr == 0) ||
      (is_ipv6 && std::memcmp(&ipv6, &in6addr_any, sizeof(ipv6)) == 0)) {
    return {};
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  const std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, freeifaddrs);
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    if (is_ipv4 && entry->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      if (in->sin_addr.s_addr == ipv4.s_addr) return entry->ifa_name;
    } else if (is_ipv6 && entry->ifa_addr->sa_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      if (std::memcmp(&in->sin6_addr, &ipv6, sizeof(ipv6)) == 0) return entry->ifa_name;
    }
  }
  return {};
}

std::optional<std::vector<int>> parse_core_sequence(const std::string& text) {
  std::vector<int> cores;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view part = std::string_view(text).substr(start, comma - start);
    const std::size_t dash = part.find('-');
    const auto first = parse_int(part.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parse_int(part.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || *last > kMaxCore) return std::nullopt;
    for (int core = *first; core <= *last; ++core) cores.push_back(core);
    start = comma + 1;
  }
  return cores;
}

std::optional<std::vector<int>> parse_core_list(const std::string& text) {
  auto cores = parse_core_sequence(text);
  if (!cores) return std::nullopt;
  std::sort(cores->begin(), cores->end());
  cores->erase(std::unique(cores->begin(), cores->end()), cores->end());
  return cores;
}

std::string format_core_list(const std::vector<int>& cores) {
  std::string text;
  for (std::size_t i = 0; i < cores.size();) {
    std::size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(cores[i]) + (j > i ? "-" + std::to_string(cores[j]) : "");
    i = j + 1;
  }
  return text;
}

const GpuHost& GpuHost::this_machine() {
  static const GpuHost host = [] {
    GpuHost found;
    const int count = cuda_glue::device_count();
    for (int index = 0; index < count; ++index) {
      found.gpus.push_back(GpuDevice{index, normalise_pci_bus_id(cuda_glue::pci_bus_id(index))});
    }
    if (count == 0) found.unavailable_reason = cuda_glue::unavailable_reason();
    return found;
  }();
  return host;
}

std::string GpuHost::describe() const {
  if (gpus.empty()) return "none: " + unavailable_reason;
  std::string text;
  for (const auto& gpu : gpus) {
    text += (text.empty() ? "" : ", ") + std::to_string(gpu.index) +
            (gpu.pci_bus_id.empty() ? "" : " (" + gpu.pci_bus_id + ")");
  }
  return text;
}

std::string GpuHost::problem(int gpu, std::string& hint) const {
  const auto count = static_cast<int>(gpus.size());
  if (gpu < 0 || gpu < count || (count == 0 && gpu == 0)) return {};
  if (count == 0) {
    hint =
        "without a GPU only gpu: 0 applies (its pools fall back to host memory); leave gpu: out to let placement "
        "choose";
    return "gpu: " + std::to_string(gpu) + " names a GPU, but this machine has none (" + unavailable_reason + ")";
  }
  hint = "use 0 to " + std::to_string(count - 1) + ", or leave gpu: out for the GPU nearest the lane's NIC";
  return "gpu: " + std::to_string(gpu) + " does not exist; GPUs present: " + describe();
}

LaneGpu describe_gpu(int gpu, const std::vector<GpuDevice>& gpus, const SysfsTopology& topology) {
  LaneGpu described;
  described.gpu = gpu;
  const auto device =
      std::find_if(gpus.begin(), gpus.end(), [gpu](const GpuDevice& each) { return each.index == gpu; });
  if (device == gpus.end()) return described;
  described.pci_bus_id = device->pci_bus_id;
  if (const auto position = topology.pci_device(device->pci_bus_id)) {
    described.numa_node = position->numa_node;
    described.cores = topology.node_cores(position->numa_node);
  }
  return described;
}

std::vector<LaneGpu> place_lanes(const std::vector<LaneRequest>& lanes, const std::vector<GpuDevice>& gpus,
                                 const SysfsTopology& topology) {
  std::vector<std::optional<PciPosition>> gpu_positions;
  for (const auto& gpu : gpus) gpu_positions.push_back(topology.pci_device(gpu.pci_bus_id));
  std::vector<int> lanes_on(gpus.size(), 0);
  std::vector<LaneGpu> placed;
  for (const auto& lane : lanes) {
    std::size_t chosen = 0;  // into gpus
    std::string reason;
    if (lane.gpu >= 0) {
      reason = "set by gpu: (" + lane.gpu_setting + ")";
      chosen = static_cast<std::size_t>(
          std::find_if(gpus.begin(), gpus.end(), [&](const GpuDevice& gpu) { return gpu.index == lane.gpu; }) -
          gpus.begin());
    } else if (!gpus.empty()) {
      const std::optional<PciPosition> nic = topology.network_interface(lane.interface);
      // Score each GPU: PCIe components shared with the NIC, then one for the same NUMA node.
      std::vector<std::pair<std::size_t, bool>> scores;
      for (const auto& position : gpu_positions) {
        if (!nic || !position) {
          scores.emplace_back(0, false);
          continue;
        }
        scores.emplace_back(shared_prefix(nic->path, position->path),
                            nic->numa_node >= 0 && nic->numa_node == position->numa_node);
      }
      const auto best =
          scores.empty() ? std::pair<std::size_t, bool>{0, false} : *std::max_element(scores.begin(), scores.end());
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        if (scores[i] == best && (scores[chosen] != best || lanes_on[i] < lanes_on[chosen])) chosen = i;
      }
      if (best.first >= 2) {
        reason = "nearest to " + lane.interface + " (same PCIe switch)";
      } else if (best.first == 1) {
        reason = "nearest to " + lane.interface + " (same PCIe root complex " + nic->path.front() + ")";
      } else if (best.second) {
        reason = "nearest to " + lane.interface + " (same NUMA node " + std::to_string(nic->numa_node) + ")";
      } else {
        reason = lane.interface.empty() ? "round-robin (no local NIC holds the source's address)"
                 : !nic                 ? "round-robin (" + lane.interface + " has no PCI device)"
                        : "round-robin (" + lane.interface + " shares no PCIe path or NUMA node with a GPU)";
      }
    } else {
      reason = "no GPU";
    }
    const int index = lane.gpu >= 0 ? lane.gpu : gpus.empty() ? 0 : gpus[chosen].index;
    LaneGpu lane_gpu = describe_gpu(index, gpus, topology);
    lane_gpu.reason = std::move(reason);
    if (chosen < lanes_on.size()) ++lanes_on[chosen];
    placed.push_back(std::move(lane_gpu));
  }
  return placed;
}

}  // namespace sluice
