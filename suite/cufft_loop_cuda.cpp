#include <cuda_runtime.h>
#include <cufft.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/clock.hpp"
#include "pipeline/memory.hpp"
#include "suite/cufft_loop.hpp"

namespace sluice::bench {
namespace {

constexpr std::size_t kBuffers = 16;

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}
void check(cufftResult status, const char* call) {
  if (status != CUFFT_SUCCESS) throw std::runtime_error(std::string(call) + ": cufftResult " + std::to_string(status));
}

}  // namespace

LoopResult cufft_loop(std::size_t size, std::size_t batch_samples, double seconds) {
  if (size == 0 || batch_samples % size != 0) throw std::invalid_argument("cufft_loop: batch is not whole frames");
  const std::size_t bytes = batch_samples * sizeof(cufftComplex);
  std::vector<float> input(batch_samples * 2);
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  for (float& value : input) value = uniform(random);
  std::vector<MemoryRegion> in;
  std::vector<MemoryRegion> out;
  for (std::size_t i = 0; i < kBuffers; ++i) {
    in.emplace_back(MemoryKind::device, bytes);
    out.emplace_back(MemoryKind::device, bytes);
    check(cudaMemcpy(in.back().data(), input.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  int length = static_cast<int>(size);
  cufftHandle plan = 0;
  LoopResult result;
  try {
    check(cufftPlanMany(&plan, 1, &length, nullptr, 1, length, nullptr, 1, length, CUFFT_C2C,
                        static_cast<int>(batch_samples / size)),
          "cufftPlanMany");
    check(cufftSetStream(plan, stream), "cufftSetStream");
    auto enqueue = [&](std::size_t i) {
      check(cufftExecC2C(plan, reinterpret_cast<cufftComplex*>(in[i % kBuffers].data()),
                         reinterpret_cast<cufftComplex*>(out[i % kBuffers].data()), CUFFT_FORWARD),
            "cufftExecC2C");
    };
    for (std::size_t i = 0; i < kBuffers; ++i) enqueue(i);  // warm-up: plan's first launch, clocks
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    // Rounds of kBuffers launches; the clock is read while the next round is already queued
    // behind the one waited for (an event per round), so the stream never runs dry.
    cudaEvent_t rounds[2] = {nullptr, nullptr};
    check(cudaEventCreateWithFlags(&rounds[0], cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&rounds[1], cudaEventDisableTiming), "cudaEventCreate");
    const std::uint64_t begin = monotonic_ns();
    std::size_t done = 0;
    for (std::size_t round = 0;; ++round) {
      for (std::size_t i = 0; i < kBuffers; ++i) enqueue(done + i);
      done += kBuffers;
      check(cudaEventRecord(rounds[round % 2], stream), "cudaEventRecord");
      if (round > 0) check(cudaEventSynchronize(rounds[(round + 1) % 2]), "cudaEventSynchronize");
      if (static_cast<double>(monotonic_ns() - begin) / 1e9 >= seconds) break;
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cudaEventDestroy(rounds[0]);
    cudaEventDestroy(rounds[1]);
    result.seconds = static_cast<double>(monotonic_ns() - begin) / 1e9;
    result.samples = static_cast<double>(done) * static_cast<double>(batch_samples);
  } catch (...) {
    if (plan != 0) cufftDestroy(plan);
    cudaStreamDestroy(stream);
    throw;
  }
  check(cufftDestroy(plan), "cufftDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return result;
}

}  // namespace sluice::bench
