// The verbs transport on a real RDMA stack (Soft-RoCE in the test VM), payloads checked against a
// pattern computed here from the chunk number alone, not against what the transport reported.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "pipeline/chunk.hpp"
#include "stages/link/rdma/receiver.hpp"
#include "stages/link/rdma/sender.hpp"
#include "tests/support/process.hpp"

namespace sluice::rdma {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Metadata each test chunk carries: its number and a gap table as full as a chunk's.
struct TestMetadata {
  std::uint64_t number = 0;
  std::uint64_t first_sample = 0;
  std::uint32_t gap_count = 0;
  std::uint32_t reserved = 0;
  std::array<Gap, Chunk::kMaxGaps> gaps{};
};

std::uint64_t mix(std::uint64_t value) {  // splitmix64: an independent byte pattern per chunk
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}
void fill_pattern(std::uint64_t number, std::byte* out, std::size_t bytes) {
  for (std::size_t offset = 0; offset < bytes; offset += 8) {
    const std::uint64_t word = mix(number * 1'000'003 + offset / 8);
    std::memcpy(out + offset, &word, std::min<std::size_t>(8, bytes - offset));
  }
}
bool matches_pattern(std::uint64_t number, const std::byte* data, std::size_t bytes) {
  std::vector<std::byte> expected(bytes);
  fill_pattern(number, expected.data(), bytes);
  return std::memcmp(expected.data(), data, bytes) == 0;
}
TestMetadata metadata_for(std::uint64_t number) {
  TestMetadata metadata;
  metadata.number = number;
  metadata.first_sample = number * 4096 + 17;
  metadata.gap_count = static_cast<std::uint32_t>(number % (Chunk::kMaxGaps + 1));
  for (std::uint32_t index = 0; index < metadata.gap_count; ++index) {
    metadata.gaps[index] = Gap{mix(number + index), index + 1};
  }
  return metadata;
}
std::size_t size_for(std::uint64_t number, std::size_t slot_bytes) { return 1 + (number * 7919) % slot_bytes; }

// Skips where there is no RDMA device; inside the VM (SLUICE_IN_VM=1) or under CI that is a failure.
std::optional<std::string> missing_rdma() {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (devices != nullptr) ibv_free_device_list(devices);
  if (count == 0) return "no RDMA device (run through tests/vm/run_in_vm.sh)";
  if (std::getenv("SLUICE_VM_ADDRESS") == nullptr) return "SLUICE_VM_ADDRESS (an address of an RDMA port) is not set";
  return std::nullopt;
}
#define REQUIRE_RDMA()                                                                             \
  if (auto reason = missing_rdma()) {                                                              \
    if (std::getenv("SLUICE_IN_VM") != nullptr || std::getenv("CI") != nullptr) FAIL() << *reason; \
    GTEST_SKIP() << *reason;                                                                       \
  }
std::string address() { return std::getenv("SLUICE_VM_ADDRESS"); }

// A host landing ring owned by the test.
struct HostRing {
  HostRing(std::uint32_t slots, std::size_t slot_bytes) : bytes(slots * slot_bytes) {
    ring.base = bytes.data();
    ring.slot_bytes = slot_bytes;
    ring.slot_count = slots;
  }
  std::vector<std::byte> bytes;
  LandingRing ring;
};

// What a receiver saw on one connection.
struct Received {
  std::vector<std::uint64_t> numbers;
  std::vector<std::uint32_t> slots;
  std::size_t bad_payloads = 0;
  std::size_t bad_metadata = 0;
  ReceiveStatus end = ReceiveStatus::idle;
  std::string error;
};

// Receives until the stream ends; `hold` delays each release (a slow downstream).
Received receive_stream(RdmaReceiver& receiver, std::chrono::microseconds hold = 0us, Clock::duration limit = 60s) {
  Received received;
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    Arrival arrival;
    const ReceiveStatus status = receiver.poll(arrival);
    if (status == ReceiveStatus::idle) continue;
    if (status != ReceiveStatus::arrived) {
      received.end = status;
      received.error = receiver.error();
      return received;
    }
    TestMetadata metadata;
    if (arrival.metadata_bytes != sizeof metadata) {
      ++received.bad_metadata;
    } else {
      std::memcpy(&metadata, arrival.metadata, sizeof metadata);
      const TestMetadata expected = metadata_for(metadata.number);
      if (std::memcmp(&metadata, &expected, sizeof metadata) != 0) ++received.bad_metadata;
    }
    if (arrival.payload_bytes != size_for(metadata.number, receiver.slot_bytes()) ||
        !matches_pattern(metadata.number, arrival.payload, arrival.payload_bytes)) {
      ++received.bad_payloads;
    }
    received.numbers.push_back(metadata.number);
    received.slots.push_back(arrival.slot);
    if (hold > 0us) std::this_thread::sleep_for(hold);
    receiver.release(arrival.slot);
  }
  received.error = "no end of stream within the limit";
  return received;
}

