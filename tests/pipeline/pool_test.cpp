// Pools: one aligned slab carved into chunks, acquire as backpressure, release from any thread.
#include "pipeline/pool.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

namespace sluice {
namespace {

TEST(Pool, CarvesOneAlignedSlabIntoDisjointChunks) {
  Pool pool("test", PoolSpec{64 * 1024, 8, MemoryKind::host});
  EXPECT_EQ(pool.chunk_count(), 8U);
  EXPECT_EQ(pool.region().size(), 8U * 64 * 1024);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool.region().data()) % 4096, 0U);
  std::set<std::byte*> starts;
  for (std::size_t i = 0; i < pool.chunk_count(); ++i) {
    Chunk& chunk = pool.chunk(i);
    EXPECT_EQ(chunk.data, pool.region().data() + i * 64 * 1024);
    EXPECT_EQ(chunk.capacity, 64U * 1024);
    EXPECT_EQ(chunk.index, i);
    starts.insert(chunk.data);
  }
  EXPECT_EQ(starts.size(), 8U);
}

TEST(Pool, EmptyPoolIsBackpressureNotAllocation) {
  Pool pool("test", PoolSpec{4096, 2, MemoryKind::host});
  ChunkPtr first = pool.try_acquire();
  ChunkPtr second = pool.try_acquire();
  ASSERT_TRUE(first && second);
  EXPECT_NE(first.get(), second.get());
  EXPECT_FALSE(pool.try_acquire());
  EXPECT_FALSE(pool.acquire(std::chrono::milliseconds(5)));
  EXPECT_EQ(pool.available(), 0U);
  first.reset();
  EXPECT_EQ(pool.available(), 1U);
  EXPECT_TRUE(pool.try_acquire());
}

TEST(Pool, ReleaseResetsMetadataAndStampsCreationTime) {
  Pool pool("test", PoolSpec{4096, 1, MemoryKind::host});
  {
    ChunkPtr chunk = pool.try_acquire();
    ASSERT_TRUE(chunk);
    EXPECT_GT(chunk->created_ns, 0U);
    chunk->size = 100;
    chunk->sample_count = 25;
    EXPECT_TRUE(chunk->add_gap(10, 5));
  }
  ChunkPtr again = pool.try_acquire();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->size, 0U);
  EXPECT_EQ(again->sample_count, 0U);
  EXPECT_EQ(again->gap_count, 0U);
}

TEST(Pool, WaiterWakesWhenAnotherThreadReleases) {
  // The waiter must be woken by the release, not find the chunk back when its wait times out:
  // a predicate wait returns true at its deadline too, so "got a chunk" alone passes without any
  // notify. The wait is long (30 s) and the release early, so returning before the deadline is
  // the wake-up; under any load this takes milliseconds, and without a notify it takes 30 s.
  constexpr auto kTimeout = std::chrono::seconds(30);
  Pool pool("test", PoolSpec{4096, 1, MemoryKind::host});
  ChunkPtr held = pool.try_acquire();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the waiter block first
    held.reset();
  });
  const auto start = std::chrono::steady_clock::now();
  ChunkPtr got = pool.acquire(kTimeout);
  const auto waited = std::chrono::steady_clock::now() - start;
  releaser.join();
  EXPECT_TRUE(got);
  EXPECT_LT(waited, kTimeout) << "the waiter slept to its deadline: the release did not wake it";
}

TEST(Chunk, GapTableRefusesOverflowSoProducersHandOnInstead) {
  Chunk chunk;
  for (std::size_t i = 0; i < Chunk::kMaxGaps; ++i) EXPECT_TRUE(chunk.add_gap(i * 10, 1));
  EXPECT_FALSE(chunk.add_gap(1000, 1));
  EXPECT_EQ(chunk.gap_count, Chunk::kMaxGaps);
}

TEST(Memory, DeviceOrPinnedWithoutCudaIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present; covered by memory_gpu_test";
  try {
    MemoryRegion region(MemoryKind::device, 4096);
    FAIL() << "device memory allocated without a device";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("CUDA"), std::string::npos) << error.what();
  }
}

TEST(Pool, ReleaseHookTakesReleasedChunksInsteadOfTheFreeList) {
  Pool pool("ring", PoolSpec{4096, 3, MemoryKind::host, 0});
  std::vector<Chunk*> held;
  while (ChunkPtr chunk = pool.try_acquire()) held.push_back(chunk.release());
  std::vector<std::uint32_t> credits;
  pool.set_release_hook([&](Chunk& chunk) { credits.push_back(chunk.index); });
  {
    held[1]->sequence = 9;
    ChunkPtr lent(held[1]);  // handed downstream, then released there
  }
  EXPECT_EQ(credits, std::vector<std::uint32_t>{1});
  EXPECT_EQ(held[1]->sequence, 0U);  // metadata reset before the hook sees it
  EXPECT_EQ(pool.available(), 0U);   // not on the free list: the hook's owner holds it
  pool.set_release_hook({});
  for (Chunk* chunk : held) pool.return_to_free_list(*chunk);
  EXPECT_EQ(pool.available(), 3U);
  { ChunkPtr again = pool.try_acquire(); }
  EXPECT_EQ(credits.size(), 1U);  // hook cleared: back to the free list
  EXPECT_EQ(pool.available(), 3U);
}

TEST(Pool, HoldsRegistrationsByOwner) {
  Pool pool("ring", PoolSpec{4096, 2, MemoryKind::host, 0});
  EXPECT_EQ(pool.registration("verbs:rxe0"), nullptr);
  pool.add_registration({"verbs:rxe0", 0x1234, 0x5678, -1});
  pool.add_registration({"io_uring:record", 0, 0, 16});
  ASSERT_NE(pool.registration("verbs:rxe0"), nullptr);
  EXPECT_EQ(pool.registration("verbs:rxe0")->remote_key, 0x5678U);
  EXPECT_EQ(pool.registration("io_uring:record")->first_buffer_index, 16);
  EXPECT_THROW(pool.add_registration({"verbs:rxe0", 1, 1, -1}), std::runtime_error);
  pool.remove_registration("verbs:rxe0");
  EXPECT_EQ(pool.registration("verbs:rxe0"), nullptr);
  EXPECT_EQ(pool.registrations().size(), 1U);
}

}  // namespace
}  // namespace sluice
