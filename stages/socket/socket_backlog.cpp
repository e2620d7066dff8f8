// A socket's receive queue against its limit, from SO_MEMINFO.
#include "stages/socket/socket_backlog.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include "pipeline/log.hpp"
#include "pipeline/units.hpp"
#include "wire/socket.hpp"

namespace sluice {
namespace {

// A receive thread that worked this share of the flow or more had no time to spare.
constexpr double kReceiveCoreBound = 0.9;

std::string fill_text(std::uint64_t queued, std::uint64_t limit) {
  return fmt::format("{} of the {} the kernel holds before it drops datagrams ({:.0f}%)",
                     format_bytes(static_cast<double>(queued)), format_bytes(static_cast<double>(limit)),
                     100.0 * static_cast<double>(queued) / static_cast<double>(limit));
}

}  // namespace

void SocketBacklog::start(int fd, StageMetrics& metrics, std::string name) {
  fd_ = fd;
  stage_name_ = std::move(name);
  sampled_ns_ = 0;
  warned_ = false;
  queued_counter_ = &metrics.counter("socket_queued_bytes");
  peak_counter_ = &metrics.counter("socket_queued_peak_bytes");
  limit_counter_ = &metrics.counter("socket_buffer_bytes");
  for (NamedCounter* gauge : {queued_counter_, peak_counter_, limit_counter_}) gauge->set(0);
}

void SocketBacklog::sample(std::uint64_t now_ns) noexcept {
  if (fd_ < 0 || (sampled_ns_ != 0 && now_ns - sampled_ns_ < kSampleEveryNs)) return;
  sampled_ns_ = now_ns;
  const std::optional<wire::ReceiveMemory> memory = wire::receive_memory(fd_);
  if (!memory) return;
  const std::uint64_t queued = memory->queued;
  const std::uint64_t limit = memory->limit;
  queued_counter_->set(queued);
  limit_counter_->set(limit);
  peak_counter_->keep_max(queued);
  if (!warned_ && limit > 0 && 2 * queued > limit) {
    warned_ = true;
    try {
      log::warn("{}: its socket holds {}: the stage is behind its sender, and the kernel drops what does not fit",
                stage_name_, fill_text(queued, limit));
    } catch (const std::exception&) {  // no memory for the text: the counters still say it
    }
  }
}

std::string behind_sender_advice(const ReceiveWork& work) {
  if (work.threads == 0) {
    return "the stage fell behind its sender; a larger receive_buffer buys time, a receive thread "
           "on a core of its own (receive_thread, receive_cpu) keeps up";
  }
  const std::uint64_t worked = work.cpu_ns > work.spin_ns ? work.cpu_ns - work.spin_ns : 0;
  const std::size_t receiving = std::max<std::size_t>(1, work.threads - std::min(work.standby, work.threads));
  const double share = work.flow_ns == 0 ? 0.0
                                         : static_cast<double>(worked) /
                                               (static_cast<double>(work.flow_ns) * static_cast<double>(receiving));
  const std::string threads = work.standby > 0 ? fmt::format("its receive threads ({} standing by)", work.standby)
                                               : (work.threads == 1 ? "its receive thread" : "its receive threads");
  if (share >= kReceiveCoreBound) {
    return fmt::format(
        "{} worked {:.0f}% of the flow (CPU time less spin): the receive core could not keep up with the "
        "stream. A core that nothing else shares helps (a VM's vCPU may share a physical core with another; "
        "ask for dedicated cores), as do more receive threads (receive_threads, receive_cpu): on cores of "
        "their own, or standing by on cores with room to spare until the socket backs up (receive_standby); "
        "or a lower rate a socket",
        threads, 100.0 * std::min(share, 1.0));
  }
  const std::string worked_text =
      work.flow_ns == 0 ? std::string() : fmt::format(", worked {:.0f}% of the flow,", 100.0 * share);
  if (work.waits != 0) {
    return fmt::format(
        "{}{} waited {} for a free ring slot while the stage's own thread, which places the datagrams "
        "into chunks, held every slot: give that thread a core of its own (cpu:)",
        threads, worked_text, work.waits == 1 ? std::string("once") : fmt::format("{} times", work.waits));
  }
  return fmt::format(
      "{}{} never waited for a ring slot: it was kept off its core at times (the threads' core-wait and "
      "steal notes say how long) or a burst outran it; a larger receive_buffer buys time",
      threads, worked_text);
}

std::string SocketBacklog::note(const ReceiveWork& work) const {
  if (peak_counter_ == nullptr) return {};  // never started
  const std::uint64_t peak = peak_counter_->get();
  const std::uint64_t limit = limit_counter_->get();
  if (limit == 0 || 2 * peak <= limit) return {};
  return "the socket's queue reached " + fill_text(peak, limit) + ": " + behind_sender_advice(work);
}

}  // namespace sluice
