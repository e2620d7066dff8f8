// CoreWait on real threads and the real scheduler: two busy threads pinned to one core each wait
// while the other runs, a sleeping thread does not, and the note names the thread and its core.
#include "pipeline/core_wait.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
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

}  // namespace
}  // namespace sluice
