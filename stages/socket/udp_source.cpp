// The udp source. A packet ahead of a hole is held until the hole fills or the window
// overflows; only then is the hole lost, counted once with its exact sample count.
#include "stages/socket/udp_source.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <utility>

#include "pipeline/clock.hpp"
#include "pipeline/config.hpp"
#include "pipeline/gpu_placement.hpp"
#include "pipeline/log.hpp"
#include "pipeline/units.hpp"
#include "wire/gnuradio.hpp"

namespace sluice {
namespace {

constexpr std::size_t kGroBytes = 65536;  // a GRO super-datagram is at most 64 KiB
__extension__ typedef __int128 Int128;    // picoseconds (under 2^41) times a rate (under 2^37)

// The merge keys (ReceiveMerge::KeyOf): when the kernel received the message (SO_TIMESTAMPNS),
// then, for datagrams received at once (a sender's GSO burst that the kernel split, which reach
// the socket with one time), the first datagram's place in the stream.
bool vita49_order(const mmsghdr& message, const std::byte* data, std::uint64_t& high, std::uint64_t& low) noexcept {
  if (!vita49::order_key(std::span<const std::byte>(data, message.msg_len), low)) low = 0;
  return wire::kernel_receive_time(message.msg_hdr, high);
}
bool gnuradio_order(const mmsghdr& message, const std::byte* data, std::uint64_t& high, std::uint64_t& low) noexcept {
  low = 0;
  if (message.msg_len >= sizeof low) std::memcpy(&low, data, sizeof low);  // the sink's sequence number
  return wire::kernel_receive_time(message.msg_hdr, high);
}

// receive_standby and receive_standby_above (after receive_threads and receive_buffer).
void read_receive_standby_settings(SettingsReader& reader, UdpSourceSettings& settings) {
  settings.receive_standby = static_cast<std::size_t>(reader.integer(
      "receive_standby", 0,
      "of the receive threads, the last this many stand by: they receive only while the socket holds "
      "receive_standby_above or more (the first thread has fallen behind), until they find it empty; spare receive "
      "capacity on cores that do other work, at no cost while the first thread keeps up",
      0, 15));
  settings.receive_standby_above = reader.bytes(
      "receive_standby_above", settings.receive_standby_above,
      "the socket's queue (its receive allocation, SO_MEMINFO) at which the first receive thread wakes the standby "
      "threads: a queue longer than the caches hold costs more a datagram to receive",
      64ULL << 10, wire::kMaxReceiveBuffer);
  const std::size_t standby = settings.receive_standby;
  if (!settings.receive_thread) return;  // the caller names every receive-thread key as one that cannot apply
  if (standby > 0 && standby >= settings.receive_threads) {
    reader.error("receive_standby",
                 std::to_string(standby) + " of " + std::to_string(settings.receive_threads) +
                     " receive thread(s) would stand by, and none would take the stream until the socket backs up",
                 "keep one receiving: receive_threads: " + std::to_string(standby + 1));
  }
  if (standby == 0 && reader.has("receive_standby_above")) {
    reader.error("receive_standby_above",
                 "receive_standby_above applies to standby receive threads, and there are none",
                 "set receive_standby: 1 with receive_threads: 2, or remove it");
  }
  if (standby > 0 && settings.receive_standby_above >= settings.receive_buffer) {
    reader.error("receive_standby_above",
                 "receive_standby_above (" + format_bytes(static_cast<double>(settings.receive_standby_above)) +
                     ") is not below receive_buffer (" + format_bytes(static_cast<double>(settings.receive_buffer)) +
                     "): the socket would be past half full before the standby threads woke",
                 "lower it, e.g. to a sixteenth of receive_buffer");
  }
}

// receive_thread and the settings that only it has.
void read_receive_thread_settings(SettingsReader& reader, UdpSourceSettings& settings) {
  settings.receive_thread = reader.boolean(
      "receive_thread", false,
      "receive on a thread of its own that makes only the recvmmsg calls (on receive_cpu); the stage's thread "
      "(on cpu:) checks, accounts and copies: the receive core does the kernel's work alone");
  settings.receive_cpu = reader.core_sequence(
      "receive_cpu",
      "cores of the receive thread (receive_thread: true): 3, 3-5 (-1: not pinned); with receive_threads, a core "
      "for each thread in the order written ([6, 0]: the first thread on 6, the second on 0)");
  // 4 (2 MiB with GRO): with many lanes on one host a deeper ring lost packets that this one
  // did not (PERFORMANCE.md, lanes); a shallower one runs out of free slots and sleeps the
  // receive thread.
  settings.receive_batches = static_cast<std::size_t>(
      reader.integer("receive_batches", 4,
                     "the receive thread's ring in recvmmsg batches (receive_thread: true): this many times batch "
                     "message slots, each call filling up to batch of them; when the stage's thread holds them all, "
                     "the socket's buffer takes the stream",
                     2, 64));
  settings.receive_spin = reader.duration(
      "receive_spin", settings.receive_spin,
      "the receive thread polls an empty socket this long before it sleeps (receive_thread: true; 0: sleeps at "
      "once): while the stream flows nobody pays to wake it, and its core shows busy while it polls");
  settings.receive_threads = static_cast<std::size_t>(reader.integer(
      "receive_threads", 1,
      "receive threads reading the one socket (receive_thread: true), each on the next core of receive_cpu as "
      "written: more than one core's worth of the kernel's receive for one stream; the stage puts their datagrams "
      "back in the order the kernel received them (SO_TIMESTAMPNS, then timestamps or sequence numbers)",
      1, 16));
  if (settings.receive_threads > 1 && settings.framing == UdpFraming::none) {
    reader.error("receive_threads",
                 "several receive threads need each datagram's place in the stream to keep datagrams the kernel "
                 "received at once in order, which framing none does not have",
                 "use framing vita49 or gnuradio_seq, or receive_threads: 1");
  }
  if (settings.receive_threads > 1 && !settings.receive_cpu.empty() &&
      settings.receive_cpu.size() < settings.receive_threads) {
    reader.error("receive_cpu",
                 "names " + std::to_string(settings.receive_cpu.size()) + " core(s) for " +
                     std::to_string(settings.receive_threads) + " receive threads",
                 "give each receive thread a core of its own, e.g. receive_cpu: 4-" +
                     std::to_string(3 + settings.receive_threads));
  }
  read_receive_standby_settings(reader, settings);
  if (settings.receive_thread) return;
  for (const char* key : {"receive_cpu", "receive_batches", "receive_spin", "receive_threads", "receive_standby",
                          "receive_standby_above"}) {
    if (reader.has(key)) {
      reader.error(key, std::string(key) + " applies to the receive thread, which is off",
                   "set receive_thread: true, or remove it (cpu: pins the stage's own thread)");
    }
  }
}

}  // namespace

std::size_t default_udp_batch(bool gro) noexcept {
  // The kernel writes a batch's buffers and the stage reads them straight back: sized to stay
  // in L2, they cost one pass less to DRAM (PERFORMANCE.md, udp receive batch).
  return gro ? 8 : 64;
}

std::size_t udp_gro_segment(const msghdr& header) noexcept {
  std::size_t segment = 0;
  for (cmsghdr* control = CMSG_FIRSTHDR(&header); control != nullptr;
       control = CMSG_NXTHDR(const_cast<msghdr*>(&header), control)) {
    if (control->cmsg_level == SOL_UDP && control->cmsg_type == UDP_GRO) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(control), sizeof(size));
      if (size > 0) segment = static_cast<std::size_t>(size);
    }
  }
  return segment;
}

