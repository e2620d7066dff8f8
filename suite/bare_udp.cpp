#include "suite/bare_udp.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/time.h>

#include <cerrno>
#include <stdexcept>

#include "pipeline/errno_message.hpp"
#include "stages/socket/udp_source.hpp"

namespace sluice::bench {

std::size_t datagrams_in(const mmsghdr& message) noexcept {
  const std::size_t segment = udp_gro_segment(message.msg_hdr);
  return segment == 0 ? 1 : (message.msg_len + segment - 1) / segment;
}

BareUdpReceiver::BareUdpReceiver(const std::string& endpoint, int receive_buffer, std::size_t batch)
    : socket_(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
  if (socket_.get() < 0) throw std::runtime_error(errno_message("socket"));
  if (::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &receive_buffer, sizeof(receive_buffer)) != 0) {
    (void)::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  const timeval timeout{0, 10'000};
  (void)::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const int one = 1;
  gro_ = ::setsockopt(socket_.get(), SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
  // The udp stage's drop count (KernelDrops): the kernel then adds it to every message, here as there.
  if (::setsockopt(socket_.get(), SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)) != 0) {
    throw std::runtime_error(errno_message("setsockopt(SO_RXQ_OVFL)"));
  }
  const auto parsed = wire::parse_endpoint(endpoint);
  if (!parsed) throw std::runtime_error("not an endpoint: " + endpoint);
  sockaddr_in address = *parsed;
  if (::bind(socket_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    throw std::runtime_error(errno_message("bind " + endpoint));
  }
  socklen_t length = sizeof(address);
  ::getsockname(socket_.get(), reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);

  slot_ = gro_ ? 65536 : 9000;
  if (batch == 0) batch = default_udp_batch(gro_);
  buffers_.resize(batch * slot_);
  iovs_.resize(batch);
  messages_.resize(batch);
  controls_.resize(batch * kUdpControlBytes);
}

std::size_t BareUdpReceiver::receive_once(bool wait) {
  const std::size_t batch = messages_.size();
  for (std::size_t i = 0; i < batch; ++i) {
    iovs_[i] = {buffers_.data() + i * slot_, slot_};
    messages_[i].msg_hdr = {};
    messages_[i].msg_hdr.msg_iov = &iovs_[i];
    messages_[i].msg_hdr.msg_iovlen = 1;
    messages_[i].msg_hdr.msg_control = controls_.data() + i * kUdpControlBytes;
    messages_[i].msg_hdr.msg_controllen = kUdpControlBytes;
  }
  const int got = ::recvmmsg(socket_.get(), messages_.data(), static_cast<unsigned>(batch),
                             wait ? MSG_WAITFORONE : MSG_DONTWAIT, nullptr);
  if (got <= 0) return 0;
  std::size_t datagrams = 0;
  for (int i = 0; i < got; ++i) {
    datagrams += datagrams_in(messages_[static_cast<std::size_t>(i)]);
    bytes_ += messages_[static_cast<std::size_t>(i)].msg_len;
  }
  packets_ += datagrams;
  return datagrams;
}

}  // namespace sluice::bench
