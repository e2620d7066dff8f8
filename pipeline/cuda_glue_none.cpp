// cuda_glue for builds without the CUDA toolkit: configuration validation refuses device and
// pinned memory before anything starts, so reaching these throws a clear error.
#include <stdexcept>
#include <string>

#include "pipeline/cuda_glue.hpp"

namespace sluice::cuda_glue {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw std::runtime_error(std::string(what) + ": this build of Sluice has no CUDA (configure found no CUDA toolkit)");
}
}  // namespace

int device_count() noexcept { return 0; }
std::string unavailable_reason() { return "this build of Sluice has no CUDA"; }
void* allocate_pinned(std::size_t) { no_cuda("host_pinned memory"); }
void free_pinned(void*) noexcept {}
std::string register_host(void*, std::size_t) noexcept { return "cudaHostRegister: this build of Sluice has no CUDA"; }
void unregister_host(void*) noexcept {}
void* allocate_device(std::size_t, int) { no_cuda("device memory"); }
void free_device(void*) noexcept {}
std::string copy(void*, const void*, std::size_t, void*) noexcept {
  return "device copy: this build of Sluice has no CUDA";
}
std::string pci_bus_id(int) { return {}; }
int device_of(const void*) noexcept { return -1; }
std::string enable_peer_access(int, int) noexcept { return "this build of Sluice has no CUDA"; }
void* create_stream(int) { no_cuda("CUDA stream"); }
void destroy_stream(void*) noexcept {}

std::string copy_async(void*, const void*, std::size_t, void*) noexcept {
  return "device copy: this build of Sluice has no CUDA";
}
std::string synchronize_stream(void*) noexcept { return "CUDA stream: this build of Sluice has no CUDA"; }
void* create_event(int) { no_cuda("CUDA event"); }
void destroy_event(void*) noexcept {}
std::string record_event(void*, void*) noexcept { return "CUDA event: this build of Sluice has no CUDA"; }
std::string stream_wait_event(void*, void*) noexcept { return "CUDA event: this build of Sluice has no CUDA"; }
std::string query_event(void*, bool& done) noexcept {
  done = true;
  return "CUDA event: this build of Sluice has no CUDA";
}
std::string synchronize_event(void*) noexcept { return "CUDA event: this build of Sluice has no CUDA"; }

}  // namespace sluice::cuda_glue
