#include "pipeline/core_wait.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <span>
#include <sstream>

#include "pipeline/clock.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/units.hpp"

namespace sluice {

namespace {

// Reads a small /proc file whole into `buffer`; its length, or 0.
std::size_t read_small(const char* path, std::span<char> buffer) noexcept {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::size_t size = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data() + size, buffer.size() - 1 - size);
    if (got <= 0) break;
    size += static_cast<std::size_t>(got);
    if (size == buffer.size() - 1) break;
  }
  ::close(fd);
  buffer[size] = '\0';
  return size;
}

}  // namespace

bool CoreWait::read(int tid, bool self, Reading& reading) noexcept {
  std::array<char, 64> directory{};
  if (self) {
    std::snprintf(directory.data(), directory.size(), "/proc/thread-self");
  } else {
    std::snprintf(directory.data(), directory.size(), "/proc/self/task/%d", tid);
  }
  std::array<char, 96> path{};
  std::array<char, 4096> text{};
  // schedstat: time on a core, time waiting for one (both ns), timeslices.
  std::snprintf(path.data(), path.size(), "%s/schedstat", directory.data());
  if (read_small(path.data(), text) == 0) return false;
  char* end = nullptr;
  std::strtoull(text.data(), &end, 10);
  reading.wait_ns = std::strtoull(end, nullptr, 10);
  std::snprintf(path.data(), path.size(), "%s/status", directory.data());
  if (read_small(path.data(), text) == 0) return false;
  const char* field = std::strstr(text.data(), "nonvoluntary_ctxt_switches:");
  if (field == nullptr) return false;
  reading.nonvoluntary = std::strtoull(field + std::strlen("nonvoluntary_ctxt_switches:"), nullptr, 10);
  return true;
}

std::map<int, std::uint64_t> parse_core_steal(std::string_view proc_stat) {
  std::map<int, std::uint64_t> steal;  // per core line ("cpu7 ..."), not the sum line ("cpu ...")
  for (std::size_t at = 0; at < proc_stat.size();) {
    const std::size_t end = std::min(proc_stat.find('\n', at), proc_stat.size());
    const std::string line(proc_stat.substr(at, end - at));
    at = end + 1;
    int core = -1;
    int label = 0;
    // The digits must follow "cpu" at once: %d would skip the sum line's spaces and read its first field.
    if (line.size() < 4 || !line.starts_with("cpu") || line[3] < '0' || line[3] > '9') continue;
    if (std::sscanf(line.c_str(), "cpu%d%n", &core, &label) != 1 || core < 0) continue;
    std::array<std::uint64_t, 8> fields{};  // user nice system idle iowait irq softirq steal
    const char* cursor = line.c_str() + label;
    bool whole = true;
    for (std::uint64_t& field : fields) {
      char* after = nullptr;
      field = std::strtoull(cursor, &after, 10);
      if (after == cursor) whole = false;
      cursor = after;
    }
    if (whole) steal[core] = fields[7];
  }
  return steal;
}

std::map<int, std::uint64_t> read_core_steal() noexcept {
  try {
    // The per-core lines come first; the interrupt counts after them can be long.
    std::ifstream file("/proc/stat");
    std::string text;
    for (std::string line; std::getline(file, line) && line.starts_with("cpu");) text += line + '\n';
    return parse_core_steal(text);
  } catch (const std::exception&) {
    return {};
  }
}

std::optional<std::uint64_t> steal_ticks(const std::map<int, std::uint64_t>& steal, const std::vector<int>& cores) {
  std::uint64_t sum = 0;
  for (const int core : cores) {
    const auto found = steal.find(core);
    if (found == steal.end()) return std::nullopt;
    sum += found->second;
  }
  return sum;
}

std::map<std::string, std::uint64_t> parse_interrupts(std::string_view proc_interrupts, const std::vector<int>& cores) {
  const std::size_t header_end = std::min(proc_interrupts.find('\n'), proc_interrupts.size());
  std::vector<int> cpus;
  std::istringstream header{std::string(proc_interrupts.substr(0, header_end))};
  for (std::string word; header >> word;) {
    if (word.starts_with("CPU")) cpus.push_back(std::atoi(word.c_str() + 3));
  }
  std::vector<std::size_t> columns;  // each of `cores`' column among a line's counts
  for (const int core : cores) {
    const auto found = std::find(cpus.begin(), cpus.end(), core);
    if (found == cpus.end()) return {};
    columns.push_back(static_cast<std::size_t>(found - cpus.begin()));
  }
  std::map<std::string, std::uint64_t> sum;
  for (std::size_t at = header_end + 1; at < proc_interrupts.size();) {
    const std::size_t end = std::min(proc_interrupts.find('\n', at), proc_interrupts.size());
    const std::string_view line = proc_interrupts.substr(at, end - at);
    at = end + 1;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string label(line.substr(0, colon));
    label.erase(0, label.find_first_not_of(' '));
    std::istringstream rest{std::string(line.substr(colon + 1))};
    std::vector<std::uint64_t> counts;
    std::string word;
    while (counts.size() < cpus.size() && rest >> word) {
      if (word.find_first_not_of("0123456789") != std::string::npos) break;
      counts.push_back(std::strtoull(word.c_str(), nullptr, 10));
    }
    if (counts.size() < cpus.size()) continue;
    // The description's last word names the device or what it is ("nvme0q1", "interrupts").
    std::string description;
    while (rest >> word) description = word;
    std::uint64_t& total = sum[description.empty() ? label : label + " " + description];
    for (const std::size_t column : columns) total += counts[column];
  }
  return sum;
}

