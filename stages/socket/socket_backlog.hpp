// How far a socket's reader is behind its sender: the bytes the kernel holds queued for the socket
// against the most it holds before it drops datagrams, sampled from the reading stage's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pipeline/stage.hpp"

namespace sluice {

// What a udp stage's receive threads did over the stream, for the advice in the queue's note.
struct ReceiveWork {
  std::size_t threads = 0;    // receive threads (0: the stage's own thread receives)
  std::uint64_t cpu_ns = 0;   // their CPU time, summed
  std::uint64_t spin_ns = 0;  // of it, polling an empty socket (receive_spin)
  std::uint64_t waits = 0;    // times one found every ring slot with the stage's thread
  std::uint64_t flow_ns = 0;  // the span its work took (flow_work_span_ns)
  std::size_t standby = 0;    // of the threads, those standing by (receive_standby)
};

// What to do about a socket that fell behind its sender, from what its readers did: a receive
// thread that worked through the flow is the bound (standby threads' work counts toward the
// threads that always receive, whose cores it relieved); one that waited for ring slots was held up by
// the stage's own thread; one that did neither lost its core at times or met a burst.
[[nodiscard]] std::string behind_sender_advice(const ReceiveWork& work);

class SocketBacklog {
 public:
  // Samples at most this often: one getsockopt a millisecond, beside thousands of recvmmsg calls.
  static constexpr std::uint64_t kSampleEveryNs = 1'000'000;

  // Counters (gauges): "socket_queued_bytes" (the last sample), "socket_queued_peak_bytes" (the
  // most seen) and "socket_buffer_bytes" (where the kernel starts dropping). The kernel counts a
  // queued datagram's whole buffer (SO_MEMINFO's rmem_alloc: payload, headers and slack) against
  // the socket's limit (rcvbuf, twice what SO_RCVBUF asked), so both are in its units.
  // `name`: the lane and stage, as the warning names them.
  void start(int fd, StageMetrics& metrics, std::string name);
  // Samples the queue when kSampleEveryNs or more has passed since the last sample (the first
  // call always samples). The first time the queue holds more than half the limit it warns once.
  void sample(std::uint64_t now_ns) noexcept;
  // For the report: how full the queue got, when it held more than half the limit, and what to do
  // about it (behind_sender_advice); else empty.
  [[nodiscard]] std::string note(const ReceiveWork& work) const;

 private:
  int fd_ = -1;
  std::string stage_name_;
  std::uint64_t sampled_ns_ = 0;  // 0: never sampled (the monotonic clock starts at boot)
  bool warned_ = false;
  NamedCounter* queued_counter_ = nullptr;
  NamedCounter* peak_counter_ = nullptr;
  NamedCounter* limit_counter_ = nullptr;
};

}  // namespace sluice
