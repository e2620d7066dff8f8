// CoreWait on real threads and the real scheduler: two busy threads pinned to one core each wait
// while the other runs, a sleeping thread does not, and the note names the thread and its core.
#include "pipeline/core_wait.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "pipeline/thread_cores.hpp"
#include "tests/support/core_rival.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

void spin_for(std::chrono::milliseconds length) {
  const auto until = std::chrono::steady_clock::now() + length;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// A thread that begins and ends `wait` unpinned, busy 20 ms between.
void run_unpinned(CoreWait& wait) {
  std::thread([&] {
    wait.begin({});
    spin_for(20ms);
    wait.end();
  }).join();
}

TEST(CoreWait, TwoBusyThreadsOnOneCoreEachWaitWhileTheOtherRuns) {
  const int core = allowed_cores().front();
  CoreWait first("stage");
  CoreWait second("receive");
  std::atomic<int> begun{0};
  std::atomic<bool> done{false};
  const auto busy = [&](CoreWait& wait) {
    pin_thread(pthread_self(), {core});
    wait.begin({core});
    begun.fetch_add(1);
    while (begun.load() < 2) {
    }
    spin_for(600ms);  // wall time: on one core the two share it, so each waits while the other runs
    wait.end();
  };
  std::thread one([&] { busy(first); });
  std::thread two([&] { busy(second); });
  // The runtime's sampler meanwhile, reading both from another thread.
  std::thread sampler([&] {
    while (!done.load()) {
      static_cast<void>(first.sample());
      static_cast<void>(second.sample());
      std::this_thread::sleep_for(50ms);
    }
  });
  one.join();
  two.join();
  done = true;
  sampler.join();
  ASSERT_EQ(begun.load(), 2);
  // Each spun 600 ms of wall time on one shared core: at most 600 ms (and some) of running
  // between them, so together they waited 600 ms or more; 450 allows for the start and end.
  EXPECT_GE(first.waited_ns() + second.waited_ns(), 450'000'000U)
      << first.waited_ns() << " + " << second.waited_ns() << " ns";
  EXPECT_GT(first.preemptions() + second.preemptions(), 2U);
  for (const CoreWait* wait : {&first, &second}) {
    EXPECT_GE(wait->lifetime_ns(), 600'000'000U);
    EXPECT_LE(wait->waited_ns(), wait->lifetime_ns());
    EXPECT_LE(wait->peak_window_ns(), wait->waited_ns());
  }
  // Whichever waited more waited noticeably within some window, and the note says so.
  const CoreWait& more = first.waited_ns() >= second.waited_ns() ? first : second;
  EXPECT_GE(more.peak_window_ns(), CoreWait::kNoticeableNs);
  EXPECT_EQ(more.core_list(), std::vector<int>{core});
  // With no thread of the pipeline pinned there, something from outside took the core.
  const std::string note = core_wait_note(more, {});
  EXPECT_NE(note.find("its " + more.name() + " thread (pinned to cores " + std::to_string(core) + ")"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("no other thread of this pipeline is pinned there"), std::string::npos) << note;
  // With one that the cpu: settings put there, they take turns by design.
  const std::string shared = core_wait_note(more, {"lane a stage fft"});
  EXPECT_NE(shared.find("takes turns there with another thread of this pipeline (lane a stage fft)"), std::string::npos)
      << shared;
}

// The same wait in an unpinned thread is no finding: it runs wherever the scheduler has room.
TEST(CoreWait, AnUnpinnedThreadHasFiguresButNoNote) {
  const int core = allowed_cores().front();
  CoreWait wait("stage");
  {
    const test::CoreRival rival(core);
    std::thread busy([&] {
      pin_thread(pthread_self(), {core});  // pinned, but not told so: as a stage the runtime did not pin
      wait.begin({});
      spin_for(300ms);
      wait.end();
    });
    busy.join();
  }
  EXPECT_GE(wait.waited_ns(), 50'000'000U);
  EXPECT_EQ(core_wait_note(wait, {}), "");
}

TEST(CoreWait, ASleepingThreadIsNotWaitingForACore) {
  CoreWait wait("stage");
  std::thread sleeper([&] {
    wait.begin({});
    std::this_thread::sleep_for(400ms);
    wait.end();
  });
  sleeper.join();
  EXPECT_GE(wait.lifetime_ns(), 400'000'000U);
  EXPECT_LT(wait.waited_ns(), CoreWait::kNoticeableNs) << "one wake-up, not a wait for a core";
  EXPECT_EQ(core_wait_note(wait, {}), "");
}

TEST(CoreWait, NothingIsReadBeforeTheThreadBeginsOrAfterItEnds) {
  CoreWait wait("stage");
  EXPECT_FALSE(wait.sample());
  EXPECT_EQ(wait.lifetime_ns(), 0U);
  std::thread([&] {
    wait.begin({});
    wait.end();
  }).join();
  const std::uint64_t lifetime = wait.lifetime_ns();
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(wait.sample());  // the thread has ended: its tid may belong to another thread by now
  EXPECT_EQ(wait.lifetime_ns(), lifetime);
}

// /proc/stat's per-core lines as the kernel writes them (the sum line first, then cpu0, cpu1 …, then
// the interrupt counts): the eighth number of each is its steal.
constexpr std::string_view kProcStat =
    "cpu  1000 0 500 90000 10 0 20 300 0 0\n"
    "cpu0 100 0 50 9000 1 0 2 7 0 0\n"
    "cpu1 200 0 60 8000 1 0 3 11 0 0\n"
    "cpu10 300 0 70 7000 1 0 4 13 0 0\n"
    "intr 123456 0 1 2 3\n"
    "ctxt 99\n";

TEST(CoreWait, StealTicksAreEachCoresEighthFieldSummed) {
  const auto steal = parse_core_steal(kProcStat);
  EXPECT_EQ(steal.size(), 3U) << "cpu0, cpu1, cpu10: not the sum line";
  EXPECT_EQ(steal_ticks(steal, {0}), 7U);
  EXPECT_EQ(steal_ticks(steal, {1, 10}), 24U) << "cpu1 is not cpu10";
  EXPECT_EQ(steal_ticks(steal, {}), 0U);
  EXPECT_EQ(steal_ticks(steal, {2}), std::nullopt) << "a core with no line";
  EXPECT_TRUE(parse_core_steal("cpu0 1 2 3 4 5 6 7\n").empty()) << "a line without a steal field";
}

TEST(CoreWait, AThreadsCoresStealIsReadFromTheKernelAtItsStartAndEnd) {
  const int core = allowed_cores().front();
  const auto read_steal = [&] {
    std::ifstream file("/proc/stat");
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    return steal_ticks(parse_core_steal(text), {core});
  };
  const auto before = read_steal();
  ASSERT_TRUE(before.has_value()) << "this kernel's /proc/stat has no steal field for core " << core;
  CoreWait wait("receive");
  std::thread busy([&] {
    pin_thread(pthread_self(), {core});
    wait.begin({core});
    spin_for(200ms);
    wait.end();
  });
  busy.join();
  const auto after = read_steal();
  ASSERT_TRUE(after.has_value());
  // Within what the kernel counted on that core around the thread's life (ticks to ns).
  const auto tick_ns = 1'000'000'000ULL / static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
  EXPECT_LE(wait.stolen_ns(), (*after - *before) * tick_ns);
  EXPECT_EQ(wait.stolen_ns() % tick_ns, 0U) << "whole ticks";
  CoreWait unpinned("stage");
  run_unpinned(unpinned);
  EXPECT_EQ(unpinned.stolen_ns(), 0U);
}

// While the thread runs, each sample brings its stolen time up to date from every core's steal, and
// says once when it has become noticeable. The kernel's own figures, with 300 ms (at the kernel's
// tick rate) added to the thread's core as a hypervisor would have stolen them.
TEST(CoreWait, EachSampleCountsTheStealSinceTheThreadBeganAndWarnsOnce) {
  const int core = allowed_cores().front();
  CoreWait wait("receive");
  std::atomic<bool> done{false};
  std::atomic<bool> began{false};
  std::thread busy([&] {
    pin_thread(pthread_self(), {core});
    wait.begin({core});
    began = true;
    while (!done) spin_for(1ms);
    wait.end();
  });
  while (!began) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(100ms);
  static_cast<void>(wait.sample());  // brings its life up to date
  const auto ticks_per_second = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));
  const auto tick_ns = 1'000'000'000ULL / ticks_per_second;
  std::map<int, std::uint64_t> steal = read_core_steal();
  ASSERT_TRUE(steal.contains(core));
  const std::uint64_t real_before = wait.stolen_ns();
  steal[core] += ticks_per_second * 3 / 10;
  EXPECT_TRUE(wait.sample_steal(steal)) << "300 ms of about 100 ms of life is noticeable";
  EXPECT_GE(wait.stolen_ns(), real_before + 300'000'000ULL - tick_ns);
  EXPECT_EQ(wait.stolen_ns() % tick_ns, 0U);
  EXPECT_FALSE(wait.sample_steal(steal)) << "it warns once";
  done = true;
  busy.join();
  EXPECT_FALSE(wait.sample_steal(steal)) << "nothing after the thread ended";
}