UdpSource::UdpSource(SettingsReader& reader, const PipelineSettings& pipeline) {
  settings_.address = reader.string("address", settings_.address, "host:port to bind (loopback by default)");
  settings_.framing =
      reader.choice("framing", UdpFraming::vita49,
                    "vita49 (timestamps: exact loss), gnuradio_seq / gnuradio_seq_size (GNU Radio network.udp_sink "
                    "header types: sequence numbers give exact loss), none (bare samples: loss cannot be detected)",
                    {{"vita49", UdpFraming::vita49},
                     {"none", UdpFraming::none},
                     {"gnuradio_seq", UdpFraming::gnuradio_seq},
                     {"gnuradio_seq_size", UdpFraming::gnuradio_seq_size}});
  if (settings_.framing != UdpFraming::vita49 && reader.has("stream_id")) {
    reader.error("stream_id", "stream_id applies to framing vita49 only", "remove it, or set framing: vita49");
  }
  if (settings_.framing == UdpFraming::none) {
    for (const char* key : {"reorder_window", "max_jump", "resync_after"}) {
      if (reader.has(key)) {
        reader.error(key, std::string(key) + " needs packet positions, which framing none does not have",
                     "use framing vita49 or gnuradio_seq");
      }
    }
  }
  settings_.stream_id = reader.integer("stream_id", -1, "VITA-49 stream ID to accept; -1: lock onto the first one seen",
                                       -1, 0xFFFFFFFFLL);
  settings_.format = reader.choice("format", SampleFormat::ci16, "sample format of the payload",
                                   {{"ci16", SampleFormat::ci16}, {"cf32", SampleFormat::cf32}});
  settings_.sample_rate =
      reader.frequency("sample_rate", 100e6, "sample rate (whole Hz); maps timestamps to sample indices", 1, 1e11);
  settings_.receive_buffer = reader.bytes(
      "receive_buffer", settings_.receive_buffer,
      "socket receive buffer (SO_RCVBUF; the kernel holds at most 1 GiB for a socket)", 4096, wire::kMaxReceiveBuffer);
  settings_.batch = static_cast<std::size_t>(reader.integer(
      "batch", 0, "datagrams per recvmmsg (0: about 512 KiB of buffers: 8 with GRO, 64 without)", 0, 1024));
  settings_.gro =
      reader.boolean("gro", true, "UDP GRO: receive coalesced datagrams and split them (where the kernel has it)");
  settings_.max_datagram = reader.bytes("max_datagram", 9000, "largest datagram expected without GRO", 64, 65535);
  settings_.reorder_window = static_cast<std::size_t>(
      reader.integer("reorder_window", 16, "packets held waiting for a late one before declaring it lost", 1, 1024));
  settings_.flush_after = reader.duration("flush_after", settings_.flush_after,
                                          "hand on a partly filled chunk after this long without packets");
  settings_.max_jump =
      reader.duration("max_jump", settings_.max_jump,
                      "a packet further than this from the stream's time is an outlier, unless resync_after agree");
  settings_.resync_after = static_cast<std::size_t>(reader.integer(
      "resync_after", 4, "consecutive agreeing outliers that make a resynchronisation (a new segment)", 1, 64));
  settings_.context_wait = reader.duration("context_wait", settings_.context_wait,
                                           "vita49: wait this long at start for an IF Context packet (frequency, rate "
                                           "into the capture's metadata); 0: do not wait");
  if (settings_.framing != UdpFraming::vita49 && reader.has("context_wait")) {
    reader.error("context_wait", "context packets are VITA-49's", "remove it, or set framing: vita49");
  }
  read_receive_thread_settings(reader, settings_);
  settings_.pool = read_pool_settings(reader, pipeline, PoolWriter::host_writes);
  if (settings_.max_jump.count() <= 0) reader.error("max_jump", "must be above 0", "e.g. 1s");
  if (settings_.sample_rate != std::floor(settings_.sample_rate)) {
    reader.error("sample_rate", "sample rate must be a whole number of Hz",
                 "timestamps are converted to exact sample counts");
  }
  if (!wire::parse_endpoint(settings_.address)) reader.error("address", "expected IPv4 host:port", "127.0.0.1:50000");
}

std::vector<int> UdpSource::receive_cores(std::size_t k) const {
  std::vector<int> cores = settings_.receive_cpu;
  if (settings_.receive_threads > 1 && !cores.empty()) return {cores[k]};
  std::sort(cores.begin(), cores.end());  // one thread: the set, in any order written
  return cores;
}

std::string UdpSource::threads_placement() const {
  if (!settings_.receive_thread) return {};
  if (settings_.receive_cpu.empty()) {
    return settings_.receive_threads == 1
               ? "receive thread on any core"
               : std::to_string(settings_.receive_threads) + " receive threads on any core" + standby_placement();
  }
  if (settings_.receive_threads == 1) return "receive thread on cores " + format_core_list(receive_cores(0));
  std::string where;
  for (std::size_t k = 0; k < settings_.receive_threads; ++k)
    where += (k == 0 ? "" : ", ") + format_core_list(receive_cores(k));
  return std::to_string(settings_.receive_threads) + " receive threads on cores " + where + standby_placement();
}

std::vector<BusyThread> UdpSource::busy_threads() const {
  std::vector<BusyThread> threads;
  if (!settings_.receive_thread) return threads;
  for (std::size_t k = 0; k < settings_.receive_threads; ++k) {
    const bool standby = k >= first_standby_thread();
    std::string name = standby ? "standby receive thread" : "receive thread";
    if (!standby && k > 0) name += " " + std::to_string(k + 1);
    threads.push_back(BusyThread{std::move(name), receive_cores(k), standby});
  }
  return threads;
}

