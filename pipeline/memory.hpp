// Where chunk bytes live (host, host-pinned, GPU device) and the one owner of each slab.
// A pool takes one contiguous slab so that one verbs MR, one dma-buf or one io_uring
// buffer table entry per chunk can cover it without per-chunk allocations.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

enum class MemoryKind { host, host_pinned, device };

std::string_view to_string(MemoryKind kind);
std::optional<MemoryKind> memory_kind_from_string(std::string_view text);

// True when this build has CUDA and at least one device answers.
bool cuda_available();
// The reason cuda_available() is false, for one-line fallback messages ("no CUDA in this build", ...).
std::string cuda_unavailable_reason();

// An owned, page-aligned slab of memory of one kind. Host slabs are touched at allocation
// so that first-write page faults never land on the hot path. Move-only.
class MemoryRegion {
 public:
  MemoryRegion() = default;
  // Throws std::runtime_error naming the failed call (posix_memalign, cudaHostAlloc, cudaMalloc).
  MemoryRegion(MemoryKind kind, std::size_t bytes, int cuda_device = 0);
  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion();

  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] MemoryKind kind() const { return kind_; }
  [[nodiscard]] int cuda_device() const { return cuda_device_; }
  // Page-locks a host slab so that GPU copies from and to it run at full PCIe rate instead of
  // through the driver's pageable bounce (cudaHostRegister, once: later calls return at once).
  // True when the slab is now pinned (host_pinned slabs always are; device slabs need nothing);
  // false, with one warning logged, when there is no GPU or the call failed: copies still work.
  // Setup only (a stage's start()); const because the bytes and their owner stay the same.
  bool pin_for_device() const;
  [[nodiscard]] bool pinned() const { return kind_ != MemoryKind::host || registered_; }

 private:
  void release() noexcept;

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  MemoryKind kind_ = MemoryKind::host;
  int cuda_device_ = 0;
  mutable bool registered_ = false;  // a host slab page-locked by pin_for_device()
};

// Copies bytes between any two kinds. Host-only copies are memcpy; anything touching the
// device goes through cudaMemcpyAsync on `cuda_stream` (nullptr = default stream) and is
// waited for before returning. Returns an empty string on success, else the error.
std::string copy_memory(std::byte* destination, MemoryKind destination_kind, const std::byte* source,
                        MemoryKind source_kind, std::size_t bytes, void* cuda_stream = nullptr) noexcept;

// One CUDA stream owner (opaque so that non-CUDA code needs no CUDA headers).
class CudaStream {
 public:
  CudaStream() = default;
  explicit CudaStream(int device);  // throws naming cudaStreamCreateWithFlags
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream();
  [[nodiscard]] void* get() const { return stream_; }

 private:
  void* stream_ = nullptr;
};

}  // namespace sluice