std::map<std::string, std::uint64_t> read_core_interrupts(const std::vector<int>& cores) noexcept {
  try {
    std::ifstream file("/proc/interrupts");
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    return parse_interrupts(text, cores);
  } catch (const std::exception&) {
    return {};
  }
}

std::string CoreWait::top_interrupt_source() const {
  if (interrupts() == 0) return {};  // the acquire pairs with end()'s release: the name is written
  return top_interrupt_source_;
}

void CoreWait::take_interrupts() noexcept {
  if (base_interrupts_.empty()) return;
  const std::map<std::string, std::uint64_t> now = read_core_interrupts(core_list_);
  std::uint64_t total = 0;
  std::uint64_t most = 0;
  const std::string* top = nullptr;
  for (const auto& [source, count] : now) {
    const auto before = base_interrupts_.find(source);
    const std::uint64_t base = before == base_interrupts_.end() ? 0 : before->second;
    const std::uint64_t taken = count > base ? count - base : 0;
    total += taken;
    if (taken > most) {
      most = taken;
      top = &source;
    }
  }
  try {
    if (top != nullptr) top_interrupt_source_ = fmt::format("{} ({})", *top, most);
  } catch (const std::exception&) {  // no memory for the name: the count still says it
  }
  interrupts_.store(total, std::memory_order_release);
}

void CoreWait::take_steal(const std::map<int, std::uint64_t>& steal) noexcept {
  if (!base_steal_) return;
  const std::optional<std::uint64_t> now = steal_ticks(steal, core_list_);
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (!now || *now < *base_steal_ || ticks_per_second <= 0) return;
  stolen_ns_.store((*now - *base_steal_) * 1'000'000'000ULL / static_cast<std::uint64_t>(ticks_per_second),
                   std::memory_order_relaxed);
}

bool steal_noticeable(std::uint64_t stolen_ns, std::uint64_t lifetime_ns, std::size_t core_count) noexcept {
  if (core_count == 0 || lifetime_ns == 0 || stolen_ns < CoreWait::kNoticeableNs) return false;
  return static_cast<double>(stolen_ns) >= 0.01 * static_cast<double>(lifetime_ns) * static_cast<double>(core_count);
}

void CoreWait::begin(const std::vector<int>& cores) noexcept {
  Reading reading;
  if (!read(0, true, reading)) return;
  const std::optional<std::uint64_t> steal = cores.empty() ? std::nullopt : steal_ticks(read_core_steal(), cores);
  std::map<std::string, std::uint64_t> interrupts;
  if (!cores.empty()) interrupts = read_core_interrupts(cores);
  std::lock_guard lock(mutex_);
  try {
    core_list_ = cores;
  } catch (const std::bad_alloc&) {
    return;
  }
  base_interrupts_ = std::move(interrupts);
  base_steal_ = steal;
  base_ = reading;
  began_ns_ = window_start_ns_ = monotonic_ns();
  window_start_wait_ns_ = 0;
  tid_ = static_cast<int>(::syscall(SYS_gettid));
  began_.store(true, std::memory_order_release);
}

std::string CoreWait::cores() const { return format_core_list(core_list()); }

const std::vector<int>& CoreWait::core_list() const noexcept {
  static const std::vector<int> kNone;
  return began_.load(std::memory_order_acquire) ? core_list_ : kNone;
}

void CoreWait::update(const Reading& reading, std::uint64_t now_ns) noexcept {
  const std::uint64_t waited = reading.wait_ns >= base_.wait_ns ? reading.wait_ns - base_.wait_ns : 0;
  waited_ns_.store(waited, std::memory_order_relaxed);
  preemptions_.store(reading.nonvoluntary - std::min(reading.nonvoluntary, base_.nonvoluntary),
                     std::memory_order_relaxed);
  lifetime_ns_.store(now_ns - began_ns_, std::memory_order_relaxed);
  const std::uint64_t in_window = waited - std::min(waited, window_start_wait_ns_);
  if (in_window > peak_window_ns_.load(std::memory_order_relaxed))
    peak_window_ns_.store(in_window, std::memory_order_relaxed);
  if (now_ns - window_start_ns_ >= kWindowNs) {
    window_start_ns_ = now_ns;
    window_start_wait_ns_ = waited;
  }
}

