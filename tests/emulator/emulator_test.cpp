// Emulator settings from YAML (errors with file:line:column), the pacing arithmetic, the
// deterministic fault plan, and the packet sizes for standard and jumbo payloads.
#include "emulator/emulator.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include "emulator/framing.hpp"
#include "emulator/signal.hpp"
#include "pipeline/settings.hpp"
#include "wire/samples.hpp"
#include "wire/socket.hpp"
#include "wire/vita49.hpp"
#include "wire/vita49_context.hpp"

namespace sluice::emulator {
namespace {

TEST(EmulatorSettings, ReadsTheEmulatorSection) {
  const EmulatorSettings settings = load_emulator_text(R"(
emulator:
  streams:
    - {address: 127.0.0.1:50000, stream_id: 7}
    - {address: 127.0.0.1:50001}
  sample_rate: 122.88Msps
  format: cf32
  payload: 8972
  rate: 1GB/s
  count: 10
  signal:
    tones: [{frequency: 1MHz, amplitude: 0.3}]
    chirp: {start: 0Hz, stop: 5MHz, amplitude: 0.1}
    noise_snr_db: 25
    seed: 9
  faults:
    seed: 4
    drop: {packets: [1, 2]}
    corrupt: {probability: 0.5}
)");
  ASSERT_EQ(settings.streams.size(), 2U);
  EXPECT_EQ(settings.streams[0].stream_id, 7U);
  EXPECT_EQ(settings.streams[1].stream_id, 2U);
  EXPECT_EQ(settings.signal.sample_rate, 122.88e6);
  EXPECT_EQ(settings.signal.format, SampleFormat::cf32);
  EXPECT_EQ(settings.payload, 8972U);
  EXPECT_EQ(settings.rate, 1e9);
  ASSERT_EQ(settings.signal.tones.size(), 1U);
  EXPECT_EQ(settings.signal.tones[0].frequency, 1e6);
  EXPECT_EQ(settings.signal.chirp_stop, 5e6);
  EXPECT_EQ(settings.signal.noise_snr_db, 25);
  EXPECT_EQ(settings.faults.drop.packets, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(settings.faults.corrupt.probability, 0.5);
}

TEST(EmulatorSettings, ErrorsNameFileLineAndColumn) {
  try {
    load_emulator_text("emulator:\n  sample_rate: 1.5Hz\n  payloda: 10\n  faults: {drop: {probability: 2}}\n",
                       "em.yaml");
    FAIL() << "expected a ConfigException";
  } catch (const ConfigException& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("em.yaml:2:16: emulator.sample_rate"), std::string::npos) << text;
    EXPECT_NE(text.find("em.yaml:3:3: emulator.payloda: unknown setting"), std::string::npos) << text;
    EXPECT_NE(text.find("did you mean 'payload'"), std::string::npos) << text;
    EXPECT_NE(text.find("emulator.faults.drop.probability"), std::string::npos) << text;
  }
}

TEST(EmulatorSettings, SamplesPerPacketFillStandardAndJumboDatagrams) {
  EmulatorSettings settings;
  settings.payload = 1472;  // 32 bytes of header/trailer, then 1440 bytes of ci16
  EXPECT_EQ(settings.samples_per_packet(), 360U);
  settings.payload = 8972;
  EXPECT_EQ(settings.samples_per_packet(), 2235U);
  settings.signal.format = SampleFormat::cf32;
  EXPECT_EQ(settings.samples_per_packet(), 1117U);
}

TEST(EmulatorSettings, FramingDefaultsByTransportAndCombinationsThatCannotApplyAreErrors) {
  const auto problem = [](const std::string& yaml) {
    try {
      (void)load_emulator_text("emulator: {" + yaml + "}\n");
    } catch (const ConfigException& error) {
      return error.errors().to_string();
    }
    return std::string();
  };
  EXPECT_EQ(load_emulator_text("emulator: {}\n").wire_framing(), Framing::vita49);
  EXPECT_EQ(load_emulator_text("emulator: {transport: tcp}\n").wire_framing(), Framing::raw_tcp);
  EXPECT_EQ(load_emulator_text("emulator: {framing: gnuradio_seq_size}\n").wire_framing(), Framing::gnuradio_seq_size);
  EXPECT_EQ(load_emulator_text("emulator: {transport: tcp, framing: none}\n").wire_framing(), Framing::none);
  // Payload 1472: the header of each framing comes out of it.
  EXPECT_EQ(load_emulator_text("emulator: {framing: gnuradio_seq}\n").samples_per_packet(), (1472U - 8U) / 4U);
  EXPECT_EQ(load_emulator_text("emulator: {framing: none, format: cf32}\n").samples_per_packet(), 1472U / 8U);
  EXPECT_NE(problem("transport: tcp, framing: gnuradio_seq").find("is a udp framing"), std::string::npos);
  EXPECT_NE(problem("framing: raw_tcp").find("raw_tcp frames go over tcp"), std::string::npos);
  EXPECT_NE(problem("framing: none, faults: {corrupt: {packets: [3]}}").find("framing none does not have"),
            std::string::npos);
  EXPECT_NE(problem("framing: none, faults: {shift: {packets: [3]}}").find("framing none does not have"),
            std::string::npos);
  EXPECT_NE(problem("framing: gnuradio_seq, faults: {corrupt: {packets: [3]}}").find("gnuradio_seq_size"),
            std::string::npos);
  EXPECT_NE(problem("framing: gnuradio_seq, context: {rf_frequency: 1GHz}").find("framing vita49 only"),
            std::string::npos);
  EXPECT_NE(problem("framing: none, capture: /x.sigmf-meta").find("need framing vita49"), std::string::npos);
  EXPECT_EQ(problem("framing: gnuradio_seq_size, faults: {corrupt: {packets: [3]}, truncate: {packets: [4]}}"), "");
  EXPECT_EQ(problem("transport: tcp, framing: none, faults: {drop: {probability: 0.1}, reorder: {packets: [2]}}"), "");
}

TEST(Pacer, WaitsUntilTheBytesAreDue) {
  const Pacer pacer(1e9);  // 1 byte per ns
  EXPECT_EQ(pacer.wait_ns(0, 0), 0U);
  EXPECT_EQ(pacer.wait_ns(1000, 0), 1000U);
  EXPECT_EQ(pacer.wait_ns(1000, 400), 600U);
  EXPECT_EQ(pacer.wait_ns(1000, 5000), 0U);  // behind: send at once, catch up
  // Over 10 s at 400 MB/s the schedule is exact to the nanosecond.
  const Pacer slow(400e6);
  EXPECT_EQ(slow.wait_ns(4'000'000'000ULL, 0), 10'000'000'000ULL);
  EXPECT_EQ(Pacer(0).wait_ns(1ULL << 40, 0), 0U);  // unpaced
}

TEST(FaultPlan, ListedPacketsAndProbabilityAreDeterministic) {
  FaultSettings faults;
  faults.seed = 11;
  faults.drop.packets = {3, 9};
  faults.duplicate.probability = 0.1;
  EXPECT_TRUE(faults.applies(FaultKind::drop, 0, 3));
  EXPECT_FALSE(faults.applies(FaultKind::drop, 0, 4));
  std::size_t hits = 0;
  for (std::uint64_t k = 0; k < 100000; ++k) {
    const bool hit = faults.applies(FaultKind::duplicate, 0, k);
    EXPECT_EQ(hit, faults.applies(FaultKind::duplicate, 0, k));
    hits += hit ? 1U : 0U;
  }
  EXPECT_NEAR(static_cast<double>(hits), 10000.0, 400.0);
  FaultSettings other = faults;
  other.seed = 12;
  std::size_t differences = 0;
  for (std::uint64_t k = 0; k < 1000; ++k) {
    differences += faults.applies(FaultKind::duplicate, 0, k) != other.applies(FaultKind::duplicate, 0, k) ? 1U : 0U;
  }
  EXPECT_GT(differences, 50U);
}

// A UDP socket on a free loopback port (`address` says which), with a 1 s receive timeout:
// a missing datagram fails the test instead of hanging it.
wire::UniqueFd loopback_receiver(sockaddr_in& address) {
  wire::UniqueFd receiver(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  address = *wire::parse_endpoint("127.0.0.1:0");
  socklen_t length = sizeof(address);
  const timeval timeout{1, 0};
  if (!receiver.valid() || ::bind(receiver.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(receiver.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      ::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0) {
    throw std::runtime_error(wire::errno_message("a loopback UDP receiver"));
  }
  return receiver;
}

TEST(Emulator, SendsValidPacketsWithTimestampsThatAdvanceWithTheSampleCount) {
  sockaddr_in address{};
  const wire::UniqueFd receiver = loopback_receiver(address);

  EmulatorSettings settings;
  settings.streams = {{wire::to_string(address), 42}};
  settings.signal.sample_rate = 100e6;
  settings.count = 20;
  settings.gso = false;
  settings.start_seconds = 1'700'000'000;
  Emulator emulator(settings);
  emulator.open();
  const EmulatorReport report = emulator.run(nullptr, false);
  EXPECT_EQ(report.packets, 20U);

  std::vector<std::byte> datagram(2048);
  for (std::uint64_t k = 0; k < 20; ++k) {
    const ssize_t got = ::recv(receiver.get(), datagram.data(), datagram.size(), 0);
    ASSERT_EQ(got, 1472);
    vita49::Packet packet;
    ASSERT_EQ(vita49::decode(std::span<const std::byte>(datagram.data(), 1472), packet), vita49::DecodeStatus::ok);
    EXPECT_EQ(packet.stream_id, 42U);
    EXPECT_EQ(packet.header.packet_count, k % 16);
    EXPECT_EQ(packet.payload.size(), 1440U);
    EXPECT_EQ(vita49::sample_index(packet.integer_timestamp, packet.fractional_timestamp, 100'000'000) -
                  1'700'000'000ULL * 100'000'000ULL,
              k * 360);
    EXPECT_TRUE(packet.trailer.valid_data);
  }
}

// A retune at a time: the changed IF Context packet goes out right before the first data
// packet at or after that time (10 µs at 100 Msps = sample 1000: packet 3 of 360 samples),
// never in the middle of a send batch, and the frequency before it is the old one.
TEST(Emulator, RetuneAtATimeGoesOutRightBeforeTheFirstPacketItAppliesTo) {
  sockaddr_in address{};
  const wire::UniqueFd receiver = loopback_receiver(address);
  EmulatorSettings settings = load_emulator_text(
      "emulator: {sample_rate: 100Msps, count: 8, gso: false, batch: 32, start_seconds: 1700000000,\n"
      "           context: {rf_frequency: 2.4GHz, retune: {at: 10us, rf_frequency: 2.5GHz}}}\n");
  settings.streams = {{wire::to_string(address), 7}};
  Emulator emulator(settings);
  emulator.open();
  const EmulatorReport report = emulator.run(nullptr, false);
  EXPECT_EQ(report.packets, 8U);
  EXPECT_EQ(report.context_packets, 2U);
  std::vector<std::byte> datagram(2048);
  std::vector<std::string> sequence;  // "C<MHz>[*]" for context (* = changed), "D<first sample>" for data
  for (std::uint64_t i = 0; i < 10; ++i) {
    const ssize_t got = ::recv(receiver.get(), datagram.data(), datagram.size(), 0);
    ASSERT_GT(got, 0);
    const std::span<const std::byte> bytes(datagram.data(), static_cast<std::size_t>(got));
    vita49::ContextPacket context;
    if (vita49::decode_context(bytes, context) == vita49::ContextStatus::ok) {
      sequence.push_back("C" +
                         std::to_string(static_cast<long long>(context.rf_reference_frequency_hz.value_or(0) / 1e6)) +
                         (context.changed ? "*" : ""));
      continue;
    }
    vita49::Packet packet;
    ASSERT_EQ(vita49::decode(bytes, packet), vita49::DecodeStatus::ok);
    sequence.push_back(
        "D" + std::to_string(vita49::sample_index(packet.integer_timestamp, packet.fractional_timestamp, 100'000'000) -
                             1'700'000'000ULL * 100'000'000ULL));
  }
  const std::vector<std::string> expected{"C2400", "D0",    "D360",  "D720",  "C2500*",
                                          "D1080", "D1440", "D1800", "D2160", "D2520"};
  EXPECT_EQ(sequence, expected);
}

// Each stream has its own sender thread, pinned where the stream's `cpu` says: two streams pinned
// to the core this test runs on both deliver every packet, in order, with their own stream IDs.
TEST(Emulator, EachStreamSendsFromItsOwnPinnedThread) {
  std::vector<wire::UniqueFd> receivers;
  EmulatorSettings settings;
  settings.streams.clear();
  const int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  for (std::uint32_t id : {7U, 8U}) {
    receivers.emplace_back(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(receivers.back().valid());
    const int buffer = 4 << 20;
    ::setsockopt(receivers.back().get(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
    sockaddr_in address = *wire::parse_endpoint("127.0.0.1:0");
    ASSERT_EQ(::bind(receivers.back().get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    socklen_t length = sizeof(address);
    ASSERT_EQ(::getsockname(receivers.back().get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
    settings.streams.push_back({wire::to_string(address), id, "", {cpu}});
  }
  settings.count = 50;
  settings.gso = false;
  Emulator emulator(settings);
  emulator.open();
  const EmulatorReport report = emulator.run(nullptr, false);
  EXPECT_EQ(report.packets, 100U);
  std::vector<std::byte> datagram(2048);
  for (std::size_t stream = 0; stream < 2; ++stream) {
    for (std::uint64_t k = 0; k < 50; ++k) {
      ASSERT_EQ(::recv(receivers[stream].get(), datagram.data(), datagram.size(), 0), 1472);
      vita49::Packet packet;
      ASSERT_EQ(vita49::decode(std::span<const std::byte>(datagram.data(), 1472), packet), vita49::DecodeStatus::ok);
      EXPECT_EQ(packet.stream_id, stream == 0 ? 7U : 8U);
      EXPECT_EQ(packet.header.packet_count, k % 16);
    }
  }
}

// Every byte of every datagram against the signal: the header, the samples at their stream index
// (big-endian for VITA-49, the sender's little-endian otherwise) and the trailer, in each udp
// framing, one datagram a send and several a send (GSO), where the samples leave from the signal
// table.
TEST(Emulator, EveryPayloadIsTheSignalAtItsIndexInEachFramingWithAndWithoutGso) {
  for (const Framing framing : {Framing::vita49, Framing::gnuradio_seq_size, Framing::none}) {
    for (const bool gso : {false, true}) {
      SCOPED_TRACE(std::string(to_string(framing)) + (gso ? ", GSO" : ", no GSO"));
      sockaddr_in address{};
      const wire::UniqueFd receiver = loopback_receiver(address);
      const int buffer = 16 << 20;
      ::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
      EmulatorSettings settings;
      settings.streams = {{wire::to_string(address), 5}};
      settings.framing = framing;
      settings.signal.sample_rate = 100e6;
      settings.signal.tones = {Tone{3.125e6, 0.5}};
      settings.signal.noise_snr_db = 30;
      settings.signal.period = 4096;  // the table wraps several times in the packets below
      settings.count = 200;
      settings.gso = gso;
      Emulator emulator(settings);
      emulator.open();
      ASSERT_EQ(emulator.run(nullptr, false).packets, 200U);

      const std::size_t per_packet = settings.samples_per_packet();
      FrameEncoder encoder(framing, 5, SampleFormat::ci16, per_packet, false);
      const std::size_t prefix = encoder.prefix_bytes();
      const std::size_t samples_bytes = per_packet * 4;
      SignalSource signal(settings.signal);
      std::vector<std::byte> expected(samples_bytes);
      std::vector<std::byte> wire_order(samples_bytes);
      std::vector<std::byte> datagram(16384);
      std::vector<std::byte> header(encoder.packet_bytes(per_packet));
      for (std::uint64_t k = 0; k < 200; ++k) {
        const ssize_t got = ::recv(receiver.get(), datagram.data(), datagram.size(), 0);
        ASSERT_EQ(static_cast<std::size_t>(got), encoder.packet_bytes(per_packet)) << "datagram " << k;
        signal.fill(k * per_packet, expected);
        const std::byte* samples = expected.data();
        if (encoder.big_endian_samples()) {
          wire::copy_swapped(SampleFormat::ci16, expected.data(), wire_order.data(), samples_bytes);
          samples = wire_order.data();
        }
        ASSERT_EQ(std::memcmp(datagram.data() + prefix, samples, samples_bytes), 0) << "samples of datagram " << k;
        if (framing == Framing::vita49) {
          vita49::Packet packet;
          ASSERT_EQ(vita49::decode(std::span<const std::byte>(datagram.data(), static_cast<std::size_t>(got)), packet),
                    vita49::DecodeStatus::ok)
              << "datagram " << k;
          EXPECT_EQ(packet.header.packet_count, k % 16);
          EXPECT_TRUE(packet.trailer.valid_data);
        }
      }
    }
  }
}

TEST(Emulator, PinningASenderPastTheLastCpuIsAnError) {
  EmulatorSettings settings;
  settings.streams = {{"127.0.0.1:9", 1, "", {100000}}};
  settings.count = 1;
  Emulator emulator(settings);
  emulator.open();
  try {
    emulator.run(nullptr, false);
    FAIL() << "a sender pinned to cpu 100000 ran";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("cpu 100000"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace sluice::emulator
