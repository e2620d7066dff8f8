// WorkerTeam: persistent threads that share one job at a time with the thread that asks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace sluice {

// A few persistent threads that share one job at a time with the thread that asks: run(job) calls
// job(part) once for every part in [0, size()) and returns when all have returned. Part i is meant
// for thread i (the caller's is 0), so each thread keeps working on the same data from one job to
// the next; a thread done with its own part takes any part still unclaimed, so a worker that is
// asleep or preempted delays no one: the others do its part. The FFTW backend splits each batch's
// work through one (stages/fft/fftw_backend.cpp).
class WorkerTeam {
 public:
  // `threads` (1 to kMaxThreads) counts the caller, so threads − 1 workers start here, named `name`
  // and their index ("fftw worker 1"). Worker i runs on core cpus[i − 1] when `cpus` is given
  // (threads − 1 of them), else on every core this process may use but `avoid_cpu` (−1: any core).
  // Throws naming the failed call, or the core this process may not use.
  WorkerTeam(std::size_t threads, const std::vector<int>& cpus, int avoid_cpu, const std::string& name);
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;
  ~WorkerTeam();

  static constexpr std::size_t kMaxThreads = 32;  // one bit per part in claims_

  [[nodiscard]] std::size_t size() const noexcept { return workers_.size() + 1; }
  // Where the workers run, for the stage's note: "on cores 2, 3", "on any core but 1", "on any core".
  [[nodiscard]] const std::string& placement() const noexcept { return placement_; }

  // Calls job(part) for every part in [0, size()), each once, on this thread and the workers; returns
  // when all have returned. `job` must not throw. Never allocates; one caller at a time.
  template <typename Job>
  void run(const Job& job) noexcept {
    if (workers_.empty()) {
      job(std::size_t{0});
      return;
    }
    run_erased([](const void* erased, std::size_t part) noexcept { (*static_cast<const Job*>(erased))(part); }, &job);
  }

 private:
  using Call = void (*)(const void*, std::size_t) noexcept;
  void run_erased(Call call, const void* job) noexcept;
  // Runs parts of job `generation`, `preferred` first, until none is left unclaimed.
  void run_parts(std::uint32_t generation, std::size_t preferred) noexcept;
  void work(std::size_t index) noexcept;
  void stop_workers() noexcept;
  // Starts workers 1..`workers`, each pinned to its set in `sets` (none: unpinned) and named
  // after `name`; stops the ones started when one fails.
  void start_workers(const std::vector<std::vector<int>>& sets, std::size_t workers, const std::string& name);

  // The job being run, set by the caller before it publishes the job's generation in claims_; a part
  // is run only once claimed for that generation, and the job cannot change before its parts are done.
  std::atomic<Call> call_{nullptr};
  std::atomic<const void*> job_{nullptr};
  std::atomic<std::uint64_t> claims_{0};  // generation << 32 | one bit per part taken
  std::atomic<std::uint32_t> parts_done_{0};
  // Bumped once per job (and once to stop). Workers spin on it briefly after each job, since the
  // next usually follows within microseconds, then sleep on it (futex) until the caller notifies.
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<std::uint32_t> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
  std::string placement_;
  std::vector<std::thread> workers_;  // last: they stop and join before the state above goes
};

}  // namespace sluice
