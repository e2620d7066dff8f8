// CUDA builds: dma-buf export through the driver API (reached via cudaGetDriverEntryPoint,
// so nothing links libcuda directly) and BAR1 through NVML (dlopen'd: no hard dependency).
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <memory>

#include "stages/link/rdma/gpu_memory.hpp"

namespace sluice::rdma {

namespace {

// The few NVML declarations used, as nvml.h states them (the header is not in every toolkit).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlBar1Memory {
  unsigned long long bar1Total;
  unsigned long long bar1Free;
  unsigned long long bar1Used;
};

struct DlClose {
  void operator()(void* handle) const noexcept { ::dlclose(handle); }
};
using Library = std::unique_ptr<void, DlClose>;

template <typename Function>
Function symbol(void* library, const char* name) {
  return reinterpret_cast<Function>(::dlsym(library, name));
}

template <typename Function>
Function driver_entry(const char* name, std::string& reason) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult status{};
  const cudaError_t error = cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &status);
  if (error != cudaSuccess || status != cudaDriverEntryPointSuccess || function == nullptr) {
    reason = std::string("the CUDA driver has no ") + name + " (" +
             (error != cudaSuccess ? cudaGetErrorString(error) : "symbol not found") + ")";
    return nullptr;
  }
  return reinterpret_cast<Function>(function);
}

std::string driver_error(const char* call, CUresult result) {
  return std::string(call) + " failed with CUresult " + std::to_string(static_cast<int>(result));
}

}  // namespace

std::optional<Bar1Info> bar1_info(int cuda_device, std::string& reason) {
  std::array<char, 32> bus_id{};
  if (cudaError_t error = cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()), cuda_device);
      error != cudaSuccess) {
    reason = std::string("cudaDeviceGetPCIBusId: ") + cudaGetErrorString(error);
    return std::nullopt;
  }
  Library nvml(::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!nvml) {
    reason = std::string("dlopen(libnvidia-ml.so.1): ") + ::dlerror();
    return std::nullopt;
  }
  auto init = symbol<NvmlReturn (*)()>(nvml.get(), "nvmlInit_v2");
  auto shutdown = symbol<NvmlReturn (*)()>(nvml.get(), "nvmlShutdown");
  auto by_bus_id = symbol<NvmlReturn (*)(const char*, NvmlDevice*)>(nvml.get(), "nvmlDeviceGetHandleByPciBusId_v2");
  auto get_bar1 = symbol<NvmlReturn (*)(NvmlDevice, NvmlBar1Memory*)>(nvml.get(), "nvmlDeviceGetBAR1MemoryInfo");
  if (init == nullptr || shutdown == nullptr || by_bus_id == nullptr || get_bar1 == nullptr) {
    reason = "libnvidia-ml.so.1 lacks nvmlDeviceGetBAR1MemoryInfo or its companions";
    return std::nullopt;
  }
  if (NvmlReturn error = init(); error != 0) {
    reason = "nvmlInit_v2 returned " + std::to_string(error);
    return std::nullopt;
  }
  NvmlDevice device = nullptr;
  NvmlBar1Memory memory{};
  NvmlReturn error = by_bus_id(bus_id.data(), &device);
  if (error == 0) error = get_bar1(device, &memory);
  shutdown();
  if (error != 0) {
    reason = "nvmlDeviceGetBAR1MemoryInfo(" + std::string(bus_id.data()) + ") returned " + std::to_string(error);
    return std::nullopt;
  }
  return Bar1Info{memory.bar1Total, memory.bar1Free};
}

std::optional<FileDescriptor> export_dmabuf(const void* address, std::size_t bytes, int cuda_device,
                                            std::string& reason) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (reinterpret_cast<std::uintptr_t>(address) % page != 0 || bytes % page != 0) {
    reason = "the range is not aligned to the " + std::to_string(page) + "-byte page size dma-buf export needs";
    return std::nullopt;
  }
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using DeviceGetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  using GetHandle = CUresult (*)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
  auto device_get = driver_entry<DeviceGet>("cuDeviceGet", reason);
  auto get_attribute = driver_entry<DeviceGetAttribute>("cuDeviceGetAttribute", reason);
  auto get_handle = driver_entry<GetHandle>("cuMemGetHandleForAddressRange", reason);
  if (device_get == nullptr || get_attribute == nullptr || get_handle == nullptr) return std::nullopt;
  CUdevice device{};
  if (CUresult result = device_get(&device, cuda_device); result != CUDA_SUCCESS) {
    reason = driver_error("cuDeviceGet", result);
    return std::nullopt;
  }
  int supported = 0;
  if (CUresult result = get_attribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device);
      result != CUDA_SUCCESS || supported == 0) {
    reason = result != CUDA_SUCCESS ? driver_error("cuDeviceGetAttribute(DMA_BUF_SUPPORTED)", result)
                                    : "GPU " + std::to_string(cuda_device) +
                                          " does not support dma-buf (needs the open kernel modules, Turing or later)";
    return std::nullopt;
  }
  int fd = -1;
  if (CUresult result =
          get_handle(&fd, reinterpret_cast<CUdeviceptr>(address), bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      result != CUDA_SUCCESS) {
    reason = driver_error("cuMemGetHandleForAddressRange(DMA_BUF_FD)", result);
    return std::nullopt;
  }
  return FileDescriptor(fd);
}

}  // namespace sluice::rdma
