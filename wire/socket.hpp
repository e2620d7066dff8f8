// Small socket helpers shared by the emulator and the socket stages: an owning fd and
// "host:port" parsing for IPv4 endpoints, receive buffers, and waiting for arrival timestamps.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pipeline/errno_message.hpp"
#include "pipeline/unique_fd.hpp"

namespace sluice::wire {

using UniqueFd = sluice::UniqueFd;  // pipeline/unique_fd.hpp

// "127.0.0.1:50000" → sockaddr_in; nullopt when malformed.
std::optional<sockaddr_in> parse_endpoint(std::string_view text);
std::string to_string(const sockaddr_in& address);
// The most a socket's receive buffer can hold: the kernel keeps twice what SO_RCVBUF asks, in an
// int, so it caps the ask at INT_MAX / 2 (one byte short of 1 GiB).
inline constexpr std::uint64_t kMaxReceiveBuffer = 1ULL << 30;
// Sets SO_RCVBUF to `bytes` (at most kMaxReceiveBuffer; SO_RCVBUFFORCE first: it goes past
// net.core.rmem_max with CAP_NET_ADMIN) and reads back what the kernel granted. Returns a note
// for the operator, which says so when the kernel capped the size, and how to lift the cap.
// Throws std::runtime_error naming the call.
// On a TCP socket, call it before listen()/connect(): the window scale is fixed then.
std::string set_receive_buffer(int fd, std::uint64_t bytes);
// The socket's SO_RCVBUF as the kernel reports it (double the usable size: it counts
// bookkeeping), or nothing when getsockopt fails.
std::optional<std::uint64_t> receive_buffer_bytes(int fd) noexcept;
// A socket's receive queue as the kernel counts it (SO_MEMINFO): `queued`, the buffers its
// datagrams take (payload, headers and slack), against `limit`, the most it holds before it drops;
// `drops`, the datagrams it dropped so far (modulo 2^32), where the kernel reports them.
struct ReceiveMemory {
  std::uint64_t queued = 0;
  std::uint64_t limit = 0;
  std::optional<std::uint32_t> drops;
};
// nullopt when getsockopt fails.
std::optional<ReceiveMemory> receive_memory(int fd) noexcept;
// When the kernel received a message (its SO_TIMESTAMPNS control message), in nanoseconds of
// the system clock; false when the message carries none.
bool kernel_receive_time(const msghdr& header, std::uint64_t& nanoseconds) noexcept;
// Takes one datagram (MSG_DONTWAIT) into `buffer`: its length, or -1 with errno; `stamp_ns` its
// kernel_receive_time, 0 where it has none.
ssize_t receive_stamped(int fd, void* buffer, std::size_t size, std::uint64_t& stamp_ns) noexcept;
// Waits up to `limit` until the kernel stamps datagrams as they arrive (SO_TIMESTAMPNS), as
// seen on a private loopback pair; whether it does. The kernel switches its arrival stamps on
// some time after the first socket asks for them (net_enable_timestamp defers it to a work
// item), and until then stamps a datagram when a receive call takes it: datagrams queued
// meanwhile carry the order they were taken in, not the order they came in. Call it after the
// socket that needs the stamps has asked for them, which keeps them on.
bool wait_for_arrival_timestamps(std::chrono::milliseconds limit);
// "socket: Permission denied" — for errors naming the call: errno now, or a saved one.
using ::sluice::errno_message;  // pipeline/errno_message.hpp

}  // namespace sluice::wire
