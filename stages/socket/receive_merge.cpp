#include "stages/socket/receive_merge.hpp"

#include <thread>

#include "pipeline/clock.hpp"

namespace sluice {

ReceiveMerge::ReceiveMerge(std::vector<ReceiveThread*> readers, KeyOf key_of)
    : readers_(std::move(readers)), key_of_(key_of), heads_(readers_.size()), watches_(readers_.size()) {}

void ReceiveMerge::key(Head& head) noexcept {
  head.id = ++seen_;
  const mmsghdr& message = head.batch->message(head.index);
  if (!key_of_(message, head.batch->data(head.index), head.high, head.low)) head.high = head.low = 0;
}

bool ReceiveMerge::fill(std::size_t j) noexcept {
  Head& head = heads_[j];
  if (head.batch != nullptr) return true;
  head.batch = readers_[j]->next(std::chrono::nanoseconds(0));
  if (head.batch == nullptr) return false;
  head.index = 0;
  key(head);
  return true;
}

bool ReceiveMerge::cannot_precede(std::size_t j, const Head& best) noexcept {
  const std::uint64_t calls = readers_[j]->calls();
  Watch& watch = watches_[j];
  if (calls % 2 == 1) {
    const bool seen_with_best = watch.id == best.id;
    if (!seen_with_best || watch.calls == calls) {
      // In a call that may have taken a datagram before `best` off the socket: wait for its end.
      if (!seen_with_best) ++holds_;
      watch = Watch{calls, best.id};
      return false;
    }
    // The call seen while `best` was already held has ended, and any call since began after it.
  }
  // Between calls (or past the watched one): what it has is in its ring, and what it takes
  // later left the socket after `best` did.
  return !fill(j);
}

ReceiveMerge::Attempt ReceiveMerge::attempt(std::size_t& chosen) noexcept {
  // Each pass that finds a new batch looks again; a pass takes at most one batch a reader.
  for (std::size_t pass = 0; pass <= readers_.size(); ++pass) {
    std::size_t best = readers_.size();
    for (std::size_t j = 0; j < readers_.size(); ++j) {
      if (!fill(j)) continue;
      const Head& head = heads_[j];
      if (best == readers_.size() || head.high < heads_[best].high ||
          (head.high == heads_[best].high && head.low < heads_[best].low)) {
        best = j;
      }
    }
    if (best == readers_.size()) return Attempt::empty;
    bool looked_again = false;
    for (std::size_t j = 0; j < readers_.size() && !looked_again; ++j) {
      if (heads_[j].batch != nullptr) continue;
      const bool clear = cannot_precede(j, heads_[best]);
      if (heads_[j].batch != nullptr) {
        looked_again = true;  // a batch came in: it may hold what goes first
      } else if (!clear) {
        return Attempt::held;
      }
    }
    if (!looked_again) {
      chosen = best;
      return Attempt::found;
    }
  }
  return Attempt::held;
}

std::optional<ReceiveMerge::Message> ReceiveMerge::next(std::chrono::nanoseconds timeout) noexcept {
  const std::uint64_t begin = monotonic_ns();
  const auto wait_ns = static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
  for (;;) {
    std::size_t chosen = 0;
    if (attempt(chosen) == Attempt::found) return Message{heads_[chosen].batch, heads_[chosen].index, chosen};
    const std::uint64_t waited = monotonic_ns() - begin;
    if (waited >= wait_ns) return std::nullopt;
    if (waited < ReceiveThread::kConsumerSpinNs) {
      cpu_relax();
    } else {
      std::this_thread::sleep_for(ReceiveThread::kConsumerNap);
    }
  }
}

bool ReceiveMerge::done(const Message& message) noexcept {
  Head& head = heads_[message.reader];
  if (++head.index < head.batch->received) {
    key(head);
    return false;
  }
  readers_[message.reader]->give_back(head.batch);
  head.batch = nullptr;
  return true;
}

}  // namespace sluice
