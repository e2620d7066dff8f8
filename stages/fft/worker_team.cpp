// The worker team: start-up, pinning and the hand-off of one job. A hand-off is a bumped
// generation counter and a word of claim bits, not a queue: the caller and the workers only ever
// share the current job, each part of it claimed by one compare-and-swap.
#include "stages/fft/worker_team.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "pipeline/clock.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/thread_cores.hpp"

namespace sluice {
namespace {

// How long a thread spins on a counter before it sleeps on it. The next job of a batch comes a few
// microseconds after the last (the stage's bookkeeping between load, transform and fold), while a
// futex wake-up costs tens of microseconds; an idle stage (waiting for input) stops spinning after this.
constexpr std::uint64_t kSpinNs = 50'000;

// Spins until `counter` differs from `seen` or kSpinNs have passed; returns its last value.
std::uint32_t spin_while_equal(const std::atomic<std::uint32_t>& counter, std::uint32_t seen) noexcept {
  std::uint32_t now = counter.load(std::memory_order_acquire);
  if (now != seen) return now;
  const std::uint64_t deadline = monotonic_ns() + kSpinNs;
  for (unsigned turn = 1;; ++turn) {
    cpu_relax();
    now = counter.load(std::memory_order_acquire);
    if (now != seen) return now;
    if (turn % 64 == 0 && monotonic_ns() > deadline)
      return now;  // the clock is read rarely: it costs more than a pause
  }
}

// The cores each of a team's `workers` may run on, checked before any thread starts: one each
// from `cpus`, else any of the process's cores but `avoid_cpu`, else any (no sets). `placement`
// says which, for the stage's log line.
std::vector<std::vector<int>> worker_core_sets(std::size_t workers, const std::vector<int>& cpus, int avoid_cpu,
                                               std::string& placement) {
  // The main thread's cores (its id is the process id): the process's own, even when the thread that
  // builds the team is pinned somewhere narrower.
  const std::vector<int> allowed = allowed_cores(getpid());
  const auto may_use = [&allowed](int cpu) { return std::binary_search(allowed.begin(), allowed.end(), cpu); };
  std::vector<std::vector<int>> sets;
  if (!cpus.empty()) {
    for (int cpu : cpus) {
      if (!may_use(cpu)) {
        throw std::runtime_error("cannot pin a worker to cpu " + std::to_string(cpu) + ": this process may use " +
                                 std::to_string(allowed.size()) + " cpus");
      }
      sets.push_back({cpu});
    }
    placement = "on cores " + format_core_list(cpus);
  } else if (may_use(avoid_cpu) && allowed.size() > 1) {
    std::vector<int> others = allowed;
    others.erase(std::find(others.begin(), others.end(), avoid_cpu));
    sets.assign(workers, others);
    placement = "on any core but " + std::to_string(avoid_cpu);
  } else {
    placement = "on any core";
  }
  return sets;
}

}  // namespace

WorkerTeam::WorkerTeam(std::size_t threads, const std::vector<int>& cpus, int avoid_cpu, const std::string& name) {
  if (threads <= 1) {
    placement_ = "none";
    return;
  }
  if (threads > kMaxThreads) {
    throw std::invalid_argument("worker team of " + std::to_string(threads) + " threads: at most " +
                                std::to_string(kMaxThreads));
  }
  if (!cpus.empty() && cpus.size() != threads - 1) {
    throw std::invalid_argument("worker team of " + std::to_string(threads) + " threads given " +
                                std::to_string(cpus.size()) + " worker cores (needs " + std::to_string(threads - 1) +
                                ")");
  }
  start_workers(worker_core_sets(threads - 1, cpus, avoid_cpu, placement_), threads - 1, name);
}

void WorkerTeam::start_workers(const std::vector<std::vector<int>>& sets, std::size_t workers,
                               const std::string& name) {
  workers_.reserve(workers);
  try {
    for (std::size_t index = 1; index <= workers; ++index) {
      workers_.emplace_back([this, index] { work(index); });
      const pthread_t handle = workers_.back().native_handle();
      if (!sets.empty()) pin_thread(handle, sets[index - 1], "worker " + std::to_string(index));
      // For top -H and perf; a name that does not fit 15 bytes is cut, which harms nothing.
      const std::string thread_name = (name + " " + std::to_string(index)).substr(0, 15);
      static_cast<void>(pthread_setname_np(handle, thread_name.c_str()));
    }
  } catch (...) {
    stop_workers();  // the threads started so far, or their destructors would terminate the process
    throw;
  }
}

WorkerTeam::~WorkerTeam() { stop_workers(); }

void WorkerTeam::stop_workers() noexcept {
  stopping_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

void WorkerTeam::run_erased(Call call, const void* job) noexcept {
  call_.store(call, std::memory_order_relaxed);
  job_.store(job, std::memory_order_relaxed);
  parts_done_.store(0, std::memory_order_relaxed);
  const std::uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;  // only this thread bumps it
  claims_.store(std::uint64_t{generation} << 32, std::memory_order_release);         // publishes the three stores above
  // seq_cst on both sides (here: bump, then read the sleepers; a worker: count itself, then read the
  // generation) so that either the worker sees the new job or this thread sees it asleep and wakes it.
  generation_.store(generation, std::memory_order_seq_cst);
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();

  run_parts(generation, 0);

  // Every part is claimed now; wait for those others are still running.
  const auto parts = static_cast<std::uint32_t>(size());
  std::uint32_t done = parts_done_.load(std::memory_order_acquire);
  while (done != parts) {
    const std::uint32_t before = done;
    done = spin_while_equal(parts_done_, before);
    if (done != before) continue;
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    done = parts_done_.load(std::memory_order_seq_cst);
    if (done != parts) parts_done_.wait(done, std::memory_order_acquire);
    caller_sleeping_.store(false, std::memory_order_relaxed);
    done = parts_done_.load(std::memory_order_acquire);
  }
}

void WorkerTeam::run_parts(std::uint32_t generation, std::size_t preferred) noexcept {
  const std::size_t parts = size();
  const std::uint64_t all = (std::uint64_t{1} << parts) - 1;
  std::uint64_t state = claims_.load(std::memory_order_acquire);
  for (;;) {
    if (state >> 32 != generation) return;  // a later job already (this thread woke late)
    const std::uint64_t taken = state & all;
    if (taken == all) return;
    std::size_t part = preferred;
    while ((taken >> part & 1) != 0) part = (part + 1) % parts;  // its own part, else the next free one
    if (!claims_.compare_exchange_weak(state, state | std::uint64_t{1} << part, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      continue;  // `state` now holds the current claims
    }
    // Claimed for this generation: the job cannot have changed, since it waits for this part.
    call_.load(std::memory_order_relaxed)(job_.load(std::memory_order_relaxed), part);
    // Counting it done releases this part's results to the caller; wake it if it went to sleep.
    if (parts_done_.fetch_add(1, std::memory_order_seq_cst) + 1 == parts &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      parts_done_.notify_one();
    }
    state = claims_.load(std::memory_order_acquire);
  }
}

void WorkerTeam::work(std::size_t index) noexcept {
  std::uint32_t seen = 0;  // the generation last run (generation_ starts at 0 and only grows)
  for (;;) {
    std::uint32_t now = spin_while_equal(generation_, seen);
    while (now == seen) {  // idle past the spin: sleep until the caller notifies
      sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
      now = generation_.load(std::memory_order_seq_cst);
      if (now == seen) generation_.wait(seen, std::memory_order_acquire);
      sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
      now = generation_.load(std::memory_order_acquire);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = now;
    run_parts(now, index);
  }
}

}  // namespace sluice
