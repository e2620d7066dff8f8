// A fence word: a mapped, pinned host word that a CUDA stream (cuStreamWriteValue64, ordered
// after the work before it) or a kernel writes numbers into, and the host reads with a load
// instead of a driver call. The cuFFT backend's fences use it.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace sluice {

class FenceWord {
 public:
  FenceWord() = default;
  // Allocates the word and has `stream` write it once, read back. An empty word (false, nothing
  // allocated) where the driver has no stream memory operations; throws std::runtime_error,
  // naming the call, where an allocation fails.
  static FenceWord open(cudaStream_t stream);
  FenceWord(FenceWord&& other) noexcept;
  FenceWord& operator=(FenceWord&& other) noexcept;
  FenceWord(const FenceWord&) = delete;
  FenceWord& operator=(const FenceWord&) = delete;
  ~FenceWord();

  explicit operator bool() const noexcept { return write_ != nullptr; }
  // Enqueues the write of `value` on `stream`; the error, or empty.
  [[nodiscard]] std::string write(cudaStream_t stream, std::uint64_t value) const noexcept;
  // The last value written (acquire).
  [[nodiscard]] std::uint64_t load() const noexcept;
  [[nodiscard]] unsigned long long* device_pointer() const noexcept {
    return reinterpret_cast<unsigned long long*>(device_);
  }

 private:
  using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  std::uint64_t* host_ = nullptr;
  CUdeviceptr device_ = 0;
  WriteValue64 write_ = nullptr;
};

}  // namespace sluice
