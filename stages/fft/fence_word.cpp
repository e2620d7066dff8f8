#include "stages/fft/fence_word.hpp"

#include <atomic>
#include <stdexcept>
#include <utility>

#include "pipeline/log.hpp"

namespace sluice {
namespace {

void check(const char* call, cudaError_t error) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
                             ")");
  }
}

}  // namespace

FenceWord FenceWord::open(cudaStream_t stream) {
  FenceWord word;
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &function, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess || function == nullptr) {
    static_cast<void>(cudaGetLastError());
    return word;
  }
  void* host = nullptr;
  check("cudaHostAlloc(fence word)", cudaHostAlloc(&host, sizeof(std::uint64_t), cudaHostAllocMapped));
  word.host_ = static_cast<std::uint64_t*>(host);
  *word.host_ = 0;
  void* device = nullptr;
  check("cudaHostGetDevicePointer(fence word)", cudaHostGetDevicePointer(&device, host, 0));
  word.device_ = reinterpret_cast<CUdeviceptr>(device);
  const auto write = reinterpret_cast<WriteValue64>(function);
  if (write(stream, word.device_, 1, CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS ||
      cudaStreamSynchronize(stream) != cudaSuccess || *word.host_ != 1) {
    static_cast<void>(cudaGetLastError());
    return {};  // no stream memory operations here (the word allocated is freed)
  }
  *word.host_ = 0;
  word.write_ = write;
  return word;
}

FenceWord::FenceWord(FenceWord&& other) noexcept
    : host_(std::exchange(other.host_, nullptr)),
      device_(std::exchange(other.device_, 0)),
      write_(std::exchange(other.write_, nullptr)) {}

FenceWord& FenceWord::operator=(FenceWord&& other) noexcept {
  if (this != &other) {
    FenceWord old(std::move(*this));
    host_ = std::exchange(other.host_, nullptr);
    device_ = std::exchange(other.device_, 0);
    write_ = std::exchange(other.write_, nullptr);
  }
  return *this;
}

FenceWord::~FenceWord() {
  if (host_ == nullptr) return;
  if (const cudaError_t error = cudaFreeHost(host_); error != cudaSuccess) {
    log::warn("cudaFreeHost(fence word): {}", cudaGetErrorString(error));
  }
}

std::string FenceWord::write(cudaStream_t stream, std::uint64_t value) const noexcept {
  if (write_ == nullptr) return "no fence word";
  if (const CUresult result = write_(stream, device_, value, CU_STREAM_WRITE_VALUE_DEFAULT); result != CUDA_SUCCESS) {
    return "cuStreamWriteValue64(fence) failed with CUresult " + std::to_string(static_cast<int>(result));
  }
  return {};
}

std::uint64_t FenceWord::load() const noexcept {
  return host_ == nullptr ? 0 : std::atomic_ref<std::uint64_t>(*host_).load(std::memory_order_acquire);
}

}  // namespace sluice
