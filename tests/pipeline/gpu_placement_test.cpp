// GPU placement against fake sysfs trees built here (two NUMA nodes, NICs and GPUs under shared
// and separate PCIe switches, a NIC without numa_node, loopback), and against this machine's /sys.
#include "pipeline/gpu_placement.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

namespace sluice {
namespace {

namespace fs = std::filesystem;

// A sysfs tree in a temporary directory, removed at the end of the test.
class FakeSysfs {
 public:
  FakeSysfs()
      : root_(fs::temp_directory_path() /
              ("sluice_sysfs_" + std::to_string(getpid()) + "_" + std::to_string(next_++))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "class/net");
    fs::create_directories(root_ / "bus/pci/devices");
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;
  ~FakeSysfs() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  [[nodiscard]] std::string root() const { return root_.string(); }
  // A PCI device at `path` below devices/ ("pci0000:00/0000:00:01.0/0000:01:00.0"); numa -2: no file.
  fs::path device(const std::string& path, int numa) const {
    const fs::path directory = root_ / "devices" / path;
    fs::create_directories(directory);
    if (numa != -2) write(directory / "numa_node", std::to_string(numa));
    if (directory.filename().string().rfind("0000:", 0) == 0) {
      fs::create_symlink(directory, root_ / "bus/pci/devices" / directory.filename());
    }
    return directory;
  }
  void nic(const std::string& name, const std::string& path, int numa) const {
    const fs::path directory = device(path, numa);
    fs::create_directories(root_ / "class/net" / name);
    fs::create_symlink(directory, root_ / "class/net" / name / "device");
  }
  void virtual_nic(const std::string& name) const { fs::create_directories(root_ / "class/net" / name); }
  void node(int index, const std::string& cpulist) const {
    const fs::path directory = root_ / "devices/system/node" / ("node" + std::to_string(index));
    fs::create_directories(directory);
    write(directory / "cpulist", cpulist);
  }

