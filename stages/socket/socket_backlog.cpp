// A socket's receive queue against its limit, from SO_MEMINFO.
#include "stages/socket/socket_backlog.hpp"

#include <linux/sock_diag.h>
#include <sys/socket.h>

#include <exception>
#include <utility>

#include "pipeline/log.hpp"
#include "pipeline/units.hpp"

namespace sluice {
namespace {

std::string fill_text(std::uint64_t queued, std::uint64_t limit) {
  return fmt::format("{} of the {} the kernel holds before it drops datagrams ({:.0f}%)",
                     format_bytes(static_cast<double>(queued)), format_bytes(static_cast<double>(limit)),
                     100.0 * static_cast<double>(queued) / static_cast<double>(limit));
}

}  // namespace

void SocketBacklog::start(int fd, StageMetrics& metrics, std::string name) {
  fd_ = fd;
  stage_name_ = std::move(name);
  sampled_ = false;
  warned_ = false;
  peak_ = 0;
  limit_ = 0;
  queued_counter_ = &metrics.counter("socket_queued_bytes");
  peak_counter_ = &metrics.counter("socket_queued_peak_bytes");
  limit_counter_ = &metrics.counter("socket_buffer_bytes");
}

void SocketBacklog::sample(std::uint64_t now_ns) noexcept {
  if (fd_ < 0 || (sampled_ && now_ns - sampled_ns_ < kSampleEveryNs)) return;
  sampled_ = true;
  sampled_ns_ = now_ns;
  std::uint32_t info[SK_MEMINFO_VARS] = {};
  socklen_t length = sizeof info;
  if (::getsockopt(fd_, SOL_SOCKET, SO_MEMINFO, info, &length) != 0 ||
      length < sizeof(std::uint32_t) * (SK_MEMINFO_RCVBUF + 1)) {
    return;
  }
  const std::uint64_t queued = info[SK_MEMINFO_RMEM_ALLOC];
  limit_ = info[SK_MEMINFO_RCVBUF];
  queued_counter_->set(queued);
  limit_counter_->set(limit_);
  if (queued > peak_) {
    peak_ = queued;
    peak_counter_->set(peak_);
  }
  if (!warned_ && limit_ > 0 && 2 * queued > limit_) {
    warned_ = true;
    try {
      log::warn("{}: its socket holds {}: the stage is behind its sender, and the kernel drops what does not fit",
                stage_name_, fill_text(queued, limit_));
    } catch (const std::exception&) {  // no memory for the text: the counters still say it
    }
  }
}

std::string SocketBacklog::note() const {
  if (limit_ == 0 || 2 * peak_ <= limit_) return {};
  return "the socket's queue reached " + fill_text(peak_, limit_) +
         ": the stage fell behind its sender; a larger receive_buffer buys time, a receive thread "
         "on a core of its own (receive_thread, receive_cpu) keeps up";
}

}  // namespace sluice
