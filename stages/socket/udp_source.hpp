// `udp` source: VITA-49 IF Data, bare samples or GNU Radio datagrams off a UDP socket
// (recvmmsg, GRO), every header checked, exact loss/duplicate/reorder accounting, samples
// byte-swapped into chunks in one copy; optionally receiving on a thread of its own.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipeline/stage.hpp"
#include "stages/socket/assembler.hpp"
#include "stages/socket/jump_guard.hpp"
#include "stages/socket/kernel_drops.hpp"
#include "stages/socket/packet_history.hpp"
#include "stages/socket/receive_merge.hpp"
#include "stages/socket/receive_thread.hpp"
#include "stages/socket/reorder_window.hpp"
#include "stages/socket/socket_backlog.hpp"
#include "wire/socket.hpp"
#include "wire/vita49.hpp"
#include "wire/vita49_context.hpp"

namespace sluice {

// How datagrams are framed: VITA-49 IF Data, bare samples, or GNU Radio's network.udp_sink
// with a sequence-number header (wire/gnuradio.hpp), with or without its size field.
enum class UdpFraming : std::uint8_t { vita49, none, gnuradio_seq, gnuradio_seq_size };

struct UdpSourceSettings {
  UdpFraming framing = UdpFraming::vita49;
  std::string address = "127.0.0.1:50000";  // bind here
  std::int64_t stream_id = -1;              // accept only this stream ID; -1: the first one seen
  SampleFormat format = SampleFormat::ci16;
  double sample_rate = 100e6;  // whole Hz: turns real-time timestamps into sample indices
  std::uint64_t receive_buffer = 256ULL << 20;
  std::size_t batch = 0;  // datagrams per recvmmsg; 0: 8 with GRO, 64 without
  bool gro = true;
  std::size_t max_datagram = 9000;  // without GRO
  std::size_t reorder_window = 16;  // packets held while waiting for an earlier one
  std::chrono::nanoseconds flush_after{std::chrono::milliseconds(20)};
  std::chrono::nanoseconds max_jump{std::chrono::seconds(1)};  // further from the stream: an outlier
  std::size_t resync_after = 4;  // agreeing outliers in a row that make a resynchronisation
  // vita49: at start, wait up to this long for the sender's IF Context packet so that the
  // capture's description carries its frequency and rate; 0: do not wait.
  std::chrono::nanoseconds context_wait{0};
  // A thread of its own makes the receive calls and nothing else; the stage's thread does the
  // rest (ReceiveThread). receive_cpu: that thread's cores (several threads: one each, in the
  // order written); receive_batches: its ring; receive_spin: how long it polls an empty socket
  // before it sleeps.
  bool receive_thread = false;
  std::vector<int> receive_cpu;
  std::size_t receive_batches = 4;
  std::chrono::nanoseconds receive_spin{0};
  std::size_t receive_threads = 1;  // reading the one socket, merged back into stream order
  // The last receive_standby of them receive only while the socket holds receive_standby_above
  // bytes or more, until they find it empty (ReceiveStandby).
  std::size_t receive_standby = 0;
  std::uint64_t receive_standby_above = 16ULL << 20;
  PoolSettings pool;
};

// The recvmmsg batch when `batch` is 0: about 512 KiB of receive buffers (8 GRO buffers of
// 64 KiB, or 64 datagrams of at most 9000 bytes), so that they are still in L2 when the stage
// copies out of them. The socket benchmark gives its bare loop the same.
std::size_t default_udp_batch(bool gro) noexcept;

// Control-message space the udp stage gives each received message: the GRO segment size, the
// kernel's drop count (KernelDrops) and, with several receive threads, the time the kernel
// received it (SO_TIMESTAMPNS). The socket benchmark's bare loop gives its messages the same.
inline constexpr std::size_t kUdpControlBytes =
    CMSG_SPACE(sizeof(int)) + KernelDrops::kControlBytes + CMSG_SPACE(sizeof(timespec));

// The segment size of a received message that GRO coalesced (its UDP_GRO control message), or 0
// for one without it: the stage and the bare loop split such a message into datagrams alike.
std::size_t udp_gro_segment(const msghdr& header) noexcept;

// A single stray timestamp never moves the stream (JumpGuard); datagrams the kernel dropped at
// the socket are told from a sender's jump by the kernel's own count (KernelDrops). With
// receive_thread the recvmmsg calls run on a ReceiveThread and the rest on the stage's thread.
class UdpSource final : public Stage {
 public:
  UdpSource(SettingsReader& reader, const PipelineSettings& pipeline);
  [[nodiscard]] std::string receive_address() const override { return settings_.address; }
  [[nodiscard]] std::string threads_placement() const override;
  [[nodiscard]] std::vector<BusyThread> busy_threads() const override;
  void start(StageContext& context) override;
  StageStatus process() override;
  void stop() noexcept override;
  // The bound port (after start), for tests that bind port 0.
  [[nodiscard]] std::uint16_t port() const { return port_; }
  // The last IF Context packet accepted (stream ID matching), for tests and the summary.
  [[nodiscard]] const vita49::ContextPacket& last_context() const { return context_packet_; }
  // VITA-49 datagrams whose header was decoded whole rather than matched against the last
  // accepted one's (vita49::RepeatDecoder), for tests; read it after the stage has stopped.
  [[nodiscard]] std::uint64_t header_decodes() const { return header_decodes_; }
  // Receive thread k (receive_thread: true; else, or past receive_threads, null), whose consumer
  // is the stage's own thread: their CPU times and the bytes received, for the socket benchmark
  // and tests.
  [[nodiscard]] const ReceiveThread* receive_thread(std::size_t k = 0) const {
    return k < receivers_.size() ? receivers_[k].get() : nullptr;
  }

