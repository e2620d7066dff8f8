// Endpoint parsing, error text and timestamp readiness for socket setup.
#include "wire/socket.hpp"

#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "pipeline/clock.hpp"
#include "pipeline/units.hpp"

namespace sluice::wire {

std::optional<sockaddr_in> parse_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port > 65535) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.empty() ? "0.0.0.0" : host.c_str(), &address.sin_addr) != 1) return std::nullopt;
  return address;
}

std::string to_string(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

std::optional<std::uint64_t> receive_buffer_bytes(int fd) noexcept {
  int bytes = 0;
  socklen_t length = sizeof(bytes);
  if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, &length) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::optional<ReceiveMemory> receive_memory(int fd) noexcept {
  std::uint32_t info[SK_MEMINFO_VARS] = {};
  socklen_t length = sizeof(info);
  if (::getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &length) != 0 ||
      length < sizeof(std::uint32_t) * (SK_MEMINFO_RCVBUF + 1)) {
    return std::nullopt;
  }
  ReceiveMemory memory{info[SK_MEMINFO_RMEM_ALLOC], info[SK_MEMINFO_RCVBUF], std::nullopt};
  if (length >= sizeof(std::uint32_t) * (SK_MEMINFO_DROPS + 1)) memory.drops = info[SK_MEMINFO_DROPS];
  return memory;
}

std::string set_receive_buffer(int fd, std::uint64_t bytes) {
  const int wanted = static_cast<int>(std::min(bytes, kMaxReceiveBuffer));
  std::string how = "SO_RCVBUFFORCE";
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &wanted, sizeof(wanted)) != 0) {
    how = "SO_RCVBUF";
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &wanted, sizeof(wanted)) != 0) {
      throw std::runtime_error(errno_message("setsockopt(SO_RCVBUF)"));
    }
  }
  const std::optional<std::uint64_t> obtained = receive_buffer_bytes(fd);
  if (!obtained) throw std::runtime_error(errno_message("getsockopt(SO_RCVBUF)"));
  // The kernel reports double the usable size (it counts bookkeeping).
  std::string note = "receive buffer " + format_bytes(static_cast<double>(*obtained) / 2.0) + " via " + how;
  // One byte short is the kernel's own ceiling (INT_MAX / 2), not a cap.
  if (*obtained / 2 + 1 < std::min(bytes, kMaxReceiveBuffer)) {
    note += " (asked " + format_bytes(static_cast<double>(bytes)) + ", capped by the kernel";
    note += how == "SO_RCVBUF" ? " at net.core.rmem_max, since this process may not use SO_RCVBUFFORCE (it needs "
                                 "CAP_NET_ADMIN): raise it, e.g. sysctl -w net.core.rmem_max=" +
                                     std::to_string(std::min(bytes, kMaxReceiveBuffer)) + ")"
                               : ")";
  }
  return note;
}

bool kernel_receive_time(const msghdr& header, std::uint64_t& nanoseconds) noexcept {
  for (cmsghdr* control = CMSG_FIRSTHDR(&header); control != nullptr;
       control = CMSG_NXTHDR(const_cast<msghdr*>(&header), control)) {
    if (control->cmsg_level == SOL_SOCKET && control->cmsg_type == SCM_TIMESTAMPNS) {
      timespec received{};
      std::memcpy(&received, CMSG_DATA(control), sizeof(received));
      nanoseconds = to_ns(received);
      return true;
    }
  }
  return false;
}

ssize_t receive_stamped(int fd, void* buffer, std::size_t size, std::uint64_t& stamp_ns) noexcept {
  stamp_ns = 0;
  iovec iov{buffer, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t received = ::recvmsg(fd, &message, MSG_DONTWAIT);
  if (received >= 0 && !kernel_receive_time(message, stamp_ns)) stamp_ns = 0;
  return received;
}

namespace {

std::uint64_t realtime_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return to_ns(now);
}

// One datagram sent to the pair's receiver and taken a millisecond later: whether its stamp
// came before the receive call (at arrival) rather than during it.
bool stamped_on_arrival(int receiver, int sender) noexcept {
  constexpr char kProbe = 0;
  if (::send(sender, &kProbe, sizeof(kProbe), 0) != 1) return false;
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  char byte = 0;
  std::uint64_t stamped = 0;
  const std::uint64_t before_call = realtime_ns();
  return receive_stamped(receiver, &byte, sizeof(byte), stamped) == 1 && stamped != 0 && stamped < before_call;
}

}  // namespace

bool wait_for_arrival_timestamps(std::chrono::milliseconds limit) {
  UniqueFd receiver(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  UniqueFd sender(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!receiver.valid() || !sender.valid()) return false;
  const int one = 1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::setsockopt(receiver.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0 ||
      ::bind(receiver.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(receiver.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      ::connect(sender.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  do {
    if (stamped_on_arrival(receiver.get(), sender.get())) return true;
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

}  // namespace sluice::wire
