// Landing registration for both memory kinds; the CUDA-specific parts (dma-buf export,
// BAR1 through NVML) are in gpu_memory_cuda.cpp or gpu_memory_none.cpp.
#include "stages/link/rdma/gpu_memory.hpp"

#include <algorithm>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"
#include "stages/link/rdma/cm.hpp"

namespace sluice::rdma {

namespace {
constexpr int kRemoteWriteAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
std::string mib(std::uint64_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }
}  // namespace

const char* to_string(LandingPath path) {
  switch (path) {
    case LandingPath::host:
      return "host";
    case LandingPath::dmabuf:
      return "dma-buf";
    case LandingPath::peermem:
      return "nvidia-peermem";
  }
  return "?";
}

std::uint64_t bar1_registration_limit(const Bar1Info& info) {
  return std::min(info.free, info.total / 100 * 43);  // 256 MiB BAR1: 115.4 MB
}

void check_bar1(int cuda_device, std::size_t bytes) {
  std::string reason;
  const std::optional<Bar1Info> info = bar1_info(cuda_device, reason);
  if (!info) {
    log::info("BAR1 size of GPU {} unknown ({}); registering {} without checking it", cuda_device, reason, mib(bytes));
    return;
  }
  if (const std::uint64_t limit = bar1_registration_limit(*info); bytes > limit) {
    throw std::runtime_error("landing buffers of " + mib(bytes) + " do not fit through GPU " +
                             std::to_string(cuda_device) + "'s BAR1 (" + mib(info->total) + " total, " +
                             mib(info->free) + " free, at most " + mib(limit) +
                             " per registration); hint: fewer or smaller landing buffers (depth:, chunk: on the "
                             "link), memory: host_pinned on the link, or enable resizable BAR / a larger BAR1 "
                             "in the BIOS (nvidia-smi -q -d MEMORY shows BAR1)");
  }
}

std::optional<LandingRegistration> register_landing(ibv_pd& pd, void* address, std::size_t bytes, bool device,
                                                    int cuda_device, std::string& why) {
  LandingRegistration registration;
  if (!device) {
    registration.mr.reset(ibv_reg_mr(&pd, address, bytes, kRemoteWriteAccess));
    if (!registration.mr) throw std::runtime_error(errno_message("ibv_reg_mr(host landing buffers)"));
    registration.why = "landing buffers in host memory (ibv_reg_mr)";
    return registration;
  }
  check_bar1(cuda_device, bytes);
  std::string dmabuf_reason;
  if (std::optional<FileDescriptor> fd = export_dmabuf(address, bytes, cuda_device, dmabuf_reason)) {
    registration.mr.reset(
        ibv_reg_dmabuf_mr(&pd, 0, bytes, reinterpret_cast<std::uint64_t>(address), fd->get(), kRemoteWriteAccess));
    if (registration.mr) {
      registration.dmabuf = std::move(*fd);
      registration.path = LandingPath::dmabuf;
      registration.why = "landing buffers in GPU memory through dma-buf (ibv_reg_dmabuf_mr)";
      return registration;
    }
    dmabuf_reason = errno_message("ibv_reg_dmabuf_mr");
  }
  registration.mr.reset(ibv_reg_mr(&pd, address, bytes, kRemoteWriteAccess));
  if (registration.mr) {
    registration.path = LandingPath::peermem;
    registration.why =
        "landing buffers in GPU memory through nvidia-peermem (ibv_reg_mr on the device pointer; "
        "dma-buf: " +
        dmabuf_reason + ")";
    return registration;
  }
  why = "GPU memory cannot be registered: dma-buf: " + dmabuf_reason + "; " +
        errno_message("ibv_reg_mr(device pointer)") + " (nvidia-peermem not loaded?)";
  return std::nullopt;
}

}  // namespace sluice::rdma
