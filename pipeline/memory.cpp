// Host memory and the parts of MemoryRegion that need no CUDA; memory_cuda.cpp adds the rest.
#include "pipeline/memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "pipeline/cuda_glue.hpp"
#include "pipeline/errno_message.hpp"
#include "pipeline/log.hpp"

namespace sluice {

std::string_view to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::host:
      return "host";
    case MemoryKind::host_pinned:
      return "host_pinned";
    case MemoryKind::device:
      return "device";
  }
  return "?";
}

std::optional<MemoryKind> memory_kind_from_string(std::string_view text) {
  if (text == "host") return MemoryKind::host;
  if (text == "host_pinned" || text == "pinned") return MemoryKind::host_pinned;
  if (text == "device" || text == "gpu") return MemoryKind::device;
  return std::nullopt;
}

namespace {
constexpr std::size_t kHostAlignment = 4096;  // O_DIRECT and verbs both want page alignment
constexpr std::size_t kHugePage = 2 << 20;

// SLUICE_HUGE_PAGES=0 keeps host slabs in 4 KiB pages (for hosts that run with THP off for
// latency reasons, and for page-for-page comparisons with tools such as fio).
bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char* value = std::getenv("SLUICE_HUGE_PAGES");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return wanted;
}
}  // namespace

MemoryRegion::MemoryRegion(MemoryKind kind, std::size_t bytes, int cuda_device)
    : size_(bytes), kind_(kind), cuda_device_(cuda_device) {
  if (bytes == 0) throw std::runtime_error("MemoryRegion: zero-byte allocation");
  switch (kind) {
    case MemoryKind::host: {
      void* memory = nullptr;
      // Slabs of 2 MiB or more are huge-page aligned and advised as such: a 4 MiB O_DIRECT
      // or DMA transfer from huge pages is a few physically contiguous segments instead of
      // 1024 scattered ones.
      const std::size_t alignment = bytes >= kHugePage && huge_pages_wanted() ? kHugePage : kHostAlignment;
      const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
      if (int error = posix_memalign(&memory, alignment, rounded); error != 0) {
        throw std::runtime_error(errno_message("posix_memalign(" + std::to_string(rounded) + " bytes)", error));
      }
      data_ = static_cast<std::byte*>(memory);
      // Advice only: without transparent huge pages the slab simply stays in 4 KiB pages.
      if (alignment == kHugePage) ::madvise(memory, rounded, MADV_HUGEPAGE);
      std::memset(data_, 0, rounded);  // fault every page in now, not on the hot path
      break;
    }
    case MemoryKind::host_pinned:
      data_ = static_cast<std::byte*>(cuda_glue::allocate_pinned(bytes));
      std::memset(data_, 0, bytes);
      break;
    case MemoryKind::device:
      data_ = static_cast<std::byte*>(cuda_glue::allocate_device(bytes, cuda_device));
      break;
  }
}

MemoryRegion::MemoryRegion(MemoryRegion&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      kind_(other.kind_),
      cuda_device_(other.cuda_device_),
      registered_(std::exchange(other.registered_, false)) {}

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    kind_ = other.kind_;
    cuda_device_ = other.cuda_device_;
    registered_ = std::exchange(other.registered_, false);
  }
  return *this;
}

MemoryRegion::~MemoryRegion() { release(); }

void MemoryRegion::release() noexcept {
  if (data_ == nullptr) return;
  if (registered_) cuda_glue::unregister_host(data_);
  registered_ = false;
  switch (kind_) {
    case MemoryKind::host:
      std::free(data_);
      break;
    case MemoryKind::host_pinned:
      cuda_glue::free_pinned(data_);
      break;
    case MemoryKind::device:
      cuda_glue::free_device(data_);
      break;
  }
  data_ = nullptr;
}

bool MemoryRegion::pin_for_device() const {
  if (pinned()) return true;
  if (data_ == nullptr) return false;
  if (!cuda_available()) {
    log::warn("host memory stays pageable: {}", cuda_unavailable_reason());
    return false;
  }
  if (std::string error = cuda_glue::register_host(data_, size_); !error.empty()) {
    log::warn("host memory stays pageable ({} bytes): {}", size_, error);
    return false;
  }
  registered_ = true;
  return true;
}

bool cuda_available() { return cuda_glue::device_count() > 0; }

std::string cuda_unavailable_reason() { return cuda_glue::unavailable_reason(); }

std::string copy_memory(std::byte* destination, MemoryKind destination_kind, const std::byte* source,
                        MemoryKind source_kind, std::size_t bytes, void* cuda_stream) noexcept {
  if (destination_kind != MemoryKind::device && source_kind != MemoryKind::device) {
    std::memcpy(destination, source, bytes);
    return {};
  }
  return cuda_glue::copy(destination, source, bytes, cuda_stream);
}

CudaStream::CudaStream(int device) : stream_(cuda_glue::create_stream(device)) {}
CudaStream::CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cuda_glue::destroy_stream(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}
CudaStream::~CudaStream() {
  if (stream_ != nullptr) cuda_glue::destroy_stream(stream_);
}

}  // namespace sluice
