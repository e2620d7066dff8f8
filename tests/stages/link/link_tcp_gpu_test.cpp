// The tcp link's sending half with chunks in GPU memory, over real loopback sockets and
// several connections: every chunk lands in host memory bit-exact and in order, and every GPU
// chunk goes back to its pool once its copy to the host finished. Skips without a GPU.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "pipeline/cuda_glue.hpp"
#include "stages/link/tcp_transport.hpp"
#include "tests/stages/link/loopback_link.hpp"
#include "tests/support/free_port.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kChunkBytes = 1 << 20;
constexpr std::uint64_t kChunks = 200;

// The payload byte at `offset` of chunk `sequence`, written on the host and copied to the GPU.
std::byte pattern(std::uint64_t sequence, std::size_t offset) {
  std::uint64_t x = sequence * 0x9E3779B97F4A7C15ULL + offset;
  x ^= x >> 31;
  return static_cast<std::byte>(x * 0xBF58476D1CE4E5B9ULL >> 56);
}
std::size_t size_of(std::uint64_t sequence) { return sequence % 3 == 0 ? kChunkBytes - sequence : kChunkBytes; }

TEST(TcpLinkGpu, DeviceChunksOverSeveralConnectionsLandBitExactInOrder) {
  if (cuda_glue::device_count() == 0) GTEST_SKIP() << cuda_glue::unavailable_reason();
  TransportSettings settings;
  settings.connections = 4;
  settings.endpoint = {"127.0.0.1", testing::free_tcp_port()};
  settings.connect_timeout = 10s;
  testing::LoopbackLink link(PoolSpec{kChunkBytes, 16, MemoryKind::device, 0},
                             PoolSpec{kChunkBytes, 8, MemoryKind::host, 0}, settings);
  Pool& source = link.source;
  TcpSender& sender = link.sender;
  TcpReceiver& receiver = link.receiver;

  auto checked = std::async(std::launch::async, [&] {
    std::uint64_t expected = 0;
    for (ChunkPtr chunk;; ++expected) {
      const LinkStatus status = receiver.receive(chunk, 10s);
      if (status == LinkStatus::end_of_stream) break;
      if (status != LinkStatus::ok) {
        ADD_FAILURE() << "receive: " << to_string(status) << " " << receiver.error();
        break;
      }
      EXPECT_EQ(chunk->sequence, expected);
      EXPECT_EQ(chunk->size, size_of(expected));
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < chunk->size; ++i) wrong += chunk->data[i] != pattern(expected, i);
      EXPECT_EQ(wrong, 0U) << "chunk " << expected;
      chunk.reset();  // the slot's credit goes back
    }
    return expected;
  });
  std::vector<std::byte> host(kChunkBytes);
  for (std::uint64_t sequence = 0; sequence < kChunks; ++sequence) {
    ChunkPtr chunk = source.acquire(10s);
    ASSERT_TRUE(chunk);
    chunk->size = size_of(sequence);
    chunk->sequence = sequence;
    for (std::size_t i = 0; i < chunk->size; ++i) host[i] = pattern(sequence, i);
    ASSERT_EQ(copy_memory(chunk->data, MemoryKind::device, host.data(), MemoryKind::host, chunk->size, nullptr), "");
    LinkStatus status;
    while ((status = sender.send(chunk, 100ms)) == LinkStatus::idle) {
    }
    ASSERT_EQ(status, LinkStatus::ok) << sender.error();
  }
  EXPECT_EQ(sender.finish(10s), LinkStatus::ok) << sender.error();
  EXPECT_EQ(checked.get(), kChunks);
  EXPECT_EQ(source.available(), source.chunk_count());  // every GPU chunk went back once copied
}

}  // namespace
}  // namespace sluice
