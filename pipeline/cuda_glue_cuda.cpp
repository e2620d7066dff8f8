// CUDA runtime implementation of cuda_glue (built only where the CUDA toolkit was found).
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "pipeline/cuda_glue.hpp"
#include "pipeline/log.hpp"

namespace sluice::cuda_glue {
namespace {

std::string describe(const char* call, cudaError_t error) {
  return std::string(call) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
}

void check(const char* call, cudaError_t error) {
  if (error != cudaSuccess) throw std::runtime_error(describe(call, error));
}

}  // namespace

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

std::string unavailable_reason() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(error) + ")";
  }
  return count == 0 ? "no CUDA device present" : "";
}

void* allocate_pinned(std::size_t bytes) {
  void* pointer = nullptr;
  check("cudaHostAlloc", cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable));
  return pointer;
}

void free_pinned(void* pointer) noexcept {
  if (cudaError_t error = cudaFreeHost(pointer); error != cudaSuccess) {
    log::warn("{}", describe("cudaFreeHost", error));
  }
}

std::string register_host(void* pointer, std::size_t bytes) noexcept {
  if (cudaError_t error = cudaHostRegister(pointer, bytes, cudaHostRegisterPortable); error != cudaSuccess) {
    cudaGetLastError();  // not sticky, but keep the next launch check clean
    return describe("cudaHostRegister", error);
  }
  return {};
}

void unregister_host(void* pointer) noexcept {
  if (cudaError_t error = cudaHostUnregister(pointer); error != cudaSuccess) {
    log::warn("{}", describe("cudaHostUnregister", error));
  }
}

void* allocate_device(std::size_t bytes, int device) {
  check("cudaSetDevice", cudaSetDevice(device));
  void* pointer = nullptr;
  check("cudaMalloc", cudaMalloc(&pointer, bytes));
  // Touch every page now so the first chunk does not pay for mapping.
  if (cudaError_t error = cudaMemset(pointer, 0, bytes); error != cudaSuccess) {
    cudaFree(pointer);
    throw std::runtime_error(describe("cudaMemset", error));
  }
  return pointer;
}

void free_device(void* pointer) noexcept {
  if (cudaError_t error = cudaFree(pointer); error != cudaSuccess) {
    log::warn("{}", describe("cudaFree", error));
  }
}

std::string copy(void* destination, const void* source, std::size_t bytes, void* stream) noexcept {
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (cudaError_t error = cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, cuda_stream);
      error != cudaSuccess) {
    return describe("cudaMemcpyAsync", error);
  }
  if (cudaError_t error = cudaStreamSynchronize(cuda_stream); error != cudaSuccess) {
    return describe("cudaStreamSynchronize", error);
  }
  return {};
}

std::string pci_bus_id(int device) {
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, static_cast<int>(sizeof(bus_id)), device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return bus_id;
}

int device_of(const void* pointer) noexcept {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

std::string enable_peer_access(int device, int peer) noexcept {
  int can = 0;
  if (cudaError_t error = cudaDeviceCanAccessPeer(&can, device, peer); error != cudaSuccess) {
    return describe("cudaDeviceCanAccessPeer", error);
  }
  if (can == 0) return "GPU " + std::to_string(device) + " cannot access GPU " + std::to_string(peer) + " directly";
  if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess) return describe("cudaSetDevice", error);
  cudaError_t error = cudaDeviceEnablePeerAccess(peer, 0);
  if (error == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return {};
  }
  return error == cudaSuccess ? std::string() : describe("cudaDeviceEnablePeerAccess", error);
}

void* create_stream(int device) {
  check("cudaSetDevice", cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void destroy_stream(void* stream) noexcept {
  if (cudaError_t error = cudaStreamDestroy(static_cast<cudaStream_t>(stream)); error != cudaSuccess) {
    log::warn("{}", describe("cudaStreamDestroy", error));
  }
}

std::string copy_async(void* destination, const void* source, std::size_t bytes, void* stream) noexcept {
  const cudaError_t error =
      cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  return error == cudaSuccess ? std::string() : describe("cudaMemcpyAsync", error);
}

std::string synchronize_stream(void* stream) noexcept {
  const cudaError_t error = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  return error == cudaSuccess ? std::string() : describe("cudaStreamSynchronize", error);
}

void* create_event(int device) {
  check("cudaSetDevice", cudaSetDevice(device));
  cudaEvent_t event = nullptr;
  check("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void destroy_event(void* event) noexcept {
  if (cudaError_t error = cudaEventDestroy(static_cast<cudaEvent_t>(event)); error != cudaSuccess) {
    log::warn("{}", describe("cudaEventDestroy", error));
  }
}

std::string record_event(void* event, void* stream) noexcept {
  const cudaError_t error = cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream));
  return error == cudaSuccess ? std::string() : describe("cudaEventRecord", error);
}

std::string stream_wait_event(void* stream, void* event) noexcept {
  const cudaError_t error = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0);
  return error == cudaSuccess ? std::string() : describe("cudaStreamWaitEvent", error);
}

std::string query_event(void* event, bool& done) noexcept {
  const cudaError_t error = cudaEventQuery(static_cast<cudaEvent_t>(event));
  done = error == cudaSuccess;
  if (error == cudaSuccess || error == cudaErrorNotReady) return {};
  return describe("cudaEventQuery", error);
}

std::string synchronize_event(void* event) noexcept {
  const cudaError_t error = cudaEventSynchronize(static_cast<cudaEvent_t>(event));
  return error == cudaSuccess ? std::string() : describe("cudaEventSynchronize", error);
}

}  // namespace sluice::cuda_glue
