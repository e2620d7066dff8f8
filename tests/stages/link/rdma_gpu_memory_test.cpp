// GPU memory for RDMA on a GPU machine (no RDMA device needed): a cudaMalloc'd landing
// ring exports as a real dma-buf, and the BAR1 check reads the same aperture nvidia-smi
// reports and refuses a registration that cannot fit through it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "pipeline/memory.hpp"
#include "stages/link/rdma/gpu_memory.hpp"

namespace sluice::rdma {
namespace {

// Missing hardware is a skip with the reason, in CI too (CI machines have no GPU; the gpu
// label runs on a GPU machine).
#define REQUIRE_GPU()                                        \
  if (!cuda_available()) {                                   \
    GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason(); \
  }

// BAR1 total in MiB as nvidia-smi prints it ("BAR1 Memory Usage" / "Total : 131072 MiB").
std::optional<std::uint64_t> nvidia_smi_bar1_mib() {
  FILE* pipe = ::popen("nvidia-smi -q -d MEMORY -i 0 2>/dev/null", "r");
  if (pipe == nullptr) return std::nullopt;
  std::string text;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) text += buffer.data();
  ::pclose(pipe);
  const std::size_t section = text.find("BAR1 Memory Usage");
  if (section == std::string::npos) return std::nullopt;
  std::smatch match;
  const std::string rest = text.substr(section);
  if (!std::regex_search(rest, match, std::regex(R"(Total\s*:\s*(\d+)\s*MiB)"))) return std::nullopt;
  return std::stoull(match[1].str());
}

TEST(RdmaGpuMemory, Bar1SizeMatchesNvidiaSmi) {
  REQUIRE_GPU();
  std::string reason;
  const std::optional<Bar1Info> info = bar1_info(0, reason);
  ASSERT_TRUE(info.has_value()) << reason;
  EXPECT_GT(info->total, 0U);
  EXPECT_LE(info->free, info->total);
  const std::optional<std::uint64_t> reported = nvidia_smi_bar1_mib();
  if (!reported) GTEST_SKIP() << "nvidia-smi not found or printed no BAR1 total; NVML said " << info->total << " bytes";
  EXPECT_EQ(info->total / (1024 * 1024), *reported);
}

TEST(RdmaGpuMemory, Bar1CheckRefusesWhatCannotFitAndPassesWhatCan) {
  REQUIRE_GPU();
  std::string reason;
  const std::optional<Bar1Info> info = bar1_info(0, reason);
  ASSERT_TRUE(info.has_value()) << reason;
  EXPECT_NO_THROW(check_bar1(0, 64 << 20));  // every BAR1 in service (>= 256 MiB) takes 64 MiB
  try {
    check_bar1(0, info->total + (1ull << 20));
    ADD_FAILURE() << "a registration larger than BAR1 passed the check";
  } catch (const std::runtime_error& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("BAR1"), std::string::npos) << text;
    EXPECT_NE(text.find("hint"), std::string::npos) << text;
  }
}

// Arithmetic only, so it runs everywhere: the 256 MiB-BAR1 case the limit exists for, where
// registrations above ~115 MB fail with "Bad address" although more is nominally free.
TEST(RdmaGpuMemory, LimitStaysBelowWhatA256MiBBar1Takes) {
  EXPECT_LT(bar1_registration_limit(Bar1Info{256ull << 20, 250ull << 20}), 116'000'000U);
  EXPECT_GT(bar1_registration_limit(Bar1Info{256ull << 20, 250ull << 20}), 64ull << 20);
  EXPECT_LE(bar1_registration_limit(Bar1Info{128ull << 30, 1ull << 20}), 1ull << 20);  // never more than is free
}

TEST(RdmaGpuMemory, DeviceMemoryExportsAsADmaBuf) {
  REQUIRE_GPU();
  MemoryRegion ring(MemoryKind::device, 8 << 20, 0);
  std::string reason;
  std::optional<FileDescriptor> fd = export_dmabuf(ring.data(), ring.size(), 0, reason);
  ASSERT_TRUE(fd.has_value()) << reason;
  ASSERT_GE(fd->get(), 0);
  // The kernel names a dma-buf's file "/dmabuf:" (anon inode of the dma-buf class).
  const auto target = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd->get())).string();
  EXPECT_NE(target.find("dmabuf"), std::string::npos) << target;
  struct stat status {};
  ASSERT_EQ(::fstat(fd->get(), &status), 0);
  EXPECT_GE(static_cast<std::uint64_t>(status.st_size), ring.size());
}

TEST(RdmaGpuMemory, AnUnalignedRangeIsRefusedWithTheReason) {
  REQUIRE_GPU();
  MemoryRegion ring(MemoryKind::device, 8 << 20, 0);
  std::string reason;
  EXPECT_FALSE(export_dmabuf(ring.data() + 100, 4096, 0, reason).has_value());
  EXPECT_NE(reason.find("aligned"), std::string::npos) << reason;
}

}  // namespace
}  // namespace sluice::rdma
