// A few persistent threads that share one job at a time with the thread that asks: run(job) calls
// job(0) on the caller and job(1) … job(size() − 1) on the workers, and returns once all are done.
// The FFTW backend splits each batch's work through one (stages/fft/fftw_backend.cpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace sluice {

class WorkerTeam {
 public:
  // `threads` counts the caller, so threads − 1 workers start here, named `name` + their index
  // ("fftw worker 1"). Worker i runs on core cpus[i − 1] when `cpus` is given (threads − 1 of them),
  // else on every core this process may use but `avoid_cpu` (−1: any core). Throws naming the failed
  // call, or the core this process may not use.
  WorkerTeam(std::size_t threads, const std::vector<int>& cpus, int avoid_cpu, const std::string& name);
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;
  ~WorkerTeam();

  [[nodiscard]] std::size_t size() const noexcept { return workers_.size() + 1; }
  // Where the workers run, for the stage's note: "on cores 2, 3", "on any core but 1", "on any core".
  [[nodiscard]] const std::string& placement() const noexcept { return placement_; }

  // Calls job(i) for every i in [0, size()): 0 on this thread, the others on the workers; returns when
  // all have returned. `job` must not throw. Never allocates; one caller at a time.
  template <typename Job>
  void run(const Job& job) noexcept {
    if (workers_.empty()) {
      job(std::size_t{0});
      return;
    }
    run_erased([](const void* erased, std::size_t index) noexcept { (*static_cast<const Job*>(erased))(index); }, &job);
  }

 private:
  using Call = void (*)(const void*, std::size_t) noexcept;
  void run_erased(Call call, const void* job) noexcept;
  void work(std::size_t index) noexcept;
  void stop_workers() noexcept;

  // The job being run: written by the caller before it bumps generation_, read by workers after.
  Call call_ = nullptr;
  const void* job_ = nullptr;
  // Bumped once per job (and once to stop). Workers spin on it briefly after each job, since the
  // next usually follows within microseconds, then sleep on it (futex) until the caller notifies.
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<std::uint32_t> sleeping_workers_{0};
  std::atomic<std::uint32_t> remaining_{0};  // workers still in the current job
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
  std::string placement_;
  std::vector<std::thread> workers_;  // last: they stop and join before the state above goes
};

}  // namespace sluice