// Sends chunks `first`..`first + count - 1` from a registered source ring, then finishes
// (or not). Returns how often the sender had to wait for a credit.
struct SendResult {
  std::uint64_t waits_for_credit = 0;
  bool ok = false;
  std::string error;
};
SendResult send_stream(RdmaSender& sender, std::uint64_t first, std::uint64_t count, std::size_t slot_bytes,
                       bool finish = true) {
  constexpr std::size_t kSources = 8;
  std::vector<std::byte> sources(kSources * slot_bytes);
  const std::uint32_t lkey = sender.register_source(sources.data(), sources.size()).lkey;
  std::vector<bool> busy(kSources, false);
  SendResult result;
  std::uint64_t number = first;
  std::size_t next_source = 0;
  const auto deadline = Clock::now() + 60s;
  while (number < first + count && Clock::now() < deadline) {
    if (!sender.poll([&](std::uint64_t source) { busy[source] = false; })) {
      result.error = sender.error();
      return result;
    }
    if (busy[next_source]) continue;  // its previous chunk's write has not completed
    std::byte* source = sources.data() + next_source * slot_bytes;
    const std::size_t bytes = size_for(number, slot_bytes);
    fill_pattern(number, source, bytes);
    const TestMetadata metadata = metadata_for(number);
    const SendStatus status = sender.send(&metadata, sizeof metadata, source, bytes, lkey, next_source);
    if (status == SendStatus::failed) {
      result.error = sender.error();
      return result;
    }
    if (status == SendStatus::no_credit) {
      ++result.waits_for_credit;
      continue;
    }
    busy[next_source] = true;
    next_source = (next_source + 1) % kSources;
    ++number;
  }
  result.ok = number == first + count && (!finish || sender.finish(10s));
  if (!result.ok) result.error = sender.error().empty() ? "timed out" : sender.error();
  return result;
}

SenderOptions sender_options(std::uint16_t port) {
  SenderOptions options;
  options.address = address();
  options.port = port;
  options.metadata_bytes = sizeof(TestMetadata);
  options.max_outstanding = 8;
  options.signal_every = 4;
  return options;
}
ReceiverOptions receiver_options(std::uint16_t port = 0) {
  ReceiverOptions options;
  options.address = address();
  options.port = port;
  options.metadata_bytes = sizeof(TestMetadata);
  return options;
}

TEST(RdmaTransport, CarriesManyChunksWithContentMetadataAndOrder) {
  REQUIRE_RDMA();
  HostRing ring(8, 64 << 10);
  RdmaReceiver receiver(receiver_options(), ring.ring);
  constexpr std::uint64_t kChunks = 400;
  Received received;
  std::thread receiving([&] {
    ASSERT_TRUE(receiver.accept(10s));
    received = receive_stream(receiver);
  });
  RdmaSender sender(sender_options(receiver.port()));
  const SendResult sent = send_stream(sender, 0, kChunks, ring.ring.slot_bytes);
  receiving.join();
  EXPECT_TRUE(sent.ok) << sent.error;
  EXPECT_EQ(received.end, ReceiveStatus::end_of_stream) << received.error;
  ASSERT_EQ(received.numbers.size(), kChunks);
  for (std::uint64_t number = 0; number < kChunks; ++number) {
    EXPECT_EQ(received.numbers[number], number);
    EXPECT_EQ(received.slots[number], number % 8);
  }
  EXPECT_EQ(received.bad_payloads, 0U);
  EXPECT_EQ(received.bad_metadata, 0U);
}

