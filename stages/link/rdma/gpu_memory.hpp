// GPU memory for RDMA: the BAR1 window a NIC writes through, the dma-buf a CUDA allocation is
// exported as, and landing buffers registered by the first path that works (dma-buf MR, then
// nvidia-peermem) — or the reason none did, so the caller lands in host-pinned memory instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "stages/link/rdma/verbs_owners.hpp"

namespace sluice::rdma {

struct Bar1Info {
  std::uint64_t total = 0;  // bytes of the BAR1 aperture
  std::uint64_t free = 0;   // bytes not mapped yet
};

// BAR1 size of CUDA device `cuda_device` through NVML (loaded with dlopen, so the program
// does not depend on it), or the reason it cannot be read.
std::optional<Bar1Info> bar1_info(int cuda_device, std::string& reason);

// The most bytes one registration may pin on a GPU with this BAR1: what is free, and at most
// 43% of the aperture, since cards with a 256 MiB BAR1 fail registrations above ~115 MB
// with "Bad address" although more is nominally free (the driver keeps the rest).
std::uint64_t bar1_registration_limit(const Bar1Info& info);

// Throws with the sizes and a hint when `bytes` will not fit through device's BAR1; logs
// and returns when BAR1 cannot be read (registration will then say what failed).
void check_bar1(int cuda_device, std::size_t bytes);

// cuMemGetHandleForAddressRange(DMA_BUF_FD) on [address, address + bytes), or the reason it
// is not available (no CUDA build, driver too old, device without dma-buf support).
std::optional<FileDescriptor> export_dmabuf(const void* address, std::size_t bytes, int cuda_device,
                                            std::string& reason);

enum class LandingPath { host, dmabuf, peermem };
const char* to_string(LandingPath path);

struct LandingRegistration {
  FileDescriptor dmabuf;  // kept open while the MR lives
  MrPtr mr;
  LandingPath path = LandingPath::host;
  std::string why;  // one line: the path taken and why the ones before it were not
};

// Registers landing memory for remote writes. Host memory: ibv_reg_mr. Device memory:
// BAR1 check, then dma-buf, then peermem; nullopt (with `why` saying what each path
// answered) when no path works, so the caller can land in host-pinned memory instead.
std::optional<LandingRegistration> register_landing(ibv_pd& pd, void* address, std::size_t bytes, bool device,
                                                    int cuda_device, std::string& why);

}  // namespace sluice::rdma