 private:
  static void write(const fs::path& file, const std::string& text) {
    std::ofstream out(file);
    out << text << "\n";
  }
  static inline int next_ = 0;
  fs::path root_;
};

// Two NUMA nodes, two host bridges each. Switch A (pci0000:00, root port 00:01.0) holds eth0
// and GPU 0; GPU 1 hangs off its own root port on the same host bridge. Switch B (pci0000:80)
// holds eth1 and GPU 2; eth2 has its own root port on pci0000:80. GPU 3 sits alone on
// pci0000:40 (node 1), eth3 alone on pci0000:c0 (node 1), eth4 on pci0000:e0 without a NUMA
// node; lo and veth0 have no device.
class Topology : public ::testing::Test {
 protected:
  void SetUp() override {
    sys_.node(0, "0-7,16-23");
    sys_.node(1, "8-15,24-31");
    sys_.nic("eth0", "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0);
    sys_.device("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0);
    sys_.device("pci0000:00/0000:00:02.0/0000:05:00.0", 0);
    sys_.device("pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.0", 1);
    sys_.nic("eth1", "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0", 1);
    sys_.nic("eth2", "pci0000:80/0000:80:03.0/0000:85:00.0", 1);
    sys_.device("pci0000:40/0000:40:01.0/0000:41:00.0", 1);
    sys_.nic("eth3", "pci0000:c0/0000:c0:01.0/0000:c1:00.0", 1);
    sys_.nic("eth4", "pci0000:e0/0000:e0:01.0/0000:e1:00.0", -1);
    sys_.virtual_nic("lo");
    sys_.virtual_nic("veth0");
  }

  // As cudaDeviceGetPCIBusId writes them: 8-digit domain, upper case.
  const std::vector<GpuDevice> gpus_{
      {0, "00000000:04:00.0"}, {1, "00000000:05:00.0"}, {2, "00000000:83:00.0"}, {3, "00000000:41:00.0"}};
  FakeSysfs sys_;
};

std::vector<LaneRequest> on(std::initializer_list<const char*> interfaces) {
  std::vector<LaneRequest> lanes;
  for (const char* interface : interfaces) lanes.push_back(LaneRequest{interface, -1, ""});
  return lanes;
}

TEST_F(Topology, ReadsPciPathsAndNumaNodes) {
  const SysfsTopology topology(sys_.root());
  const auto eth0 = topology.network_interface("eth0");
  ASSERT_TRUE(eth0);
  EXPECT_EQ(eth0->path,
            (std::vector<std::string>{"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}));
  EXPECT_EQ(eth0->numa_node, 0);
  const auto gpu = topology.pci_device("0000:83:00.0");
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->numa_node, 1);
  EXPECT_EQ(topology.network_interface("eth4")->numa_node, -1);
  EXPECT_FALSE(topology.network_interface("lo"));
  EXPECT_FALSE(topology.network_interface("veth0"));
  EXPECT_FALSE(topology.network_interface("eth9"));
  EXPECT_FALSE(topology.pci_device("0000:99:00.0"));
  EXPECT_EQ(topology.node_cores(1), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}));
  EXPECT_TRUE(topology.node_cores(2).empty());
  EXPECT_TRUE(topology.node_cores(-1).empty());
}

TEST_F(Topology, TheGpuOnTheNicsSwitchWins) {
  const auto placed = place_lanes(on({"eth0", "eth1"}), gpus_, SysfsTopology(sys_.root()));
  ASSERT_EQ(placed.size(), 2U);
  EXPECT_EQ(placed[0].gpu, 0);
  EXPECT_EQ(placed[0].reason, "nearest to eth0 (same PCIe switch)");
  EXPECT_EQ(placed[0].pci_bus_id, "00000000:04:00.0");
  EXPECT_EQ(placed[0].numa_node, 0);
  EXPECT_EQ(format_core_list(placed[0].cores), "0-7,16-23");
  EXPECT_EQ(placed[1].gpu, 2);
  EXPECT_EQ(placed[1].reason, "nearest to eth1 (same PCIe switch)");
  EXPECT_EQ(format_core_list(placed[1].cores), "8-15,24-31");
}

TEST_F(Topology, SameSwitchBeatsLoadThenRootComplexThenNumaNode) {
  // Three lanes on eth0 all take GPU 0 (its switch), not GPU 1 on the same host bridge.
  const auto switched = place_lanes(on({"eth0", "eth0", "eth0"}), gpus_, SysfsTopology(sys_.root()));
  for (const auto& lane : switched) EXPECT_EQ(lane.gpu, 0);
  const auto rooted = place_lanes(on({"eth2"}), gpus_, SysfsTopology(sys_.root()));
  EXPECT_EQ(rooted[0].gpu, 2);
  EXPECT_EQ(rooted[0].reason, "nearest to eth2 (same PCIe root complex pci0000:80)");
  // eth3 shares only node 1 with GPUs 2 and 3: the two lanes spread over both.
  const auto by_node = place_lanes(on({"eth3", "eth3"}), gpus_, SysfsTopology(sys_.root()));
  EXPECT_EQ(by_node[0].gpu, 2);
  EXPECT_EQ(by_node[1].gpu, 3);
  EXPECT_EQ(by_node[1].reason, "nearest to eth3 (same NUMA node 1)");
}

TEST_F(Topology, NothingToTellGoesRoundRobin) {
  const std::vector<GpuDevice> two{gpus_[0], gpus_[1]};
  const auto placed = place_lanes(on({"lo", "veth0", "eth4", ""}), two, SysfsTopology(sys_.root()));
  ASSERT_EQ(placed.size(), 4U);
  EXPECT_EQ(placed[0].gpu, 0);
  EXPECT_EQ(placed[1].gpu, 1);
  EXPECT_EQ(placed[2].gpu, 0);
  EXPECT_EQ(placed[3].gpu, 1);
  EXPECT_EQ(placed[0].reason, "round-robin (lo has no PCI device)");
  EXPECT_EQ(placed[2].reason, "round-robin (eth4 shares no PCIe path or NUMA node with a GPU)");
  EXPECT_EQ(placed[3].reason, "round-robin (no local NIC holds the source's address)");
  // The GPUs' own NUMA node still gives the lane its cores.
  EXPECT_EQ(format_core_list(placed[1].cores), "0-7,16-23");
}

TEST_F(Topology, AGpuTheFileNamesIsKeptAndCountsForRoundRobin) {
  std::vector<LaneRequest> lanes = on({"lo", "lo", "lo"});
  lanes[0].gpu = 1;
  lanes[0].gpu_setting = "lanes.a.gpu";
  const auto placed = place_lanes(lanes, {gpus_[0], gpus_[1]}, SysfsTopology(sys_.root()));
  EXPECT_EQ(placed[0].gpu, 1);
  EXPECT_EQ(placed[0].reason, "set by gpu: (lanes.a.gpu)");
  EXPECT_EQ(placed[1].gpu, 0);
  EXPECT_EQ(placed[2].gpu, 0);  // GPU 0 has one lane, GPU 1 one: the lower index
}

TEST_F(Topology, MissingSysfsAndNoGpus) {
  const auto placed = place_lanes(on({"eth0"}), {}, SysfsTopology(sys_.root()));
  EXPECT_EQ(placed[0].gpu, 0);
  EXPECT_EQ(placed[0].reason, "no GPU");
  const auto nowhere = place_lanes(on({"eth0", "eth0"}), {gpus_[0], gpus_[1]}, SysfsTopology(sys_.root() + "/absent"));
  EXPECT_EQ(nowhere[0].gpu, 0);
  EXPECT_EQ(nowhere[1].gpu, 1);
  EXPECT_TRUE(nowhere[0].cores.empty());
}

TEST(CoreList, ParsesAndFormatsTheSysfsForm) {
  EXPECT_EQ(parse_core_list("3"), (std::vector<int>{3}));
  EXPECT_EQ(parse_core_list("3-5"), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(parse_core_list("3,7,9-10"), (std::vector<int>{3, 7, 9, 10}));
  EXPECT_EQ(parse_core_list("9-10,3,3"), (std::vector<int>{3, 9, 10}));
  for (const char* bad : {"", "a", "5-3", "-1", "3,", "1-2-3", "3 ,4", "70000"})
    EXPECT_FALSE(parse_core_list(bad)) << bad;
  EXPECT_EQ(format_core_list({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(format_core_list({}), "");
  EXPECT_EQ(normalise_pci_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalise_pci_bus_id("0000:1b:00.0"), "0000:1b:00.0");
}

// This machine's /sys: every NIC with a device link reads as the path its link resolves to,
// with the numa_node the kernel gives it (or its parent), and its addresses map back to it.
TEST(RealSysfs, NicsReadAsTheKernelLinksThem) {
  const SysfsTopology topology;
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator("/sys/class/net")) {
    const std::string name = entry.path().filename().string();
    std::error_code error;
    const fs::path device = fs::canonical(entry.path() / "device", error);
    const auto position = topology.network_interface(name);
    if (error) {
      EXPECT_FALSE(position) << name << " has no device link";
      continue;
    }
    ASSERT_TRUE(position) << name;
    const fs::path expected = device.lexically_relative("/sys/devices");
    EXPECT_EQ(position->path.back(), device.filename().string()) << name;
    EXPECT_EQ(position->path.size(), static_cast<std::size_t>(std::distance(expected.begin(), expected.end()))) << name;
    fs::path with_numa = device;
    while (!fs::exists(with_numa / "numa_node") && with_numa.has_parent_path() && with_numa != "/sys/devices") {
      with_numa = with_numa.parent_path();
    }
    std::ifstream numa(with_numa / "numa_node");
    int node = -1;
    if (numa >> node) {
      EXPECT_EQ(position->numa_node, node) << name;
    }
    ++checked;
  }
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  const std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, freeifaddrs);
  for (const ifaddrs* each = list; each != nullptr; each = each->ifa_next) {
    if (each->ifa_addr == nullptr || each->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(each->ifa_addr)->sin_addr, text, sizeof(text));
    EXPECT_EQ(interface_holding(std::string(text) + ":50000"), each->ifa_name) << text;
  }
  EXPECT_EQ(interface_holding("127.0.0.1:50000"), "lo");
  EXPECT_EQ(interface_holding("0.0.0.0:50000"), "");
  EXPECT_EQ(interface_holding("203.0.113.77:50000"), "");
  if (checked == 0) GTEST_SKIP() << "no NIC with a PCI device here";
}

}  // namespace
}  // namespace sluice