bool CoreWait::sample() noexcept {
  std::lock_guard lock(mutex_);
  if (tid_ == 0) return false;
  Reading reading;
  if (read(tid_, false, reading)) update(reading, monotonic_ns());
  if (warned_ || core_list_.empty() || peak_window_ns() < kNoticeableNs) return false;
  warned_ = true;
  return true;
}

void CoreWait::end() noexcept {
  std::lock_guard lock(mutex_);
  if (tid_ == 0) return;
  Reading reading;
  if (read(tid_, true, reading)) update(reading, monotonic_ns());
  if (base_steal_) take_steal(read_core_steal());
  take_interrupts();
  tid_ = 0;
}

bool CoreWait::sample_steal(const std::map<int, std::uint64_t>& steal) noexcept {
  std::lock_guard lock(mutex_);
  if (tid_ == 0) return false;
  take_steal(steal);
  if (warned_steal_ || !steal_noticeable(stolen_ns(), lifetime_ns(), core_list_.size())) return false;
  warned_steal_ = true;
  return true;
}

std::string core_wait_note(const CoreWait& wait, const std::vector<std::string>& sharers) {
  constexpr std::uint64_t kNoticeableNs = CoreWait::kNoticeableNs;
  if (wait.core_list().empty()) return {};  // an unpinned thread waits wherever the scheduler has room
  const std::uint64_t waited = wait.waited_ns();
  const bool bursts = wait.peak_window_ns() >= kNoticeableNs;
  const bool overall = waited >= kNoticeableNs && waited * 200 >= wait.lifetime_ns();
  if (!bursts && !overall) return {};
  std::string cause;
  if (sharers.empty()) {
    cause =
        "no other thread of this pipeline is pinned there, so another process or an unpinned thread took its "
        "cores (a sender, a system thread): keep them off (isolcpus, a cpuset, or the sender's cores elsewhere)";
  } else {
    std::string names;
    for (std::size_t i = 0; i < sharers.size() && i < 4; ++i) names += (i == 0 ? "" : ", ") + sharers[i];
    if (sharers.size() > 4) names += fmt::format(" and {} more", sharers.size() - 4);
    cause = fmt::format(
        "it takes turns there with {} ({}), as the cpu: settings ask; give it a core of its own "
        "where it must keep up",
        sharers.size() == 1 ? "another thread of this pipeline" : "other threads of this pipeline", names);
  }
  return fmt::format(
      "its {} thread (pinned to cores {}) was ready to run but kept off a core for {} in all ({:.2f}% of its {}), "
      "up to {} in one sampling window of about {}, and lost its core to another thread {} times; {}",
      wait.name(), wait.cores(), format_duration(std::chrono::nanoseconds(waited)),
      wait.lifetime_ns() > 0 ? 100.0 * static_cast<double>(waited) / static_cast<double>(wait.lifetime_ns()) : 0.0,
      format_duration(std::chrono::nanoseconds(wait.lifetime_ns())),
      format_duration(std::chrono::nanoseconds(wait.peak_window_ns())),
      format_duration(std::chrono::nanoseconds(CoreWait::kWindowNs)), wait.preemptions(), cause);
}

std::string core_steal_note(const std::string& name, const std::string& cores, std::size_t core_count,
                            std::uint64_t stolen_ns, std::uint64_t lifetime_ns) {
  if (!steal_noticeable(stolen_ns, lifetime_ns, core_count)) return {};
  const double share =
      static_cast<double>(stolen_ns) / (static_cast<double>(lifetime_ns) * static_cast<double>(core_count));
  return fmt::format(
      "the hypervisor stole {} from its {} thread's cores ({}: {:.1f}% of their time over its {}, /proc/stat's steal): "
      "this machine is a virtual machine whose vCPUs wait for the host's cores, "
      "and a stream behind the thread backs up while its vCPU waits; "
      "ask for dedicated (pinned) vCPUs, or run where the host does not share its cores",
      format_duration(std::chrono::nanoseconds(stolen_ns)), name, cores, 100.0 * share,
      format_duration(std::chrono::nanoseconds(lifetime_ns)));
}

std::string core_steal_note(const CoreWait& wait) {
  return core_steal_note(wait.name(), wait.cores(), wait.core_list().size(), wait.stolen_ns(), wait.lifetime_ns());
}

}  // namespace sluice
