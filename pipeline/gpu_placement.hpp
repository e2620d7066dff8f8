// Which GPU a lane uses when its file does not say: the one nearest the NIC its source
// receives on (PCIe path and NUMA node from sysfs), else the least used. The sysfs root and
// the GPU list are parameters, so that tests run it on fake trees; GpuHost is this machine's.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sluice {

// One GPU as placement sees it: its CUDA index and PCI bus id ("0000:17:00.0"; may be empty).
struct GpuDevice {
  int index = 0;
  std::string pci_bus_id;
};

// Where a PCI device sits: the bridges from its host bridge down to it, and its NUMA node.
struct PciPosition {
  std::vector<std::string> path;  // {"pci0000:00", "0000:00:01.0", "0000:01:00.0"}
  int numa_node = -1;             // -1: the kernel does not know
};

// Reads the PCI positions of NICs and GPUs and the cores of NUMA nodes under a sysfs root.
class SysfsTopology {
 public:
  explicit SysfsTopology(std::string root = "/sys") : root_(std::move(root)) {}
  // The NIC's position, or nullopt for an interface without a PCI device (lo, veth, bridges).
  [[nodiscard]] std::optional<PciPosition> network_interface(const std::string& name) const;
  // The position of the PCI device `bus_id` ("0000:17:00.0", any case), or nullopt.
  [[nodiscard]] std::optional<PciPosition> pci_device(const std::string& bus_id) const;
  // The cores of NUMA node `node` (its cpulist), empty when unknown.
  [[nodiscard]] std::vector<int> node_cores(int node) const;

 private:
  [[nodiscard]] std::optional<PciPosition> position_of(const std::string& link) const;
  std::string root_;
};

// The interface that holds local address `host` (IPv4 or IPv6, from a "host:port" or bare),
// through getifaddrs; empty for a wildcard address, a name or an address no interface holds.
std::string interface_holding(const std::string& address);

// "0000:17:00.0" from CUDA's "00000000:17:00.0" or upper-case forms.
std::string normalise_pci_bus_id(std::string bus_id);

// Core lists as sysfs and `cpu:` write them: "3", "3-5", "3,7,9-10". Nullopt on bad text.
std::optional<std::vector<int>> parse_core_list(const std::string& text);
// The same text as a sequence: the cores in the order written (a range ascending), repeats kept,
// for lists whose order means something (a core for each thread in turn).
std::optional<std::vector<int>> parse_core_sequence(const std::string& text);
std::string format_core_list(const std::vector<int>& cores);  // "3-5,7"; "" for none

// What one lane asks for: the NIC its source receives on ("" when unknown) and a GPU
// named by the file (-1: none, placement chooses).
struct LaneRequest {
  std::string interface;
  int gpu = -1;
  std::string gpu_setting;  // where that GPU was named, e.g. "lanes.port0.gpu"
};

struct LaneGpu {
  int gpu = 0;
  std::string pci_bus_id;  // empty when unknown
  std::string reason;      // "nearest to eth0 (same PCIe switch)", "round-robin", "set by gpu: (lanes.port0.gpu)"
  int numa_node = -1;      // of that GPU
  std::vector<int> cores;  // that NUMA node's cores, where unpinned stage threads of the lane go
};

// Places each lane: a GPU the file names; else the GPU sharing the longest PCIe path with
// the lane's NIC (below the host bridge: same switch; the host bridge alone: same root
// complex), then the same NUMA node; else (or to break ties) the GPU with fewest lanes so
// far, lowest index first. `gpus` empty: every lane on GPU 0 (its pools fall back to host).
std::vector<LaneGpu> place_lanes(const std::vector<LaneRequest>& lanes, const std::vector<GpuDevice>& gpus,
                                 const SysfsTopology& topology);

// The GPUs of a host and its sysfs: what loading a pipeline places lanes on.
struct GpuHost {
  std::vector<GpuDevice> gpus;
  std::string unavailable_reason;  // why `gpus` is empty
  SysfsTopology topology;
  // This machine's (cuda_glue, /sys), read once per process.
  static const GpuHost& this_machine();
  // Why `gpu:` `gpu` cannot apply here (with `hint` set), or empty. Without GPUs, gpu 0 is
  // accepted: its pools fall back to host memory like `memory: device` does.
  [[nodiscard]] std::string problem(int gpu, std::string& hint) const;
  [[nodiscard]] std::string describe() const;  // "0 (0000:17:00.0), 1 (0000:65:00.0)" or "none: why"
};

// The NUMA node and cores of GPU `gpu` (for a stage whose gpu: differs from its lane's).
LaneGpu describe_gpu(int gpu, const std::vector<GpuDevice>& gpus, const SysfsTopology& topology);

}  // namespace sluice