TEST(RdmaTransport, AFullGapTableCrossesIntact) {
  REQUIRE_RDMA();
  HostRing ring(2, 4096);
  RdmaReceiver receiver(receiver_options(), ring.ring);
  TestMetadata metadata;
  metadata.number = 7;
  metadata.gap_count = Chunk::kMaxGaps;
  for (std::uint32_t index = 0; index < Chunk::kMaxGaps; ++index) {
    metadata.gaps[index] = Gap{~std::uint64_t{0} - index * 1'000'000'007ull, (1ull << 40) + index};
  }
  std::optional<TestMetadata> landed;
  std::thread receiving([&] {
    ASSERT_TRUE(receiver.accept(10s));
    const auto deadline = Clock::now() + 30s;
    Arrival arrival;
    while (Clock::now() < deadline) {
      const ReceiveStatus status = receiver.poll(arrival);
      if (status == ReceiveStatus::idle) continue;
      if (status == ReceiveStatus::arrived && arrival.metadata_bytes == sizeof(TestMetadata)) {
        landed.emplace();
        std::memcpy(&*landed, arrival.metadata, sizeof(TestMetadata));
        receiver.release(arrival.slot);
      }
      if (status != ReceiveStatus::arrived) return;
    }
  });
  RdmaSender sender(sender_options(receiver.port()));
  std::vector<std::byte> payload(4096);
  const std::uint32_t lkey = sender.register_source(payload.data(), payload.size()).lkey;
  ASSERT_EQ(sender.send(&metadata, sizeof metadata, payload.data(), payload.size(), lkey, 0), SendStatus::posted);
  EXPECT_TRUE(sender.finish(10s)) << sender.error();
  receiving.join();
  ASSERT_TRUE(landed.has_value());
  EXPECT_EQ(std::memcmp(&*landed, &metadata, sizeof metadata), 0);
}

TEST(RdmaTransport, CreditsHoldAFastSenderToASlowReceiver) {
  REQUIRE_RDMA();
  HostRing ring(4, 16 << 10);
  RdmaReceiver receiver(receiver_options(), ring.ring);
  constexpr std::uint64_t kChunks = 120;
  Received received;
  std::thread receiving([&] {
    ASSERT_TRUE(receiver.accept(10s));
    received = receive_stream(receiver, 3ms);
  });
  RdmaSender sender(sender_options(receiver.port()));
  const SendResult sent = send_stream(sender, 0, kChunks, ring.ring.slot_bytes);
  receiving.join();
  EXPECT_TRUE(sent.ok) << sent.error;
  EXPECT_GT(sent.waits_for_credit, 0U) << "the sender never ran out of credits against a slow receiver";
  EXPECT_EQ(received.end, ReceiveStatus::end_of_stream) << received.error;
  ASSERT_EQ(received.numbers.size(), kChunks);
  for (std::uint64_t number = 0; number < kChunks; ++number) EXPECT_EQ(received.numbers[number], number);
  // A slot overwritten before its release would show as a wrong payload or metadata.
  EXPECT_EQ(received.bad_payloads, 0U);
  EXPECT_EQ(received.bad_metadata, 0U);
}

TEST(RdmaTransport, AnErrorCrossesTheConnection) {
  REQUIRE_RDMA();
  HostRing ring(4, 4096);
  RdmaReceiver receiver(receiver_options(), ring.ring);
  Received received;
  std::thread receiving([&] {
    ASSERT_TRUE(receiver.accept(10s));
    received = receive_stream(receiver);
  });
  RdmaSender sender(sender_options(receiver.port()));
  const SendResult sent = send_stream(sender, 0, 5, ring.ring.slot_bytes, false);
  EXPECT_TRUE(sent.ok) << sent.error;
  sender.fail("upstream socket stage failed: bind: Address in use");
  receiving.join();
  EXPECT_EQ(received.end, ReceiveStatus::peer_error);
  EXPECT_EQ(received.error, "upstream socket stage failed: bind: Address in use");
  EXPECT_EQ(received.numbers.size(), 5U);
}

TEST(RdmaTransport, AReceiverTakesASecondSenderAndARestartedReceiverIsReachedAgain) {
  REQUIRE_RDMA();
  HostRing ring(8, 8192);
  std::optional<RdmaReceiver> receiver(std::in_place, receiver_options(), ring.ring);
  const std::uint16_t port = receiver->port();
  std::array<Received, 2> sessions;
  std::thread receiving([&] {
    for (Received& session : sessions) {
      ASSERT_TRUE(receiver->accept(10s));
      session = receive_stream(*receiver);
      receiver->close();
    }
  });
  for (std::uint64_t session = 0; session < 2; ++session) {
    RdmaSender sender(sender_options(port));
    const SendResult sent = send_stream(sender, session * 11, 11, ring.ring.slot_bytes);
    EXPECT_TRUE(sent.ok) << "session " << session << ": " << sent.error;
  }
  receiving.join();
  for (std::uint64_t session = 0; session < 2; ++session) {
    EXPECT_EQ(sessions[session].end, ReceiveStatus::end_of_stream) << sessions[session].error;
    ASSERT_EQ(sessions[session].numbers.size(), 11U);
    EXPECT_EQ(sessions[session].numbers.front(), session * 11);
    EXPECT_EQ(sessions[session].bad_payloads + sessions[session].bad_metadata, 0U);
  }
  // The ring carried on where the first sender left it: slot 11 % 8 = 3.
  EXPECT_EQ(sessions[1].slots.front(), 3U);

  // A receiver restarted on the same port accepts a new sender.
  receiver.reset();
  receiver.emplace(receiver_options(port), ring.ring);
  Received third;
  std::thread restarted([&] {
    ASSERT_TRUE(receiver->accept(10s));
    third = receive_stream(*receiver);
  });
  RdmaSender sender(sender_options(port));
  EXPECT_TRUE(send_stream(sender, 100, 6, ring.ring.slot_bytes).ok) << sender.error();
  restarted.join();
  EXPECT_EQ(third.end, ReceiveStatus::end_of_stream) << third.error;
  ASSERT_EQ(third.numbers.size(), 6U);
  EXPECT_EQ(third.numbers.front(), 100U);
  EXPECT_EQ(third.slots.front(), 0U);
}

// A sender connecting to a receiver another process is still setting up: retried.
std::unique_ptr<RdmaSender> connect_with_retries(std::uint16_t port) {
  const auto deadline = Clock::now() + 20s;
  for (;;) {
    try {
      return std::make_unique<RdmaSender>(sender_options(port));
    } catch (const std::exception& error) {
      if (Clock::now() > deadline) throw;
      std::this_thread::sleep_for(100ms);
    }
  }
}

// The other side of the kill tests runs in its own process (this binary, started with
// --peer ROLE): verbs contexts cannot be shared across fork().
std::unique_ptr<testing::Process> start_peer(const std::string& role, std::uint16_t port) {
  return std::make_unique<testing::Process>(
      std::vector<std::string>{"/proc/self/exe", "--peer", role, std::to_string(port)});
}

// The peer's loss must be noticed within the 1-2 s the design promises; the bound here is
// looser (the VM emulates the CPU) but far below anything a hang would give.
constexpr auto kNoticeWithin = 6s;

TEST(RdmaTransport, AReceiverNoticesItsSenderKilledMidStream) {
  REQUIRE_RDMA();
  HostRing ring(8, 16 << 10);
  RdmaReceiver receiver(receiver_options(), ring.ring);
  const auto peer = start_peer("sender", receiver.port());
  ASSERT_TRUE(receiver.accept(20s));
  std::uint64_t arrived = 0;
  ReceiveStatus status = ReceiveStatus::idle;
  Clock::time_point killed{};
  const auto deadline = Clock::now() + 60s;
  while (Clock::now() < deadline) {
    Arrival arrival;
    status = receiver.poll(arrival);
    if (status == ReceiveStatus::arrived) {
      EXPECT_TRUE(matches_pattern(arrived, arrival.payload, arrival.payload_bytes));
      receiver.release(arrival.slot);
      if (++arrived == 20) {
        peer->send_signal(SIGKILL);
        killed = Clock::now();
      }
      continue;
    }
    if (status != ReceiveStatus::idle) break;
  }
  const auto noticed = Clock::now() - killed;
  peer->wait(10s);
  ASSERT_GE(arrived, 20U) << receiver.error();
  EXPECT_TRUE(status == ReceiveStatus::disconnected || status == ReceiveStatus::failed) << receiver.error();
  EXPECT_LT(noticed, kNoticeWithin);
  std::printf("receiver noticed the killed sender after %.3f s: %s\n", std::chrono::duration<double>(noticed).count(),
              receiver.error().c_str());
}

TEST(RdmaTransport, ASenderNoticesItsReceiverKilledMidStream) {
  REQUIRE_RDMA();
  const auto peer = start_peer("receiver", 0);
  ASSERT_TRUE(peer->wait_for_stdout("\n", 20s)) << peer->stderr_so_far();
  const auto port = static_cast<std::uint16_t>(std::stoi(peer->stdout_so_far()));
  auto sender = connect_with_retries(port);
  std::vector<std::byte> source(16 << 10);
  const std::uint32_t lkey = sender->register_source(source.data(), source.size()).lkey;
  std::uint64_t completed = 0;
  std::uint64_t number = 0;
  Clock::time_point killed{};
  bool alive = true;
  const auto deadline = Clock::now() + 60s;
  while (alive && Clock::now() < deadline) {
    alive = sender->poll([&](std::uint64_t) {
      if (++completed == 20) {
        peer->send_signal(SIGKILL);
        killed = Clock::now();
      }
    });
    if (!alive) break;
    // Keep offering chunks; the one source buffer is reused only once nothing is in flight.
    if (sender->in_flight() == 0) {
      fill_pattern(number, source.data(), 1024);
      const TestMetadata metadata = metadata_for(number);
      if (sender->send(&metadata, sizeof metadata, source.data(), 1024, lkey, number) == SendStatus::posted) ++number;
    }
  }
  const auto noticed = Clock::now() - killed;
  peer->wait(10s);
  ASSERT_GE(completed, 20U) << sender->error();
  EXPECT_FALSE(alive) << "the sender did not notice its receiver was killed";
  EXPECT_LT(noticed, kNoticeWithin);
  std::printf("sender noticed the killed receiver after %.3f s: %s\n", std::chrono::duration<double>(noticed).count(),
              sender->error().c_str());
}

// --peer sender PORT: streams to PORT until killed. --peer receiver 0: listens, writes its
// port as a line to stdout, takes chunks until killed.
int run_peer(const std::string& role, std::uint16_t port) {
  try {
    if (role == "sender") {
      auto sender = connect_with_retries(port);
      send_stream(*sender, 0, ~std::uint64_t{0} / 2, 16 << 10, false);
      return 0;
    }
    HostRing ring(8, 16 << 10);
    RdmaReceiver receiver(receiver_options(), ring.ring);
    const std::uint16_t bound = receiver.port();
    std::printf("%u\n", static_cast<unsigned>(bound));
    std::fflush(stdout);
    if (receiver.accept(20s)) receive_stream(receiver, 0us, 120s);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "peer %s: %s\n", role.c_str(), error.what());
    return 1;
  }
}

}  // namespace
}  // namespace sluice::rdma

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--peer") {
    return sluice::rdma::run_peer(argv[2], static_cast<std::uint16_t>(std::stoi(argv[3])));
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