std::string UdpSource::standby_placement() const {
  if (settings_.receive_standby == 0) return {};
  return ", the last " +
         (settings_.receive_standby == 1 ? std::string() : std::to_string(settings_.receive_standby) + " ") +
         "standing by until the socket holds " + format_bytes(static_cast<double>(settings_.receive_standby_above));
}

sockaddr_in UdpSource::open_socket(StageContext& context) {
  const auto address = wire::parse_endpoint(settings_.address);
  socket_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!socket_.valid()) throw std::runtime_error(wire::errno_message("socket(AF_INET, SOCK_DGRAM)"));
  const std::string note = wire::set_receive_buffer(socket_.get(), settings_.receive_buffer);
  log::info("{}: {}", context.stage_name(), note);
  context.metrics().notes.push_back(note);
  const timeval timeout{0, 10'000};  // no receive blocks longer (process() polls with its own 10 ms)
  if (::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0) {
    throw std::runtime_error(wire::errno_message("setsockopt(SO_RCVTIMEO)"));
  }
  if (::bind(socket_.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof(sockaddr_in)) != 0) {
    throw std::runtime_error(wire::errno_message("bind(" + settings_.address + ")"));
  }
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  if (::getsockname(socket_.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    throw std::runtime_error(wire::errno_message("getsockname"));
  }
  port_ = ntohs(bound.sin_port);
  if (settings_.receive_thread && settings_.receive_threads > 1) {
    // The receive threads' messages are put back in the order the kernel received them.
    const int one = 1;
    if (::setsockopt(socket_.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0) {
      throw std::runtime_error(wire::errno_message("setsockopt(SO_TIMESTAMPNS)") +
                               " (several receive threads need it: set receive_threads: 1)");
    }
    if (!wire::wait_for_arrival_timestamps(std::chrono::seconds(1))) {
      const std::string unstamped =
          "the kernel did not stamp datagrams as they arrive (SO_TIMESTAMPNS) within 1 s: the receive threads' first "
          "datagrams may be handed on in the order the threads took them, and counted reordered";
      log::warn("{}: {}", context.stage_name(), unstamped);
      context.metrics().notes.push_back(unstamped);
    }
  }
  gro_ = false;
  if (settings_.gro) {
    const int one = 1;
    if (::setsockopt(socket_.get(), SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0) {
      gro_ = true;
    } else {
      const std::string fallback =
          std::string("UDP GRO unavailable (") + std::strerror(errno) + "): one datagram per receive";
      log::info("{}: {}", context.stage_name(), fallback);
      context.metrics().notes.push_back(fallback);
    }
  }
  return bound;
}

void UdpSource::allocate_batches() {
  slot_bytes_ = gro_ ? kGroBytes : settings_.max_datagram;
  if (settings_.batch == 0) settings_.batch = default_udp_batch(gro_);
  if (settings_.receive_thread) {
    std::vector<ReceiveThread*> readers;
    for (std::size_t k = 0; k < settings_.receive_threads; ++k) {
      receivers_.push_back(std::make_unique<ReceiveThread>(socket_.get(), settings_.receive_batches, settings_.batch,
                                                           slot_bytes_, kUdpControlBytes, settings_.receive_spin));
      readers.push_back(receivers_.back().get());
      if (settings_.receive_threads > 1) receivers_.back()->wait_outside_calls();
    }
    if (settings_.receive_standby > 0) {
      standby_ = std::make_unique<ReceiveStandby>(settings_.receive_standby_above);
      receivers_.front()->watch_for_standby(standby_.get());
      for (std::size_t k = first_standby_thread(); k < receivers_.size(); ++k) receivers_[k]->stand_by(standby_.get());
    }
    if (readers.size() > 1) {
      merge_.emplace(std::move(readers), settings_.framing == UdpFraming::vita49 ? &vita49_order : &gnuradio_order);
    }
  }
  // The stage's own receives: every one without a receive thread, the last ones at a stop with it.
  slots_ = std::make_unique<ReceiveSlots>(settings_.batch, slot_bytes_, kUdpControlBytes);
}

void UdpSource::start(StageContext& context) {
  context_ = &context;
  rate_ = static_cast<std::uint64_t>(settings_.sample_rate);
  sample_shift_ = static_cast<unsigned>(std::countr_zero(bytes_per_sample(settings_.format)));
  samples_per_picosecond_ = settings_.sample_rate / 1e12;
  const sockaddr_in bound = open_socket(context);
  drops_.start(socket_.get(), context.metrics(), gro_);
  backlog_.start(socket_.get(), context.metrics(), "lane " + context.lane_name() + " stage " + context.stage_name());
  allocate_batches();
  window_.start(settings_.reorder_window, settings_.max_datagram);

  history_.start(context.metrics());
  drop_truncated_ = &context.metrics().drop_counter("truncated");
  drop_empty_ = &context.metrics().drop_counter("empty");
  drop_bad_size_ = &context.metrics().drop_counter("bad_size_field");
  drop_unknown_type_ = &context.metrics().drop_counter("unknown_type");
  drop_wrong_stream_ = &context.metrics().drop_counter("wrong_stream_id");
  drop_bad_payload_ = &context.metrics().drop_counter("bad_payload");
  received_messages_ = &context.metrics().counter("received_messages");
  context_packets_ = &context.metrics().counter("context_packets");
  context_changes_ = &context.metrics().counter("context_changes");
  drop_bad_context_ = &context.metrics().drop_counter("bad_context");
  locked_ = settings_.stream_id >= 0;
  stream_id_ = locked_ ? static_cast<std::uint32_t>(settings_.stream_id) : 0;

  Pool& pool = context.create_pool("out", settings_.pool.spec(context.cuda_device()));
  // VITA-49 payloads are big-endian; the other framings carry the sender's little-endian bytes.
  assembler_.start(context, pool, settings_.format, rate_, settings_.framing == UdpFraming::vita49);
  const double jump_samples = std::chrono::duration<double>(settings_.max_jump).count() * settings_.sample_rate;
  guard_.start(context.metrics(), static_cast<std::uint64_t>(std::max(1.0, jump_samples)), settings_.resync_after,
               settings_.max_datagram);
  context.stream.sample_rate = settings_.sample_rate;
  context.stream.format = settings_.format;
  const std::string where = " on " + wire::to_string(bound) + (gro_ ? " (GRO)" : "");
  switch (settings_.framing) {
    case UdpFraming::vita49:
      context.stream.description = "VITA-49" + where;
      break;
    case UdpFraming::gnuradio_seq:
    case UdpFraming::gnuradio_seq_size:
      context.stream.description = std::string("GNU Radio udp_sink datagrams (sequence numbers") +
                                   (settings_.framing == UdpFraming::gnuradio_seq_size ? " and size" : "") + ")" +
                                   where + "; no timestamps: times are not recorded";
      break;
    case UdpFraming::none: {
      context.stream.description = "bare " + std::string(to_string(settings_.format)) + " samples" + where +
                                   ": lost datagrams cannot be detected (no sequence numbers or timestamps)";
      const std::string warning =
          "framing none: lost datagrams cannot be detected or counted, except those the kernel drops at this socket "
          "(socket_overflow)";
      log::warn("{}: {}", context.stage_name(), warning);
      context.metrics().notes.push_back(warning);
      assembler_.set_origin(0, false);
      break;
    }
  }
  if (settings_.framing == UdpFraming::vita49 && settings_.context_wait.count() > 0) wait_for_context(context);
  last_packet_ns_ = monotonic_ns();
  if (!receivers_.empty()) start_receive_threads(context);
}

void UdpSource::start_receive_threads(StageContext& context) {
  receiver_waits_ = &context.metrics().counter("receive_thread_waits");
  receiver_blocking_calls_ = &context.metrics().counter("receive_thread_blocking_calls");
  receiver_spin_ns_ = &context.metrics().counter("receive_thread_spin_ns");
  receiver_cpu_ns_ = &context.metrics().counter("receive_thread_cpu_ns");
  if (merge_) merge_holds_ = &context.metrics().counter("receive_merge_holds");
  if (standby_) {
    standby_raises_ = &context.metrics().counter("receive_standby_raises");
    standby_bytes_ = &context.metrics().counter("receive_standby_bytes");
  }
  const std::vector<int>& cores = settings_.receive_cpu;
  if (context.cpu() >= 0 && std::find(cores.begin(), cores.end(), context.cpu()) != cores.end()) {
    // It works, but the receive core then does all the work again, and more.
    const std::string note = "receive_cpu " + std::to_string(context.cpu()) +
                             " is also the stage's cpu: a receive thread and the stage's thread take turns on one "
                             "core; give the stage's thread other cores (cpu:), or set receive_thread: false";
    log::warn("{}: {}", context.stage_name(), note);
    context.metrics().notes.push_back(note);
  }
  if (settings_.receive_spin.count() > 0 && cores.empty()) {
    const std::string note =
        "receive_spin without receive_cpu: the receive thread spins on whichever core the scheduler gives it, "
        "beside other threads; give it a core of its own (receive_cpu:)";
    log::warn("{}: {}", context.stage_name(), note);
    context.metrics().notes.push_back(note);
  }
  for (std::size_t k = 0; k < receivers_.size(); ++k) {
    const std::vector<int> own = receive_cores(k);
    const std::string suffix = k == 0 ? "" : " " + std::to_string(k + 1);
    try {
      receivers_[k]->start(own, "rx" + suffix + " " + context.lane_name(),
                           &context.metrics().thread("receive" + suffix));
    } catch (const std::runtime_error& error) {
      throw std::runtime_error("receive_cpu " + format_core_list(own) + ": " + error.what() +
                               " (pick cores this process may use: taskset -cp PID lists them)");
    }
  }
  log::info("{}: {}{}", context.stage_name(), threads_placement(), cores.empty() ? " (receive_cpu not set)" : "");
}

void UdpSource::wait_for_context(StageContext& context) {
  const std::uint64_t deadline = monotonic_ns() + static_cast<std::uint64_t>(settings_.context_wait.count());
  std::vector<std::byte> datagram(slot_bytes_);
  while (!have_context_) {
    const std::uint64_t now = monotonic_ns();
    if (now >= deadline) break;
    pollfd readable{socket_.get(), POLLIN, 0};
    const int ready = ::poll(&readable, 1, static_cast<int>(std::max<std::uint64_t>(1, (deadline - now) / 1'000'000)));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(wire::errno_message("poll"));
    if (ready <= 0) continue;
    // Peek first: a data packet stays queued for process(), which owns the stream.
    std::array<std::byte, 4> word{};
    const ssize_t peeked = ::recv(socket_.get(), word.data(), word.size(), MSG_PEEK);
    if (peeked < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      throw std::runtime_error(wire::errno_message("recv(MSG_PEEK)"));
    }
    if (peeked < 4 || static_cast<unsigned>(word[0]) >> 4 != static_cast<unsigned>(vita49::PacketType::context)) break;
    const ssize_t length = ::recv(socket_.get(), datagram.data(), datagram.size(), 0);
    if (length < 0) throw std::runtime_error(wire::errno_message("recv"));
    ++batch_packets_;
    ++batch_messages_;
    handle_context(datagram.data(), static_cast<std::size_t>(length));
  }
  if (mismatched_rate_ != 0) {
    throw std::runtime_error(
        fmt::format("the sender's IF Context packet gives a sample rate of {} Hz, the stage is configured for {} Hz: "
                    "set sample_rate: {} (or fix the sender)",
                    mismatched_rate_, settings_.sample_rate, mismatched_rate_));
  }
  if (!have_context_) {
    const std::string note =
        "no IF Context packet before the first data packet or within context_wait: the capture's frequency is unknown "
        "(0)";
    log::warn("{}: {}", context.stage_name(), note);
    context.metrics().notes.push_back(note);
    return;
  }
  const vita49::ContextPacket& values = context_packet_;
  if (values.rf_reference_frequency_hz) context.stream.center_frequency = *values.rf_reference_frequency_hz;
  if (values.bandwidth_hz) context.stream.bandwidth = values.bandwidth_hz;
  if (values.reference_level_dbm) context.stream.reference_level_dbm = values.reference_level_dbm;
  if (values.gain_stage1_db) context.stream.gain_db = *values.gain_stage1_db + values.gain_stage2_db.value_or(0.0);
  context.stream.description += fmt::format("; IF Context: RF {} Hz, rate {} Hz", context.stream.center_frequency,
                                            values.sample_rate_hz.value_or(settings_.sample_rate));
}

bool UdpSource::handle_context(const std::byte* data, std::size_t bytes) noexcept {
  switch (vita49::decode_context(std::span<const std::byte>(data, bytes), context_scratch_)) {
    case vita49::ContextStatus::ok:
      break;
    case vita49::ContextStatus::truncated:
      drop_truncated_->add();
      return false;
    case vita49::ContextStatus::bad_size_field:
      drop_bad_size_->add();
      return false;
    case vita49::ContextStatus::unknown_type:
    case vita49::ContextStatus::not_context:
      drop_unknown_type_->add();
      return false;
    case vita49::ContextStatus::reserved_cif_bit:
    case vita49::ContextStatus::bad_value:
      drop_bad_context_->add();
      return false;
  }
  // A context packet describes the data stream of the same stream ID (VITA 49.0 7.1.2).
  if (locked_ && context_scratch_.stream_id != stream_id_) {
    drop_wrong_stream_->add();
    return false;
  }
  context_packets_->add();
  const auto& next = context_scratch_;
  const auto& last = context_packet_;
  const bool changed =
      have_context_ &&
      (next.rf_reference_frequency_hz != last.rf_reference_frequency_hz || next.sample_rate_hz != last.sample_rate_hz ||
       next.bandwidth_hz != last.bandwidth_hz || next.reference_level_dbm != last.reference_level_dbm ||
       next.gain_stage1_db != last.gain_stage1_db || next.gain_stage2_db != last.gain_stage2_db);
  if (changed) context_changes_->add();
  // The first context packet (values unknown until now: no context_wait, or it arrived late) and
  // every change travel with the data they describe.
  if (changed || !have_context_) {
    // A context packet describes the data packets that follow it (the sender retuned before
    // them): everything received so far goes downstream under the old values, and the chunk
    // that starts with the next data packet carries the new ones, so a capture starts a new
    // segment exactly there.
    while (release_oldest_pending()) {
    }
    assembler_.flush();
    StreamContext values;
    if (next.rf_reference_frequency_hz) values.rf_frequency = *next.rf_reference_frequency_hz;
    if (next.sample_rate_hz) values.sample_rate = *next.sample_rate_hz;
    if (next.bandwidth_hz) values.bandwidth = *next.bandwidth_hz;
    if (next.reference_level_dbm) values.reference_level_dbm = *next.reference_level_dbm;
    if (next.gain_stage1_db) values.gain_db = *next.gain_stage1_db + next.gain_stage2_db.value_or(0.0);
    assembler_.mark_context_change(values);
  }
  if (next.sample_rate_hz && *next.sample_rate_hz != settings_.sample_rate) mismatched_rate_ = *next.sample_rate_hz;
  context_packet_ = next;
  have_context_ = true;
  return true;
}

int UdpSource::receive_batch() noexcept {
  slots_->rearm(0, slots_->count());
  // After a short batch the socket is empty: wait for it first instead of asking recvmmsg for
  // an EAGAIN (one system call less per wake-up at paced rates).
  int received = -1;
  errno = EAGAIN;
  if (!drained_)
    received =
        ::recvmmsg(socket_.get(), slots_->headers(0), static_cast<unsigned>(settings_.batch), MSG_DONTWAIT, nullptr);
  if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    // Nothing queued: wait for the socket, timed as the stage's wait. (A blocking receive
    // counted its sleep as busy time, and a receiver that kept up read as saturated.)
    pollfd readable{socket_.get(), POLLIN, 0};
    int ready = 0;
    {
      const WaitTimer waiting(context_->metrics());
      ready = ::poll(&readable, 1, 10);  // process() returns now and then to see stop requests
    }
    if (ready > 0) {
      received =
          ::recvmmsg(socket_.get(), slots_->headers(0), static_cast<unsigned>(settings_.batch), MSG_DONTWAIT, nullptr);
    } else if (ready == 0 || errno == EINTR) {
      received = -1;
      errno = EAGAIN;
    } else {
      context_->fail(wire::errno_message("poll"));
      return kReceiveFailed;
    }
  }
  return received;
}

StageStatus UdpSource::process() {
  if (context_->stop_requested()) {
    if (!receivers_.empty()) drain_receive_threads();
    drain_socket();
    note_lost_end();
    while (release_oldest_pending()) {
    }
    assembler_.flush();
    return StageStatus::end_of_stream;
  }
  backlog_.sample(monotonic_ns());
  if (merge_) return process_merged();
  if (!receivers_.empty()) return process_from_thread();
  const int received = receive_batch();
  if (received == kReceiveFailed) return StageStatus::error;
  if (received <= 0) {
    if (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      context_->fail(wire::errno_message("recvmmsg"));
      return StageStatus::error;
    }
    flush_when_quiet();
    return StageStatus::idle;
  }
  drained_ = static_cast<std::size_t>(received) < settings_.batch;
  handle_batch(ReceiveBatch{slots_.get(), 0, static_cast<std::size_t>(received)});
  return check_context_rate();
}

void UdpSource::publish_receive_thread() noexcept {
  std::uint64_t waits = 0;
  std::uint64_t blocking = 0;
  std::uint64_t spun = 0;
  std::uint64_t cpu = 0;
  for (const auto& receiver : receivers_) {
    waits += receiver->waits_for_batch();
    blocking += receiver->blocking_calls();
    spun += receiver->spin_ns();
    cpu += receiver->cpu_ns();
  }
  receiver_waits_->set(waits);
  receiver_blocking_calls_->set(blocking);
  receiver_spin_ns_->set(spun);
  receiver_cpu_ns_->set(cpu);
  if (merge_) merge_holds_->set(merge_->holds());
  if (standby_) {
    std::uint64_t bytes = 0;
    for (std::size_t k = first_standby_thread(); k < receivers_.size(); ++k) bytes += receivers_[k]->received_bytes();
    standby_raises_->set(standby_->raises());
    standby_bytes_->set(bytes);
  }
}

ReceiveWork UdpSource::receive_work() const noexcept {
  ReceiveWork work;
  work.threads = receivers_.size();
  if (work.threads == 0) return work;
  work.standby = settings_.receive_standby;
  work.cpu_ns = receiver_cpu_ns_->get();
  work.spin_ns = receiver_spin_ns_->get();
  work.waits = receiver_waits_->get();
  const FlowCounters& out = context_->metrics().out;
  work.flow_ns = static_cast<std::uint64_t>(flow_work_span_ns(out.chunks.load(std::memory_order_relaxed),
                                                              out.first_ns.load(std::memory_order_relaxed),
                                                              out.last_ns.load(std::memory_order_relaxed)));
  return work;
}

StageStatus UdpSource::process_from_thread() noexcept {
  ReceiveBatch* batch = nullptr;
  {
    const WaitTimer waiting(context_->metrics());
    batch = receivers_.front()->next(std::chrono::milliseconds(10));  // process() returns now and then to see stops
  }
  if (batch == nullptr) return when_nothing_came();
  handle_batch(*batch);
  receivers_.front()->give_back(batch);
  publish_receive_thread_now_and_then();
  return check_context_rate();
}

void UdpSource::publish_receive_thread_now_and_then() noexcept {
  // The receive thread's counts, shown live: a read of them each batch would take their cache
  // line from the receive thread's core as often as a spin ends there.
  if (last_packet_ns_ - published_receive_thread_ns_ < kPublishReceiveThreadNs) return;
  published_receive_thread_ns_ = last_packet_ns_;
  publish_receive_thread();
}

StageStatus UdpSource::process_merged() noexcept {
  // The others go on taking the stream: a thread that failed would not show as a pause.
  for (const auto& receiver : receivers_) {
    if (receiver->failed_errno() != 0) return when_nothing_came();
  }
  std::optional<ReceiveMerge::Message> message;
  {
    const WaitTimer waiting(context_->metrics());
    message = merge_->next(std::chrono::milliseconds(10));
  }
  if (!message) return when_nothing_came();
  handle_merged(*message, settings_.batch);  // a batch's worth a call, as from one thread
  publish_receive_thread_now_and_then();
  return check_context_rate();
}

void UdpSource::handle_merged(ReceiveMerge::Message message, std::size_t limit) noexcept {
  last_packet_ns_ = monotonic_ns();
  for (std::size_t handled = 1;; ++handled) {
    handle_message(*message.batch, message.index);
    static_cast<void>(merge_->done(message));
    if (handled == limit) break;
    const auto next = merge_->next(std::chrono::nanoseconds(0));
    if (!next) break;
    message = *next;
  }
  publish_packets();
}

StageStatus UdpSource::when_nothing_came() noexcept {
  publish_receive_thread();
  for (const auto& receiver : receivers_) {
    if (const int error = receiver->failed_errno(); error != 0) {
      context_->fail(wire::errno_message("recvmmsg (receive thread)", error));
      return StageStatus::error;
    }
  }
  flush_when_quiet();
  return StageStatus::idle;
}

void UdpSource::drain_receive_threads() noexcept {
  for (const auto& receiver : receivers_) receiver->stop();
  if (merge_) {
    // Every call is over: the rings hold all there is, and the merge waits for nothing.
    if (const auto message = merge_->next(std::chrono::nanoseconds(0))) {
      handle_merged(*message, std::numeric_limits<std::size_t>::max());
    }
  } else {
    ReceiveThread& receiver = *receivers_.front();
    while (ReceiveBatch* batch = receiver.next(std::chrono::nanoseconds(0))) {
      handle_batch(*batch);
      receiver.give_back(batch);
    }
  }
  publish_receive_thread();
}

void UdpSource::drain_socket() noexcept {
  const std::uint64_t buffer = wire::receive_buffer_bytes(socket_.get()).value_or(0);
  std::uint64_t taken = 0;
  while (taken < buffer) {
    slots_->rearm(0, slots_->count());
    const int received =
        ::recvmmsg(socket_.get(), slots_->headers(0), static_cast<unsigned>(settings_.batch), MSG_DONTWAIT, nullptr);
    if (received <= 0) return;  // empty (or failing: the stream ends here either way)
    for (int i = 0; i < received; ++i) taken += slots_->message(static_cast<std::size_t>(i)).msg_len;
    handle_batch(ReceiveBatch{slots_.get(), 0, static_cast<std::size_t>(received)});
  }
}

void UdpSource::note_lost_end() noexcept {
  const std::uint64_t dropped = drops_.finish(socket_.get());
  if (dropped == 0) return;
  const auto least = dropped * drops_.last_packet_samples();
  try {
    // No packet placed: nothing tells how many samples a datagram held.
    const std::string size =
        least == 0 ? std::string("of a size no placed packet tells")
                   : fmt::format("at least {} samples{}", least,
                                 drops_.segments_per_drop() > 1
                                     ? fmt::format(" (up to {} with GRO)", least * drops_.segments_per_drop())
                                     : "");
    const std::string note = fmt::format(
        "the kernel dropped {} datagram(s) after the last one this stage received (its socket was full when the "
        "stream ended): the stream's end is lost, {}, and with no later packet to show where it ended they are not "
        "in lost_samples",
        dropped, size);
    log::warn("lane {} stage {}: {}", context_->lane_name(), context_->stage_name(), note);
    context_->metrics().notes.push_back(note);
  } catch (const std::exception&) {  // no memory for the note: the counters still say it
  }
}

void UdpSource::handle_batch(const ReceiveBatch& batch) noexcept {
  last_packet_ns_ = monotonic_ns();
  for (std::size_t i = 0; i < batch.received; ++i) handle_message(batch, i);
  publish_packets();
}

void UdpSource::publish_packets() noexcept {
  // One atomic add per receive call (or run of merged messages) rather than per packet.
  context_->metrics().packets.fetch_add(batch_packets_, std::memory_order_relaxed);
  received_messages_->add(batch_messages_);
  batch_packets_ = 0;
  batch_messages_ = 0;
}

void UdpSource::flush_when_quiet() noexcept {
  if (monotonic_ns() - last_packet_ns_ >= static_cast<std::uint64_t>(settings_.flush_after.count())) {
    // The stream paused: whatever waited for a late packet is released, the chunk goes on.
    while (release_oldest_pending()) {
    }
    assembler_.flush();
  }
}

StageStatus UdpSource::check_context_rate() noexcept {
  if (mismatched_rate_ == 0) return StageStatus::ok;
  context_->fail(
      fmt::format("an IF Context packet gives a sample rate of {} Hz, the stage is configured for {} Hz: "
                  "timestamps would map to wrong sample indices (set sample_rate: {}, or fix the sender)",
                  mismatched_rate_, settings_.sample_rate, mismatched_rate_));
  return StageStatus::error;
}

void UdpSource::handle_message(const ReceiveBatch& batch, std::size_t i) noexcept {
  const msghdr& header = batch.message(i).msg_hdr;
  const std::size_t length = batch.message(i).msg_len;
  const std::byte* data = batch.data(i);
  ++batch_messages_;
  drops_.received(header);  // datagrams dropped right before this one
  const std::size_t coalesced = gro_ ? udp_gro_segment(header) : 0;
  const std::size_t segment = coalesced != 0 ? coalesced : length;
  if ((header.msg_flags & MSG_TRUNC) != 0) {
    ++batch_packets_;
    drop_truncated_->add();
    return;
  }
  if (length == 0) {  // a zero-length datagram is malformed like any other
    ++batch_packets_;
    drop_empty_->add();
    return;
  }
  // A coalesced datagram holds equal segments (the last may be shorter): split it back.
  for (std::size_t offset = 0; offset < length; offset += segment) {
    handle_datagram(data + offset, std::min(segment, length - offset));
  }
}

void UdpSource::handle_datagram(const std::byte* data, std::size_t bytes) noexcept {
  ++batch_packets_;
  if (settings_.framing != UdpFraming::vita49) {
    handle_gnuradio(data, bytes);
    return;
  }
  // A datagram shaped like the last accepted one passed every check that one passed.
  const std::span<const std::byte> datagram(data, bytes);
  if (!repeat_.decode(datagram, packet_) && !decode_data(datagram)) return;
  const std::size_t samples = packet_.payload.size() >> sample_shift_;

  // Where the packet sits in the stream, in samples since the timestamp epoch.
  std::uint64_t epoch_index = 0;
  bool timed = true;
  if (!packet_position(samples, epoch_index, timed)) {
    drop_bad_payload_->add();
    return;
  }
  if (!have_origin_) {
    have_origin_ = true;
    timed_ = timed;
    origin_ = epoch_index;
    assembler_.set_origin(origin_, timed);
  }
  accept_packet(epoch_index, packet_.payload, samples, packet_.header.packet_count);
}

bool UdpSource::decode_data(std::span<const std::byte> datagram) noexcept {
  ++header_decodes_;
  switch (vita49::decode(datagram, packet_)) {
    case vita49::DecodeStatus::ok:
      break;
    case vita49::DecodeStatus::truncated:
      drop_truncated_->add();
      return false;
    case vita49::DecodeStatus::bad_size_field:
      drop_bad_size_->add();
      return false;
    case vita49::DecodeStatus::unknown_type:
      // Context packets are read for their values and never taken for data.
      if (datagram.size() >= 4 &&
          static_cast<unsigned>(datagram[0]) >> 4 == static_cast<unsigned>(vita49::PacketType::context)) {
        handle_context(datagram.data(), datagram.size());
      } else {
        drop_unknown_type_->add();
      }
      return false;
  }
  const bool has_id = packet_.header.type == vita49::PacketType::if_data_stream_id;
  if (!locked_) {
    locked_ = true;
    stream_id_ = packet_.stream_id;
  }
  if ((has_id ? packet_.stream_id : 0) != stream_id_) {
    drop_wrong_stream_->add();
    return false;
  }
  const std::size_t payload = packet_.payload.size();
  if (payload == 0 || payload % bytes_per_sample(settings_.format) != 0 || payload > settings_.max_datagram) {
    drop_bad_payload_->add();
    return false;
  }
  repeat_.remember(datagram, packet_);
  return true;
}

bool UdpSource::packet_position(std::size_t samples, std::uint64_t& epoch_index, bool& timed) noexcept {
  const auto& header = packet_.header;
  if (header.tsf == vita49::Tsf::real_time && header.tsi != vita49::Tsi::none) {
    if (packet_.fractional_timestamp >= vita49::kPicosecondsPerSecond) return false;
    const std::uint64_t seconds = packet_.integer_timestamp;
    const std::uint64_t picoseconds = packet_.fractional_timestamp;
    if (have_last_time_ && seconds - last_seconds_ <= 1 && seconds >= last_seconds_) {
      // Within a second of the last one: the difference in picoseconds times the rate, in a
      // double, is exact to far below half a sample.
      const std::int64_t delta =
          static_cast<std::int64_t>((seconds - last_seconds_) * vita49::kPicosecondsPerSecond) +
          (static_cast<std::int64_t>(picoseconds) - static_cast<std::int64_t>(last_picoseconds_));
      epoch_index = last_epoch_index_ + samples_in(delta, samples);
    } else {
      epoch_index = vita49::sample_index(seconds, picoseconds, rate_);
    }
    // Whatever this packet turns out to be, its conversion is exact: the next one starts from it.
    last_seconds_ = seconds;
    last_picoseconds_ = picoseconds;
    last_epoch_index_ = epoch_index;
    have_last_time_ = true;
  } else if (header.tsf == vita49::Tsf::sample_count && header.tsi != vita49::Tsi::none) {
    epoch_index = static_cast<std::uint64_t>(packet_.integer_timestamp) * rate_ + packet_.fractional_timestamp;
  } else if (header.tsf == vita49::Tsf::free_running) {
    epoch_index = packet_.fractional_timestamp;
  } else {
    // No usable timestamp: the 4-bit packet count is all there is; missing counts are
    // assumed to be packets as long as this one.
    timed = false;
    const auto skipped = static_cast<std::uint64_t>((header.packet_count - next_count_) & 0xF);
    epoch_index = have_origin_ ? untimed_next_ + skipped * samples : 0;
    next_count_ = static_cast<std::uint8_t>((header.packet_count + 1) & 0xF);
    untimed_next_ = epoch_index + samples;
  }
  return true;
}

std::uint64_t UdpSource::samples_in(std::int64_t picoseconds, std::size_t samples) noexcept {
  if (samples != span_samples_) set_span(samples);
  if (picoseconds >= span_low_ && picoseconds <= span_high_) return samples;
  // Within a second: the product in a double is exact to far below half a sample.
  return static_cast<std::uint64_t>(std::llround(static_cast<double>(picoseconds) * samples_per_picosecond_));
}

void UdpSource::set_span(std::size_t samples) noexcept {
  // picoseconds * rate within a quarter sample (a quarter of 10^12) of samples * 10^12.
  const auto exact = static_cast<Int128>(samples) * static_cast<Int128>(vita49::kPicosecondsPerSecond);
  const auto quarter = static_cast<Int128>(vita49::kPicosecondsPerSecond / 4);
  const auto rate = static_cast<Int128>(rate_);
  span_samples_ = samples;
  span_low_ = static_cast<std::int64_t>((exact - quarter + rate) / rate);
  span_high_ = static_cast<std::int64_t>((exact + quarter - 1) / rate);
}

void UdpSource::handle_gnuradio(const std::byte* data, std::size_t bytes) noexcept {
  gnuradio::Header header;
  if (settings_.framing != UdpFraming::none) {
    switch (gnuradio::decode(std::span<const std::byte>(data, bytes),
                             settings_.framing == UdpFraming::gnuradio_seq_size, header)) {
      case gnuradio::DecodeStatus::ok:
        break;
      case gnuradio::DecodeStatus::truncated:
        drop_truncated_->add();
        return;
      case gnuradio::DecodeStatus::bad_size_field:
        drop_bad_size_->add();
        return;
    }
  }
  const std::size_t sample_bytes = bytes_per_sample(settings_.format);
  const std::size_t payload = bytes - header.header_bytes;
  const std::byte* samples_at = data + header.header_bytes;
  if (payload == 0 || payload % sample_bytes != 0 || payload > settings_.max_datagram) {
    drop_bad_payload_->add();
    return;
  }
  const std::size_t samples = payload / sample_bytes;
  if (settings_.framing == UdpFraming::none) {
    // Nothing says where a datagram belongs: each follows the last one received.
    commit(assembler_.expected(), samples_at, samples);
    return;
  }
  // The sink sends equal datagrams, so a sequence number is a position in samples.
  if (datagram_samples_ == 0) datagram_samples_ = samples;
  if (samples != datagram_samples_) {
    drop_bad_payload_->add();
    return;
  }
  const std::uint64_t position = header.sequence * datagram_samples_;
  if (!have_origin_) {
    have_origin_ = true;
    timed_ = false;
    origin_ = position;
    assembler_.set_origin(0, false);
  }
  accept_packet(position, std::span<const std::byte>(samples_at, payload), samples, std::nullopt);
}

void UdpSource::accept_packet(std::uint64_t position, std::span<const std::byte> payload, std::size_t samples,
                              std::optional<std::uint8_t> packet_count) noexcept {
  const std::uint64_t expected = origin_ + assembler_.expected();
  if (position == expected && window_.empty() && guard_.idle()) {
    // The next packet with nothing held: what the checks below come to, without their detours.
    history_.arrived(position - origin_);
    commit(position - origin_, payload.data(), samples);
    drops_.used(position, samples, packet_count);
    return;
  }
  if (position > expected && position - expected > guard_.bound() && drops_.explains(position, samples, packet_count)) {
    guard_.discard();
    place_after_overflow(position, payload.data(), samples);
    drops_.used(position, samples, packet_count);
    return;
  }
  guard_.admit(
      JumpGuard::Packet{position, samples, packet_count.value_or(0), payload}, expected,
      [this](const JumpGuard::Packet& placed) { place_samples(placed); },
      [this](const JumpGuard::Packet& first) { return move_stream(first); });
}

void UdpSource::place_after_overflow(std::uint64_t position, const std::byte* payload, std::size_t samples) noexcept {
  // The kernel dropped the datagrams in between, so none of them can still arrive: the hole is
  // lost now, not after the reorder window, and the stream goes on from this packet.
  while (release_oldest_pending()) {
  }
  const std::uint64_t from = assembler_.expected();
  const std::uint64_t index = position - origin_;
  commit(index, payload, samples);
  history_.reach(index);
  log::warn(
      "{}: samples {} to {} lost ({} samples, {:.6f} s): the kernel dropped them at the socket (its drop count "
      "rose by {}; its receive buffer was full: the stage fell behind), not a jump of the sender",
      context_->stage_name(), from, index, index - from, static_cast<double>(index - from) / settings_.sample_rate,
      drops_.since_used());
}

void UdpSource::place_samples(const JumpGuard::Packet& packet) noexcept {
  if (const auto index = history_.fresh_index(packet.position, origin_, assembler_.expected()))
    handle_samples(*index, packet.payload.data(), packet.samples);
  drops_.used(
      packet.position, packet.samples,
      settings_.framing == UdpFraming::vita49 ? std::optional(static_cast<std::uint8_t>(packet.tag)) : std::nullopt);
}

bool UdpSource::move_stream(const JumpGuard::Packet& first) noexcept {
  // Everything from before the jump goes downstream first.
  while (release_oldest_pending()) {
  }
  const std::uint64_t expected = assembler_.expected();
  const std::uint64_t old_position = origin_ + expected;
  const bool forward = first.position > old_position;
  if (forward) {
    // The stream index keeps counting the sender's time: the span it skipped is a gap.
    if (!assembler_.skip_to(first.position - origin_)) return false;
  } else {
    // Time went back: the stream index goes on from here; the new chunk carries the new time.
    assembler_.flush();
    origin_ = first.position - expected;
    assembler_.set_origin(origin_, timed_);
    assembler_.mark_time_jump();
  }
  history_.restart(assembler_.expected());
  drops_.restart();
  const std::uint64_t jump = forward ? first.position - old_position : old_position - first.position;
  log::warn(
      "{}: stream resynchronised at sample {}: the sender jumped {} by {} samples ({:.6f} s), confirmed by {} packets",
      context_->stage_name(), assembler_.expected(), forward ? "ahead" : "back", jump,
      static_cast<double>(jump) / settings_.sample_rate, guard_.held_count());
  return true;
}

void UdpSource::handle_samples(std::uint64_t index, const std::byte* payload, std::size_t samples) noexcept {
  const std::uint64_t expected = assembler_.expected();
  if (window_.holds(index)) {
    history_.count_duplicate();
    return;
  }
  history_.arrived(index);
  if (index == expected) {
    commit(index, payload, samples);
    drain_pending();
    return;
  }
  // Ahead of a hole: hold it, unless the window is full — then the oldest hole is lost.
  if (samples * bytes_per_sample(settings_.format) > settings_.max_datagram) return;
  while (window_.full()) {
    if (!release_oldest_pending()) break;
  }
  if (index == assembler_.expected()) {
    commit(index, payload, samples);
    drain_pending();
    return;
  }
  window_.hold(index, std::span<const std::byte>(payload, samples * bytes_per_sample(settings_.format)), samples);
}

void UdpSource::commit(std::uint64_t index, const std::byte* payload, std::size_t samples) noexcept {
  if (assembler_.append(index, payload, samples)) history_.placed(index);
}

void UdpSource::drain_pending() noexcept {
  while (const auto next = window_.take(assembler_.expected()))
    commit(next->index, next->payload.data(), next->samples);
}

bool UdpSource::release_oldest_pending() noexcept {
  const auto oldest = window_.take_oldest();
  if (!oldest) return false;
  commit(oldest->index, oldest->payload.data(), oldest->samples);
  drain_pending();
  return true;
}

void UdpSource::stop() noexcept {
  if (!receivers_.empty()) drain_receive_threads();
  guard_.discard();  // never confirmed: outliers
  while (release_oldest_pending()) {
  }
  assembler_.flush();
  try {
    if (std::string note = backlog_.note(receive_work()); !note.empty())
      context_->metrics().notes.push_back(std::move(note));
  } catch (const std::exception&) {  // no memory for the note: the counters still say it
  }
}

void register_udp_source_stage(StageRegistry& registry) {
  registry.add(
      StageType{"udp", StageRole::source,
                "VITA-49 IF Data, GNU Radio udp_sink or bare samples over UDP (recvmmsg, GRO) with loss accounting",
                [](SettingsReader& reader, const PipelineSettings& pipeline) -> std::unique_ptr<Stage> {
                  return std::make_unique<UdpSource>(reader, pipeline);
                }});
}

}  // namespace sluice
