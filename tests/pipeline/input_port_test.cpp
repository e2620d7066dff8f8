// A stage waiting for input sleeps until its producer pushes (or closes) instead of polling:
// counted by the kernel (the waiting thread's voluntary context switches), not by Sluice.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "pipeline/metrics.hpp"
#include "pipeline/spsc_queue.hpp"
#include "pipeline/stage.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

// The calling thread's voluntary context switches so far (each sleep or blocking wait is one).
long voluntary_switches() {
  rusage usage{};
  EXPECT_EQ(::getrusage(RUSAGE_THREAD, &usage), 0);
  return usage.ru_nvcsw;
}

struct Waited {
  bool got_chunk = false;
  long switches = 0;
};

// Pops on a thread of its own while the test thread pushes `chunk` (or closes) after `delay`.
Waited pop_while_producer_waits(SpscQueue<Chunk*>& queue, Chunk* chunk, std::chrono::milliseconds delay) {
  StageMetrics metrics("lane", "stage", "test");
  InputPort port(queue, metrics);
  std::atomic<bool> waiting{false};
  Waited waited;
  std::thread consumer([&] {
    const long before = voluntary_switches();
    waiting = true;
    ChunkPtr popped = port.pop(30s);
    waited.switches = voluntary_switches() - before;
    waited.got_chunk = popped != nullptr;
    static_cast<void>(popped.release());  // a test chunk of no pool
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(delay);
  if (chunk != nullptr) {
    EXPECT_TRUE(queue.try_push(chunk));
  } else {
    queue.close();
  }
  consumer.join();
  return waited;
}

// Polling in 50 µs sleeps would switch thousands of times in 300 ms; a blocking wait a few.
TEST(InputPort, AWaitingConsumerSleepsUntilThePushInsteadOfPolling) {
  SpscQueue<Chunk*> queue(4);
  Chunk chunk;
  const Waited waited = pop_while_producer_waits(queue, &chunk, 300ms);
  EXPECT_TRUE(waited.got_chunk);
  EXPECT_LT(waited.switches, 50) << "the consumer woke " << waited.switches << " times while nothing came";
}

TEST(InputPort, AWaitingConsumerWakesWhenTheProducerCloses) {
  SpscQueue<Chunk*> queue(4);
  const Waited waited = pop_while_producer_waits(queue, nullptr, 300ms);
  EXPECT_FALSE(waited.got_chunk);
  EXPECT_TRUE(queue.finished());
  EXPECT_LT(waited.switches, 50);
}

}  // namespace
}  // namespace sluice