TEST(CoreWait, TheStealNoteNamesTheHypervisorOnlyForANoticeableShare) {
  // 30 ms of two cores' 1 s: 1.5%, noticeable.
  const std::string note = core_steal_note("receive", "2-3", 2, 30'000'000, 1'000'000'000);
  EXPECT_NE(note.find("hypervisor stole 30.00 ms from its receive thread's cores (2-3: 1.5%"), std::string::npos)
      << note;
  EXPECT_NE(note.find("dedicated (pinned) vCPUs"), std::string::npos) << note;
  EXPECT_EQ(core_steal_note("receive", "2", 1, 9'000'000, 100'000'000), "") << "under 10 ms";
  EXPECT_EQ(core_steal_note("receive", "2", 1, 50'000'000, 10'000'000'000), "") << "under 1% of the time";
  EXPECT_EQ(core_steal_note("stage", "", 0, 50'000'000, 1'000'000'000), "") << "unpinned";
}

// /proc/interrupts as the kernel writes it: a header naming the CPUs (CPU 2 offline here), a count
// for each, then what the source is; ERR and MIS have one count and are left out.
TEST(CoreInterrupts, AreEachCoresCountsBySource) {
  const std::string text =
      "           CPU0       CPU1       CPU3       \n"
      "  24:          1          0          5  IO-APIC   5-edge      ACPI:Ged\n"
      "  40:          7          0          0  PCI-MSIX-0000:00:05.0   0-edge      nvme0q0\n"
      " LOC:        100        200        300   Local timer interrupts\n"
      " ERR:          0\n"
      " MIS:          0\n";
  EXPECT_TRUE(parse_interrupts(text, {2}).empty()) << "CPU 2 has no column";
  EXPECT_TRUE(parse_interrupts(text, {0, 2}).empty());
  EXPECT_EQ(parse_interrupts(text, {3}).at("24 ACPI:Ged"), 5U);
  EXPECT_EQ(parse_interrupts(text, {0}).at("40 nvme0q0"), 7U);
  EXPECT_EQ(parse_interrupts(text, {1}).at("LOC interrupts"), 200U);
  EXPECT_EQ(parse_interrupts(text, {0}).size(), 3U) << "ERR and MIS are not a core's";
  // Several cores: each source summed over them.
  const auto both = parse_interrupts(text, {1, 3});
  EXPECT_EQ(both.at("24 ACPI:Ged"), 5U);
  EXPECT_EQ(both.at("LOC interrupts"), 500U);
  EXPECT_TRUE(parse_interrupts("no header\n", {0}).empty());
}

// A pinned thread busy for 300 ms has its core's interrupts counted from its start to its end:
// the timer's at least, as the kernel's /proc/interrupts counted them on that core meanwhile.
TEST(CoreInterrupts, APinnedThreadsCoresAreReadAtItsStartAndEnd) {
  const int core = allowed_cores().front();
  CoreWait wait("receive");
  std::map<std::string, std::uint64_t> before;
  std::map<std::string, std::uint64_t> after;
  std::thread([&] {
    pin_thread(pthread_self(), {core});
    before = read_core_interrupts({core});
    wait.begin({core});
    spin_for(300ms);
    wait.end();
    after = read_core_interrupts({core});
  }).join();
  ASSERT_FALSE(before.empty()) << "/proc/interrupts could not be read";
  std::uint64_t kernel_count = 0;
  for (const auto& [source, count] : after) kernel_count += count - (before.contains(source) ? before.at(source) : 0);
  EXPECT_GT(wait.interrupts(), 0U) << "a busy core takes the timer's interrupts at least";
  EXPECT_LE(wait.interrupts(), kernel_count);
  EXPECT_FALSE(wait.top_interrupt_source().empty());
  CoreWait unpinned("stage");
  run_unpinned(unpinned);
  EXPECT_EQ(unpinned.interrupts(), 0U);
  EXPECT_EQ(unpinned.top_interrupt_source(), "");
}

}  // namespace
}  // namespace sluice
