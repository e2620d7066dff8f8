// The tcp link transport over real loopback sockets: every chunk's bytes, metadata, gap
// table and order arrive; credits stop the sender while the receiver holds its ring;
// failures, silence and a closed peer are reported on the other side.
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "pipeline/chunk_wire.hpp"
#include "pipeline/clock.hpp"
#include "stages/link/link_halves.hpp"
#include "stages/link/tcp_transport.hpp"
#include "tests/stages/link/loopback_link.hpp"
#include "tests/support/free_port.hpp"
#include "wire/socket.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

using testing::free_tcp_port;

TransportSettings loopback(std::chrono::milliseconds peer_timeout = 1500ms, std::uint32_t connections = 1) {
  TransportSettings settings;
  settings.connections = connections;
  settings.endpoint = {"127.0.0.1", free_tcp_port()};
  settings.connect_timeout = 10s;
  settings.peer_timeout = peer_timeout;
  return settings;
}

// The payload byte at `offset` of chunk `sequence`: what the receiver checks against.
std::byte pattern(std::uint64_t sequence, std::size_t offset) {
  std::uint64_t x = sequence * 0x9E3779B97F4A7C15ULL + offset;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  return static_cast<std::byte>(x >> 56);
}
std::size_t size_of(std::uint64_t sequence) { return sequence % 5 == 0 ? 4096 + sequence : 64 * 1024; }
std::uint32_t gaps_of(std::uint64_t sequence) {
  return sequence % 7 == 0 ? static_cast<std::uint32_t>(sequence % 33) : 0;
}

void fill(Chunk& chunk, std::uint64_t sequence) {
  chunk.size = size_of(sequence);
  for (std::size_t i = 0; i < chunk.size; ++i) chunk.data[i] = pattern(sequence, i);
  chunk.lane = 2;
  chunk.sequence = sequence;
  chunk.first_sample = sequence * 16384;
  chunk.sample_count = chunk.size / 4;
  chunk.format = SampleFormat::ci16;
  chunk.timestamp = Timestamp{1700000000 + sequence, sequence * 1000, sequence % 2 == 0};
  chunk.packets = static_cast<std::uint32_t>(sequence % 100);
  chunk.time_jump = sequence % 7 == 3;
  chunk.context_change = sequence % 50 == 10;  // a retune now and then: its values cross too
  if (chunk.context_change) chunk.context.rf_frequency = 2.4e9 + static_cast<double>(sequence);
  for (std::uint32_t g = 0; g < gaps_of(sequence); ++g) ASSERT_TRUE(chunk.add_gap(sequence * 100 + g, g + 1));
}

// Both halves connected over loopback: 8 source chunks and `slots` landing slots of 64 KiB.
struct Connected : testing::LoopbackLink {
  explicit Connected(std::size_t slots, const TransportSettings& settings = loopback(), std::uint32_t sender_lane = 2)
      : LoopbackLink(PoolSpec{64 * 1024, 8, MemoryKind::host, 0}, PoolSpec{64 * 1024, slots, MemoryKind::host, 0},
                     settings, sender_lane) {}
};

