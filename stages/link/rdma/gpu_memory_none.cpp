// Builds without CUDA: there is no GPU memory to export or size.
#include "stages/link/rdma/gpu_memory.hpp"

namespace sluice::rdma {

std::optional<Bar1Info> bar1_info(int, std::string& reason) {
  reason = "no CUDA in this build";
  return std::nullopt;
}

std::optional<FileDescriptor> export_dmabuf(const void*, std::size_t, int, std::string& reason) {
  reason = "no CUDA in this build";
  return std::nullopt;
}

}  // namespace sluice::rdma