 private:
  // Socket, receive buffer, timeout, bind, GRO; returns the bound address.
  sockaddr_in open_socket(StageContext& context);
  // The receive buffers (one batch, or the receive thread's ring), set once.
  void allocate_batches();
  // One recvmmsg batch, after waiting up to 10 ms for the socket when it was empty: the
  // messages received, 0 or -1 when none came, kReceiveFailed after context_->fail().
  static constexpr int kReceiveFailed = -2;
  int receive_batch() noexcept;
  // receive_thread: the next batch the receive thread filled, waiting up to 10 ms (timed as the
  // stage's wait), handled and given back; its status as process() returns it.
  StageStatus process_from_thread() noexcept;
  // receive_threads above 1: the next messages in stream order (ReceiveMerge), up to a batch's
  // worth, the first waited for up to 10 ms (timed as the stage's wait).
  StageStatus process_merged() noexcept;
  // `message` and those after it in queue order that are ready without a wait, up to `limit`
  // in all, then their packets counted.
  void handle_merged(ReceiveMerge::Message message, std::size_t limit) noexcept;
  // The packets handled since the last call into the stage's count.
  void publish_packets() noexcept;
  // Receive thread k's cores: the whole receive_cpu set for one thread, its own core of it for
  // several (empty: not pinned).
  [[nodiscard]] std::vector<int> receive_cores(std::size_t k) const;
  // The first standby receive thread's number: the last receive_standby of them stand by.
  [[nodiscard]] std::size_t first_standby_thread() const noexcept {
    return settings_.receive_threads - settings_.receive_standby;
  }
  // threads_placement()'s words for the standby threads, or nothing without them.
  [[nodiscard]] std::string standby_placement() const;
  // No message came: a receive thread's failure fails the stage; else a quiet stream flushes.
  StageStatus when_nothing_came() noexcept;
  // The receive threads are stopped: every batch they filled is handled, in stream order.
  void drain_receive_threads() noexcept;
  // At a stop: the datagrams the socket still holds (sent before the stop, not yet read by a
  // source that fell behind) are handled, up to one receive buffer's worth, so that a sender
  // that goes on does not keep the stage from ending.
  void drain_socket() noexcept;
  // After the drain: datagrams the kernel dropped after the last one received, counted and named.
  void note_lost_end() noexcept;
  // The receive thread's waits, blocking calls, spin and CPU time into the stage's counters: at
  // once, or (after a batch) when kPublishReceiveThreadNs have passed since the last time.
  void publish_receive_thread() noexcept;
  void publish_receive_thread_now_and_then() noexcept;
  static constexpr std::uint64_t kPublishReceiveThreadNs = 10'000'000;
  // What the receive threads did over the stream, for the socket queue's note.
  [[nodiscard]] ReceiveWork receive_work() const noexcept;
  // Every message of `batch` from the last receive, then the batch's packets counted.
  void handle_batch(const ReceiveBatch& batch) noexcept;
  // Message `i` of the batch: its kernel drop count, then its datagrams (GRO segments).
  void handle_message(const ReceiveBatch& batch, std::size_t i) noexcept;
  // No packet came: after flush_after without one, what is held and the chunk go on.
  void flush_when_quiet() noexcept;
  // After a batch: a context packet's mismatched rate fails the stage.
  StageStatus check_context_rate() noexcept;
  void handle_datagram(const std::byte* data, std::size_t bytes) noexcept;
  // The whole header check of a VITA-49 datagram into packet_ (counted in header_decodes_):
  // false when it is dropped or is a context packet. An accepted one is remembered by repeat_.
  bool decode_data(std::span<const std::byte> datagram) noexcept;
  // Samples in `picoseconds` (less than a second either way) at the stage's rate, rounded to
  // the nearest; `samples`: the packet's length, the usual answer, checked in two comparisons.
  [[nodiscard]] std::uint64_t samples_in(std::int64_t picoseconds, std::size_t samples) noexcept;
  // The picoseconds that samples_in answers with `samples` without a double: within a quarter
  // sample of them.
  void set_span(std::size_t samples) noexcept;
  // packet_'s position in samples since its timestamp's epoch; `timed` false when it has no
  // timestamp (its 4-bit count placed it). False: its fractional timestamp is out of range.
  bool packet_position(std::size_t samples, std::uint64_t& epoch_index, bool& timed) noexcept;
  // An IF Context packet (type 4): counted, its values kept; false when it is malformed.
  bool handle_context(const std::byte* data, std::size_t bytes) noexcept;
  void wait_for_context(StageContext& context);
  // Registers their counters, pins and starts the receive threads, last in start(): from here on
  // they own the socket's reads.
  void start_receive_threads(StageContext& context);
  void handle_gnuradio(const std::byte* data, std::size_t bytes) noexcept;
  // A data packet at `position` (sender's index space): the stream's next one with nothing held
  // goes straight to its chunk; any other through the guard, or after datagrams the kernel
  // dropped. `packet_count`: VITA-49's 4-bit count.
  void accept_packet(std::uint64_t position, std::span<const std::byte> payload, std::size_t samples,
                     std::optional<std::uint8_t> packet_count) noexcept;
  void place_after_overflow(std::uint64_t position, const std::byte* payload, std::size_t samples) noexcept;
  // JumpGuard::admit's steps: a plausible packet into the stream; the stream onto a confirmed jump.
  void place_samples(const JumpGuard::Packet& packet) noexcept;
  bool move_stream(const JumpGuard::Packet& first) noexcept;
  // A fresh packet at stream index `index`: into its chunk, or held until the hole before it fills.
  void handle_samples(std::uint64_t index, const std::byte* payload, std::size_t samples) noexcept;
  void commit(std::uint64_t index, const std::byte* payload, std::size_t samples) noexcept;
  void drain_pending() noexcept;
  bool release_oldest_pending() noexcept;