// Sends `chunks` chunks through `link` and checks each one as it lands, in order.
void send_and_check(Connected& link, std::uint64_t chunks) {
  auto checked = std::async(std::launch::async, [&] {
    std::uint64_t expected = 0;
    for (;;) {
      ChunkPtr chunk;
      const LinkStatus status = link.receiver.receive(chunk, 5s);
      if (status == LinkStatus::end_of_stream) {
        link.receiver.close();  // at once, as the receiving stage does: the sender's finish must not take it for a loss
        break;
      }
      if (status != LinkStatus::ok) {
        ADD_FAILURE() << "receive: " << to_string(status) << " " << link.receiver.error();
        break;
      }
      EXPECT_EQ(chunk->pool, &link.landing);
      EXPECT_EQ(chunk->sequence, expected);
      EXPECT_EQ(chunk->size, size_of(expected));
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < chunk->size; ++i) wrong += chunk->data[i] != pattern(expected, i);
      EXPECT_EQ(wrong, 0U) << "chunk " << expected;
      EXPECT_EQ(chunk->lane, 2U);
      EXPECT_EQ(chunk->first_sample, expected * 16384);
      EXPECT_EQ(chunk->sample_count, chunk->size / 4);
      EXPECT_EQ(chunk->timestamp.seconds, 1700000000 + expected);
      EXPECT_EQ(chunk->timestamp.picoseconds, expected * 1000);
      EXPECT_EQ(chunk->timestamp.valid, expected % 2 == 0);
      EXPECT_EQ(chunk->packets, expected % 100);
      EXPECT_EQ(chunk->time_jump, expected % 7 == 3);
      EXPECT_EQ(chunk->context_change, expected % 50 == 10);
      if (chunk->context_change) {
        EXPECT_EQ(chunk->context.rf_frequency, 2.4e9 + static_cast<double>(expected));
      }
      EXPECT_EQ(chunk->gap_count, gaps_of(expected));
      for (std::uint32_t g = 0; g < chunk->gap_count; ++g) {
        EXPECT_EQ(chunk->gaps[g].first_sample, expected * 100 + g);
        EXPECT_EQ(chunk->gaps[g].length, g + 1U);
      }
      ++expected;
    }
    return expected;
  });
  for (std::uint64_t sequence = 0; sequence < chunks; ++sequence) {
    ChunkPtr chunk = link.source.acquire(5s);
    ASSERT_TRUE(chunk);
    fill(*chunk, sequence);
    LinkStatus status;
    while ((status = link.sender.send(chunk, 100ms)) == LinkStatus::idle) {
    }
    ASSERT_EQ(status, LinkStatus::ok) << link.sender.error();
    EXPECT_FALSE(chunk);
  }
  EXPECT_EQ(link.sender.finish(5s), LinkStatus::ok) << link.sender.error();
  EXPECT_EQ(checked.get(), chunks);
  EXPECT_EQ(link.source.available(), 8U);  // every source chunk went back once sent
  link.receiver.close();
  EXPECT_EQ(link.landing.available(), link.landing.chunk_count());  // every slot back in the ring's free list
}

TEST(TcpLink, EveryChunkArrivesWithItsBytesMetadataGapsAndOrder) {
  Connected link(4);
  EXPECT_EQ(link.hello_seen, (std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{3}}));
  EXPECT_EQ(link.sender.slot_count(), 4U);
  EXPECT_EQ(link.sender.slot_bytes(), 64U * 1024);
  send_and_check(link, 600);
}

TEST(TcpLink, ChunksSpreadOverSeveralConnectionsArriveInOrder) {
  // Three connections, and a ring deeper than them and shallower: chunks overtake each
  // other on the wire, and the receiver hands them out in the order sent.
  for (const std::size_t slots : {std::size_t{2}, std::size_t{7}}) {
    Connected link(slots, loopback(1500ms, 3));
    EXPECT_EQ(link.hello_seen, (std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{3}}));
    send_and_check(link, 900);
  }
}

TEST(TcpLink, SenderWaitsForCreditsWhileTheReceiverHoldsEverySlot) {
  Connected link(3);
  std::vector<ChunkPtr> held;
  for (std::uint64_t sequence = 0; sequence < 3; ++sequence) {
    ChunkPtr chunk = link.source.acquire(1s);
    fill(*chunk, sequence);
    ASSERT_EQ(link.sender.send(chunk, 2s), LinkStatus::ok);
    ChunkPtr landed;
    ASSERT_EQ(link.receiver.receive(landed, 5s), LinkStatus::ok);
    held.push_back(std::move(landed));  // a slow downstream: nothing released
  }
  ChunkPtr fourth = link.source.acquire(1s);
  fill(*fourth, 3);
  EXPECT_EQ(link.sender.send(fourth, 300ms), LinkStatus::idle);  // no credit: the chunk stays with the caller
  ASSERT_TRUE(fourth);
  EXPECT_EQ(fourth->sequence, 3U);
  held.erase(held.begin());  // downstream releases one slot: its credit goes back
  EXPECT_EQ(link.sender.send(fourth, 5s), LinkStatus::ok) << link.sender.error();
  ChunkPtr landed;
  ASSERT_EQ(link.receiver.receive(landed, 5s), LinkStatus::ok);
  EXPECT_EQ(landed->sequence, 3U);
}

