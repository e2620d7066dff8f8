// The few CUDA runtime calls the core runtime needs, behind plain C++ so that only
// cuda_glue_cuda.cpp (CUDA builds) or cuda_glue_none.cpp (CPU-only builds) sees CUDA.
#pragma once

#include <cstddef>
#include <string>

namespace sluice::cuda_glue {

int device_count() noexcept;               // 0 when no CUDA build, no driver or no device
std::string unavailable_reason();          // why device_count() is 0
void* allocate_pinned(std::size_t bytes);  // throws naming cudaHostAlloc
void free_pinned(void* pointer) noexcept;
// Page-locks existing host memory for device copies (cudaHostRegister); returns the error, or empty.
std::string register_host(void* pointer, std::size_t bytes) noexcept;
void unregister_host(void* pointer) noexcept;
void* allocate_device(std::size_t bytes, int device);  // throws naming cudaMalloc; memory is zeroed
void free_device(void* pointer) noexcept;
// cudaMemcpyAsync on `stream`, then cudaStreamSynchronize of it; the error, or empty.
std::string copy(void* destination, const void* source, std::size_t bytes, void* stream) noexcept;
std::string pci_bus_id(int device);           // "0000:17:00.0" (cudaDeviceGetPCIBusId); empty when unknown
int device_of(const void* pointer) noexcept;  // the GPU holding device memory `pointer`; -1 for host memory
// Lets `device` read and write `peer`'s memory directly (cudaDeviceEnablePeerAccess); returns
// why not, or empty. Copies between GPUs work without it, staged through the host.
std::string enable_peer_access(int device, int peer) noexcept;
void* create_stream(int device);  // throws naming cudaStreamCreateWithFlags
void destroy_stream(void* stream) noexcept;
// Stream work without waiting: each returns the failed call and its error, or empty.
std::string copy_async(void* destination, const void* source, std::size_t bytes, void* stream) noexcept;
std::string synchronize_stream(void* stream) noexcept;
void* create_event(int device);  // throws naming cudaEventCreateWithFlags (timing off)
void destroy_event(void* event) noexcept;
std::string record_event(void* event, void* stream) noexcept;
std::string stream_wait_event(void* stream, void* event) noexcept;  // device side: the host does not wait
// Whether the work before the event's last record has finished (`done`); the error, or empty.
std::string query_event(void* event, bool& done) noexcept;
std::string synchronize_event(void* event) noexcept;

}  // namespace sluice::cuda_glue
