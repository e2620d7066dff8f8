// How long a thread waited for a core: the time it was ready to run while the scheduler ran
// something else where it may run (the kernel's run delay, schedstat's second field), and how
// often another thread took the core from it (nonvoluntary context switches). A pinned thread
// that waits here shares its core: a receive thread that does falls behind its socket. On a
// virtual machine its core can also be taken from outside: the hypervisor's steal time on the
// cores a thread is pinned to (/proc/stat) is the time their vCPUs were ready to run while the
// host ran other work, which the guest's scheduler never sees as a wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

class CoreWait {
 public:
  // The window over which the runtime samples every thread (a window closes at the first sample
  // this long or more after it opened); the most a thread waited within one window is its peak.
  static constexpr std::uint64_t kWindowNs = 100'000'000;
  // A wait a stream behind the thread notices: at 5 GB/s, 50 MB queued.
  static constexpr std::uint64_t kNoticeableNs = 10'000'000;

  // `name`: which of its stage's threads ("stage", "receive").
  explicit CoreWait(std::string name) : name_(std::move(name)) {}
  CoreWait(const CoreWait&) = delete;
  CoreWait& operator=(const CoreWait&) = delete;

  // On the thread itself as it starts: what it has waited so far is left out, and `cores` (the
  // cores it is pinned to; empty when not pinned) is kept. Where /proc cannot be read (or the
  // cores not kept) the figures stay 0.
  void begin(const std::vector<int>& cores) noexcept;
  // From one other thread (the runtime's sampler, about every kWindowNs): brings the figures up
  // to date while the thread runs; nothing before begin() or after end(). True once: the first
  // time a pinned thread waited kNoticeableNs or more within one window, for a warning while the
  // run goes on.
  bool sample() noexcept;
  // On the thread itself as it ends: the last figures; later samples do nothing.
  void end() noexcept;
  // From the sampler, with every core's steal now (read_core_steal()): brings stolen_ns() up to
  // date while the thread runs. True once: the first time the steal is noticeable
  // (steal_noticeable()), for a warning while the run goes on.
  bool sample_steal(const std::map<int, std::uint64_t>& steal) noexcept;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  // The cores begin() was given (empty until then), as a list and as the report writes them:
  // safe to read from any thread.
  [[nodiscard]] const std::vector<int>& core_list() const noexcept;
  [[nodiscard]] std::string cores() const;
  [[nodiscard]] std::uint64_t waited_ns() const noexcept { return waited_ns_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t peak_window_ns() const noexcept {
    return peak_window_ns_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t preemptions() const noexcept { return preemptions_.load(std::memory_order_relaxed); }
  // From begin() to end() (or to the last sample while it runs).
  [[nodiscard]] std::uint64_t lifetime_ns() const noexcept { return lifetime_ns_.load(std::memory_order_relaxed); }
  // The hypervisor's steal time on the thread's cores from begin() to end() (or to the last
  // sample_steal() while it runs), summed over them: 0 for an unpinned thread, or where /proc/stat
  // cannot be read.
  [[nodiscard]] std::uint64_t stolen_ns() const noexcept { return stolen_ns_.load(std::memory_order_relaxed); }
  // The interrupts the thread's cores took from begin() to end(), summed over them, and the source
  // of the most ("" where none): set at end(), 0 before and for an unpinned thread. On a kernel
  // that does not account interrupt time apart, /proc/stat shows their time as the thread's own.
  [[nodiscard]] std::uint64_t interrupts() const noexcept { return interrupts_.load(std::memory_order_acquire); }
  [[nodiscard]] std::string top_interrupt_source() const;

 private:
  struct Reading {
    std::uint64_t wait_ns = 0;
    std::uint64_t nonvoluntary = 0;
  };
  // The thread's figures under /proc/thread-self (its own) or /proc/self/task/<tid>: false when
  // they cannot be read (the thread has ended, or /proc is not mounted).
  static bool read(int tid, bool self, Reading& reading) noexcept;
  // The steal of its cores in `steal` (ticks) since begin() into stolen_ns_.
  void take_steal(const std::map<int, std::uint64_t>& steal) noexcept;
  // The interrupts its cores took since begin() into interrupts_ and top_interrupt_source_.
  void take_interrupts() noexcept;
  void update(const Reading& reading, std::uint64_t now_ns) noexcept;

  std::string name_;
  std::vector<int> core_list_;      // written once, before began_
  std::atomic<bool> began_{false};  // core_list_ is set
  std::mutex mutex_;                // a sample and the thread's end
  int tid_ = 0;                     // 0: not begun, or ended
  Reading base_;
  std::uint64_t began_ns_ = 0;
  std::uint64_t window_start_ns_ = 0;
  std::uint64_t window_start_wait_ns_ = 0;
  std::atomic<std::uint64_t> waited_ns_{0};
  std::atomic<std::uint64_t> peak_window_ns_{0};
  std::atomic<std::uint64_t> preemptions_{0};
  std::atomic<std::uint64_t> lifetime_ns_{0};
  std::optional<std::uint64_t> base_steal_;  // at begin(), for a pinned thread
  std::atomic<std::uint64_t> stolen_ns_{0};
  std::map<std::string, std::uint64_t> base_interrupts_;  // at begin(), per source, for a pinned thread
  std::atomic<std::uint64_t> interrupts_{0};
  std::string top_interrupt_source_;  // written at end(), before interrupts_
  bool warned_ = false;
  bool warned_steal_ = false;
};

// Each core's steal (the eighth number of its line, in USER_HZ ticks) in `proc_stat`, the text of
// /proc/stat; a line without one is left out.
std::map<int, std::uint64_t> parse_core_steal(std::string_view proc_stat);
// The same from the kernel's /proc/stat: empty where it cannot be read.
std::map<int, std::uint64_t> read_core_steal() noexcept;
// The steal of `cores` in `steal`, summed; nullopt when a core is missing.
std::optional<std::uint64_t> steal_ticks(const std::map<int, std::uint64_t>& steal, const std::vector<int>& cores);

// The interrupts of `cores`, by source, summed over them, from `proc_interrupts`, the text of
// /proc/interrupts: its first line names the CPUs, each other line a source (its number or name, a
// count for each CPU, then what it is); a source is named by its label and description
// ("24 nvme0q1"). Lines with fewer counts than CPUs (ERR, MIS) are left out; empty where a core
// has no column. Only those cores' counts are kept: on a host of many CPUs the table is large.
std::map<std::string, std::uint64_t> parse_interrupts(std::string_view proc_interrupts, const std::vector<int>& cores);
// The same from the kernel's /proc/interrupts: empty where it cannot be read.
std::map<std::string, std::uint64_t> read_core_interrupts(const std::vector<int>& cores) noexcept;

// Whether the hypervisor stole a noticeable share of a pinned thread's `core_count` cores:
// kNoticeableNs or more, and 1% or more of their time over its life.
bool steal_noticeable(std::uint64_t stolen_ns, std::uint64_t lifetime_ns, std::size_t core_count) noexcept;

// For the report: when the steal is noticeable, what it means and what to do; else empty.
std::string core_steal_note(const std::string& name, const std::string& cores, std::size_t core_count,
                            std::uint64_t stolen_ns, std::uint64_t lifetime_ns);
std::string core_steal_note(const CoreWait& wait);

// For the report: when a pinned thread waited long enough for a core that a stream behind it
// would back up (kNoticeableNs or more in one window, or in all that and 0.5% of its life), what
// happened and what to do; else empty. `sharers`: the other threads of the pipeline pinned to
// any of its cores, which take turns with it by the configuration's design; with none, the
// thread that took its core came from outside the pipeline's cpu: settings. An unpinned thread
// gets none: it runs wherever the scheduler has room, and its figures say how long that took.
std::string core_wait_note(const CoreWait& wait, const std::vector<std::string>& sharers);

}  // namespace sluice
