// PendingConnections: non-blocking accept, a header buffer per connection, closes by reason.
#include "stages/socket/tcp_pending.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace sluice {

void PendingConnections::start(StageMetrics& metrics, Limits limits) {
  limits_ = limits;
  connections_ = &metrics.counter("connections");
  disconnects_ = &metrics.counter("disconnects");
  std::size_t index = 0;
  for (const char* reason : {"idle_connection", "garbage_connection", "second_sender", "crowded_out"}) {
    closed_[index++] = &metrics.drop_counter(reason);
  }
}

void PendingConnections::service(int listener, Clock::time_point now, bool serving) noexcept {
  accept_all(listener, now);
  for (Slot& slot : slots_) {
    if (slot.state == State::reading) read(slot, now);
    if (slot.state == State::empty || now - slot.since < limits_.idle) continue;
    if (slot.state == State::reading) {
      close(slot, Close::idle);
    } else if (serving) {
      close(slot, Close::second_sender);  // proved a sender, but another is served all along
    }
  }
}

void PendingConnections::accept_all(int listener, Clock::time_point now) noexcept {
  for (;;) {
    wire::UniqueFd socket(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!socket.valid()) return;  // EAGAIN: none waiting (other errors: the peer left already)
    connections_->add();
    auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.state == State::empty; });
    if (free == slots_.end()) {
      // Full of connections that have not sent a frame: the oldest one goes, so that a flood
      // of silent connections cannot keep a late sender out.
      free = std::min_element(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) {
        return (a.state == State::reading) > (b.state == State::reading) ||
               ((a.state == State::reading) == (b.state == State::reading) && a.since < b.since);
      });
      close(*free, Close::crowded_out);
    }
    free->state = State::reading;
    free->socket = std::move(socket);
    free->since = now;
    free->have = 0;
  }
}

void PendingConnections::read(Slot& slot, Clock::time_point now) noexcept {
  // Framing none: one byte shows a sender; raw_tcp: a whole header, and nothing past it.
  const std::size_t wanted = limits_.framed ? raw_tcp::kHeaderBytes - slot.have : 1;
  const ssize_t got = ::recv(slot.socket.get(), slot.bytes.data() + slot.have, wanted, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    close(slot, slot.have == 0 ? Close::left : Close::garbage);  // left, after no bytes or a cut header
    return;
  }
  slot.have += static_cast<std::size_t>(got);
  if (limits_.framed && slot.have < raw_tcp::kHeaderBytes) return;
  if (limits_.framed) {
    raw_tcp::FrameHeader header;
    if (raw_tcp::decode_header(slot.bytes, header) != raw_tcp::DecodeStatus::ok ||
        header.payload_bytes > limits_.max_frame) {
      close(slot, Close::garbage);
      return;
    }
  }
  slot.state = State::ready;
  slot.since = now;
}

bool PendingConnections::take_sender(Sender& sender) noexcept {
  Slot* earliest = nullptr;
  for (Slot& slot : slots_) {
    if (slot.state == State::ready && (earliest == nullptr || slot.since < earliest->since)) earliest = &slot;
  }
  if (earliest == nullptr) return false;
  sender.socket = std::move(earliest->socket);
  sender.bytes = earliest->bytes;
  sender.have = earliest->have;
  earliest->state = State::empty;
  return true;
}

std::size_t PendingConnections::poll_set(std::span<pollfd> out) const noexcept {
  std::size_t count = 0;
  for (const Slot& slot : slots_) {
    if (slot.state == State::reading && count < out.size()) out[count++] = pollfd{slot.socket.get(), POLLIN, 0};
  }
  return count;
}

void PendingConnections::close(Slot& slot, Close reason) noexcept {
  slot.socket.reset();
  slot.state = State::empty;
  slot.have = 0;
  disconnects_->add();
  if (reason != Close::left) closed_[static_cast<std::size_t>(reason)]->add();
}

void PendingConnections::clear() noexcept {
  for (Slot& slot : slots_) {
    if (slot.state != State::empty) close(slot, Close::left);
  }
}

}  // namespace sluice