TEST(TcpLink, ReceiverFailureReachesTheSender) {
  Connected link(2);
  link.receiver.abort("disk full on the receiving node");
  ChunkPtr chunk = link.source.acquire(1s);
  fill(*chunk, 0);
  LinkStatus status = LinkStatus::ok;
  for (int attempt = 0; attempt < 50 && (status == LinkStatus::ok || status == LinkStatus::idle); ++attempt) {
    if (!chunk) {
      chunk = link.source.acquire(1s);
      fill(*chunk, 1);
    }
    status = link.sender.send(chunk, 100ms);
  }
  EXPECT_EQ(status, LinkStatus::error);
  EXPECT_NE(link.sender.error().find("disk full on the receiving node"), std::string::npos) << link.sender.error();
}

TEST(TcpLink, SenderFailureReachesTheReceiver) {
  Connected link(2);
  link.sender.abort("upstream stage failed");
  ChunkPtr chunk;
  EXPECT_EQ(link.receiver.receive(chunk, 5s), LinkStatus::error);
  EXPECT_NE(link.receiver.error().find("upstream stage failed"), std::string::npos) << link.receiver.error();
}

TEST(TcpLink, ConnectionClosedMidStreamIsPeerLoss) {
  Connected link(2);
  ChunkPtr chunk = link.source.acquire(1s);
  fill(*chunk, 0);
  ASSERT_EQ(link.sender.send(chunk, 2s), LinkStatus::ok);
  link.sender.close();  // gone without an end of stream
  ChunkPtr landed;
  ASSERT_EQ(link.receiver.receive(landed, 5s), LinkStatus::ok);  // what arrived is still delivered
  EXPECT_EQ(link.receiver.receive(landed, 5s), LinkStatus::peer_lost);
  EXPECT_NE(link.receiver.error().find("closed"), std::string::npos) << link.receiver.error();
}