  UdpSourceSettings settings_;
  StageContext* context_ = nullptr;
  wire::UniqueFd socket_;
  std::uint16_t port_ = 0;
  bool gro_ = false;
  std::size_t slot_bytes_ = 0;
  std::unique_ptr<ReceiveSlots> slots_;  // the stage's own receives (all of them without a receive thread)
  // or on threads of their own (receive_thread: true), merged when there are several; the
  // standby threads' signal (receive_standby) outlives them
  std::unique_ptr<ReceiveStandby> standby_;
  std::vector<std::unique_ptr<ReceiveThread>> receivers_;
  std::optional<ReceiveMerge> merge_;
  ReorderWindow window_;
  PacketHistory history_;
  ChunkAssembler assembler_;
  JumpGuard guard_;
  KernelDrops drops_;
  SocketBacklog backlog_;  // how far behind its sender the stage is, sampled in process()
  vita49::Packet packet_;
  vita49::RepeatDecoder repeat_;
  std::uint64_t header_decodes_ = 0;
  bool locked_ = false;
  std::uint32_t stream_id_ = 0;
  bool have_origin_ = false;
  bool timed_ = true;
  std::uint64_t origin_ = 0;  // epoch index of stream index 0 (modulo 2^64 after a backward resync)
  std::uint64_t last_packet_ns_ = 0;
  std::uint64_t published_receive_thread_ns_ = 0;  // last_packet_ns_ when the counts last went out
  std::uint8_t next_count_ = 0;
  std::uint64_t untimed_next_ = 0;
  std::uint64_t rate_ = 0;
  unsigned sample_shift_ = 2;  // log2 of the bytes per sample
  std::size_t span_samples_ = 0;
  std::int64_t span_low_ = 0;
  std::int64_t span_high_ = -1;
  double samples_per_picosecond_ = 0;
  // The last real-time timestamp converted, so the next one is a small exact difference
  // instead of a 128-bit division.
  std::uint64_t last_seconds_ = 0;
  std::uint64_t last_picoseconds_ = 0;
  std::uint64_t last_epoch_index_ = 0;
  bool have_last_time_ = false;
  std::uint64_t batch_packets_ = 0;
  // The kernel's messages behind them: with UDP_GRO one message holds a run of datagrams, so
  // packets over messages is the kernel's merge factor, which sets a receive call's cost a datagram.
  std::uint64_t batch_messages_ = 0;
  NamedCounter* received_messages_ = nullptr;
  bool drained_ = false;              // the last receive returned less than a batch: the socket was empty
  std::size_t datagram_samples_ = 0;  // gnuradio framings: the first datagram's, which all share
  vita49::ContextPacket context_packet_;
  vita49::ContextPacket context_scratch_;
  bool have_context_ = false;
  double mismatched_rate_ = 0;  // a context packet's sample rate that is not the configured one
  NamedCounter* context_packets_ = nullptr;
  NamedCounter* context_changes_ = nullptr;
  NamedCounter* drop_bad_context_ = nullptr;
  NamedCounter* drop_truncated_ = nullptr;
  NamedCounter* drop_empty_ = nullptr;
  NamedCounter* drop_bad_size_ = nullptr;
  NamedCounter* drop_unknown_type_ = nullptr;
  NamedCounter* drop_wrong_stream_ = nullptr;
  NamedCounter* drop_bad_payload_ = nullptr;
  // Times the receive thread found every ring slot with the stage's thread and waited: the stage's
  // thread was the bound, and the socket's buffer took the stream meanwhile.
  NamedCounter* receiver_waits_ = nullptr;
  NamedCounter* receiver_blocking_calls_ = nullptr;
  NamedCounter* receiver_spin_ns_ = nullptr;
  NamedCounter* receiver_cpu_ns_ = nullptr;  // the receive threads' CPU time, spin included
  NamedCounter* merge_holds_ = nullptr;
  NamedCounter* standby_raises_ = nullptr;  // receive_standby: times the standby threads were woken
  NamedCounter* standby_bytes_ = nullptr;   // and what they received
};

void register_udp_source_stage(StageRegistry& registry);

}  // namespace sluice
