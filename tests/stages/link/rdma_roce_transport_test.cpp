// The roce transport through the link seam (LinkSender / LinkReceiver), on Soft-RoCE in
// the test VM: real pools on both sides, chunk_wire metadata, credits from the pool's
// release hook, the hello, end of stream and a receiver's failure reaching the sender.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "stages/link/roce_transport.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

bool have_rdma_address() { return std::getenv("SLUICE_VM_ADDRESS") != nullptr; }
#define REQUIRE_VM()                                                                                          \
  if (!have_rdma_address()) {                                                                                 \
    if (std::getenv("CI") != nullptr) FAIL() << "SLUICE_VM_ADDRESS unset: run through tests/vm/run_in_vm.sh"; \
    GTEST_SKIP() << "no RDMA port address (SLUICE_VM_ADDRESS): run through tests/vm/run_in_vm.sh";            \
  }

TransportSettings settings_for(std::uint16_t port) {
  TransportSettings settings;
  settings.endpoint = LinkEndpoint{std::getenv("SLUICE_VM_ADDRESS"), port};
  settings.connect_timeout = 20s;
  return settings;
}

void fill(Chunk& chunk, std::uint64_t sequence) {
  chunk.size = 1000 + sequence * 37 % chunk.capacity;
  if (chunk.size > chunk.capacity) chunk.size = chunk.capacity;
  for (std::size_t offset = 0; offset < chunk.size; ++offset) {
    chunk.data[offset] = static_cast<std::byte>((sequence * 131 + offset * 7) & 0xff);
  }
  chunk.lane = 3;
  chunk.sequence = sequence;
  chunk.first_sample = sequence * 100'000;
  chunk.sample_count = chunk.size / 4;
  chunk.format = SampleFormat::ci16;
  chunk.timestamp = Timestamp{1'700'000'000 + sequence, 250'000'000'000, true};
  chunk.gap_count = 0;
  for (std::uint64_t gap = 0; gap < sequence % (Chunk::kMaxGaps + 1); ++gap)
    chunk.add_gap(sequence * 1000 + gap, gap + 1);
}

TEST(RoceTransport, MovesChunksWithMetadataAndCreditsThroughTheSeam) {
  REQUIRE_VM();
  Pool landing("landing", PoolSpec{64 << 10, 4, MemoryKind::host, 0});
  Pool source("source", PoolSpec{64 << 10, 8, MemoryKind::host, 0});
  RoceReceiver receiver;
  receiver.listen(settings_for(7480), 3, landing);
  EXPECT_NE(landing.registrations().size(), 0U);
  constexpr std::uint64_t kChunks = 100;
  const std::vector<std::byte> hello{std::byte{1}, std::byte{2}, std::byte{3}};
  LinkStatus sender_end = LinkStatus::idle;
  std::thread sending([&] {
    RoceSender sender;
    sender.connect(settings_for(7480), 3, {&source}, hello);
    EXPECT_EQ(sender.slot_count(), 4U);
    EXPECT_EQ(sender.slot_bytes(), 64U << 10);
    for (std::uint64_t sequence = 0; sequence < kChunks; ++sequence) {
      ChunkPtr chunk = source.acquire(10s);
      ASSERT_TRUE(chunk);
      fill(*chunk, sequence);
      LinkStatus status;
      while ((status = sender.send(chunk, 100ms)) == LinkStatus::idle) {
      }
      ASSERT_EQ(status, LinkStatus::ok) << sender.error();
    }
    sender_end = sender.finish(10s);
    sender.close();
    EXPECT_EQ(source.registrations().size(), 0U);
  });
  EXPECT_EQ(receiver.accept(), hello);
  Pool expected_pool("expected", PoolSpec{64 << 10, 1, MemoryKind::host, 0});
  ChunkPtr expected = expected_pool.acquire(1s);
  std::uint64_t received = 0;
  LinkStatus status = LinkStatus::idle;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    ChunkPtr chunk;
    status = receiver.receive(chunk, 100ms);
    if (status == LinkStatus::idle) continue;
    if (status != LinkStatus::ok) break;
    fill(*expected, received);
    EXPECT_EQ(chunk->sequence, received);
    EXPECT_EQ(chunk->size, expected->size);
    EXPECT_EQ(std::memcmp(chunk->data, expected->data, expected->size), 0) << "chunk " << received;
    EXPECT_EQ(chunk->first_sample, expected->first_sample);
    EXPECT_EQ(chunk->timestamp.seconds, expected->timestamp.seconds);
    EXPECT_EQ(chunk->timestamp.picoseconds, expected->timestamp.picoseconds);
    ASSERT_EQ(chunk->gap_count, expected->gap_count);
    for (std::uint32_t gap = 0; gap < chunk->gap_count; ++gap) {
      EXPECT_EQ(chunk->gaps[gap].first_sample, expected->gaps[gap].first_sample);
      EXPECT_EQ(chunk->gaps[gap].length, expected->gaps[gap].length);
    }
    ++received;
    // chunk released here: its slot's credit goes back through the pool's release hook.
  }
  sending.join();
  EXPECT_EQ(status, LinkStatus::end_of_stream) << receiver.error();
  EXPECT_EQ(received, kChunks);
  EXPECT_EQ(sender_end, LinkStatus::ok);
  receiver.close();
  EXPECT_EQ(landing.available(), 4U) << "every landing slot returns to the pool at close";
}

TEST(RoceTransport, AReceiversFailureReachesTheSender) {
  REQUIRE_VM();
  Pool landing("landing", PoolSpec{16 << 10, 2, MemoryKind::host, 0});
  Pool source("source", PoolSpec{16 << 10, 2, MemoryKind::host, 0});
  RoceReceiver receiver;
  receiver.listen(settings_for(7481), 0, landing);
  LinkStatus sender_status = LinkStatus::ok;
  std::string sender_error;
  std::thread sending([&] {
    RoceSender sender;
    try {
      sender.connect(settings_for(7481), 0, {&source}, {});
    } catch (const std::exception& error) {  // a receiver that failed once it had the hello is not retried
      sender_status = LinkStatus::idle;
      sender_error = std::string("connect threw: ") + error.what();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (sender_status == LinkStatus::ok || sender_status == LinkStatus::idle) {
      if (std::chrono::steady_clock::now() > deadline) break;
      ChunkPtr chunk = source.acquire(100ms);
      if (!chunk) continue;
      fill(*chunk, 0);
      sender_status = sender.send(chunk, 100ms);
    }
    sender_error = sender.error();
  });
  receiver.accept();
  receiver.abort("record stage: No space left on device");
  sending.join();
  EXPECT_EQ(sender_status, LinkStatus::error);
  EXPECT_EQ(sender_error, "the receiver failed: record stage: No space left on device");
}

}  // namespace
}  // namespace sluice