TEST(TcpLink, SilentSenderIsLostAfterPeerTimeout) {
  // A sender whose host froze: connected, handshake done, then not a byte (no heartbeats).
  const TransportSettings settings = loopback(300ms);
  Pool landing("landing", PoolSpec{64 * 1024, 2, MemoryKind::host, 0});
  TcpReceiver receiver;
  receiver.listen(settings, 0, landing);
  wire::UniqueFd frozen(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(settings.endpoint.port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(frozen.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  // hello: type 1, version 2, lane 0, one connection, no body (little-endian frame header).
  const std::array<std::uint8_t, 16> hello{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
  ASSERT_EQ(::send(frozen.get(), hello.data(), hello.size(), 0), 16);
  EXPECT_TRUE(receiver.accept().empty());
  const std::uint64_t begin = monotonic_ns();
  ChunkPtr chunk;
  LinkStatus status = LinkStatus::idle;
  while (status == LinkStatus::idle) status = receiver.receive(chunk, 100ms);
  const double waited = static_cast<double>(monotonic_ns() - begin) / 1e9;
  EXPECT_EQ(status, LinkStatus::peer_lost);
  EXPECT_NE(receiver.error().find("silent"), std::string::npos) << receiver.error();
  EXPECT_GE(waited, 0.29);  // not before the timeout: heartbeats would have kept a live peer
  receiver.close();
}

TEST(TcpLink, ReceiverRefusesASenderOfAnotherLane) {
  const TransportSettings settings = loopback();
  Pool source("source", PoolSpec{64 * 1024, 2, MemoryKind::host, 0});
  Pool landing("landing", PoolSpec{64 * 1024, 2, MemoryKind::host, 0});
  TcpReceiver receiver;
  receiver.listen(settings, 2, landing);
  auto accepted = std::async(std::launch::async, [&] { receiver.accept(); });
  TcpSender sender;
  try {
    sender.connect(settings, 5, {&source}, {});
    ADD_FAILURE() << "connect succeeded";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("lane #5"), std::string::npos) << error.what();
  }
  EXPECT_THROW(accepted.get(), std::runtime_error);
}

TEST(TcpLink, SenderRetriesUntilTheReceiverListens) {
  const TransportSettings settings = loopback();
  Pool source("source", PoolSpec{64 * 1024, 2, MemoryKind::host, 0});
  Pool landing("landing", PoolSpec{64 * 1024, 2, MemoryKind::host, 0});
  TcpSender sender;
  auto connected = std::async(std::launch::async, [&] { sender.connect(settings, 0, {&source}, {}); });
  std::this_thread::sleep_for(300ms);  // the receiving node starts later
  TcpReceiver receiver;
  receiver.listen(settings, 0, landing);
  receiver.accept();
  connected.get();
  EXPECT_EQ(sender.slot_count(), 2U);
}

// A connected loopback pair: `client` connected to `server`, the peer of a TcpConnection.
struct TcpPair {
  wire::UniqueFd client;
  wire::UniqueFd server;
  TcpPair() {
    wire::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(listener.get(), 1), 0);
    EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
    client.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(client.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    server.reset(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }
};

// The receiving end of a link has sent its last bytes (the end's acknowledgement) while the
// peer, not reading yet, holds them back and has sent a heartbeat it never read. Closing then
// would reset the connection and discard what was not yet delivered; linger() sends a FIN, reads
// the heartbeat and waits for the peer's close, so every byte arrives and then the end.
TEST(TcpConnection, LingerDeliversWhatIsInFlightBeforeTheConnectionCloses) {
  TcpPair pair;
  const std::array<std::byte, 16> heartbeat{};
  ASSERT_EQ(::send(pair.client.get(), heartbeat.data(), heartbeat.size(), 0), 16);
  // Until the server's send queue is full: its tail waits there, not yet delivered.
  const std::vector<std::byte> block(1 << 20, std::byte{7});
  std::size_t sent = 0;
  for (ssize_t n = 0; sent < (64U << 20) && n >= 0; sent += static_cast<std::size_t>(std::max<ssize_t>(n, 0))) {
    n = ::send(pair.server.get(), block.data(), block.size(), MSG_DONTWAIT);
  }
  int queued = 0;
  ASSERT_EQ(::ioctl(pair.server.get(), SIOCOUTQ, &queued), 0);
  ASSERT_GT(queued, 0) << "nothing waits in the server's send queue";
  TcpFailure failure;
  TcpConnection connection(failure);
  connection.adopt(std::move(pair.server), 2000ms);
  std::thread closing([&] {
    connection.linger();
    connection.close();
  });
  std::this_thread::sleep_for(50ms);  // the server is lingering before the client reads
  std::vector<std::byte> got(64 * 1024);
  std::size_t received = 0;
  ssize_t n = 0;
  while ((n = ::recv(pair.client.get(), got.data(), got.size(), 0)) > 0) received += static_cast<std::size_t>(n);
  const int error = n < 0 ? errno : 0;
  pair.client.reset();  // the client closes once it has read the end
  closing.join();
  EXPECT_EQ(error, 0) << "the client's read failed: " << std::strerror(error);
  EXPECT_EQ(received, sent);
  EXPECT_FALSE(failure.failed()) << failure.text();
}

TEST(LinkHello, StreamInfoCrossesIntactAndGarbageIsRefused) {
  StreamInfo stream;
  stream.sample_rate = 250e6;
  stream.format = SampleFormat::cf32;
  stream.center_frequency = 1.42e9;
  stream.description = "VITA-49 stream 0x1 on 127.0.0.1:50000";
  stream.fft_size = 4096;
  stream.window = "hann";
  stream.averaging = 8;
  stream.start_time = Timestamp{1700000000, 123456789, true};
  const StreamInfo back = decode_stream_info(encode_stream_info(stream));
  EXPECT_EQ(back.sample_rate, 250e6);
  EXPECT_EQ(back.format, SampleFormat::cf32);
  EXPECT_EQ(back.center_frequency, 1.42e9);
  EXPECT_EQ(back.description, stream.description);
  EXPECT_EQ(back.fft_size, 4096U);
  EXPECT_EQ(back.window, "hann");
  EXPECT_EQ(back.averaging, 8U);
  EXPECT_EQ(back.start_time.seconds, 1700000000U);
  EXPECT_EQ(back.start_time.picoseconds, 123456789U);
  EXPECT_TRUE(back.start_time.valid);
  const std::string garbage = "{\"version\": 1}";
  EXPECT_THROW(decode_stream_info(std::as_bytes(std::span(garbage.data(), garbage.size()))), std::runtime_error);
  const std::string future = "{\"version\": 2}";
  EXPECT_THROW(decode_stream_info(std::as_bytes(std::span(future.data(), future.size()))), std::runtime_error);
}

}  // namespace
}  // namespace sluice
